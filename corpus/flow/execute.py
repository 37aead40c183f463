"""Running the corpus flow's stages here, one after the other (datatrove's local executor with a
bar per stage and a closing line per part: corpus.flow.progress), and what a re-run forgets
first; on Slurm they are submitted by corpus.flow.submit."""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
from pathlib import Path

from datatrove.pipeline.readers.base import BaseDiskReader, BaseReader
from datatrove.pipeline.writers import JsonlWriter

from configs.base import ConfigError
from configs.durable import write_atomically
from configs.experiment import ExperimentConfig
from corpus.accounting.summary import counters, find_step, merged_stats, not_read_whole, summarize_arm, unverified
from corpus.extractors.base import versions_text
from corpus.flow.progress import ConsoleExecutor, TapReader, preload_workers
from corpus.postprocess.steps import MINHASH_FILTER_STAGE
from corpus.read.reference_steps import ReferenceDraw
from corpus.read.warc import InputFileError
from corpus.stage import SPLIT, Stage, recorded_split, rerun_task
from corpus.tokens.budget import BudgetError
from slurm import console


class DiskFull(OSError):
    """A stage ran out of space: one line says where, what the plan projected, and that a rerun resumes."""


# errors raised inside a stage whose one line says what, where and what to do: the console shows
# them without the end of the stage's log (kept for the unexpected ones)
KNOWN_REFUSALS = (InputFileError, BudgetError, ConfigError, DiskFull)


def disk_full_message(config: ExperimentConfig, error: OSError, stage: Stage | None = None) -> str:
    """Where the space ran out, what the plan (`python -m corpus.flow.plan`) says the stage needs."""
    where = Path(error.filename) if error.filename else config.output_root
    plan_file = config.plan_dir() / "plan.json"
    label = stage.label if stage else "the corpus flow"
    try:
        row = next(r for r in json.loads(plan_file.read_text())["footprint"]["stages"] if r["stage"] == label)
        need = f"the plan ({plan_file}) projects {(row['final_bytes'] + row['temporary_bytes']) / 1e9:,.1f} GB for {label}"
    except (OSError, ValueError, KeyError, StopIteration):
        need = f"no plan says what {label} needs (python -m corpus.flow.plan CONFIG projects it)"
    free = shutil.disk_usage(config.output_root).free
    return (f"{where}: no space left on the device ({free / 1e9:,.1f} GB free now) while {label} ran; {need}. "
            "Free space there and run again: finished tasks are kept, the rest resumes")


def local_workers(stage: Stage) -> int:
    return 1 if stage.one_local_process else min(stage.resources.workers, os.cpu_count() or 1)


def run_local(config: ExperimentConfig, stages: list[Stage]) -> None:
    """Every stage here, in order: a bar per stage, a closing line per part, library output in
    `<output_root>/logs/<part>.log` (corpus.flow.progress)."""
    written: dict[str, int] = {}  # documents each stage run here wrote, by output folder: the next bars' totals
    preload_workers([stage.pipeline for stage in stages if local_workers(stage) > 1])
    for i, stage in enumerate(stages):
        log = config.output_root / "logs" / f"{stage.part_label}.log"
        tasks = stage.tasks
        reader = stage.pipeline[0]
        taps = stage.logs / "progress" if isinstance(reader, BaseReader) else None
        if taps is not None:
            shutil.rmtree(taps, ignore_errors=True)
            taps.mkdir(parents=True)
        total = tasks if taps is None else None  # documents from an earlier stage's count; else a rate without an end
        if isinstance(reader, BaseDiskReader):
            total = written.get(reader.data_folder.path)
        with console.stage(stage.label, log, "docs" if taps else "tasks", total, explained=KNOWN_REFUSALS) as bar:
            counter = TapReader(taps, bar, None if taps else stage.logs / "completions")
            counter.start()
            try:
                ConsoleExecutor(stage.pipeline, tasks=tasks, workers=local_workers(stage), logging_dir=str(stage.logs),
                                skip_completed=True, log=log, tap_folder=taps).run()
            except OSError as e:
                if e.errno != errno.ENOSPC:
                    raise
                raise DiskFull(disk_full_message(config, e, stage)) from None
            finally:
                counter.stop()
        for step in stage.pipeline:
            if type(step) is JsonlWriter:
                written[step.output_folder.path] = counters(find_step(merged_stats(stage.logs)[0], JsonlWriter)).get("total", 0)
        if i + 1 < len(stages) and stages[i + 1].part_label == stage.part_label:
            continue
        if stage.part == "postprocess" and stage.name != MINHASH_FILTER_STAGE:  # run stage by stage (the plan's pilot)
            console.closing_line(stage.label, f"{tasks} tasks", stage.logs, log)
        else:
            console.closing_line(stage.part_label, part_counts(config, stage), part_output(config, stage), log)


