#!/usr/bin/env bash
# The GPU check (bench/gpu_check.py): on one GPU, the 1B decoder's training speed with SDPA,
# Transformer Engine where present and unfused attention, beside Hugging Face's LlamaForCausalLM
# (plain and compiled), in one table; its runs stop at --budget (7 minutes), under 8 with start-up.
# Writes the tracked record bench/measured/gpu_check-<gpu>-<model>.json the tables of
# docs/reference/gpu-figures.md are made from (python -m bench.gpu_tables --update); bash
# bench/device_check.sh runs it beside the labeler's estimate. On CPU: bash bench/gpu_check.sh --model tiny ...
#   bash bench/gpu_check.sh [--model 1b] [--steps 15] [--global-batch 32] [--micro-batch 8] [--commit SHA]
#                           [--record-dir bench/measured] [--out-dir DIR]
#   sbatch --gpus=1 --time=00:15:00 bench/gpu_check.sh
set -euo pipefail
cd "${SLURM_SUBMIT_DIR:-$(dirname "$0")/..}"
if [ -f .venv/bin/activate ]; then source .venv/bin/activate; fi
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null || true
exec "${PYTHON:-python3}" -m bench.gpu_check "$@"
