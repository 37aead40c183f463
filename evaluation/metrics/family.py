"""A metric family: the report's scores of one metric, each a weighted mean of per-document values
over tasks (a benchmark's tasks, a category's benchmarks, the average), and the builder the
benchmark metrics share."""

from __future__ import annotations

from dataclasses import dataclass, field

from evaluation.tasks.suite import CATEGORIES, CATEGORY_TITLES, Suite


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


def benchmark_family(name: str, title: str, lower: bool, scale: float, suite: Suite, key_of, centered=False) -> Family:
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
