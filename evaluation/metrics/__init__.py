"""What the report scores: metric families, their scored units, and the per-document values they
are means of, read from lm-eval's own per-document logs (`samples_<task>.jsonl`, lm-eval 0.4.13)
with no second evaluation pass (documents.py).

Families (Signal and Noise, Heineman et al. 2025; DataDecide, Magnusson et al. 2025: at small
scale a continuous likelihood metric separates corpora that accuracy cannot), one module each:
`accuracy` (the suite's metric, the paper's headline), `bpb` (bits per byte of the gold answer),
`p_gold` (probability on the gold choice), `clean_text` (bits per byte of clean main content, its
own category). A new metric is a module with `NAME`, `family(suite, clean_tasks)` and
`values(sample, config)`, and its line in FAMILIES.

CoQA is generative: it has no likelihood score and keeps F1 in the accuracy family alone. A
family's category and average are means over the benchmarks that have it (suite.yaml's
`continuous` says which), each benchmark the mean of its tasks. Where the gold choice is logged:
gold.py.
"""

from __future__ import annotations

from evaluation.metrics import accuracy, bpb, clean_text, p_gold
from evaluation.metrics.family import Family
from evaluation.tasks.clean_text import CleanTextTask
from evaluation.tasks.suite import Suite

FAMILIES = (accuracy, bpb, p_gold, clean_text)
# what the decision table reads, per arm against the reference: (family, column)
DECISION = (("accuracy", "average"), ("bpb", "average"), ("clean_text", "plain"), ("clean_text", "markdown"))


def families(suite: Suite, clean_tasks: list[CleanTextTask]) -> dict[str, Family]:
    """The report's metric families (the clean-text one where the config runs clean-text tasks)."""
    return {m.NAME: f for m in FAMILIES if (f := m.family(suite, clean_tasks)) is not None}


def document_values(sample: dict, config: dict) -> dict[str, float]:
    """Every value the report averages for one logged document, from every family's module."""
    values: dict[str, float] = {}
    for metric in FAMILIES:
        values |= metric.values(sample, config)
    return values


__all__ = ["DECISION", "FAMILIES", "Family", "document_values", "families"]
