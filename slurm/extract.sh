#!/usr/bin/env bash
# The corpus flow of an experiment: extraction of every arm, the shared tokenizer, identical
# post-processing, tokenisation and the equal token budget (corpus/flow/stages.py).
#   bash slurm/extract.sh [CONFIG]     on this machine (datatrove's local executor, stage by stage)
#   sbatch slurm/extract.sh [CONFIG]   on a cluster: this small job submits every stage as a
#                                      datatrove job array that waits for the stages it needs
#                                      (partition, GPUs, tasks, time from the config)
# Re-running skips the tasks that finished (datatrove completion markers under each logs/); an input
# file a task skipped (inputs.on_corrupt: skip) is read again once replaced, or with --retry-skipped.
# On Slurm a re-run is refused while jobs it submitted before are queued or running (it prints the
# scancel command); past executor.max_queued_tasks it submits what fits and a job that runs this
# script again for the rest.
# With a plan (python -m corpus.flow.plan CONFIG), a config projected to fall short of the token budget
# is refused before any work; `... extract.sh CONFIG --allow-short` runs it anyway.
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
exec python -m corpus.flow "$CONFIG" --executor "$EXECUTOR" "${@:2}"
