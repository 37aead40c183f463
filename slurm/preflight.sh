#!/usr/bin/env bash
# GPU preflight (bench/preflight.py): environment checks, the labeler's pages/s, training
# tokens/s and MFU with checkpoint resume, export parity and one lm-eval task; about 10 minutes,
# plus the scaling of training over the job's GPUs and nodes (tokens/s per GPU on 1 GPU, one node,
# every node) when it has more than one GPU.
# Writes <output_root>/preflight/preflight.json, which python -m corpus.flow.plan reads.
#   sbatch slurm/preflight.sh CONFIG                                  one GPU of the cluster
#   sbatch --gpus-per-node=8 slurm/preflight.sh CONFIG                a node: 1 and 8 GPUs
#   sbatch --nodes=4 --gpus-per-node=8 slurm/preflight.sh CONFIG      4 nodes: 1, 8 and 32 GPUs
#   bash slurm/preflight.sh CONFIG [--gpus-per-node N]                here (on CPU: tiny shapes and random
#                                                                     models, code paths only)
#SBATCH --job-name=xsuite-preflight
#SBATCH --partition=gpu
#SBATCH --nodes=1
#SBATCH --gpus-per-node=1
#SBATCH --cpus-per-task=16
#SBATCH --mem=128G
#SBATCH --time=00:30:00
#SBATCH --output=slurm-preflight-%j.out
set -euo pipefail
CONFIG=${1:-configs/local.yaml}
cd "${SLURM_SUBMIT_DIR:-$(dirname "$0")/..}"
if [ -f .venv/bin/activate ]; then source .venv/bin/activate; fi
SCALE=()
if [ -n "${SLURM_JOB_ID:-}" ]; then  # the job's own shape (SLURM_GPUS_PER_NODE may read type:count)
  GPUS=${SLURM_GPUS_PER_NODE:-1}
  SCALE=(--gpus-per-node "${GPUS##*:}" --nodes "${SLURM_NNODES:-1}")
fi
exec python -m bench.preflight "$CONFIG" "${SCALE[@]}" "${@:2}"
