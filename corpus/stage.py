"""What every stage package builds: a `Stage` (a datatrove pipeline, its tasks and resources, and the
stages it waits for, by label), and the JSONL reader and id writer that pass documents between
stages. The flow (corpus.flow) orders and runs them."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from datatrove.pipeline.readers import JsonlReader
from datatrove.pipeline.writers import JsonlWriter

from configs.base import Resources

SPLIT = "split.json"  # in a stage's logs: the split its tasks run at, written before the first of them


def label(name: str, arm: str | None = None) -> str:
    """A stage's name in logs, Slurm job names and `needs`: `<name>-<arm>`, or `<name>` for a stage
    over all arms."""
    return f"{name}-{arm}" if arm else name


@dataclass
class Stage:
    name: str
    arm: str | None  # None: a stage over all arms
    pipeline: list
    resources: Resources
    logs: Path
    needs: list[str] = field(default_factory=list)  # labels of the stages it waits for
    # the folders only it writes: removed with its completion markers when it must run again whole
    # (a step writes a shard's file only when the shard has something, so an old one would stay)
    outputs: list[Path] = field(default_factory=list)
    one_local_process: bool = False  # an in-process vLLM engine takes the whole machine (or its GPU)
    part: str = ""  # the part of the flow a person sees (default: the stage's name): one log, one closing line
    # what its outputs are cut for, by config key (exact dedup's signatures: a file per finder task)
    partitions: dict[str, int] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return label(self.name, self.arm)

    @property
    def tasks(self) -> int:
        return self.resources.tasks

    @property
    def part_label(self) -> str:
        return label(self.part or self.name, self.arm)

    @property
    def split(self) -> dict[str, int]:
        """How the stage's work is divided: its tasks, and what its outputs are cut for."""
        return {"tasks": self.tasks, **self.partitions}


def recorded_split(logs: Path) -> dict[str, int] | None:
    """The split a stage's tasks ran at (SPLIT); for a stage run before that record was written,
    the task count in datatrove's own record of its executor."""
    if (logs / SPLIT).is_file():
        return json.loads((logs / SPLIT).read_text())
    if (logs / "executor.json").is_file():
        return {"tasks": json.loads((logs / "executor.json").read_text())["world_size"]}
    return None


def unfinished_tasks(logs: Path, tasks: int) -> list[int]:
    """The tasks of a stage (its datatrove logging folder) without their completion marker."""
    return [rank for rank in range(tasks) if not (logs / "completions" / f"{rank:05d}").is_file()]


def rerun_task(logs: Path, rank: int) -> None:
    """The task runs again at the stage's next run (its completion marker goes); the flow then runs
    every stage built on it again."""
    (logs / "completions" / f"{rank:05d}").unlink(missing_ok=True)


def record_hash(record_id: str) -> int:
    """A record's 64-bit hash, the same in every arm and task: which copy of a duplicate the
    dedups keep, and the order of the budget's draw (with its seed)."""
    return int.from_bytes(hashlib.blake2b(record_id.encode(), digest_size=8).digest(), "little")


def stream_sha256(f: BinaryIO) -> str:
    """The sha256 of an open binary file's bytes from where it is to its end, read 16 MiB at a time."""
    digest = hashlib.sha256()
    for block in iter(lambda: f.read(1 << 24), b""):
        digest.update(block)
    return digest.hexdigest()


def documents_reader(folder: Path) -> JsonlReader:
    """The documents an earlier stage wrote to `folder`. No `file_path` metadata: it would write
    this run's absolute folder into every later output."""
    return JsonlReader(str(folder), glob_pattern="*.jsonl.gz", doc_progress=False, add_file_path=False)


def documents_writer(folder: Path) -> JsonlWriter:
    """One `<rank>.jsonl.gz` per task under `folder`."""
    return JsonlWriter(str(folder), output_filename="${rank}.jsonl.gz")


def record_id(writer, document) -> dict:
    """JsonlWriter adapter: only the record id."""
    return {"id": document.id}


class RecordIdWriter(JsonlWriter):
    """Only the record ids of the post-processed documents (the ledger's overlap between arms)."""

    name = "🆔 Record ids"

    def __init__(self, output_folder: str):
        super().__init__(output_folder, output_filename="${rank}.jsonl.gz", adapter=record_id)
