"""Where an experiment stands: every stage's tasks, failures, spend, ETA and the next command. Read-only.

    python -m slurm.status CONFIG [--json] [--watch SECONDS] [--exact]      (bash slurm/status.sh CONFIG)

One table for the whole flow in its order (extraction per arm, tokenizer, reference reads,
post-processing per arm, tokenisation, budget, training per rung x arm x seed, evaluation per rung,
report): tasks done / total, failed, running, pending (with Slurm's reason), what the finished tasks
produced, the CPU- and GPU-hours spent beside the plan's (`<output_root>/plan/plan.json`) and an
ETA from the task times measured so far. A call reads at most 500 finished tasks' stats per stage
beyond those earlier calls read (kept under ~/.cache/xsuite-status/), drawn at random, and scales
the rest from them, marked `~`; --exact reads them all. Then every failed task with its log and
the last error line in it, the training runs (step, tokens/s, MFU, loss, newest complete
checkpoint) and the command to run next, worded as the refusals of the commands it names word it.

It reads listings and the records the flow writes (completion markers, datatrove's per-task stats
and logs, `logs/slurm/jobs.jsonl`, `log.jsonl`, checkpoints, `results.json`), never the data;
where `squeue` and `sacct` exist, one call of each adds running and pending tasks, Slurm's reasons
and the time spent. A completion marker whose output file is missing counts as failed, not done.
Safe to run at any time, from a login node, while the run goes on: it writes nothing but its cache.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from functools import cache
from pathlib import Path

from configs.experiment import ExperimentConfig, load_experiment_or_exit

# sacct states of a task that ended without finishing its work
FAILED_STATES = {"FAILED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL", "BOOT_FAIL", "DEADLINE", "PREEMPTED"}
SQUEUE_FORMAT = "%F|%j|%T|%V|%K|%r|%M"
JOB_NUMBER = re.compile(r"\d+")
SACCT_FIELDS = "JobID,JobName,State,ElapsedRaw,AllocCPUS,AllocTRES"
LOG_TAIL_BYTES = 64 * 1024
STATS_BLOCK = 1024  # stats files read (and held) at once
READERS = 16  # threads that read them
# a stage's stats read at most per call beyond those cached (without --exact): a random sample that
# scales to the unread rest (a paper run's first call reads 12 stages x 500, not 557,664 files)
SAMPLE = 500
LOST_OUTPUT = "completion marker without its output"
DONE_LINE = "Processing done for rank="  # what datatrove logs when a task finished
# the exception line that closes a traceback (loguru's or Python's), or a Slurm daemon's error
ERROR_LINE = re.compile(r"^(?:[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Refused|Failed)\b.*|slurmstepd: error: .*)$")


@dataclass
class Row:
    """One line of the table: a part of the corpus flow, a training run, a rung's evaluation, the report."""
    stage: str
    tasks: int
    done: int = 0
    failed: int = 0
    running: int = 0
    pending: int = 0
    reasons: dict[str, int] = field(default_factory=dict)  # Slurm's reasons of the pending tasks
    produced: dict[str, int] = field(default_factory=dict)
    cpu_hours: float = 0.0
    gpu_hours: float = 0.0
    planned_cpu_hours: float | None = None
    planned_gpu_hours: float | None = None
    eta_s: float | None = None
    # finished tasks whose stats were not read: their figures in `produced` (and, without sacct, in
    # the hours) scaled from `sample` tasks drawn at random among the unread ones (0, 0: exact)
    estimated: int = 0
    sample: int = 0


@dataclass
class Failure:
    stage: str
    task: str
    log: str
    error: str


@dataclass
class QueuedTask:
    """A row of squeue: one task, or the pending tasks of an array (`tasks` of them)."""
    job: str
    name: str
    state: str
    submitted: str
    tasks: int
    reason: str


@dataclass
class Accounted:
    """A row of sacct: one job or array task."""
    job: str  # <job>_<index> for an array task
    state: str
    seconds: int


@dataclass
class Spent:
    """What sacct says of the jobs of one name: CPU- and GPU-seconds over every allocation, the
    newest allocation (the first row of the newest job), and those that ended failed (a paper run's arrays are 557,664 rows: only
    these are kept)."""
    cpu_s: float = 0.0
    gpu_s: float = 0.0
    newest: Accounted | None = None
    newest_number: int = -1  # the newest allocation's job number
    failed: list[Accounted] = field(default_factory=list)


# ---------------------------------------------------------------- Slurm: one squeue, one sacct


def array_size(indices: str) -> int:
    """Tasks in squeue's %K of a pending array (`0-99%10`, `3,5-9`), 1 for one task (or N/A)."""
    indices = indices.split("%")[0]
    if not re.fullmatch(r"[\d,\-]+", indices):
        return 1
    return sum(int(b) - int(a) + 1 if "-" in part else 1
               for part in indices.split(",") if part for a, _, b in [part.partition("-")])


