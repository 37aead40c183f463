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
  documents' part (mean over the pairs, evaluation/statistics/intervals.py) and the arm's seed
  variance over its seeds. The floor is that range's mean at the arms' mean noise. Its 95th
  percentile is a test: the signal over the standard error of the pair it is made of (the two
  arms' own seed variances: a range of arm means, which pairs nothing) against that ratio's 95th
  percentile with no difference and every arm as noisy as their mean, each arm's seed variance
  drawn on its own degrees of freedom (Monte Carlo, fixed draws); `signal_floor_95` is that percentile times the
  pair's standard error. Studentised by the pair's own variances, it holds its 5% whether the arms
  are equally noisy or one is 3x noisier (bench/calibration.py: 3.5-6.5% of runs with no
  difference). Pure noise is not near 1: with 5 arms and 2 seeds and no difference anywhere, SNR
  over seeds had a median of 1.7 in a review's simulation. With an arm whose seeds' noise is
  neither measured nor named (one seed) there is no floor.

The paper divides its dispersion and its standard deviation by the mean score; the ratio of the
two is the same up to that mean, and here both stay in the score's own unit.
"""

from __future__ import annotations

import math
import statistics
from functools import cache

import numpy as np
from scipy import special

from evaluation.statistics.intervals import SeedVariance


def pooled_sd(groups: list[list[float]]) -> float | None:
    """The standard deviation within groups, pooled over the groups of two values or more."""
    usable = [g for g in groups if len(g) > 1]
    if not usable:
        return None
    df = sum(len(g) - 1 for g in usable)
    return math.sqrt(sum((len(g) - 1) * statistics.variance(g) for g in usable) / df)


FLOOR_DRAWS = 8192  # Monte Carlo draws of the floor's null distribution (fixed: the same floor every time)


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


def studentised_range_quantile(q: float, documents: float, seeds: list[SeedVariance], counts: list[int],
                               means: list[float]) -> float:
    """The q-quantile of (max − min of K arms' means) / (its pair's standard error) with no
    difference and every arm as noisy as the arms' mean seed variance v: arm k's mean of variance
    `documents` + v / counts[k], its seed variance estimated anew on its own degrees of freedom, the
    pair's standard error 2 `documents` + each arm's estimate over its seeds. v is known only
    through the arms' estimates, on their pooled degrees of freedom: each draw takes it from its
    fiducial distribution (the estimate x nu / W, as the intervals do), weighted by how likely the
    arms' observed `means` are at that v with no difference (their spread says something of the
    noise too; a common mean profiled out). Without that weight the quantile is too low where the
    documents' part is a small share of the noise (pure noise passed it in 7-10% of runs at 2 seeds
    in bench/calibration.py)."""
    v = statistics.fmean(s.variance for s in seeds)
    rng = np.random.default_rng(0)
    if v <= 0:  # the documents alone: the range of K normal draws over sqrt(2) of one
        return float(np.quantile(np.ptp(rng.standard_normal((FLOOR_DRAWS, len(seeds))), axis=1), q) / math.sqrt(2))
    n, pooled = np.array(counts, dtype=float), sum(s.df for s in seeds)
    truth = v * pooled / rng.chisquare(pooled, FLOOR_DRAWS) if math.isfinite(pooled) else np.full(FLOOR_DRAWS, v)
    tau = documents + truth[:, None] / n  # each arm's mean's variance, per draw
    precision = 1 / tau
    centre = (precision * np.array(means)).sum(axis=1) / precision.sum(axis=1)
    log_weight = -0.5 * (np.log(tau).sum(axis=1) + np.log(precision.sum(axis=1))
                         + (precision * (np.array(means) - centre[:, None]) ** 2).sum(axis=1))
    weight = np.exp(log_weight - log_weight.max())
    z = rng.standard_normal((FLOOR_DRAWS, len(seeds)))
    w = np.column_stack([rng.chisquare(s.df, FLOOR_DRAWS) / s.df if math.isfinite(s.df) else np.ones(FLOOR_DRAWS)
                         for s in seeds])
    drawn = z * np.sqrt(tau)
    hi, lo, rows = drawn.argmax(axis=1), drawn.argmin(axis=1), np.arange(FLOOR_DRAWS)
    estimate = truth[:, None] * w / n
    ratio = (drawn[rows, hi] - drawn[rows, lo]) / np.sqrt(2 * documents + estimate[rows, hi] + estimate[rows, lo])
    order = np.argsort(ratio)
    cumulative = np.cumsum(weight[order]) / weight.sum()
    return float(ratio[order][min(np.searchsorted(cumulative, q), FLOOR_DRAWS - 1)])


def signal_and_noise(finals: dict[str, list[float]], checkpoints: list[list[float]], pairs: list[dict],
                     seeds: dict[str, SeedVariance]) -> dict:
    """`finals`: arm -> its seeds' scores at the compared step; `checkpoints`: per run, its scores at
    its last k evaluated checkpoints; `pairs`: every compared pair's interval (`Interval.to_json()`),
    whose documents' part makes the floor's; `seeds`: arm -> the seed variance its pairs use (its
    own, or one named for a one-seed arm)."""
    means = {arm: statistics.fmean(v) for arm, v in finals.items() if v}
    signal = max(means.values()) - min(means.values()) if len(means) > 1 else None
    seed, checkpoint = pooled_sd(list(finals.values())), pooled_sd(checkpoints)
    floor = floor_95 = None
    if signal is not None and pairs and all(seeds[arm].df > 0 for arm in means):
        variances = [seeds[arm] for arm in means]
        counts = [len(finals[arm]) for arm in means]
        # one arm's mean: half a pair's documents' part, net of the interaction its seed variance holds
        documents = max(0.0, statistics.fmean(p["var_documents"] - p["var_interaction"] for p in pairs) / 2)
        floor = standard_range(len(means)) * math.sqrt(
            documents + statistics.fmean(s.variance / n for s, n in zip(variances, counts, strict=True)))
        hi, lo = max(means, key=means.get), min(means, key=means.get)
        se = math.sqrt(2 * documents + seeds[hi].variance / len(finals[hi]) + seeds[lo].variance / len(finals[lo]))
        floor_95 = studentised_range_quantile(0.95, documents, variances, counts, list(means.values())) * se

    def ratio(value, noise):
        return value / noise if value is not None and noise else None

    return {"signal": signal, "seed_sd": seed, "checkpoint_sd": checkpoint,
            "seed_sd_by_arm": {arm: statistics.stdev(v) if len(v) > 1 else None for arm, v in finals.items()},
            "signal_floor": floor, "signal_floor_95": floor_95,
            "above_floor": signal > floor_95 if floor_95 else None,
            "snr": ratio(signal, checkpoint), "snr_seeds": ratio(signal, seed),
            "snr_floor": ratio(floor, checkpoint), "snr_seeds_floor": ratio(floor, seed)}
