"""The report's decision, simulated (the method: evaluation/power.py): a score's noise in the parts the
report measures, the threshold each simulated run must clear, the power at a true difference, the
minimum detectable difference, the fewest seeds that reach 80%, and the level each score is decided at."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
from scipy import optimize, special, stats
from scipy.stats import qmc

from evaluation.metrics import DECISION, Family
from evaluation.statistics.intervals import LEVEL, critical_difference

POWER = 0.80
MAX_SEEDS = 20
DRAWS = 4096  # simulated runs per power, a power of 2 (Sobol points, fixed: the same answer every time)


@dataclass(frozen=True)
class UnitNoise:
    """The noise of one benchmark's (or clean-text task's) paired difference."""

    item_variance: float  # sigma^2 of one document's score
    item_correlation: float  # rho between two arms
    seed_item_share: float  # phi
    seed_std: float  # sigma_seed of the score, net of the seed-by-document part


@dataclass(frozen=True)
class ScoreNoise:
    """The noise of one score's paired difference, in the parts the report measures."""

    fixed: float  # sum_t w_t^2 fixed_t / n_t: the documents' part no seed redraws
    interaction: float  # sum_t w_t^2 2 sigma_int,t^2 / n_t: both arms' interaction over the documents, at one seed
    terms: tuple[tuple[float, float, int], ...]  # per task (w^2 fixed_t / n, w^2 2 sigma_int,t^2 / n, n)
    seed: tuple[float, float]  # each arm's variance of the score across its seeds (shift and interaction)
    # from a run: the degrees of freedom of the estimate of their sum, the variance of the paired seed differences
    # (the decision's own estimate: S − 1 for one pair, (K − 1)(S − 1) pooled over K arms); None: known (assumed)
    seed_df: float | None = None

    def variance(self, seeds: int) -> float:
        """Var of the paired difference, mean over `seeds` paired seeds."""
        return self.fixed + sum(self.seed) / seeds


def score_noise(weights: dict[str, float], units: dict[str, dict[str, float]], items: dict[str, int],
                noise: dict[str, UnitNoise], seed_correlation: float) -> ScoreNoise:
    """The noise of the score sum_b w_b score_b (score_b = sum_t w_bt mean of task t), from each
    unit's parameters; one seed's shifts correlate by `seed_correlation` across units."""
    terms = []
    for unit, w in weights.items():
        n = noise[unit]
        paired = 2 * n.item_variance * (1 - n.item_correlation)
        terms += [((w * v) ** 2 * paired * (1 - n.seed_item_share) / items[t],
                   (w * v) ** 2 * paired * n.seed_item_share / items[t], items[t]) for t, v in units[unit].items()]
    stds = {u: w * noise[u].seed_std for u, w in weights.items()}
    shift = sum(a * b * (1.0 if u == v else seed_correlation) for u, a in stds.items() for v, b in stds.items())
    interaction = sum(t[1] for t in terms)
    return ScoreNoise(sum(t[0] for t in terms), interaction, tuple(terms), (shift + interaction / 2,) * 2)