def stage_folder(config: ExperimentConfig, stage: Stage) -> Path:
    """The folder a stage writes under (where its provenance is recorded)."""
    part = stage.part or stage.name
    if part == "read" and not config.arms[stage.arm].postprocess:
        part = "postprocess"  # a reference corpus that joins where post-processing writes
    folders = {"tokenize": lambda: config.dataset_dir(stage.arm), "budget": lambda: config.output_root / "datasets",
               "tokenizer": config.tokenizer_dir, "extract": lambda: config.arm_dir(stage.arm),
               "read": lambda: config.arm_dir(stage.arm), "postprocess": lambda: config.post_dir(stage.arm)}
    return folders[part]()


def part_output(config: ExperimentConfig, stage: Stage) -> Path:
    """Where the closing line points: the documents (or tokens) the part wrote."""
    return stage_folder(config, stage) / {"tokenize": "tokens", "budget": "", "tokenizer": ""}.get(stage.name, "output")


def part_counts(config: ExperimentConfig, last: Stage) -> str:
    """The closing line's counts, from datatrove's stats of the part's stages."""
    if last.name == "extract":
        s = summarize_arm(config, last.arm)
        notes = "; ".join(filter(None, (not_read_whole(s["input_files"]), unverified(s["input_files"]))))
        files = f" — {notes}, see the ledger" if notes else ""
        by = f" by {versions}" if (versions := versions_text(s["versions"])) else ""
        return (f"{s['records']} records → {s['documents_out']} documents{by} ({sum(s['dropped'].values())} dropped, "
                f"{sum(s['fallback'].values())} by fallback){'' if s['balanced'] else ' — NOT BALANCED, see the ledger'}{files}")
    if last.name == "budget":
        return f"{config.dataset.tokens_per_arm:,} tokens for each of {len(config.arms)} arms"
    steps, _ = merged_stats(last.logs)
    if last.name == "tokenizer":
        return f"{config.tokenizer.kind}, {config.tokenizer.vocab_size:,} tokens, from {len(config.tokenizer_arms())} arms' text"
    first, _ = merged_stats(config.post_dir(last.arm) / "logs" / "exact-signatures") if last.part == "postprocess" else (steps, 0)
    n_in = counters(first[0]).get("documents", 0) if first else 0
    if last.name == "read":
        n_in = counters(find_step(steps, ReferenceDraw)).get("read", 0)
    if last.name == "tokenize":
        return f"{n_in} documents → {counters(steps[-1]).get('tokens', 0):,} tokens"
    written = counters(find_step(steps, JsonlWriter))
    tokens = f", {written['doc_len_tokens']:,} tokens" if "doc_len_tokens" in written else ""
    return f"{n_in} → {written.get('total', 0)} documents{tokens}"


def completion_times(stage: Stage) -> list[float]:
    """When each task of the stage that completed did (its datatrove completion marker)."""
    done = stage.logs / "completions"
    return [p.stat().st_mtime for p in done.glob("[0-9]*")] if done.is_dir() else []


class SplitChanged(RuntimeError):
    """A stage's finished tasks ran at another split than the config's."""


def check_splits(stages: list[Stage]) -> None:
    """Refuse to finish a stage at another split than the one its finished tasks ran at: task r of
    n reads the files (or documents, or hash ranges) r, r + n, ..., so the tasks of two splits
    would read some twice and others never; and outputs cut for n tasks of the next stage are not
    cut for m. Re-planning the unfinished work would mean a mapping of datatrove's shards of our
    own: the user chooses instead, the old split or the stage again whole."""
    changed = []
    for stage in stages:
        finished, before = len(completion_times(stage)), recorded_split(stage.logs)
        if finished and before is not None and any(stage.split.get(key) != value for key, value in before.items()):
            changed.append((stage, finished, before))
    if not changed:
        return

    def text(split: dict[str, int]) -> str:
        return ", ".join(f"{key}={value}" for key, value in split.items())

    lines = [f"  {stage.label}: {finished} task{'s' if finished > 1 else ''} finished at {text(before)}; the config now says "
             f"{text(stage.split)}" for stage, finished, before in changed]
    raise SplitChanged(
        "refused: a stage would finish at another split than its finished tasks ran at\n" + "\n".join(lines) + "\n"
        "Task r of n reads the inputs r, r + n, r + 2n, ...: tasks of two splits would read some records twice and others "
        "never. Run again with the split each stage was begun at, or run a stage again whole at the new split: remove its "
        "completion markers (every stage built on it then runs again too):\n"
        + "\n".join(f"  rm -r {stage.logs / 'completions'}" for stage, _, _ in changed))


