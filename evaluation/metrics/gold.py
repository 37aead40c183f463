"""What a logged multiple-choice document says of its gold choice, as lm-eval scored it."""

from __future__ import annotations

import math

import numpy as np

LN2 = math.log(2)  # bits from nats


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


def choices(sample: dict, config: dict) -> tuple[np.ndarray, int] | None:
    """A multiple-choice document's log-likelihood per choice and its gold index; None where the
    log names no one gold choice."""
    gold = gold_index(sample, config.get("target_delimiter", " "))
    if gold is None:
        return None
    return np.array([r[0] for r in sample["filtered_resps"]], dtype=float), gold


def bits_per_byte(loglikelihood: float, continuation: str) -> float:
    return -loglikelihood / LN2 / len(continuation.encode("utf-8"))
