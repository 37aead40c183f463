#!/usr/bin/env bash
# Extraction of every arm of an experiment.
#   bash slurm/extract.sh [CONFIG]     on this machine (datatrove's local executor)
#   sbatch slurm/extract.sh [CONFIG]   on a cluster: this small job submits one datatrove job array
#                                      per arm (partition, GPUs, tasks, time from the config)
# Re-running skips the tasks that finished (datatrove completion markers under <arm>/logs/).
#SBATCH --job-name=xsuite-extract
#SBATCH --partition=cpu
#SBATCH --cpus-per-task=1
#SBATCH --mem-per-cpu=4G
#SBATCH --time=01:00:00
#SBATCH --output=slurm-extract-%j.out
set -euo pipefail
CONFIG=${1:-configs/local.yaml}
cd "${SLURM_SUBMIT_DIR:-$(dirname "$0")/..}"
if [ -f .venv/bin/activate ]; then source .venv/bin/activate; fi
if [ -n "${SLURM_JOB_ID:-}" ]; then EXECUTOR=slurm; else EXECUTOR=local; fi
exec python -m corpus.extract "$CONFIG" --executor "$EXECUTOR"