def record_splits(stages: list[Stage]) -> None:
    """The split of every stage that runs whole (no task finished), before any of its tasks runs."""
    for stage in stages:
        if not completion_times(stage):
            stage.logs.mkdir(parents=True, exist_ok=True)
            write_atomically(stage.logs / SPLIT, json.dumps(stage.split) + "\n")


def ranks_with_output(folder) -> set[int]:
    """The tasks (by rank) with a file not empty in a writer's folder, from one listing: datatrove
    names a task's files for its rank (`00042.jsonl.gz`, `00042_00003.jsonl.gz`). A listing per task
    would cost tasks x files: minutes at a few thousand tasks."""
    try:
        entries = folder.ls("", detail=True)
    except FileNotFoundError:
        return set()
    ranks = set()
    for entry in entries:
        digits = re.match(r"\d+", entry["name"].rsplit("/", 1)[-1])
        if entry.get("type") == "file" and entry.get("size") and digits:
            ranks.add(int(digits.group()))
    return ranks


def lost_outputs(stage: Stage) -> dict[int, str]:
    """The finished tasks whose written documents are gone, by rank, with what is missing: a
    completion marker must never outlive its output (a second driver's cleanup, a hand `rm`, a
    disk fault). A task's writer whose stats count documents must have left a file named for the
    task (`<rank>*`), not empty, in its output folder."""
    from datatrove.pipeline.writers.disk_base import DiskWriter

    lost, written = {}, {}
    writers = [step for step in stage.pipeline if isinstance(step, DiskWriter)]
    for rank in range(stage.tasks):
        stats_file = stage.logs / "stats" / f"{rank:05d}.json"
        if not (stage.logs / "completions" / f"{rank:05d}").is_file() or not stats_file.is_file():
            continue
        steps = json.loads(stats_file.read_text())
        for index, writer in enumerate(writers):
            recorded = next((s for s in steps if s["name"] == f"{writer.type}: {writer.name}"), None)
            if not recorded or not counters(recorded).get("total"):
                continue
            if index not in written:
                written[index] = ranks_with_output(writer.output_folder)
            if rank not in written[index]:
                lost[rank] = (f"{counters(recorded)['total']} documents recorded, no file {rank:05d}* in "
                              f"{writer.output_folder.path}")
                break
    return lost


def rerun_lost_tasks(stages: list[Stage]) -> list[str]:
    """Every finished task whose output is gone runs again (every stage built on it then runs again
    too: forget_what_depends_on_reruns); returns a message for each."""
    messages = []
    for stage in stages:
        for rank, missing in lost_outputs(stage).items():
            rerun_task(stage.logs, rank)
            messages.append(f"run again: {stage.label} task {rank}, finished but its output is gone ({missing})")
    return messages


def forget(stage: Stage) -> None:
    """The stage will run again whole: its completion markers, its tasks' stats and every folder
    it writes go, so nothing of an earlier run is read as if this one wrote it."""
    for folder in [stage.logs / "completions", stage.logs / "stats", *stage.outputs]:
        shutil.rmtree(folder, ignore_errors=True)


def forget_what_depends_on_reruns(stages: list[Stage]) -> list[str]:
    """A stage runs again whole when a stage it needs runs again (a task without its completion
    marker) or completed after any of its own tasks did (re-run since, e.g. an arm re-extracted
    alone): everything of its earlier run is forgotten (`forget`), and so it goes for every stage
    built on it. `stages` in running order. Returns the labels of the stages forgotten that had
    completed tasks."""
    reruns: set[str] = set()
    finished: dict[str, float] = {}  # when each stage that stays complete finished
    forgotten = []
    for stage in stages:
        times = completion_times(stage)
        stale = any(need in reruns for need in stage.needs) or \
            (times and any(finished.get(need, 0.0) > min(times) for need in stage.needs))
        if stale or not times:  # a stage with no completed task runs whole: what an aborted run left goes
            if times:
                forgotten.append(stage.label)
            forget(stage)
            reruns.add(stage.label)
        elif len(times) < stage.tasks:
            reruns.add(stage.label)
        else:
            finished[stage.label] = max(times)
    return forgotten
