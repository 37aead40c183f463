#!/usr/bin/env bash
# The device check: on one GPU whose image has only torch and transformers (no vLLM, no megatron-core,
# no pydantic, no package index), under 8 minutes: the 1B training bench (bench/gpu_check.sh, with the
# carried packages), then the torch-only labeler estimate (python -m bench.labeler_torch measure). Each
# part stops at its budget (200 s and 160 s) and is killed past it plus --margin (50 s: start-up and
# the record), the kill waiting 10 s more: 8 minutes at most in all; a part that fails leaves the other's record. Writes the
# tracked records bench/measured/gpu_check-<gpu>-<model>.json and bench/measured/labeler_torch-<gpu>.json
# (GPU, driver, versions, commit, command), then prints the tables docs/reference/gpu-figures.md renders (python -m bench.gpu_tables --update writes them there).
# Before it, where the project's environment is: python -m bench.device_check --wheels (the carried
# packages, listed with sizes, into bench/results/device_site; carry that folder with the tree).
#   bash bench/device_check.sh --commit SHA [--train-budget 200] [--labeler-budget 160] [--margin 50]
#        [--record-dir bench/measured] [--train-args "..."] [--labeler-args "..."]
# On CPU, the same paths at the tiny shapes (tests/test_device_check.py):
#   bash bench/device_check.sh --commit SHA --record-dir DIR --margin 600 --train-args "--model tiny ..." \
#        --labeler-args "--arch tiny --batch 2 ..."
set -uo pipefail
cd "${SLURM_SUBMIT_DIR:-$(dirname "$0")/..}"
if [ -f .venv/bin/activate ]; then source .venv/bin/activate; fi
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
PY=${PYTHON:-python3}
COMMIT=$(git rev-parse HEAD 2>/dev/null || true)
TRAIN_BUDGET=200 LABELER_BUDGET=160 MARGIN=50 RECORD_DIR=bench/measured TRAIN_ARGS="" LABELER_ARGS=""
SITE=bench/results/device_site OUT=bench/results/device_check
while [ $# -gt 0 ]; do
  case "$1" in
    --commit) COMMIT=$2; shift 2 ;;
    --train-budget) TRAIN_BUDGET=$2; shift 2 ;;
    --labeler-budget) LABELER_BUDGET=$2; shift 2 ;;
    --margin) MARGIN=$2; shift 2 ;;
    --record-dir) RECORD_DIR=$2; shift 2 ;;
    --train-args) TRAIN_ARGS=$2; shift 2 ;;
    --labeler-args) LABELER_ARGS=$2; shift 2 ;;
    --out-dir) OUT=$2; shift 2 ;;
    *) echo "bench/device_check.sh: unknown option $1 (see the header of bench/device_check.sh)" >&2; exit 2 ;;
  esac
done
if [ -z "$COMMIT" ]; then
  echo "bench/device_check.sh: no git checkout here: give --commit SHA (the commit this tree is)" >&2; exit 2
fi
if [ -d "$SITE" ]; then  # the carried packages this image lacks, after nothing of its own
  CARRIED=$("$PY" -m bench.device_check --pythonpath "$SITE") || {
    echo "bench/device_check.sh: python -m bench.device_check --pythonpath $SITE failed: the carried packages are not on the path" >&2; exit 2; }
  export PYTHONPATH="${CARRIED}${PYTHONPATH:+:$PYTHONPATH}"
  echo "carried: ${CARRIED:-nothing missing here}"
fi
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null || true
mkdir -p "$OUT"
status=0

echo "== training: bash bench/gpu_check.sh (budget ${TRAIN_BUDGET} s)"
# shellcheck disable=SC2086  # TRAIN_ARGS is a list of options
timeout --kill-after=10 $((TRAIN_BUDGET + MARGIN)) bash bench/gpu_check.sh --budget "$TRAIN_BUDGET" --commit "$COMMIT" \
  --record-dir "$RECORD_DIR" --out-dir "$OUT/gpu_check" $TRAIN_ARGS || { echo "training part failed (exit $?): its record, if any, is kept"; status=1; }

echo "== labeler: python -m bench.labeler_torch measure (budget ${LABELER_BUDGET} s; a torch-only estimate, no vLLM)"
# shellcheck disable=SC2086
timeout --kill-after=10 $((LABELER_BUDGET + MARGIN)) "$PY" -m bench.labeler_torch measure --budget "$LABELER_BUDGET" \
  --commit "$COMMIT" --record-dir "$RECORD_DIR" --out "$OUT/labeler_torch.json" $LABELER_ARGS \
  || { echo "labeler part failed (exit $?): what it measured before is in its record"; status=1; }

echo "== the tables (python -m bench.gpu_tables --records $RECORD_DIR)"
"$PY" -m bench.gpu_tables --records "$RECORD_DIR" || status=1
exit $status
