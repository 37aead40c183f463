#!/usr/bin/env bash
# Pretraining: one decoder per (rung, arm, seed) on the arm's token-matched dataset (pretrain/train.py).
#   bash slurm/pretrain.sh [CONFIG] [ARM] [SEED] [RUNG]     on this machine: CPU, or every local GPU via torchrun
#   sbatch slurm/pretrain.sh [CONFIG] [ARM] [SEED] [RUNG]   on a cluster: this small job submits one GPU job per
#                                                           (rung, arm, seed), nodes/GPUs/time from the rung's
#                                                           slurm, requeued on preemption (pretrain/submit.py)
# An empty ARM or SEED ('') means all of them. Without ARM/SEED/RUNG: every trained arm, every seed and
# every rung of pretrain.ladder (one rung for a config with pretrain.model). Runs resume from their last
# checkpoint.
#SBATCH --job-name=xsuite-pretrain-submit
#SBATCH --partition=cpu
#SBATCH --cpus-per-task=1
#SBATCH --mem-per-cpu=2G
#SBATCH --time=00:10:00
#SBATCH --output=slurm-pretrain-submit-%j.out
set -euo pipefail
CONFIG=${1:-configs/local.yaml}
ARGS=()
if [ -n "${2:-}" ]; then ARGS+=(--arm "$2"); fi
if [ -n "${3:-}" ]; then ARGS+=(--seed "$3"); fi
if [ -n "${4:-}" ]; then ARGS+=(--rung "$4"); fi
cd "${SLURM_SUBMIT_DIR:-$(dirname "$0")/..}"
if [ -f .venv/bin/activate ]; then source .venv/bin/activate; fi
if [ -n "${SLURM_JOB_ID:-}" ]; then exec python -m pretrain.submit "$CONFIG" "${ARGS[@]}"; fi
GPUS=$(python -c "import torch; print(torch.cuda.device_count())")
if [ "$GPUS" -gt 1 ]; then
  exec torchrun --standalone --nproc-per-node "$GPUS" -m pretrain.train "$CONFIG" "${ARGS[@]}"
fi
exec python -m pretrain.train "$CONFIG" "${ARGS[@]}"
