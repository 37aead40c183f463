#!/usr/bin/env bash
# lm-eval on every exported checkpoint not yet evaluated (evaluation/evaluate.py).
#   bash slurm/evaluate.sh [CONFIG] [RUNG]     on this machine, one checkpoint after the other
#   sbatch slurm/evaluate.sh [CONFIG] [RUNG]   on a cluster: this small job submits one GPU array task per
#                                              pending checkpoint (evaluation.slurm in the config)
# Without RUNG: every rung of pretrain.ladder. Results:
# <output_root>/eval/<arm>/<rung>/seed<S>/step_*/{results.json,samples_<task>.jsonl}; then
# python -m evaluation.report CONFIG.
#SBATCH --job-name=xsuite-evaluate-submit
#SBATCH --partition=cpu
#SBATCH --cpus-per-task=1
#SBATCH --mem-per-cpu=2G
#SBATCH --time=00:10:00
#SBATCH --output=slurm-evaluate-submit-%j.out
set -euo pipefail
CONFIG=${1:-configs/local.yaml}
ARGS=()
if [ -n "${2:-}" ]; then ARGS+=(--rung "$2"); fi
cd "${SLURM_SUBMIT_DIR:-$(dirname "$0")/..}"
if [ -f .venv/bin/activate ]; then source .venv/bin/activate; fi
if [ -n "${SLURM_JOB_ID:-}" ]; then exec python -m evaluation.evaluate "$CONFIG" "${ARGS[@]}" --submit; fi
exec python -m evaluation.evaluate "$CONFIG" "${ARGS[@]}"
