"""What the report scores: metric families, their scored units, and the per-document values they
are means of, read from lm-eval's own per-document logs (`samples_<task>.jsonl`, lm-eval 0.4.13)
with no second evaluation pass.

Families (Signal and Noise, Heineman et al. 2025; DataDecide, Magnusson et al. 2025: at small
scale a continuous likelihood metric separates corpora that accuracy cannot):

- `accuracy`: each benchmark's suite metric (acc, acc_norm; F1 for CoQA), the paper's headline;
- `bpb`: bits per byte of the gold continuation, -log2 P(gold | context) over the continuation's
  UTF-8 bytes as lm-eval scored it (target delimiter included): every multiple-choice and cloze
  task, and LAMBADA's target word. Lower is better;
- `p_gold`: the probability mass on the gold choice, the softmax over the choices' summed
  log-likelihoods: every multiple-choice task;
- `clean_text`: bits per byte of clean main content (evaluation/clean_text.py), lm-eval's
  `bits_per_byte` (sum of bits over sum of bytes), its own category, never in the average.

CoQA is generative: it has no likelihood score and keeps F1 in the accuracy family alone. A
family's category and average are means over the benchmarks that have it (suite.yaml's
`continuous` says which), each benchmark the mean of its tasks.

Where the gold choice is logged: lm-eval's `target` is the gold index, or the gold choice's text
(the continuation is then the target delimiter + it). WinoGrande's form (lm-eval's "multiple
input": the choices are contexts sharing one continuation) logs only the shared continuation; its
gold index, `doc_to_text(doc)`, is not logged, and with two choices lm-eval's own `acc` for the
document says which one it is.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from evaluation.clean_text import VIEW_TITLES, CleanTextTask
from evaluation.suite import CATEGORIES, CATEGORY_TITLES, Suite

LN2 = math.log(2)
# what the decision table reads, per arm against the reference: (family, column)
DECISION = (("accuracy", "average"), ("bpb", "average"), ("clean_text", "plain"), ("clean_text", "markdown"))


@dataclass(frozen=True)
class Family:
    name: str
    title: str
    lower_is_better: bool
    scale: float  # shown as value x scale (100: a fraction shown in points)
    unit: str
    # scored unit (a benchmark, or a clean-text task) -> its tasks and their weights
    units: dict[str, dict[str, float]] = field(default_factory=dict)
    keys: dict[str, str] = field(default_factory=dict)  # unit -> the per-document value it averages
    columns: dict[str, dict[str, float]] = field(default_factory=dict)  # column -> units and weights
    column_titles: dict[str, str] = field(default_factory=dict)
    offsets: dict[str, float] = field(default_factory=dict)  # column -> what its score subtracts (centered)

    @property
    def decimals(self) -> int:
        return 2 if self.scale == 100 else 3

    def task_keys(self) -> dict[str, str]:
        """task -> the per-document value its unit averages."""
        return {t: self.keys[u] for u, tasks in self.units.items() for t in tasks}

    def task_weights(self, column: str) -> dict[str, float]:
        """The weight of every task in a column's score (a unit's weight shared by its tasks)."""
        out: dict[str, float] = {}
        for unit, w in self.columns[column].items():
            for task, v in self.units[unit].items():
                out[task] = out.get(task, 0.0) + w * v
        return out

    def scores(self) -> dict[tuple[str, str], dict[str, float]]:
        """Every score of the family, ("units" | "columns", name) -> its task weights."""
        return ({("units", u): dict(tasks) for u, tasks in self.units.items()}
                | {("columns", c): self.task_weights(c) for c in self.columns})


def _benchmark_family(name: str, title: str, lower: bool, scale: float, suite: Suite, key_of, centered=False) -> Family:
    units, keys = {}, {}
    for b in suite.benchmarks:
        key = key_of(b)
        if key is not None:
            tasks = b.form(suite.headline)
            units[b.name] = {t: 1 / len(tasks) for t in tasks}
            keys[b.name] = key
    columns, titles, offsets = {}, {}, {}
    for column in ("average", *CATEGORIES):
        members = [b.name for b in suite.benchmarks if b.name in units and (column == "average" or b.category == column)]
        if members:
            columns[column] = {m: 1 / len(members) for m in members}
            titles[column] = "Avg" if column == "average" else CATEGORY_TITLES[column]
    if centered:  # (score − chance) / (1 − chance), averaged: weights 1 / (k (1 − chance)), chance subtracted
        k = len(suite.benchmarks)
        columns["average_centered"] = {b.name: 1 / (k * (1 - b.chance)) for b in suite.benchmarks}
        titles["average_centered"] = "Avg (centered)"
        offsets["average_centered"] = sum(b.chance / (k * (1 - b.chance)) for b in suite.benchmarks)
    return Family(name, title, lower, scale, "points" if scale == 100 else "bits/byte", units, keys, columns, titles,
                  offsets)


def families(suite: Suite, clean_tasks: list[CleanTextTask]) -> dict[str, Family]:
    """The report's metric families, the clean-text one where the config runs clean-text tasks."""
    out = {
        "accuracy": _benchmark_family("accuracy", "Accuracy (the suite's metric)", False, 100, suite,
                                      lambda b: b.score, centered=True),
        "bpb": _benchmark_family("bpb", "Bits per byte of the gold answer; lower is better", True, 1, suite,
                                 lambda b: "bpb" if "bpb" in b.continuous else None),
        "p_gold": _benchmark_family("p_gold", "Probability on the gold answer", False, 100, suite,
                                    lambda b: "p_gold" if "p_gold" in b.continuous else None),
    }
    if clean_tasks:
        units = {t.task: {t.task: 1.0} for t in clean_tasks}
        columns, titles = {}, {}
        for view in ("plain", "markdown"):
            members = [t.task for t in clean_tasks if t.view == view]
            if members:
                columns[view] = {m: 1 / len(members) for m in members}
                titles[view] = VIEW_TITLES[view]
        for t in clean_tasks:
            if t.view is None:
                columns[t.task], titles[t.task] = {t.task: 1.0}, t.task
        out["clean_text"] = Family("clean_text", "Clean text, bits per byte; lower is better", True, 1, "bits/byte",
                                   units, {t.task: "clean_bpb" for t in clean_tasks}, columns, titles)
    return out


