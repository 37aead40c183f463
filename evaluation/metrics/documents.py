"""lm-eval's per-document logs (`samples_<task>.jsonl`, lm-eval 0.4.13) read into the values every
metric family averages, with no second evaluation pass."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from evaluation.metrics import document_values


@dataclass(frozen=True)
class TaskDocuments:
    """One task's logged documents in one run: per document (leaf task, doc_id) its hash and values."""

    hashes: dict[tuple[str, int], str]
    values: dict[tuple[str, int], dict[str, float]]
    scored: int  # documents lm-eval scored (its n-samples), over the task's leaves
    logged: int  # lines in the sample logs


def leaf_tasks(result: dict, task: str) -> list[str]:
    """A task, or the tasks under a group (lm-eval's group_subtasks, recursively)."""
    children = result.get("group_subtasks", {}).get(task)
    if not children:
        return [task]
    return [leaf for child in children for leaf in leaf_tasks(result, child)]


def read_task_documents(result: dict, folder: Path, task: str) -> TaskDocuments:
    hashes, values, scored, logged = {}, {}, 0, 0
    for leaf in leaf_tasks(result, task):
        scored += int(result.get("n-samples", {}).get(leaf, {}).get("effective", 0))
        path = folder / f"samples_{leaf}.jsonl"
        if not path.is_file():
            continue
        config = result.get("configs", {}).get(leaf, {})
        for line in path.read_text().splitlines():
            sample = json.loads(line)
            key = (leaf, int(sample["doc_id"]))
            hashes[key] = sample.get("doc_hash", "")
            values[key] = document_values(sample, config)
            logged += 1
    return TaskDocuments(hashes, values, scored, logged)