def decision_threshold(noise: ScoreNoise, seeds: int, alpha: float, draws: int | None = None) \
        -> tuple[np.ndarray, np.ndarray]:
    """Per simulated run, how far above zero the mean difference must lie for the report to call
    it a result (the critical difference of its own noise estimates, and every seed's difference
    on the same side), and the true standard deviation of that mean. Seed variances estimated from
    a run (`noise.seed_df`) are not taken as the truth: each simulated run first draws the true
    ones from their fiducial distribution (the estimate x nu / W, W ~ chi2(nu), as the intervals
    do), so that the power is the average over what the run's estimate leaves possible."""
    # scrambled Sobol points (fixed seed): the power curve's noise shrinks like 1 / draws, not its root
    draws = draws or DRAWS
    u = np.clip(qmc.Sobol(2 * seeds + 2, seed=0).random(draws), 1e-12, 1 - 1e-12)
    parts = [(f + i / seeds, n) for f, i, n in noise.terms if n > 1 and f + i > 0]
    df = sum(v for v, _ in parts) ** 2 / sum(v ** 2 / (n - 1) for v, n in parts) if parts else math.inf
    documents = (noise.fixed + noise.interaction / seeds) * (stats.chi2.ppf(u[:, 0], df) / df if np.isfinite(df)
                                                             else np.ones(draws))  # no documents' noise: known
    # one draw for the pair's sum: two independent draws on one degree of freedom each let either arm's
    # variance be many times its estimate at once
    factors = [noise.seed_df / stats.chi2.ppf(u[:, 1 + 2 * seeds], noise.seed_df)] if noise.seed_df else [1.0]
    true = [v * factors[k % len(factors)] * np.ones(draws) for k, v in enumerate(noise.seed)]
    shifts = [special.ndtri(u[:, 1 + k * seeds: 1 + (k + 1) * seeds]) * np.sqrt(v)[:, None] for k, v in enumerate(true)]
    paired = (shifts[1] - shifts[0]).var(axis=1, ddof=1) / seeds  # the report's seeds' part, on seeds − 1
    spread = np.full(draws, noise.interaction / seeds)
    h = critical_difference(alpha, documents, spread, np.full(draws, df), paired, np.full(draws, seeds - 1.0),
                            tolerance=1e-4)
    residuals = (shifts[1] - shifts[1].mean(axis=1, keepdims=True)) - (shifts[0] - shifts[0].mean(axis=1, keepdims=True))
    return np.maximum(h, (-residuals).max(axis=1)), np.sqrt(noise.fixed + (true[0] + true[1]) / seeds)


def primary_level(sides: str) -> float:
    """The two-sided level the simulated decision tests the primary comparison at: 1 − LEVEL; one-sided,
    twice that (its p is half the two-sided one, and power_at counts only the arm's side), so that the
    primary MDD is that of the decision `decide_primary` applies."""
    return (1 - LEVEL) * (2 if sides == "one-sided" else 1)


def power_at(difference: float, threshold: tuple[np.ndarray, np.ndarray]) -> float:
    """The chance the report calls a true `difference` (> 0) a result in its direction."""
    h, sd = threshold
    return float(np.mean(special.ndtr((abs(difference) - h) / sd)))


def mdd(noise: ScoreNoise, seeds: int, alpha: float, draws: int | None = None) -> float | None:
    """The true difference the report calls a result 80% of the time; None below two seeds (one seed
    does not measure the seeds' noise a result must beat) or without any noise (a score that never
    varies: the report calls nothing there a result). Seed variances estimated from a run
    (`noise.seed_df`) give the MDD calibrated over the runs the estimate could come from
    (`calibrated_mdd`)."""
    if seeds < 2 or noise.variance(seeds) == 0:
        return None
    if noise.seed_df:
        return calibrated_mdd(noise, seeds, alpha, draws)
    return known_mdd(decision_threshold(noise, seeds, alpha, draws))


def known_mdd(threshold: tuple[np.ndarray, np.ndarray]) -> float:
    """The difference at which `power_at` reaches POWER on a simulated decision's threshold."""
    typical = float(np.median(threshold[0]) + np.median(threshold[1]))
    high = typical
    while power_at(high, threshold) < POWER:
        high *= 2
    return float(optimize.brentq(lambda d: power_at(d, threshold) - POWER, 0.0, high, xtol=1e-6 * typical))


# multiples of the estimated seed variance an MDD is priced at; a decade apart, log MDD interpolated between them
# came within 0.1% of 25 points' at 2 arms x 2 seeds (bench/calibration.py's noise)
CALIBRATION_GRID = np.geomspace(1e-3, 1e3, 7)
CALIBRATION_PILOTS = 64  # quantiles of the estimate's chi-square spread that the calibration averages over