def squeue_tasks(prefix: str) -> list[QueuedTask] | None:
    """This user's jobs named `<prefix>-...`; None where squeue does not run (no Slurm here)."""
    if shutil.which("squeue") is None:
        return None
    try:
        out = subprocess.run(["squeue", "--me", "--noheader", f"--format={SQUEUE_FORMAT}"], capture_output=True, text=True,
                             check=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    rows = []
    for line in out.splitlines():
        parts = line.strip().split("|")
        if len(parts) >= 7 and parts[1].startswith(f"{prefix}-"):
            job, name, state, submitted, indices, reason = parts[:6]
            rows.append(QueuedTask(job, name, state, submitted, array_size(indices) if state == "PENDING" else 1,
                                   "" if reason in ("None", "(null)") else reason))
    return rows


@cache  # a run's allocations share a few TRES strings
def gpus_of(tres: str) -> int:
    found = re.search(r"gres/gpu(?::[^=,]+)?=(\d+)", tres)
    return int(found.group(1)) if found else 0


def sacct_spent(names: Iterable[str], since: str) -> dict[str, Spent] | None:
    """The allocations of the jobs named `names` since `since`, by name; None where sacct does not run."""
    names = sorted(set(names))
    if shutil.which("sacct") is None or not names:
        return None
    try:
        out = subprocess.run(["sacct", "--noheader", "--parsable2", "--allocations", f"--starttime={since}",
                              f"--format={SACCT_FIELDS}", f"--name={','.join(names)}"],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, check=True, timeout=120).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    spent: dict[str, Spent] = {}
    numbers: dict[str, int] = {}  # job number by JobID before its array index: an array's rows share one
    for line in out.splitlines():  # a paper run's arrays: 557,664 lines, so a plain loop, least work first
        fields = line.split("|")
        if len(fields) < 6 or not fields[3].isdigit():
            continue
        job, name, state, seconds, cpus, tres = fields[:6]
        one, seconds = spent.get(name) or spent.setdefault(name, Spent()), int(seconds)
        one.cpu_s += seconds * int(cpus or 0)
        one.gpu_s += seconds * gpus_of(tres)
        head = job.partition("_")[0]
        if (number := numbers.get(head)) is None:
            number = numbers[head] = job_number(job)
        if number > one.newest_number:
            one.newest, one.newest_number = Accounted(job, state.split(" ", 1)[0], seconds), number
        if state in FAILED_STATES:  # the one state with more words is `CANCELLED by <uid>`
            one.failed.append(Accounted(job, state, seconds))
    return spent


def job_number(job: str) -> int:
    """The job of a sacct JobID (`1234`, `1234_5` an array task, `1234_[6-9]` pending ones)."""
    return int(JOB_NUMBER.match(job).group())


# ---------------------------------------------------------------- logs


def tail_lines(path: Path) -> list[str]:
    """The whole lines of the last LOG_TAIL_BYTES of a file (none if it cannot be read)."""
    try:
        with open(path, "rb") as f:
            size = f.seek(0, os.SEEK_END)
            f.seek(max(0, size - LOG_TAIL_BYTES))
            lines = f.read().decode(errors="replace").splitlines()
    except OSError:
        return []
    return lines[1:] if size > LOG_TAIL_BYTES else lines  # the first line read may be cut


def last_error_line(log: Path) -> str | None:
    """The exception and message that end the last traceback in `log` (not the traceback), or a
    Slurm daemon's error (time limit, memory); None when the log holds none."""
    lines = tail_lines(log)
    return next((line.strip() for line in reversed(lines) if ERROR_LINE.match(line)), None)


def task_stats(stats_folder: Path, ranks: list[int]) -> Iterator[tuple[int, list[dict]]]:
    """(rank, datatrove's stats) of each of `ranks` whose stats can be read, in order, a block at a
    time (held in memory a block at a time), each block shared among READERS threads: on a cluster
    file system each file is a round trip."""
    folder = str(stats_folder)

    def read(part: list[int]) -> list[tuple[int, list[dict]]]:
        out = []
        for rank in part:
            try:
                with open(f"{folder}/{rank:05d}.json", "rb") as f:
                    out.append((rank, json.loads(f.read())))
            except (OSError, ValueError):  # a task writing it now, or one whose stats were removed
                continue
        return out

    with ThreadPoolExecutor(READERS) as pool:
        for start in range(0, len(ranks), STATS_BLOCK):
            block = ranks[start:start + STATS_BLOCK]
            size = -(-len(block) // READERS)
            for part in pool.map(read, [block[i:i + size] for i in range(0, len(block), size)]):
                yield from part


def total(value) -> int:
    return int(value["total"]) if isinstance(value, dict) else int(value)


def figures(steps: list[dict]) -> dict[str, int]:
    """What one task read and wrote, from its stats: records (a WARC reader's), documents in (its
    reader's), documents out (its last writer's), tokens (counted by its last step that counts
    them)."""
    out: dict[str, int] = {}
    first = steps[0]["stats"] if steps else {}
    if "response_records" in first:
        out["records"] = total(first["response_records"])
    if "documents" in first:
        out["documents_in"] = total(first["documents"])
    writers = [s["stats"] for s in steps if "WRITER" in s["name"]]
    if writers:
        out["documents_out"] = total(writers[-1].get("total", 0))
    for step in reversed(steps):
        key = next((k for k in ("tokens", "doc_len_tokens") if k in step["stats"]), None)
        if key:
            out["tokens"] = total(step["stats"][key])
            break
    return out


def task_seconds(steps: list[dict]) -> float:
    times = [s.get("time_stats", 0) for s in steps]  # a number (0) for a step that saw nothing
    return sum(t["total"] if isinstance(t, dict) else t for t in times)


# ---------------------------------------------------------------- the corpus flow


def flow_stages(config: ExperimentConfig) -> list:
    """The corpus flow's stages as `python -m corpus.flow` builds them, from the input list the
    first run stored (nothing resolved, generated or written)."""
    from corpus.flow.stages import corpus_stages
    from corpus.read.inputs import PATHS_FILE, inputs_folder
    from corpus.read.manifest import MANIFEST, read_manifest

    folder = inputs_folder(config)
    base = read_manifest(folder / MANIFEST)["base"] if (folder / MANIFEST).is_file() else str(folder)
    return corpus_stages(config, base, folder / PATHS_FILE)


def ranks_named(names: Iterable[str], prefix: str = "", suffix: str = "") -> set[int]:
    """The ranks in the file names `<prefix><rank><suffix>` among `names`: completion markers
    (`00012`), shards (`00012.jsonl.gz`), task logs (`task_00012.log`)."""
    a, b = len(prefix), len(suffix)
    stems = [name[a:len(name) - b] for name in names if name.startswith(prefix) and name.endswith(suffix)] if a or b \
        else names
    return set(map(int, filter(str.isdecimal, stems)))


def listing(folder: Path) -> list[str]:
    try:
        return os.listdir(folder)
    except OSError:
        return []


def shard_writers(stage) -> list[Path]:
    """The folders where the stage's writers leave one `<rank>.jsonl.gz` per task that wrote documents."""
    from datatrove.pipeline.writers import JsonlWriter

    return [Path(step.output_folder.path) for step in stage.pipeline
            if isinstance(step, JsonlWriter) and step.output_filename.template == "${rank}.jsonl.gz"]


def planned(plan: dict | None, stage: str, arm: str) -> tuple[float | None, float | None]:
    """The plan's CPU- and GPU-hours of a (plan stage, arm), summed over its rows."""
    if plan is None:
        return None, None
    rows = [s for s in plan["costs"]["stages"] if s["stage"] == stage and str(s["arm"]).split(":")[0] == arm]
    if not rows:
        return None, None
    return sum(s["cpu_hours"] for s in rows), sum(s["gpu_hours"] for s in rows)


PLAN_STAGE = {"extract": "extraction", "postprocess": "post-processing", "read": "reference read"}


FIGURES = ("records", "documents_in", "documents_out", "tokens")


def mtime_ns(path: Path) -> int | None:
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return None


@dataclass
class Tally:
    """What a stage's finished tasks (marker there, outputs there) did: `done` of them, their FIGURES
    and seconds summed, exact for `read` of them and scaled for the other `done - read` from the
    stats of `sample` tasks drawn at random among them; the tasks whose marker outlived their
    output, with their figures and the missing file."""
    done: int
    sums: dict[str, float]
    seconds: float
    read: int
    sample: int
    lost: list[tuple[int, dict[str, int], float, Path]]  # rank, its figures and seconds, the missing file


def task_figures(steps: list[dict]) -> list[float]:
    """A task's FIGURES and seconds, as the cache keeps them."""
    made = figures(steps)
    return [made.get(k, 0) for k in FIGURES] + [task_seconds(steps)]


def read_figures(stats_folder: Path, ranks: Iterable[int]) -> dict[int, list[float]]:
    """The figures (task_figures) of each of `ranks` whose stats can be read."""
    return {rank: task_figures(steps) for rank, steps in task_stats(stats_folder, sorted(ranks))}


def ran_again(completions: Path, summed: Iterable[int], listed: int) -> set[int]:
    """The tasks summed at the listing of `completions` that had mtime `listed` that ran again
    since: their marker removed and written anew, so newer than that listing (their stats replaced)."""
    if mtime_ns(completions) == listed:  # no marker written or removed since
        return set()
    return {rank for rank in summed if (mtime_ns(completions / f"{rank:05d}") or listed + 1) > listed}


def tally(stage, markers: set[int], listed: int | None, outputs: dict[Path, set[int]], cached: dict | None,
          exact: bool) -> tuple[dict, Tally]:
    """What the stage's finished tasks did, from their stats, and its cache entry for the next call.
    `markers`: the completion markers, listed when `completions/` had mtime `listed`; `outputs`: the
    ranks of the shards in each of the stage's shard writers' folders; `cached`: this entry of the
    last call.

    The cache keeps each read task's figures, so they are not read again; a task whose marker went
    (its figures dropped) or that ran again (a marker newer than the last listing: its figures
    dropped and its new stats read) costs the others nothing. Of the tasks not read, those whose
    output is missing are read (few: each may be a lost output), the rest all when `exact` or when
    they are at most SAMPLE, else a random SAMPLE of them, and the unread rest is scaled from
    those. Whatever is read joins the cache, so a run watched call after call ends exact. The
    cache is dropped when the stage began again whole (its SPLIT record rewritten)."""
    from corpus.stage import SPLIT

    key = mtime_ns(stage.logs / SPLIT)
    completions, stats = stage.logs / "completions", stage.logs / "stats"
    known: dict[int, Sequence[float]] = {}  # the cache's are tuples, those read lists
    again: set[int] = set()
    if cached and cached.get("key") == key and cached.get("listed") is not None and "columns" in cached:
        known = {rank: made for rank, made in zip(cached["ranks"], zip(*cached["columns"], strict=True), strict=True)
                 if rank in markers}
        again = ran_again(completions, known, cached["listed"])
        for rank in again:
            del known[rank]
    # a marker without its shard: lost if its stats say it wrote documents (few: read each)
    missing = set().union(*(markers - present for present in outputs.values()))
    known |= read_figures(stats, (missing | again) - known.keys())
    wrote = FIGURES.index("documents_out")
    gone = {rank: next(folder / f"{rank:05d}.jsonl.gz" for folder, present in outputs.items() if rank not in present)
            for rank in missing if rank in known and known[rank][wrote]}
    unread = sorted(markers - known.keys())
    drawn = read_figures(stats, unread if exact or len(unread) <= SAMPLE else
                         random.Random(stage.label).sample(unread, SAMPLE))
    known |= drawn
    done, read = len(markers) - len(gone), len(known) - len(gone)
    scale = (done - read) / len(drawn) if drawn else 0.0  # tasks left unread per task drawn
    columns = [sum(column) for column in zip(*(made for rank, made in known.items() if rank not in gone),
                                             strict=True)] or [0.0] * (len(FIGURES) + 1)
    scaled = [sum(column) * scale for column in zip(*drawn.values(), strict=True)] or [0.0] * (len(FIGURES) + 1)
    *sums, seconds = (a + b for a, b in zip(columns, scaled, strict=True))
    lost = [(rank, dict(zip(FIGURES, known[rank][:-1], strict=True)), known[rank][-1], path)
            for rank, path in sorted(gone.items())]
    ranks = sorted(known)  # a column a figure: loads faster than a row a task at 557,664 tasks
    entry = {"key": key, "listed": listed, "ranks": ranks,
             "columns": [list(column) for column in zip(*(known[rank] for rank in ranks), strict=True)]}
    return entry, Tally(done, dict(zip(FIGURES, sums, strict=True)), seconds, read, len(drawn) if read < done else 0, lost)


def cache_file(config: ExperimentConfig) -> Path:
    """Where the tallies of the last call are kept for the next (outside the output root: the
    command writes nothing there)."""
    root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return root / "xsuite-status" / f"{hashlib.sha256(str(config.output_root.resolve()).encode()).hexdigest()[:16]}.json"


def corpus_rows(config: ExperimentConfig, stages: list, queue: list[QueuedTask] | None,
                accounting: dict[str, Spent] | None, plan: dict | None, cache: dict,
                exact: bool = False) -> tuple[list[Row], list[Failure]]:
    """A row per part of the flow (an arm's extraction, its post-processing, ...), its stages' tasks
    added up; the failed tasks named. `cache`: the tallies of the last call, by stage, updated;
    `exact`: every finished task's stats read (tally)."""
    from corpus.flow.submit import job_name

    rows: dict[str, Row] = {}
    failures: list[Failure] = []
    parts: dict[str, list] = {}
    for stage in stages:
        parts.setdefault(stage.part_label, []).append(stage)
    for label, part in parts.items():
        row = rows[label] = Row(label, 0)
        if part[0].arm:
            row.planned_cpu_hours, row.planned_gpu_hours = planned(plan, PLAN_STAGE.get(part[0].part or part[0].name, ""),
                                                                   part[0].arm)
        spent = [one for s in part if (one := (accounting or {}).get(job_name(config, s.label)))]
        unmeasured = False  # work left in a stage no finished task has timed yet: no ETA
        for stage in part:
            queued = stage_queue(row, [q for q in queue or [] if q.name == job_name(config, stage.label)])
            markers = {rank for rank in ranks_named(listing(stage.logs / "completions")) if rank < stage.tasks}
            listed = mtime_ns(stage.logs / "completions")  # after the listing: a marker newer is newer than it
            outputs = {folder: ranks_named(listing(folder), suffix=".jsonl.gz") for folder in shard_writers(stage)}
            cache[stage.label], done = tally(stage, markers, listed, outputs, cache.get(stage.label), exact)
            for rank, made, _, gone in done.lost:  # failed, not done: not counted
                row.failed += 1
                failures.append(Failure(stage.label, f"{rank:05d}", str(stage.logs / "completions" / f"{rank:05d}"),
                                        f"completion marker without its output {gone} "
                                        f"({made.get('documents_out', 0):,} documents written)"))
            keys = (("records", "documents_in") if stage is part[0] else ()) + \
                (("documents_out", "tokens") if stage is part[-1] else ())
            for key in keys:
                if done.sums[key]:
                    row.produced[key] = row.produced.get(key, 0) + round(done.sums[key])
            row.tasks += stage.tasks
            row.done += done.done
            row.estimated += done.done - done.read
            row.sample += done.sample
            if not spent:  # without Slurm's accounting: the finished tasks' own times
                row.cpu_hours += done.seconds * stage.resources.cpus_per_task / 3600
                row.gpu_hours += done.seconds * stage.resources.gpus_per_task / 3600
            started = ranks_named(listing(stage.logs / "logs"), "task_", ".log")
            for rank in sorted(started - markers):  # started, not finished: running, or failed
                log = stage.logs / "logs" / f"task_{rank:05d}.log"
                error = last_error_line(log)
                if error is None and (queue is None or queued or any(DONE_LINE in line for line in tail_lines(log))):
                    continue  # running here or queued, or finished once and to run again (its marker removed)
                row.failed += 1
                failures.append(Failure(stage.label, f"{rank:05d}", str(log), error or
                                        "stopped without an error line (killed: time limit or memory?); its Slurm log "
                                        f"is under {stage.logs / 'slurm_logs'}"))
            left = stage.tasks - done.done
            if left and done.done:  # the tasks left at the mean time of those finished, `workers` at a time
                row.eta_s = (row.eta_s or 0.0) + left * done.seconds / done.done / max(1, stage.resources.workers)
            elif left:
                unmeasured = True
        if spent:  # Slurm's own figure: failed and running tasks included
            row.cpu_hours, row.gpu_hours = sum(one.cpu_s for one in spent) / 3600, sum(one.gpu_s for one in spent) / 3600
        if unmeasured:
            row.eta_s = None
    return list(rows.values()), failures


def stage_queue(row: Row, queued: list[QueuedTask]) -> int:
    """Adds a stage's queued tasks to its row; returns how many are running or pending."""
    for q in queued:
        if q.state == "PENDING":
            row.pending += q.tasks
            if q.reason:
                row.reasons[q.reason] = row.reasons.get(q.reason, 0) + q.tasks
        else:
            row.running += q.tasks
    return sum(q.tasks for q in queued)


# ---------------------------------------------------------------- training, evaluation, report


def last_log_records(log: Path, n: int = 20) -> list[dict]:
    """The last `n` whole records of a run's log.jsonl, read from its end."""
    from pretrain.train import log_record

    return [r for r in map(log_record, tail_lines(log)) if r][-n:]


def job_failure(stage: str, spent: Spent | None, log_of) -> Failure | None:
    """The newest allocation of a job when it ended failed, with the last error line of its log."""
    newest = spent.newest if spent else None
    if newest is None or newest.state not in FAILED_STATES:
        return None
    log = log_of(newest.job)
    return Failure(stage, newest.job, str(log), last_error_line(log) or f"{newest.state} (no error line in the log)")


def training_rows(config: ExperimentConfig, queue: list[QueuedTask] | None, accounting: dict[str, Spent] | None,
                  plan: dict | None) -> tuple[list[Row], list[dict], list[Failure]]:
    """A row per (rung, arm, seed) run, its training detail, and the runs whose last job failed."""
    rows, details, failures = [], [], []
    prefix = config.executor.job_name_prefix
    for rung in config.rungs():
        one = config.for_rung(rung)
        steps = one.training_steps()[0]
        per_run = (plan or {}).get("costs", {}).get("rungs", {}).get(rung, {}).get("gpu_hours_per_run")
        for arm, seed in one.runs():
            label = f"train-{arm}-{rung}-seed{seed}"
            run_dir = one.run_dir(arm, seed)
            row = Row(label, 1, planned_gpu_hours=per_run)
            queued = stage_queue(row, [q for q in queue or [] if q.name == f"{prefix}-{label}"])
            detail = {"run": label, "step": 0, "steps": steps, "tokens_per_s": None, "mfu": None, "loss": None,
                      "checkpoint": None}
            if run_dir.is_dir():
                from pretrain.checkpoint import latest_checkpoint

                latest = latest_checkpoint(run_dir)
                records = last_log_records(run_dir / "log.jsonl")
                if records:
                    last = records[-1]
                    detail |= {"step": last["step"], "tokens_per_s": last["tokens_per_s"], "mfu": last["mfu"],
                               "loss": last["loss"]}
                    row.produced = {"steps": last["step"], "tokens": last["tokens"]}
                    mean_s = sum(r["seconds"] for r in records) / len(records)
                    info = json.loads((run_dir / "run.json").read_text()) if (run_dir / "run.json").is_file() else {}
                    device_hours = last["step"] * mean_s * info.get("world_size", 1) / 3600
                    if info.get("device", "cpu") == "cpu":
                        row.cpu_hours = device_hours
                    else:
                        row.gpu_hours = device_hours
                    row.eta_s = (steps - last["step"]) * mean_s
                if latest is not None:
                    detail["checkpoint"] = str(latest)
                    row.produced["checkpoint_step"] = int(latest.name.removeprefix("step_"))
                    row.done = int(row.produced["checkpoint_step"] >= steps)
            spent = (accounting or {}).get(f"{prefix}-{label}")
            if spent:
                row.cpu_hours, row.gpu_hours = spent.cpu_s / 3600, spent.gpu_s / 3600
            if not row.done and not queued and \
                    (failure := job_failure(label, spent, lambda job, d=run_dir: d / f"slurm-{job}.out")):
                row.failed = 1
                failures.append(failure)
            if row.done:
                row.eta_s = 0.0
            rows.append(row)
            details.append(detail)
    return rows, details, failures


def evaluation_row(config: ExperimentConfig, queue: list[QueuedTask] | None, accounting: dict[str, Spent] | None,
                   plan: dict | None) -> tuple[Row, dict, list[Failure]]:
    """One row for every rung's evaluation (one Slurm array evaluates every pending checkpoint):
    checkpoints scored of those the runs will export, and tasks scored, per rung."""
    from corpus.flow.pricing import checkpoints_per_run
    from evaluation.evaluate import checkpoint_info, exported_checkpoints, result_dir

    row = Row("evaluate", 0)
    scored: dict[str, dict] = {}
    for rung in config.rungs():
        one = config.for_rung(rung)
        expected = len(one.runs()) * checkpoints_per_run(one)
        row.tasks += expected
        checkpoints = tasks = 0
        for checkpoint in exported_checkpoints(config, rung):
            results = result_dir(config, checkpoint_info(checkpoint)) / "results.json"
            if results.is_file():
                checkpoints += 1
                tasks += len(json.loads(results.read_text())["results"])
        row.done += checkpoints
        scored[rung] = {"checkpoints": checkpoints, "of": expected, "tasks_scored": tasks}
    row.produced = {"checkpoints": row.done, "tasks_scored": sum(s["tasks_scored"] for s in scored.values())}
    if plan is not None:
        row.planned_gpu_hours = sum(s["gpu_hours"] for s in plan["costs"]["stages"] if s["stage"] == "evaluation")
    name = f"{config.executor.job_name_prefix}-evaluate"
    queued = stage_queue(row, [q for q in queue or [] if q.name == name])
    spent = (accounting or {}).get(name) or Spent()
    row.cpu_hours, row.gpu_hours = spent.cpu_s / 3600, spent.gpu_s / 3600
    failures = []
    listed = config.output_root / "eval" / "slurm" / "checkpoints.txt"
    checkpoints = listed.read_text().split() if listed.is_file() else []
    # the newest submission's: checkpoints.txt lists its checkpoints, array task i the line i
    for a in [a for a in spent.failed if job_number(a.job) == spent.newest_number] if not queued else []:
        _, _, index = a.job.partition("_")
        if index.isdigit() and int(index) < len(checkpoints):
            checkpoint = Path(checkpoints[int(index)])
            if not (result_dir(config, checkpoint_info(checkpoint)) / "results.json").is_file():
                log = config.output_root / "eval" / "slurm" / f"evaluate-{a.job}.out"
                failures.append(Failure("evaluate", str(checkpoint), str(log), last_error_line(log) or a.state))
    row.failed = len(failures)
    return row, scored, failures


def report_row(config: ExperimentConfig) -> Row:
    """The report is done when it is newer than every evaluation result."""
    report = config.report_dir() / "report.md"
    results = [p.stat().st_mtime for p in (config.output_root / "eval").glob("*/*/seed*/step_*/results.json")]
    current = report.is_file() and bool(results) and report.stat().st_mtime >= max(results)
    return Row("report", 1, done=int(current))


# ---------------------------------------------------------------- the whole experiment


def since(config: ExperimentConfig) -> str:
    """sacct's start of the window: the first submission this output root recorded (else 60 days)."""
    from corpus.flow.submit import record_lines

    times = [line["submitted"] for line in record_lines(config)]
    return min(times) if times else "now-60days"


def next_command(config: ExperimentConfig, config_path: str, status: dict, queue: list[QueuedTask] | None) -> str:
    """What to run now, as the refusal of the command it names words it."""
    from corpus.flow.submit import queue_refusal, still_queued

    launcher = "bash" if queue is None else "sbatch"
    rows = {r["stage"]: r for r in status["rows"]}
    corpus = [r for r in status["rows"] if r["stage"] in status["corpus_parts"]]
    ours = still_queued(config, [(q.job, q.name, q.state, q.submitted) for q in queue or []])
    if ours and (status["failures"] or any("DependencyNeverSatisfied" in r["reasons"] for r in corpus)):
        return queue_refusal(config, ours)
    if any(r["running"] or r["pending"] for r in status["rows"]):
        return "nothing: wait ({} running, {} pending)".format(sum(r["running"] for r in status["rows"]),
                                                               sum(r["pending"] for r in status["rows"]))
    if any(r["done"] < r["tasks"] for r in corpus):
        lost = [f["log"] for f in status["failures"] if f["error"].startswith(LOST_OUTPUT)]
        fix = "fix what failed (the error lines above), then: " if len(lost) < status["corpus_failures"] else ""
        if lost:  # a marker that outlived its output would keep its task from running again
            more = f" (and {len(lost) - 10:,} more: the failures' `log` in --json)" if len(lost) > 10 else ""
            fix += f"remove the completion markers whose outputs are gone: rm {' '.join(lost[:10])}{more}; then: "
        return f"{fix}{launcher} slurm/extract.sh {config_path}  (only the tasks without a completion marker run)"
    if config.pretrain is None:
        return "nothing: every stage is done"
    from pretrain.train import missing_inputs, missing_inputs_refusal, selected_runs

    if missing := missing_inputs(config, selected_runs(config, config_path, None, None)):
        return missing_inputs_refusal(config_path, missing)
    if any(r["done"] < r["tasks"] for name, r in rows.items() if name.startswith("train-")):
        return f"{launcher} slurm/pretrain.sh {config_path}"
    if config.evaluation is None:
        return "nothing: every stage is done"
    if rows["evaluate"]["done"] < rows["evaluate"]["tasks"]:
        from evaluation.evaluate import exported_checkpoints, no_checkpoint_refusal

        return f"{launcher} slurm/evaluate.sh {config_path}" if exported_checkpoints(config) else \
            no_checkpoint_refusal(config, config_path)
    if not rows["report"]["done"]:
        return f"python -m evaluation.report {config_path}"
    return f"nothing: every stage is done; the report: {config.report_dir() / 'report.md'}"


def write_cache(path: Path, cache: dict) -> None:
    """The tallies for the next call; where they cannot be written, the next call reads every stats file again."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        part = path.with_name(f"{path.name}.{os.getpid()}")
        part.write_text(json.dumps(cache))
        part.replace(path)
    except OSError:
        pass


def experiment_status(config: ExperimentConfig, config_path: str, use_cache: bool = True, exact: bool = False) -> dict:
    """Everything the command shows, as one JSON-ready dict. `exact`: no figure scaled from a sample
    (every finished task's stats summed, see tally). `use_cache`: read only the stats of the
    tasks that finished since the last call (cache_file)."""
    from corpus.flow.submit import job_name

    stages = flow_stages(config)
    plan_file = config.plan_dir() / "plan.json"
    plan = json.loads(plan_file.read_text()) if plan_file.is_file() else None
    queue = squeue_tasks(config.executor.job_name_prefix)
    names = [job_name(config, s.label) for s in stages] + [job_name(config, "evaluate")]
    names += [job_name(config, f"train-{arm}-{rung}-seed{seed}") for rung in (config.rungs() if config.pretrain else [])
              for arm, seed in config.for_rung(rung).runs()]
    accounting = sacct_spent(names, since(config)) if queue is not None else None
    cached = cache_file(config)
    try:
        cache = json.loads(cached.read_text()) if use_cache else {}
    except (OSError, ValueError):
        cache = {}
    rows, failures = corpus_rows(config, stages, queue, accounting, plan, cache, exact)
    if use_cache:
        write_cache(cached, cache)
    corpus_parts, corpus_failures = [r.stage for r in rows], len(failures)
    training: list[dict] = []
    evaluation: dict = {}
    if config.pretrain is not None:
        train, training, failed = training_rows(config, queue, accounting, plan)
        rows += train
        failures += failed
        if config.evaluation is not None:
            row, evaluation, failed = evaluation_row(config, queue, accounting, plan)
            rows += [row, report_row(config)]
            failures += failed
    status = {"experiment": config.name, "config": config_path, "output_root": str(config.output_root),
              "at": time.strftime("%Y-%m-%dT%H:%M:%S"), "slurm": queue is not None, "accounting": accounting is not None,
              "cache": str(cached) if use_cache else None,
              "plan": str(plan_file) if plan else None, "rows": [asdict(r) for r in rows], "corpus_parts": corpus_parts,
              "failures": [asdict(f) for f in failures], "corpus_failures": corpus_failures, "training": training,
              "evaluation": evaluation}
    status["next"] = next_command(config, config_path, status, queue)
    return status


# ---------------------------------------------------------------- output


COLUMNS = ("stage", "done/total", "failed", "running", "pending", "produced", "CPU-h (plan)", "GPU-h (plan)", "ETA")


def hours(spent: float, plan: float | None) -> str:
    def text(h: float) -> str:
        return f"{h:,.1f}" if h >= 0.1 or h == 0 else "<0.001" if h < 0.001 else f"{h:.3f}"

    return text(spent) + ("" if plan is None else f" ({text(plan)})")


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    if seconds < 3600:
        return f"{seconds / 60:.0f}m"
    return f"{seconds / 3600:.1f}h" if seconds < 86400 else f"{seconds / 86400:.1f}d"


def cells(row: dict, accounting: bool) -> list[str]:
    """The row's table cells; `~` before a figure scaled from a sample: the produced figures, the
    ETA (the finished tasks' mean time), the hours where they are the finished tasks' own times
    (without sacct)."""
    reasons = ", ".join(f"{n:,} {reason}" for reason, n in row["reasons"].items())
    done = row["done"] >= row["tasks"]
    about = "~" if row["estimated"] else ""
    timed = "" if accounting else about
    return [row["stage"], f"{row['done']:,}/{row['tasks']:,}", f"{row['failed']:,}" if row["failed"] else "",
            f"{row['running']:,}" if row["running"] else "", f"{row['pending']:,}" + (f" ({reasons})" if reasons else "")
            if row["pending"] else "", ", ".join(f"{k} {about}{v:,}" for k, v in row["produced"].items()),
            timed + hours(row["cpu_hours"], row["planned_cpu_hours"]), timed + hours(row["gpu_hours"], row["planned_gpu_hours"]),
            "done" if done else about + duration(row["eta_s"])]


def sections(status: dict) -> list[str]:
    """The text below the table: failures, training runs, evaluation, the next command."""
    out = []
    if scaled := sum(r["estimated"] for r in status["rows"]):
        out.append(f"~ estimated: the stats of {scaled:,} of {sum(r['done'] for r in status['rows']):,} finished tasks "
                   f"are not read yet; their figures are scaled from {sum(r['sample'] for r in status['rows']):,} drawn at "
                   f"random (at most {SAMPLE} a stage). " + (f"Each call reads {SAMPLE} more a stage; " if status["cache"] else
                                                             "With --no-cache each call reads the same sample; ")
                   + "--exact reads them all.")
    if status["failures"]:
        out.append(f"failed ({len(status['failures'])}):")
        out += [f"  {f['stage']} task {f['task']}: {f['error']}\n    log: {f['log']}" for f in status["failures"]]
    if status["training"]:
        out.append("training:")
        for t in status["training"]:
            speed = "" if t["tokens_per_s"] is None else f", {t['tokens_per_s']:,.0f} tokens/s" + \
                ("" if t["mfu"] is None else f", MFU {t['mfu']:.1%}") + f", loss {t['loss']:.4f}"
            out.append(f"  {t['run']}: step {t['step']:,}/{t['steps']:,}{speed}; checkpoint {t['checkpoint'] or 'none'}")
    if status["evaluation"]:
        out.append("evaluation: " + "; ".join(f"{rung} {e['checkpoints']}/{e['of']} checkpoints, {e['tasks_scored']} tasks "
                                               "scored" for rung, e in status["evaluation"].items()))
    sources = "squeue and sacct" if status["accounting"] else "squeue" if status["slurm"] else \
        "markers and logs only (no Slurm here)"
    out.append(f"from {sources}; plan: {status['plan'] or 'none (python -m corpus.flow.plan CONFIG)'}")
    out.append("next: " + status["next"])
    return out


def plain_text(status: dict) -> str:
    table = [list(COLUMNS)] + [cells(r, status["accounting"]) for r in status["rows"]]
    widths = [max(len(line[i]) for line in table) for i in range(len(COLUMNS))]
    lines = [f"{status['experiment']} ({status['output_root']}) at {status['at']}"]
    lines += ["  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip() for line in table]
    return "\n".join(lines + sections(status))


def show(status: dict, console) -> None:
    """A rich table on a terminal; plain text otherwise (a log, a pipe)."""
    if not console.is_terminal:
        print(plain_text(status), flush=True)
        return
    from rich.table import Table

    table = Table(title=f"{status['experiment']} ({status['output_root']}) at {status['at']}")
    for column in COLUMNS:
        table.add_column(column, justify="left" if column in ("stage", "produced") else "right")
    for row in status["rows"]:
        style = "red" if row["failed"] else "green" if row["done"] >= row["tasks"] else None
        table.add_row(*cells(row, status["accounting"]), style=style)
    console.print(table)
    console.print("\n".join(sections(status)), highlight=False, markup=False)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m slurm.status", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("config", help="experiment YAML, e.g. configs/paper.yaml")
    parser.add_argument("--json", action="store_true", help="print the status as one JSON object (for scripts, dashboards)")
    parser.add_argument("--watch", type=float, metavar="SECONDS", help="refresh every SECONDS until interrupted")
    parser.add_argument("--exact", action="store_true",
                        help=f"read the stats of every finished task not read before (minutes at the paper's scale); by "
                             f"default a stage reads at most {SAMPLE} a call, drawn at random, and scales the rest from "
                             "them (shown with ~)")
    parser.add_argument("--no-cache", action="store_true",
                        help="read the finished tasks' stats again (by default those read by earlier calls are not: their "
                             "sums are kept under ~/.cache/xsuite-status/)")
    args = parser.parse_args(argv)
    config = load_experiment_or_exit(args.config)
    from rich.console import Console

    console = Console()
    while True:
        status = experiment_status(config, args.config, use_cache=not args.no_cache, exact=args.exact)
        if args.watch and console.is_terminal:
            console.clear()
        if args.json:
            print(json.dumps(status), flush=True)
        else:
            show(status, console)
        if not args.watch:
            return 0
        try:
            time.sleep(args.watch)
        except KeyboardInterrupt:
            return 0


if __name__ == "__main__":
    sys.exit(main())
