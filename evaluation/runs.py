"""The evaluated runs as the report compares them: which checkpoints, which documents, which values.

- Every (arm, seed) run is compared at the same step: the largest step every evaluated run
  reached (with `evaluation.average_last` k, the last k such steps, averaged). A run evaluated
  further is compared there all the same, and the report lists it; no run's gap is filled by an
  earlier checkpoint.
- Every comparison of a task uses the documents every compared run logged with the same document
  hash (lm-eval's `doc_hash`): a samples file shorter than lm-eval's count for the task, or a
  document whose hash differs between runs, is listed with what it leaves out, never dropped
  silently. An arm one of whose runs logged none of a task's documents is compared without that
  task (the other arms keep it, on the documents their runs logged), and the notes name it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import numpy as np

from configs.experiment import ExperimentConfig
from evaluation.evaluate import read_result
from evaluation.metrics.clean_text import clean_text_values
from evaluation.metrics.documents import TaskDocuments, read_task_documents


@dataclass
class Run:
    """One evaluated checkpoint of one (arm, seed) run."""

    arm: str
    seed: int
    step: int
    tokens: int
    folder: Path
    result: dict
    _documents: dict[str, TaskDocuments] = field(default_factory=dict, repr=False)
    _means: dict[tuple[str, str], float | None] = field(default_factory=dict, repr=False)

    def documents(self, task: str) -> TaskDocuments:
        if task not in self._documents:
            self._documents[task] = read_task_documents(self.result, self.folder, task)
        return self._documents[task]

    def label(self) -> str:
        return f"{self.arm} seed {self.seed} step {self.step}"


def load_runs(config: ExperimentConfig) -> list[Run]:
    """Every evaluated checkpoint of the config's (arm, seed) runs, with its training tokens (from
    the config, the one source of them); a damaged results.json is DamagedResult, naming it and
    the command that redoes it."""
    runs = []
    for arm, seed in config.runs():
        for path in sorted(config.eval_dir(arm, seed).glob("step_*/results.json")):
            step = int(path.parent.name.removeprefix("step_"))
            result = read_result(path, config.run_dir(arm, seed) / "hf" / path.parent.name,
                                 {"arm": arm, "seed": seed, "step": step})
            runs.append(Run(arm, seed, result["step"], config.pretrain.tokens_at(result["step"]), path.parent, result))
    return runs


def value_array(run: Run, task: str, key: str, documents: list[tuple[str, int]]) -> np.ndarray:
    """A run's values of `key` on `documents` of a task; the clean-text `clean_bpb` is the ratio's
    linearisation over those documents (evaluation.metrics.clean_text.clean_text_values)."""
    values = run.documents(task).values
    if key == "clean_bpb":
        return clean_text_values(np.array([values[d]["bits"] for d in documents]),
                                 np.array([values[d]["bytes"] for d in documents]))
    return np.array([values[d][key] for d in documents])


def value_name(key: str) -> str:
    """The per-document value a key needs: the clean-text score is computed from `bits` (and bytes)."""
    return "bits" if key == "clean_bpb" else key


def short_log(run: Run, task: str) -> str | None:
    """The note for a task whose samples log is shorter than lm-eval's count, if it is."""
    t = run.documents(task)
    return f"{task}: {run.label()} logged {t.logged} of the {t.scored} documents lm-eval scored" if t.logged < t.scored else None


def run_score(run: Run, tasks: dict[str, float], key_of: dict[str, str]) -> float | None:
    """The weighted score of one checkpoint over every document lm-eval scored; None if a task's
    log is missing or shorter than that (a score of part of its documents is not that checkpoint's)."""
    total = 0.0
    for task, w in tasks.items():
        if short_log(run, task):
            return None
        if (task, key_of[task]) not in run._means:
            docs = [d for d, v in run.documents(task).values.items() if value_name(key_of[task]) in v]
            run._means[task, key_of[task]] = float(value_array(run, task, key_of[task], docs).mean()) if docs else None
        mean = run._means[task, key_of[task]]
        if mean is None:
            return None
        total += w * mean
    return total