def calibrated_mdd(noise: ScoreNoise, seeds: int, alpha: float, draws: int | None = None) -> float:
    """The MDD of a score whose seeds' variance a run estimated on `noise.seed_df` degrees of freedom
    (the paired seed differences, the decision's own estimate): the known-noise MDD at the estimate
    times k, with k such that over the pilots the estimate could come from (estimate = truth x
    chi2(nu) / nu, at CALIBRATION_PILOTS even quantiles) the power at the MDD each would print
    averages POWER, the estimate standing in for the truth. It assumes what makes that exact: with
    the seeds' noise dominant, the power at the MDD priced at c times the truth depends on c alone,
    not on the truth (bench/calibration.py's printed-MDD rows measure how close the printed MDDs
    come). Averaging the power over the fiducial distribution of the true variance instead printed
    2.1x the true MDD at 2 arms x 2 seeds (median over pilots; power 0.91, in a review's simulation),
    and taking the estimate as the truth (k = 1) prints MDDs that hold far less often
    (tests/test_power.py)."""
    a, b = noise.seed
    known = replace(noise, seed_df=None)
    at_estimate = decision_threshold(known, seeds, alpha, draws)

    def scaled(c: float) -> ScoreNoise:
        return replace(known, seed=(c * a, c * b))

    # the MDD at c x the estimate is smooth in log c (slope 1/2 where the seeds' noise dominates, 0 where the
    # documents' does): interpolated there, and the power at it computed exactly (it bends sharply around c = 1)
    grid = np.log(CALIBRATION_GRID)
    log_mdd = np.log([known_mdd(decision_threshold(scaled(c), seeds, alpha, draws)) for c in CALIBRATION_GRID])
    pilots = np.log(stats.chi2.ppf((np.arange(CALIBRATION_PILOTS) + 0.5) / CALIBRATION_PILOTS, noise.seed_df)
                    / noise.seed_df)

    def shortfall(log_k: float) -> float:
        return float(np.mean([power_at(math.exp(x), at_estimate)
                              for x in np.interp(log_k + pilots, grid, log_mdd)])) - POWER

    # past the grid's ends the MDD is taken as at its ends (np.interp): there the documents' noise, or the seeds'
    # alone, sets it
    if shortfall(grid[0]) >= 0 or shortfall(grid[-1]) <= 0:  # the grid cannot tell: the estimate as the truth
        return known_mdd(at_estimate)
    log_k = optimize.brentq(shortfall, grid[0], grid[-1], xtol=1e-4)
    return math.exp(float(np.interp(log_k, grid, log_mdd)))


def seeds_needed(difference: float, noise_at) -> int | None:
    """The fewest paired seeds (2 to MAX_SEEDS) at which the report calls the true `difference` a
    result 80% of the time; `noise_at(seeds)` -> (ScoreNoise, alpha). None where none do: the test
    documents are the limit, or the seeds' noise with every seed required to agree."""
    noise, alpha = noise_at(MAX_SEEDS)
    # with the seeds' noise gone the documents' remains: below its normal-theory MDD no seed count will do
    if abs(difference) < (special.ndtri(1 - alpha / 2) + special.ndtri(POWER)) * math.sqrt(noise.fixed):
        return None
    best = 0.0
    for seeds in range(2, MAX_SEEDS + 1):
        noise, alpha = noise_at(seeds)
        power = power_at(difference, decision_threshold(noise, seeds, alpha))
        if power >= POWER:
            return seeds
        if power < best - 0.05:  # past its peak: more seeds only lower it
            return None
        best = max(best, power)
    return None


def table_levels(fams: dict[str, Family], arms: int) -> dict[tuple[str, str, str], tuple[float, str]]:
    """(family, "columns" | "units", score) -> the level it is decided at, and in which table."""
    decision = [(f, c) for f, c in DECISION if f in fams and c in fams[f].columns]
    alpha = 1 - LEVEL
    out = {}
    for name, family in fams.items():
        for column in family.columns:
            out[name, "columns", column] = ((alpha / ((arms - 1) * len(decision)), "decision table")
                                            if (name, column) in decision and arms > 1 else (alpha, "interval"))
        for unit in family.units:
            out[name, "units", unit] = (alpha / (max(1, arms * (arms - 1) // 2) * len(family.units)), "per-benchmark table")
    return out
