"""`p_gold`: the probability mass on the gold choice, the softmax over the choices' summed
log-likelihoods: every multiple-choice task."""

from __future__ import annotations

import numpy as np

from evaluation.metrics.family import Family, benchmark_family
from evaluation.metrics.gold import choices
from evaluation.tasks.suite import Suite

NAME = "p_gold"


def family(suite: Suite, clean_tasks) -> Family:
    return benchmark_family(NAME, "Probability on the gold answer", False, 100, suite,
                            lambda b: NAME if NAME in b.continuous else None)


def values(sample: dict, config: dict) -> dict[str, float]:
    if config.get("output_type") != "multiple_choice" or not (scored := choices(sample, config)):
        return {}
    lls, gold = scored
    p = np.exp(lls - lls.max())
    return {NAME: float(p[gold] / p.sum())}
