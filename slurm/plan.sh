#!/usr/bin/env bash
# Plan a run before spending it (corpus/flow/plan.py): a pilot of a few input files through every arm
# and all post-processing, measured rates, the projected yield and cost and the budget verdict;
# then the run's power (evaluation/power.py). Writes <output_root>/plan/plan.json, which
# slurm/extract.sh checks.
#   bash slurm/plan.sh [CONFIG] [--pilot-files N]    on this machine
#   sbatch slurm/plan.sh [CONFIG] [...]              as one job on a node (add --gres=gpu:1 to pilot
#                                                    a GPU labeler arm there)
# Exit status 1: the configured inputs are projected to fall short of dataset.tokens_per_arm.
#SBATCH --job-name=xsuite-plan
#SBATCH --partition=cpu
#SBATCH --cpus-per-task=8
#SBATCH --mem-per-cpu=4G
#SBATCH --time=04:00:00
#SBATCH --output=slurm-plan-%j.out
set -euo pipefail
CONFIG=${1:-configs/local.yaml}
cd "${SLURM_SUBMIT_DIR:-$(dirname "$0")/..}"
if [ -f .venv/bin/activate ]; then source .venv/bin/activate; fi
status=0
python -m corpus.flow.plan "$CONFIG" "${@:2}" || status=$?
python -m evaluation.power "$CONFIG"
exit "$status"
