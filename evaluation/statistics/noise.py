"""Noise measured from the run, and the signal-to-noise ratio (Signal and Noise, Heineman et al. 2025).

For every metric family and every score (a benchmark, a category, the average, a clean-text task):

- seed noise: the standard deviation of an arm's score across its seeds at the compared step,
  pooled over arms (root of the mean variance, weighted by seeds − 1), and each arm's own;
- checkpoint noise: the standard deviation over a run's last k evaluated checkpoints
  (`evaluation.noise_checkpoints`, default 3), pooled the same way over runs: the paper's noise.
  Over a short run those checkpoints still climb, and the trend counts as noise here;
- signal: the spread of the arms' final scores (mean over seeds), max − min;
- SNR: signal / checkpoint noise, and signal / seed noise;
- the floor: the signal the same arms show with no true difference at all. With no difference,
  max − min of K arms' means is the range of K normal draws, each an arm's noise: half a pair's
  documents' part (mean over the pairs, evaluation/statistics/intervals.py) and the arm's own seed variance
  over its seeds (mean over the arms). The floor is that range's mean at the measured noise, and
  its 95th percentile with the noise's own uncertainty (the fiducial distribution the intervals
  use: with 2-3 seeds the seed variance may be far above its estimate), and the SNRs the mean
  gives. A signal below the 95th percentile is one pure noise reaches one run in twenty (with 5
  arms and 2 seeds and no difference anywhere, SNR over seeds had a median of 1.7 in a review's
  simulation).

The paper divides its dispersion and its standard deviation by the mean score; the ratio of the
two is the same up to that mean, and here both stay in the score's own unit.
"""

from __future__ import annotations

import math
import statistics
from functools import cache

import numpy as np
from scipy import optimize, special

from evaluation.statistics.intervals import NODE_WEIGHTS, fiducial_variances


def pooled_sd(groups: list[list[float]]) -> float | None:
    """The standard deviation within groups, pooled over the groups of two values or more."""
    usable = [g for g in groups if len(g) > 1]
    if not usable:
        return None
    df = sum(len(g) - 1 for g in usable)
    return math.sqrt(sum((len(g) - 1) * statistics.variance(g) for g in usable) / df)


@cache
def _range_cdf(arms: int) -> tuple[np.ndarray, np.ndarray]:
    """P(R <= r) of R = max − min of `arms` independent standard normal draws, on a grid of r:
    K int phi(x) (Phi(x + r) − Phi(x))^(K−1) dx, by quadrature."""
    x = np.linspace(-8, 8, 1201)
    r = np.linspace(0, 12, 1201)
    inner = np.clip(special.ndtr(x[None, :] + r[:, None]) - special.ndtr(x)[None, :], 0, 1) ** (arms - 1)
    return r, np.minimum(arms * np.trapezoid(np.exp(-x ** 2 / 2)[None, :] / math.sqrt(2 * math.pi) * inner, x, axis=1), 1)


def standard_range(arms: int) -> float:
    """The mean of max − min of `arms` independent standard normal draws."""
    r, cdf = _range_cdf(arms)
    return float(np.trapezoid(1 - cdf, r))


def range_quantile(arms: int, q: float, variances: np.ndarray, weights: np.ndarray) -> float:
    """The q-quantile of max − min of `arms` normal draws whose variance is uncertain: `variances`
    at the quadrature nodes of its fiducial distribution (evaluation/statistics/intervals.py), `weights`."""
    r, cdf = _range_cdf(arms)
    sd = np.sqrt(np.maximum(variances, 1e-300))

    def above(x: float) -> float:
        return float(weights @ (1 - np.interp(x / sd, r, cdf, right=1.0))) - (1 - q)

    high = float(sd.max()) * r[-1]
    return float(optimize.brentq(above, 0.0, high, xtol=1e-9 * high)) if above(0.0) > 0 > above(high) else 0.0


def signal_and_noise(finals: dict[str, list[float]], checkpoints: list[list[float]], pairs: list[dict]) -> dict:
    """`finals`: arm -> its seeds' scores at the compared step; `checkpoints`: per run, its scores at
    its last k evaluated checkpoints; `pairs`: every compared pair's interval (`Interval.to_json()`),
    whose noise makes the floor."""
    means = [statistics.fmean(v) for v in finals.values() if v]
    signal = max(means) - min(means) if len(means) > 1 else None
    seed, checkpoint = pooled_sd(list(finals.values())), pooled_sd(checkpoints)
    floor = floor_95 = None
    if signal is not None and pairs:
        # one arm's mean: half a pair's documents' part, and its own seeds' variance over its seeds
        measured = [(statistics.variance(v) / len(v), len(v) - 1) for v in finals.values() if len(v) > 1] \
            if any(p["var_seeds"] > 0 for p in pairs) else []
        seeds = statistics.fmean(v for v, _ in measured) if measured else 0.0
        seeds_df = sum(v for v, _ in measured) ** 2 / sum(v ** 2 / df for v, df in measured) if seeds > 0 else math.inf
        parts = (statistics.fmean(p["var_documents"] for p in pairs) / 2,
                 statistics.fmean(p["var_interaction"] for p in pairs) / 2,
                 min(p["df_documents"] or math.inf for p in pairs), seeds, seeds_df)
        sd = math.sqrt(max(0.0, parts[0] - parts[1]) + seeds)
        floor = standard_range(len(means)) * sd
        floor_95 = range_quantile(len(means), 0.95, fiducial_variances(*([v] for v in parts))[0], NODE_WEIGHTS)

    def ratio(value, noise):
        return value / noise if value is not None and noise else None

    return {"signal": signal, "seed_sd": seed, "checkpoint_sd": checkpoint,
            "seed_sd_by_arm": {arm: statistics.stdev(v) if len(v) > 1 else None for arm, v in finals.items()},
            "signal_floor": floor, "signal_floor_95": floor_95,
            "above_floor": signal > floor_95 if floor_95 else None,
            "snr": ratio(signal, checkpoint), "snr_seeds": ratio(signal, seed),
            "snr_floor": ratio(floor, checkpoint), "snr_seeds_floor": ratio(floor, seed)}
