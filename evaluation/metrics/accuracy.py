"""`accuracy`: each benchmark's suite metric (acc, acc_norm; F1 for CoQA) as lm-eval logged it per
document, the paper's headline, with a centered average ((score − chance) / (1 − chance))."""

from __future__ import annotations

from evaluation.metrics.family import Family, benchmark_family
from evaluation.tasks.suite import Suite

NAME = "accuracy"


def family(suite: Suite, clean_tasks) -> Family:
    return benchmark_family(NAME, "Accuracy (the suite's metric)", False, 100, suite, lambda b: b.score, centered=True)


def values(sample: dict, config: dict) -> dict[str, float]:
    """lm-eval's own per-document metrics (acc, acc_norm, f1, ...)."""
    return {k: float(v) for k, v in sample.items()
            if k in sample.get("metrics", []) and isinstance(v, (int, float)) and not isinstance(v, bool)}
