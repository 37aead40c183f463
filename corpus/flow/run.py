"""The corpus flow of an experiment: extraction of every arm, then (when the config has the
sections) the shared tokenizer, identical post-processing, tokenisation and the equal token budget.

    python -m corpus.flow CONFIG [--until extract|postprocess|dataset] [--arms A B] [--retry-skipped]

Writes under `<output_root>/`: `inputs/` (the input list and its manifest, written at the first run
and fixed for the output root's life: corpus.read.inputs), `extract/<arm>/` (documents, datatrove logs, `summary.json`: every
record accounted for; a reference-corpus arm's read logs), `tokenizer/`, `post/<arm>/` (`output/` the post-processed documents,
`removed/<step>/` every removed document with its reason), `datasets/<arm>/` (Megatron
`.bin/.idx`) and `datasets/manifest.json`. With `--executor local` (the default; `bash
slurm/extract.sh`) the stages run here in order and a re-run skips finished tasks; with
`--executor slurm` (`sbatch slurm/extract.sh`) every stage is submitted as a job array that waits
for the stages it needs, within the site's limits, and never while jobs of an earlier submission
are queued or running (corpus.flow.submit). Where `python -m corpus.flow.plan CONFIG` has written a plan, its per-file
yields are checked against the config's inputs and budget first: a run projected to fall short is
refused before any work, unless `--allow-short`. An input file a finished task skipped (`inputs.on_corrupt:
skip`) is read again once it was replaced, or with `--retry-skipped`, and every stage built on its task
runs again. `python -m corpus.accounting.ledger CONFIG` then accounts for every record.
"""

from __future__ import annotations

import argparse
import errno
import shutil
import sys

from configs.base import ConfigError
from configs.environment import check_output_root
from configs.experiment import ExperimentConfig, load_experiment_or_exit
from configs.provenance import write_provenance
from corpus.accounting.summary import print_summaries, summarize_arm, write_summary
from corpus.extractors.dripper import DripperArm
from corpus.extractors.dripper.labelers.revision import pin_revision
from corpus.flow.execute import (
    DiskFull,
    SplitChanged,
    check_splits,
    disk_full_message,
    forget_what_depends_on_reruns,
    record_splits,
    rerun_lost_tasks,
    run_local,
    stage_folder,
)
from corpus.flow.plan import ShortInputs, check_plan
from corpus.flow.stages import UNTIL, corpus_stages
from corpus.flow.submit import CONTINUE, SubmissionFailed, SubmissionRefused, check_nothing_queued, record_lines, submit_slurm
from corpus.read.inputs import files_to_read_again, resolve_inputs
from corpus.read.warc import InputFileError
from corpus.stage import rerun_task, unfinished_tasks
from corpus.tokens.budget import BudgetError, budget_is_stale
from slurm.console import add_verbose_flag, apply_verbose_flag, say
from slurm.lock import DriverLocked, driving


def run_corpus(config: ExperimentConfig, until: str = "dataset", arms: list[str] | None = None,
               executor: str = "local", allow_short: bool = False, retry_skipped: bool = False) -> list[dict]:
    """Run (locally) or submit (Slurm) every stage; returns the local extraction summaries. A full
    run the latest plan projects short of the budget raises ShortInputs, unless `allow_short`. An
    input file a finished extraction task skipped is read again (its task, and every stage built on
    it, run again) once it came back replaced, or with `retry_skipped`.
    From a script, call it under `if __name__ == "__main__":`: the local executor's worker
    processes import the calling script again, and without the guard they hang the run."""
    check_output_root(config.output_root)
    with driving(config.output_root, say):  # one driver per output root (slurm.lock), before any write
        return drive_corpus(config, until, arms, executor, allow_short, retry_skipped)


