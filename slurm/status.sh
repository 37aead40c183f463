#!/usr/bin/env bash
# Where an experiment stands (slurm/status.py): every stage's tasks done / failed / running / pending,
# what they produced, CPU- and GPU-hours against the plan, an ETA, each failed task's log and error
# line, the training runs, and the command to run next. Read-only: safe on a login node at any time.
#   bash slurm/status.sh [CONFIG] [--json] [--watch SECONDS]
# With squeue and sacct on PATH (a login node) one call of each adds running and pending tasks,
# Slurm's reasons and the time spent; without them, the completion markers and logs alone.
set -euo pipefail
CONFIG=${1:-configs/local.yaml}
cd "$(dirname "$0")/.."
if [ -f .venv/bin/activate ]; then source .venv/bin/activate; fi
exec python -m slurm.status "$CONFIG" "${@:2}"