# ---------------------------------------------------------------- per-document values


def gold_index(sample: dict, delimiter: str) -> int | None:
    """The gold choice of a multiple-choice document, as lm-eval's own scoring finds it."""
    target, arguments = sample["target"], sample["arguments"]
    if isinstance(target, int) and not isinstance(target, bool):
        return target if 0 <= target < len(arguments) else None
    if not isinstance(target, str):
        return None  # several gold choices: no one gold continuation
    if len({continuation for _, continuation in arguments}) == 1:  # multiple input: the choices are contexts
        if len(arguments) != 2 or "acc" not in sample:
            return None
        best = int(np.argmax([r[0] for r in sample["filtered_resps"]]))
        return best if sample["acc"] == 1 else 1 - best
    matches = [i for i, (_, continuation) in enumerate(arguments) if continuation == delimiter + target]
    return matches[0] if matches else None  # lm-eval: choices.index(target)


def document_values(sample: dict, config: dict) -> dict[str, float]:
    """Every value the report averages for one logged document: lm-eval's own per-document
    metrics (acc, acc_norm, f1, ...), and `bpb`, `p_gold`, or the clean-text `bits` and `bytes`."""
    values = {k: float(v) for k, v in sample.items()
              if k in sample.get("metrics", []) and isinstance(v, (int, float)) and not isinstance(v, bool)}
    kind = config.get("output_type")
    if kind == "loglikelihood_rolling" and "bits_per_byte" in sample:
        loglikelihood, nbytes = sample["bits_per_byte"]
        values |= {"bits": -loglikelihood / LN2, "bytes": float(nbytes)}
    elif kind == "loglikelihood":
        (loglikelihood, _), = sample["filtered_resps"]
        values["bpb"] = -loglikelihood / LN2 / len(sample["arguments"][0][1].encode("utf-8"))
    elif kind == "multiple_choice":
        gold = gold_index(sample, config.get("target_delimiter", " "))
        if gold is not None:
            lls = np.array([r[0] for r in sample["filtered_resps"]], dtype=float)
            p = np.exp(lls - lls.max())
            values["bpb"] = -lls[gold] / LN2 / len(sample["arguments"][gold][1].encode("utf-8"))
            values["p_gold"] = float(p[gold] / p.sum())
    return values


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


def clean_text_values(bits: np.ndarray, nbytes: np.ndarray) -> np.ndarray:
    """Per-document values whose mean is lm-eval's bits per byte, sum(bits) / sum(bytes), and
    whose variance over documents is the ratio's (the delta method's linearisation): R +
    (bits_i − R bytes_i) / mean(bytes)."""
    ratio = bits.sum() / nbytes.sum()
    return ratio + (bits - ratio * nbytes) / nbytes.mean()
