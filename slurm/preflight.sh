#!/usr/bin/env bash
# GPU preflight (bench/preflight.py): environment checks, the labeler's pages/s, training
# tokens/s and MFU with checkpoint resume, export parity and one lm-eval task; about 10 minutes.
# Writes <output_root>/preflight/preflight.json, which python -m corpus.flow.plan reads.
#   sbatch slurm/preflight.sh CONFIG   on one GPU node of the cluster
#   bash slurm/preflight.sh CONFIG     here (on CPU: tiny shapes and random models, code paths only)
#SBATCH --job-name=xsuite-preflight
#SBATCH --partition=gpu
#SBATCH --gpus=1
#SBATCH --cpus-per-task=16
#SBATCH --mem=128G
#SBATCH --time=00:30:00
#SBATCH --output=slurm-preflight-%j.out
set -euo pipefail
CONFIG=${1:-configs/local.yaml}
cd "${SLURM_SUBMIT_DIR:-$(dirname "$0")/..}"
if [ -f .venv/bin/activate ]; then source .venv/bin/activate; fi
exec python -m bench.preflight "$CONFIG" "${@:2}"
