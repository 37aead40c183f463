"""The report's headline: per arm and seed, the suite's accuracies as lm-eval reports them (results.json),
raw and centered, per benchmark, category and average: the paper's Table 5 layout."""

from __future__ import annotations

import statistics

from evaluation.runs import Comparison
from evaluation.tasks.suite import COLUMNS, Benchmark, Suite


def task_score(result: dict, task: str, metric: str) -> float | None:
    value = result["results"].get(task, {}).get(f"{metric},none")
    return None if value is None or value == "N/A" else float(value)


def benchmark_scores(result: dict, suite: Suite, form: str) -> dict[str, float | None]:
    """Each benchmark's score in `form` (cloze or standard); None where a task is missing."""
    out = {}
    for b in suite.benchmarks:
        values = [task_score(result, t, b.score) for t in b.form(form)]
        out[b.name] = None if None in values else sum(values) / len(values)
    return out


def centered(score: float, b: Benchmark) -> float:
    return (score - b.chance) / (1 - b.chance)


def category_means(scores: dict[str, float | None], suite: Suite, center: bool = False) -> dict[str, float | None]:
    """Average and per-category means over benchmarks; None where a benchmark is missing."""
    values = {b.name: (centered(scores[b.name], b) if center else scores[b.name]) if scores[b.name] is not None else None
              for b in suite.benchmarks}
    out = {}
    for column in COLUMNS:
        members = [values[b.name] for b in suite.benchmarks if column == "average" or b.category == column]
        out[column] = None if None in members else sum(members) / len(members)
    return out


def _mean_over_steps(per_step: list[dict[str, float | None]]) -> dict[str, float | None]:
    return {k: None if any(s[k] is None for s in per_step) else statistics.fmean(s[k] for s in per_step)
            for k in per_step[0]}


def headline_table(comparison: Comparison, suite: Suite, arms: list[str]) -> dict:
    """Per arm and seed, the suite's accuracies as lm-eval reports them (results.json), at the
    compared step (the mean over the compared steps with evaluation.average_last)."""
    table = {}
    for arm in arms:
        seeds = sorted(comparison.by_arm[arm])
        runs = [comparison.by_arm[arm][s] for s in seeds]
        per_seed = [_mean_over_steps([benchmark_scores(r.result, suite, suite.headline) for r in rs]) for rs in runs]
        standard = [_mean_over_steps([benchmark_scores(r.result, suite, "standard") for r in rs]) for rs in runs]
        table[arm] = {
            "seeds": seeds,
            "steps": [max(r.step for r in rs) for rs in runs],
            "tokens": [max(r.tokens for r in rs) for rs in runs],
            "benchmarks": {b.name: [s[b.name] for s in per_seed] for b in suite.benchmarks},
            "standard_form": {b.name: [s[b.name] for s in standard] for b in suite.benchmarks if b.cloze},
            "columns": {c: [category_means(s, suite)[c] for s in per_seed] for c in COLUMNS},
            "centered_columns": {c: [category_means(s, suite, center=True)[c] for s in per_seed] for c in COLUMNS},
        }
    return table