@dataclass
class Comparison:
    """The compared checkpoints of every run, the documents of every task, and what was left out."""

    runs: list[Run]
    steps: list[int]  # the compared steps (the last `average_last` every run reached)
    notes: list[str]  # every mismatch of steps or documents, for the report
    _common: dict[str, list[tuple[str, int]]] = field(default_factory=dict, repr=False)
    _with_key: dict[tuple[str, str], list[tuple[str, int]]] = field(default_factory=dict, repr=False)

    @cached_property
    def by_arm(self) -> dict[str, dict[int, list[Run]]]:
        """arm -> seed -> its runs at the compared steps."""
        out: dict[str, dict[int, list[Run]]] = {}
        for run in self.runs:
            if run.step in self.steps:
                out.setdefault(run.arm, {}).setdefault(run.seed, []).append(run)
        return out

    def note(self, text: str) -> None:
        """A note for the report, once however many callers find the same thing."""
        if text not in self.notes:
            self.notes.append(text)

    @property
    def compared(self) -> list[Run]:
        return [r for seeds in self.by_arm.values() for rs in seeds.values() for r in rs]

    def documents(self, task: str, key: str) -> list[tuple[str, int]]:
        """The documents of a task every compared run of the arms that have it (`arms_with`) logged a
        `key` value for, under one hash."""
        if task not in self._common:
            self._common[task] = self._common_documents(task)
        if (task, key) not in self._with_key:
            having = self.arms_with(task)
            docs = [d for d in self._common[task]
                    if all(value_name(key) in r.documents(task).values[d] for r in self.compared if r.arm in having)]
            if len(docs) < len(self._common[task]):
                self.note(f"{task}: {len(self._common[task]) - len(docs)} documents have no {key} in some run's "
                                  f"log: {key} is compared on {len(docs)}")
            self._with_key[task, key] = docs
        return self._with_key[task, key]

    def arms_with(self, task: str) -> list[str]:
        """The arms every compared run of which logged documents of the task."""
        return [arm for arm, seeds in self.by_arm.items() if all(r.documents(task).logged for rs in seeds.values() for r in rs)]

    def _common_documents(self, task: str) -> list[tuple[str, int]]:
        having = self.arms_with(task)
        runs = [r for r in self.compared if r.arm in having]
        if not runs:
            return []
        for run in self.compared:
            if run.arm not in having and not run.documents(task).logged:
                self.note(f"{task}: {run.label()} logged none of its documents: {run.arm} is compared without {task}")
        logged = [r.documents(task) for r in runs]
        every = sorted(set().union(*(t.hashes for t in logged)))
        common = [d for d in every if all(d in t.hashes for t in logged)]
        for run, t in zip(runs, logged, strict=True):
            if note := short_log(run, task):
                self.note(note)
            elif len(t.hashes) < len(every):
                self.note(f"{task}: {run.label()} lacks {len(every) - len(t.hashes)} documents other runs logged")
        same = [d for d in common if len({t.hashes[d] for t in logged}) == 1]
        if len(same) < len(common):
            self.note(f"{task}: {len(common) - len(same)} documents differ between runs under one doc_id "
                              "(different doc_hash): left out")
        if len(same) < len(every):
            self.note(f"{task}: compared on the {len(same)} of {len(every)} documents every run logged alike")
        return same

    def matrix(self, arm: str, seeds: list[int], task: str, key: str) -> np.ndarray:
        """seeds x documents: the arm's values, each the mean over the compared steps."""
        docs = self.documents(task, key)
        return np.array([np.mean([value_array(r, task, key, docs) for r in self.by_arm[arm][s]], axis=0) for s in seeds])


def compare(runs: list[Run], average_last: int) -> Comparison:
    """The comparison at the largest step every evaluated run reached (its last `average_last`
    such steps), and every run whose checkpoints differ from that, named."""
    steps_of: dict[tuple[str, int], set[int]] = {}
    for run in runs:
        steps_of.setdefault((run.arm, run.seed), set()).add(run.step)
    if not steps_of:
        return Comparison(runs, [], [])
    common = sorted(set.intersection(*steps_of.values()))
    if not common:
        listing = "; ".join(f"{a} seed {s}: {sorted(v)}" for (a, s), v in sorted(steps_of.items()))
        return Comparison(runs, [], [f"no step every evaluated run reached, nothing compared ({listing})"])
    steps = common[-average_last:]
    notes = []
    if len(steps) < average_last:
        notes.append(f"evaluation.average_last is {average_last}, but every run reached only {len(steps)} common steps")
    every_step = set().union(*steps_of.values())
    for (arm, seed), reached in sorted(steps_of.items()):
        if missing := sorted(every_step - reached):
            notes.append(f"{arm} seed {seed}: no evaluated checkpoint at steps {missing}, which other runs have")
        later = sorted(s for s in reached if s > steps[-1])
        if later:
            notes.append(f"{arm} seed {seed}: evaluated up to step {later[-1]}, compared at step {steps[-1]} "
                         f"(the largest step every run reached); steps {later} not compared")
    return Comparison(runs, steps, notes)
