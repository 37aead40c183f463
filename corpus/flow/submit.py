"""The corpus flow submitted to Slurm within a site's limits, recorded, and never twice at once.

Every stage is a datatrove job array that waits (`afterok`) for every array of every stage it
needs: a failed task holds everything after it.

- **MaxArraySize** (`executor.max_array_size`): a stage of more tasks is several arrays, and the
  stage's `workers` are shared among them with none lost (their `%N` throttles add up to it: 256
  workers over 47 arrays are 21 arrays of 6 and 26 of 5). With more arrays than workers, each runs
  one task at a time and waits (`afterany`) for the array `workers` places before it.
- **Queued tasks** (`executor.max_queued_tasks`: a per-user MaxSubmitJobs, where every array task
  counts): the submission never holds more. What fits is shared among the stages that can start
  (`next_round`); a stage submitted in part holds what needs it. One small job,
  `<prefix>-continue` (`slurm/extract.sh` on a copy of the config), waits (`afterok`) for
  everything submitted, then submits the rest the same way: a failed task holds it too.
- **One submission at a time.** Every job is recorded in `<output_root>/logs/slurm/jobs.jsonl` the
  moment its `sbatch` returns, so an `sbatch` that fails halfway through a submission loses no
  record of what it queued; an `sbatch` that failed is recorded too, with when it ran: a busy
  slurmctld may queue a job whose `sbatch` timed out. A new submission is refused while any
  recorded job is still queued or running (`squeue` on the recorded job names; for a failed
  `sbatch`, a job of its name submitted while it ran), with the commands that clear the queue
  (docs/guides/cluster.md, "After a failed task").
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from datetime import datetime, timedelta
from functools import partial
from pathlib import Path

from datatrove.executor import SlurmPipelineExecutor
from datatrove.executor.slurm import launch_slurm_job

from configs.experiment import ExperimentConfig
from corpus.shims import array_args, prepare_arrays
from corpus.stage import Stage, unfinished_tasks
from slurm.jobs import REPO, sbatch
from slurm.lock import ENDED

CONTINUE = "continue"

# squeue's and our record's time format; a job's submit time, set by slurmctld, may fall this far
# outside the times this machine saw its sbatch start and fail
TIME_FORMAT = "%Y-%m-%dT%H:%M:%S"
CLOCK_SLACK = timedelta(seconds=2)


class SubmissionRefused(RuntimeError):
    """Jobs of this output root are still queued or running."""


class SubmissionFailed(RuntimeError):
    """An sbatch failed halfway through a submission; what it queued before is recorded."""


class StageArrays(SlurmPipelineExecutor):
    """datatrove's Slurm executor without its merge_stats job: the ledger reads every task's own
    stats, and a stage that waited on that job would be held for good if it failed."""

    def launch_merge_stats(self) -> None:
        return None


def throttles(workers: int, arrays: int) -> list[int]:
    """Each array's `%N`: `workers` shared among `arrays` with none lost (at least 1 each; with
    more arrays than workers, the arrays are chained so that `workers` run at once)."""
    if arrays > workers:
        return [1] * arrays
    return [workers // arrays + (1 if i < workers % arrays else 0) for i in range(arrays)]


def next_round(stages: list[Stage], unfinished: dict[str, int], limit: int | None) -> dict[str, int]:
    """How many of each stage's unfinished tasks one submission queues: all of them within
    `limit` less one place; past it, `limit` less two places, first shared among the stages that
    can start now in proportion to their workers (a GPU stage and a CPU stage both busy), then in
    running order to any stage whose needs this round submits whole. The two places: the job that
    will submit the rest, and the one submitting this round, which is still running and counts
    against MaxSubmitJobs (a first round from a login node leaves that place empty)."""
    if limit is None or sum(unfinished.values()) <= limit - 1:
        return {label: n for label, n in unfinished.items() if n}
    room = limit - 2
    ready = [s for s in stages if unfinished[s.label] and not any(unfinished[need] for need in s.needs)]
    workers = sum(s.resources.workers for s in ready)
    out = {s.label: min(unfinished[s.label], room * s.resources.workers // workers) for s in ready}
    room -= sum(out.values())
    for stage in stages:
        label = stage.label
        if unfinished[label] and all(out.get(need, 0) == unfinished[need] for need in stage.needs):
            more = min(unfinished[label] - out.get(label, 0), room)
            out[label] = out.get(label, 0) + more
            room -= more
    return {label: n for label, n in out.items() if n}


def rounds(stages: list[Stage], limit: int | None) -> list[dict[str, int]]:
    """Every submission a run from nothing takes at `limit`: the tasks each queues per stage."""
    unfinished = {stage.label: stage.tasks for stage in stages}
    out = []
    while any(unfinished.values()):
        out.append(next_round(stages, unfinished, limit))
        for label, n in out[-1].items():
            unfinished[label] -= n
    return out


def submit_stage(config: ExperimentConfig, stage: Stage, ranks: list[int], needs: list[str]) -> list[str]:
    """`ranks` of the stage as arrays of at most max_array_size tasks, each after every job of `needs`."""
    res, size = stage.resources, config.executor.max_array_size
    executor = StageArrays(
        stage.pipeline, tasks=stage.tasks, workers=res.workers, time=res.time, partition=res.partition,
        cpus_per_task=res.cpus_per_task, mem_per_cpu_gb=res.mem_per_cpu_gb, gpus_per_task=res.gpus_per_task, qos=res.qos,
        job_name=job_name(config, stage.label), env_command=config.executor.env_command, logging_dir=str(stage.logs),
        slurm_logs_folder=str(stage.logs / "slurm_logs"), skip_completed=True, max_array_size=size)
    script = prepare_arrays(executor, ranks)
    count = -(-len(ranks) // size)
    shares = throttles(res.workers, count)
    jobs: list[str] = []
    for i in range(count):
        after = [f"afterok:{':'.join(needs)}"] if needs else []
        if count > res.workers and i >= res.workers:
            after.append(f"afterany:{jobs[i - res.workers]}")
        dependency = [f"--dependency={','.join(after)}"] if after else []
        args = [*array_args(i, min(size, len(ranks) - i * size), shares[i]), *dependency]
        jobs.append(recorded_sbatch(config, stage.label, partial(launch_slurm_job, script, executor.job_id_retriever, *args)))
    return jobs


def job_name(config: ExperimentConfig, label: str) -> str:
    return f"{config.executor.job_name_prefix}-{label}"


def record_file(config: ExperimentConfig) -> Path:
    return config.output_root / "logs" / "slurm" / "jobs.jsonl"


def record(config: ExperimentConfig, entry: dict) -> None:
    """One line appended to the record (and closed) at once: what a later failure cannot take back."""
    path = record_file(config)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        f.write(json.dumps(entry) + "\n")


def recorded_sbatch(config: ExperimentConfig, label: str, submit) -> str:
    """`submit()` (one sbatch; returns the job id), its job recorded as soon as it returns. A failed
    sbatch is recorded with the times it ran between (a timed-out one may have queued its job all
    the same) and raises SubmissionFailed."""
    name, start = job_name(config, label), time.strftime(TIME_FORMAT)
    try:
        job = submit()
    except (OSError, subprocess.CalledProcessError) as e:
        end = time.strftime(TIME_FORMAT)
        # datatrove's launcher leaves sbatch's message on the console, not on the exception
        error = (getattr(e, "stderr", None) or "").strip() or \
            (f"exit status {e.returncode}" if isinstance(e, subprocess.CalledProcessError) else str(e))
        record(config, {"submitted": end, "jobs": {}, "failed": {"name": name, "from": start, "to": end, "error": error}})
        raise SubmissionFailed(
            f"sbatch of {name} failed ({error}). Every job queued before it is recorded in {record_file(config)}, and a "
            f"job of {name} submitted while it ran (a timed-out sbatch may have queued it) counts as queued. Submit "
            "again: while any of them is queued or running it is refused, with the scancel that clears them") from e
    record(config, {"submitted": time.strftime(TIME_FORMAT), "jobs": {name: [job]}})
    return job


def record_lines(config: ExperimentConfig) -> list[dict]:
    path = record_file(config)
    return [json.loads(line) for line in path.read_text().splitlines()] if path.is_file() else []


def recorded_jobs(config: ExperimentConfig) -> dict[str, set[str]]:
    """Every job id any submission of this output root recorded, by job name."""
    out: dict[str, set[str]] = {}
    for line in record_lines(config):
        for name, ids in line["jobs"].items():
            out.setdefault(name, set()).update(ids)
    return out


def failed_sbatches(config: ExperimentConfig) -> list[tuple[str, datetime, datetime]]:
    """(job name, from, to) of every recorded sbatch that failed: a job of that name submitted
    between those times (give or take CLOCK_SLACK) may be its own."""
    return [(f["name"], datetime.strptime(f["from"], TIME_FORMAT) - CLOCK_SLACK,
             datetime.strptime(f["to"], TIME_FORMAT) + CLOCK_SLACK)
            for line in record_lines(config) if (f := line.get("failed"))]


def queued_jobs(config: ExperimentConfig) -> list[tuple[str, str, str]]:
    """(job id, name, state) of every recorded job still queued or running, and of every job a
    failed sbatch may have queued, this job aside (the one submitting the rest)."""
    recorded, failed = recorded_jobs(config), failed_sbatches(config)
    names = sorted(set(recorded) | {name for name, _, _ in failed})
    if not names:
        return []
    try:
        # --me: a failed sbatch's window is matched by name, and another user's job may share it (Slurm >= 20.11)
        out = subprocess.run(["squeue", "--me", "--noheader", "--format=%F|%j|%T|%V", f"--name={','.join(names)}"],
                             capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError) as e:
        raise SubmissionRefused(f"cannot tell whether the jobs {record_file(config)} records are still queued: "
                                f"squeue failed ({getattr(e, 'stderr', '') or e}); submit from a node where squeue runs") from e

    return still_queued(config, [tuple(line.strip().split("|")) for line in out.stdout.splitlines() if line.strip()])


def still_queued(config: ExperimentConfig, rows: list[tuple[str, str, str, str]]) -> list[tuple[str, str, str]]:
    """(job id, name, state) of the squeue `rows` (job id, name, state, submit time) that this output
    root's record names, or that a failed sbatch of it may have queued, and that have not ended
    (this job aside: the one submitting the rest)."""
    ids, failed = set().union(set(), *recorded_jobs(config).values()), failed_sbatches(config)

    def ours(job: str, name: str, submitted: str) -> bool:
        return job in ids or any(name == n and start <= datetime.strptime(submitted, TIME_FORMAT) <= end
                                 for n, start, end in failed)

    return sorted({(job, name, state) for job, name, state, submitted in rows
                   if ours(job, name, submitted) and state not in ENDED and job != os.environ.get("SLURM_JOB_ID")})


def check_nothing_queued(config: ExperimentConfig) -> None:
    """Refuse a submission while jobs of this output root are queued or running: their tasks
    would run twice, and jobs held by a failed task would wait for good beside the new ones."""
    queued = queued_jobs(config)
    if queued:
        raise SubmissionRefused(queue_refusal(config, queued))


def queue_refusal(config: ExperimentConfig, queued: list[tuple[str, str, str]]) -> str:
    """What a submission refused while `queued` (job id, name, state) wait or run says: which jobs,
    the scancel that clears them, and to submit again."""
    ids = sorted({job for job, _, _ in queued}, key=int)
    pending = sorted({job for job, _, state in queued if state == "PENDING"}, key=int)
    running = sorted({job for job, _, state in queued if state != "PENDING"}, key=int)
    names = sorted({name for _, name, _ in queued})
    lines = [f"refused: {len(ids)} job{'s' if len(ids) > 1 else ''} of {config.output_root} still queued or running "
             f"({', '.join(names)}; recorded in {record_file(config)})."]
    if pending:
        lines.append("After a failed task, what comes after it stays PENDING for good (reason DependencyNeverSatisfied). "
                     f"Cancel what is pending:\n  scancel --state=PENDING {' '.join(pending)}")
    if running:
        lines.append(f"Wait until no task runs (squeue -j {','.join(running)}), or stop them: scancel {' '.join(running)}")
    lines.append("Then submit again: only the tasks without a completion marker run.")
    return "\n".join(lines)


def submit_continuation(config: ExperimentConfig, after: list[str], until: str, arms: list[str] | None) -> str:
    """The job that submits what did not fit, once everything submitted has finished:
    `slurm/extract.sh` on a copy of the config (the job that submits the first round)."""
    folder = (config.output_root / "logs" / "slurm").resolve()
    snapshot = folder / "config.json"
    folder.mkdir(parents=True, exist_ok=True)
    snapshot.write_text(config.model_dump_json(indent=2) + "\n")
    res = config.postprocess.resources
    options = [f"--dependency=afterok:{':'.join(after)}", f"--job-name={job_name(config, CONTINUE)}",
               f"--partition={res.partition}", f"--qos={res.qos}", f"--output={folder / 'continue-%j.out'}"]
    args = [str(snapshot), "--allow-short", "--until", until, *(["--arms", *arms] if arms else [])]
    return recorded_sbatch(config, CONTINUE, partial(sbatch, REPO / "slurm" / "extract.sh", options, args))


def submit_slurm(config: ExperimentConfig, stages: list[Stage], until: str = "dataset",
                 arms: list[str] | None = None) -> dict[str, list[str]]:
    """Submit what fits of every stage's unfinished tasks (`next_round`), and the job that submits
    the rest; returns each stage's job ids (none: done already, or left for a later round), and
    that job's under CONTINUE."""
    unfinished = {stage.label: unfinished_tasks(stage.logs, stage.tasks) for stage in stages}
    this_round = next_round(stages, {label: len(ranks) for label, ranks in unfinished.items()},
                            config.executor.max_queued_tasks)
    job_ids: dict[str, list[str]] = {}
    for stage in stages:
        ranks = unfinished[stage.label][:this_round.get(stage.label, 0)]
        needs = [job for need in stage.needs for job in job_ids.get(need, [])]
        job_ids[stage.label] = submit_stage(config, stage, ranks, needs) if ranks else []
    if sum(this_round.values()) < sum(map(len, unfinished.values())):
        submitted = sorted({job for ids in job_ids.values() for job in ids}, key=int)
        job_ids[CONTINUE] = [submit_continuation(config, submitted, until, arms)]
    return job_ids