def drive_corpus(config: ExperimentConfig, until: str, arms: list[str] | None, executor: str, allow_short: bool,
                 retry_skipped: bool) -> list[dict]:
    """run_corpus's work, under the output root's lock."""
    # before anything is forgotten or written: the jobs a submission queued may still read and write
    # it (a local run is refused alike; without a submission record there is nothing to ask Slurm)
    if executor == "slurm" or record_lines(config):
        check_nothing_queued(config)
    base, paths_file = resolve_inputs(config)
    stages = corpus_stages(config, base, paths_file, until, arms)
    check_splits(stages)  # before anything is forgotten: a refused run changes nothing
    for name in arms or config.extractor_arms:  # the hub model's commit, fixed before any task loads it
        if isinstance(arm := config.extractor_arms[name], DripperArm):
            pin_revision(config.arm_dir(name), arm.labeler)
    for file, tasks in files_to_read_again(config, base, retry_skipped).items():
        for arm, task in tasks:
            rerun_task(config.arm_dir(arm) / "logs", task)
        say(f"read again: {file} (not read whole by {', '.join(sorted({arm for arm, _ in tasks}))}; "
            f"{'--retry-skipped' if retry_skipped else 'it was replaced since'})")
    if until == "dataset" and not arms and (short := check_plan(config, paths_file)):
        if not allow_short:
            raise ShortInputs(f"refused before any work: {short}. To run anyway: --allow-short")
        print(f"warning (--allow-short): {short}", file=sys.stderr)
    for message in rerun_lost_tasks(stages):
        say(message)
    budget = next((stage for stage in stages if stage.name == "budget"), None)
    if budget is not None and budget_is_stale(config):  # cut for other arms, budget or seed: cut again
        shutil.rmtree(budget.logs / "completions", ignore_errors=True)
    if forgotten := forget_what_depends_on_reruns(stages):
        say(f"run again, built on a stage that runs again: {', '.join(forgotten)}")
    # after forgetting: a stage that reruns whole removes its folders, the tokenizer's provenance with them
    for folder in sorted({stage_folder(config, stage) for stage in stages}):
        if warning := write_provenance(folder, config, "corpus"):
            say(f"warning: {warning}")
    record_splits(stages)
    if executor == "slurm":
        jobs = submit_slurm(config, stages, until, arms)
        for stage in stages:
            print(f"{stage.label}: " + ("job " + ", ".join(jobs[stage.label]) if jobs[stage.label] else "done already"
                                        if not unfinished_tasks(stage.logs, stage.tasks) else "in a later submission"))
        if CONTINUE in jobs:
            print(f"the rest (past executor.max_queued_tasks): job {jobs[CONTINUE][0]} submits it when these have finished")
        return []
    run_local(config, stages)
    summaries = []
    for arm in arms or list(config.extractor_arms):
        summaries.append(summarize_arm(config, arm))
        write_summary(config, arm, summaries[-1])
    return summaries


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m corpus.flow", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("config", help="experiment YAML, e.g. configs/local.yaml")
    parser.add_argument("--until", choices=UNTIL, default="dataset",
                        help="last stage to run (default: as far as the config goes)")
    parser.add_argument("--arms", nargs="+", help="extract only these arms (and stop after extraction)")
    parser.add_argument("--allow-short", action="store_true",
                        help="run even if the latest plan (python -m corpus.flow.plan) projects the inputs short of the budget")
    parser.add_argument("--executor", choices=["local", "slurm"], default="local",
                        help="run the stages here, or submit them to Slurm (slurm/extract.sh: slurm under sbatch)")
    parser.add_argument("--retry-skipped", action="store_true",
                        help="read again every input file a finished task skipped as not whole (inputs.on_corrupt: skip), "
                             "and every stage built on it; a skipped file replaced since is read again without it")
    add_verbose_flag(parser)
    args = parser.parse_args(argv)
    apply_verbose_flag(args)
    config = load_experiment_or_exit(args.config)
    unknown = set(args.arms or []) - set(config.extractor_arms)
    if unknown:
        print(f"--arms: {sorted(unknown)} are not extractor arms of {args.config} (those: {sorted(config.extractor_arms)}); "
              "reference arms are read after the tokenizer, in a full run", file=sys.stderr)
        return 2
    try:
        summaries = run_corpus(config, args.until, args.arms, args.executor, args.allow_short, args.retry_skipped)
    except (BudgetError, ShortInputs, ConfigError, SubmissionRefused, SubmissionFailed, SplitChanged, DriverLocked) as e:
        print(f"{args.config}: {e}", file=sys.stderr)
        return 2
    except (InputFileError, DiskFull):  # its one line is on the console already, with the log's path
        return 1
    except OSError as e:  # out of space between stages (a summary, a record): the same one line
        if e.errno != errno.ENOSPC:
            raise
        print(f"{args.config}: {disk_full_message(config, e)}", file=sys.stderr)
        return 1
    if summaries and (args.until == "extract" or args.arms):
        print_summaries(summaries)
    elif summaries:
        say(f"every record through every stage: python -m corpus.accounting.ledger {args.config}")
    else:
        print(f"submitted; when the jobs finish: python -m corpus.accounting.ledger {args.config}")
    return 0
