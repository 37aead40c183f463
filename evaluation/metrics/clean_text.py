"""`clean_text`: bits per byte of clean main content (evaluation/tasks/clean_text.py), lm-eval's
`bits_per_byte` (sum of bits over sum of bytes), its own category, never in the average: one
column per view (plain text, Markdown) averaging the sets, and one per set without views."""

from __future__ import annotations

import numpy as np

from evaluation.metrics.family import Family
from evaluation.metrics.gold import LN2
from evaluation.tasks.clean_text import VIEW_TITLES, CleanTextTask

NAME = "clean_text"


def family(suite, clean_tasks: list[CleanTextTask]) -> Family | None:
    if not clean_tasks:
        return None
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
    return Family(NAME, "Clean text, bits per byte; lower is better", True, 1, "bits/byte", units,
                  {t.task: "clean_bpb" for t in clean_tasks}, columns, titles)


def values(sample: dict, config: dict) -> dict[str, float]:
    """A rolling log-likelihood's bits and bytes (their ratio is taken over the documents: runs.py)."""
    if config.get("output_type") != "loglikelihood_rolling" or "bits_per_byte" not in sample:
        return {}
    loglikelihood, nbytes = sample["bits_per_byte"]
    return {"bits": -loglikelihood / LN2, "bytes": float(nbytes)}


def clean_text_values(bits: np.ndarray, nbytes: np.ndarray) -> np.ndarray:
    """Per-document values whose mean is lm-eval's bits per byte, sum(bits) / sum(bytes), and
    whose variance over documents is the ratio's (the delta method's linearisation): R +
    (bits_i − R bytes_i) / mean(bytes)."""
    ratio = bits.sum() / nbytes.sum()
    return ratio + (bits - ratio * nbytes) / nbytes.mean()
