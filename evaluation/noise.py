"""Noise measured from the run, and the signal-to-noise ratio (Signal and Noise, Heineman et al. 2025).

For every metric family and every score (a benchmark, a category, the average, a clean-text task):

- seed noise: the standard deviation of an arm's score across its seeds at the compared step,
  pooled over arms (root of the mean variance, weighted by seeds − 1);
- checkpoint noise: the standard deviation over a run's last k evaluated checkpoints
  (`evaluation.noise_checkpoints`, default 3), pooled the same way over runs: the paper's noise.
  Over a short run those checkpoints still climb, and the trend counts as noise here;
- signal: the spread of the arms' final scores (mean over seeds), max − min;
- SNR: signal / checkpoint noise, and signal / seed noise.

The paper divides its dispersion and its standard deviation by the mean score; the ratio of the
two is the same up to that mean, and here both stay in the score's own unit.
"""

from __future__ import annotations

import math
import statistics


def pooled_sd(groups: list[list[float]]) -> float | None:
    """The standard deviation within groups, pooled over the groups of two values or more."""
    usable = [g for g in groups if len(g) > 1]
    if not usable:
        return None
    df = sum(len(g) - 1 for g in usable)
    return math.sqrt(sum((len(g) - 1) * statistics.variance(g) for g in usable) / df)


def signal_and_noise(finals: dict[str, list[float]], checkpoints: list[list[float]]) -> dict:
    """`finals`: arm -> its seeds' scores at the compared step; `checkpoints`: per run, its scores at
    its last k evaluated checkpoints."""
    means = [statistics.fmean(v) for v in finals.values() if v]
    signal = max(means) - min(means) if len(means) > 1 else None
    seed, checkpoint = pooled_sd(list(finals.values())), pooled_sd(checkpoints)
    return {"signal": signal, "seed_sd": seed, "checkpoint_sd": checkpoint,
            "snr": signal / checkpoint if signal is not None and checkpoint else None,
            "snr_seeds": signal / seed if signal is not None and seed else None}
