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
SCREEN = 1.05  # seeds_needed calibrates only where the MDD at the estimate is within this of the difference
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
    on the same side), and the true standard deviation of that mean, `noise` taken as the truth
    (a run's estimate of the seeds' variance is priced by `calibrated_mdd`, not here)."""
    # scrambled Sobol points (fixed seed): the power curve's noise shrinks like 1 / draws, not its root
    draws = draws or DRAWS
    u = np.clip(qmc.Sobol(2 * seeds + 1, seed=0).random(draws), 1e-12, 1 - 1e-12)
    parts = [(f + i / seeds, n) for f, i, n in noise.terms if n > 1 and f + i > 0]
    df = sum(v for v, _ in parts) ** 2 / sum(v ** 2 / (n - 1) for v, n in parts) if parts else math.inf
    documents = (noise.fixed + noise.interaction / seeds) * (stats.chi2.ppf(u[:, 0], df) / df if np.isfinite(df)
                                                             else np.ones(draws))  # no documents' noise: known
    shifts = [special.ndtri(u[:, 1 + k * seeds: 1 + (k + 1) * seeds]) * math.sqrt(v) for k, v in enumerate(noise.seed)]
    paired = (shifts[1] - shifts[0]).var(axis=1, ddof=1) / seeds  # the report's seeds' part, on seeds − 1
    spread = np.full(draws, noise.interaction / seeds)
    h = critical_difference(alpha, documents, spread, np.full(draws, df), paired, np.full(draws, seeds - 1.0),
                            tolerance=1e-4)
    residuals = (shifts[1] - shifts[1].mean(axis=1, keepdims=True)) - (shifts[0] - shifts[0].mean(axis=1, keepdims=True))
    return np.maximum(h, (-residuals).max(axis=1)), np.full(draws, math.sqrt(noise.variance(seeds)))


def primary_level(sides: str) -> float:
    """The two-sided level the simulated decision tests the primary comparison at: 1 − LEVEL; one-sided,
    twice that (its p is half the two-sided one, and power_at counts only the arm's side), so that the
    primary MDD is that of the decision `decide_primary` applies."""
    return (1 - LEVEL) * (2 if sides == "one-sided" else 1)


def power_at(difference: float, threshold: tuple[np.ndarray, np.ndarray]) -> float:
    """The chance the report calls a true `difference` (> 0) a result in its direction."""
    return float(powers_at(np.array([difference]), threshold)[0])


def powers_at(differences: np.ndarray, threshold: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    """`power_at` at each of several true differences at once."""
    h, sd = threshold
    return special.ndtr((np.abs(differences)[:, None] - h) / sd).mean(axis=1)


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


# multiples of the estimated seed variance the rule is solved at, half a decade apart; log MDD and log k are
# interpolated between them (a grid 1.5x finer moves the printed MDD by under 0.5%: tests/test_power.py)
CALIBRATION_GRID = np.geomspace(1e-3, 1e3, 13)
CALIBRATION_PILOTS = 24  # quantiles of the estimate's chi-square spread each true variance's pilots are taken at
# weight of the curvature of log k (per decade, squared) against the power's shortfall: the equations alone leave k
# free to zigzag between neighbouring grid points (each true variance's pilots average k over three decades), the
# smoothest solution does not; at 2 arms x 2 seeds with the documents half of Var(D) a weight 2.5x smaller or 4x
# larger moves the printed MDD by about 3% and 1% (tests/test_power.py)
CALIBRATION_SMOOTHNESS = 0.0125


def calibrated_mdd(noise: ScoreNoise, seeds: int, alpha: float, draws: int | None = None) -> float:
    """The MDD of a score whose seeds' variance a run estimated on `noise.seed_df` degrees of freedom
    (the paired seed differences, the decision's own estimate; or a named run's arms' seed variances):
    the known-noise MDD at the estimate
    times k(estimate), the same rule a pilot applies to its own estimate. k is one curve over the seed
    variance (in multiples x of the estimate; the documents' part, measured on many documents, fixed)
    chosen so that for every true x on CALIBRATION_GRID the power at the MDDs printed by the pilots it
    could give (estimates x chi2(nu) / nu at CALIBRATION_PILOTS even quantiles, each priced with k at its
    own estimate) averages POWER; where the seeds' noise dominates k is one constant (the power at the
    MDD priced at c times the truth depends on c alone), where the documents' does k hardly matters,
    and between them a pilot that under-estimates the seeds prints near the documents' floor, losing
    power that the ones over the truth cannot give back: taking k from the estimate as if it were the
    truth printed MDDs whose power averaged 0.76 where the documents make half of Var(D)
    (tests/test_power.py). The equations are solved by least squares with a small penalty on the
    curvature of log k (CALIBRATION_SMOOTHNESS). Averaging the power over the fiducial distribution of
    the true variance instead printed 2.1x the true MDD at 2 arms x 2 seeds (power 0.91)."""
    a, b = noise.seed
    grid = np.log(CALIBRATION_GRID)
    thresholds = [decision_threshold(replace(noise, seed=(c * a, c * b), seed_df=None), seeds, alpha, draws)
                  for c in CALIBRATION_GRID]
    log_mdd = np.log([known_mdd(t) for t in thresholds])
    # past the grid's ends log MDD goes on along its end slopes (1/2 where the seeds' noise alone sets it)
    slopes = np.diff(log_mdd)[[0, -1]] / np.diff(grid)[[0, -1]]
    pilots = np.log(stats.chi2.ppf((np.arange(CALIBRATION_PILOTS) + 0.5) / CALIBRATION_PILOTS, noise.seed_df)
                    / noise.seed_df)

    def printed(log_k: np.ndarray, estimates: np.ndarray) -> np.ndarray:  # log MDD printed at log estimates
        at = np.interp(estimates, grid, log_k) + estimates  # k constant past the grid's ends
        return np.interp(at, grid, log_mdd) + np.minimum(0.0, at - grid[0]) * slopes[0] \
            + np.maximum(0.0, at - grid[-1]) * slopes[1]

    # each true variance's power as a function of log d, tabulated once (smooth: interpolated between points
    # 1/64 of a unit of log d apart) over the MDDs a pilot can print, widened to where it is 0 or 1
    log_d = np.linspace(log_mdd[0] - 3.0, log_mdd[-1] + 3.0, int(64 * (log_mdd[-1] - log_mdd[0] + 6.0)))
    curves = [powers_at(np.exp(log_d), t) for t in thresholds]

    def shortfalls(log_k: np.ndarray) -> np.ndarray:
        power = [np.interp(printed(log_k, x + pilots), log_d, curve).mean() for x, curve in zip(grid, curves, strict=True)]
        # both terms are sums over the grid of what integrals over log10 x would hold: the solution does not depend on its step
        curvature = np.diff(log_k, 2) / np.diff(np.log10(CALIBRATION_GRID[:3]), 1)[0] ** 2
        return np.concatenate([np.array(power) - POWER, CALIBRATION_SMOOTHNESS * curvature])

    log_k = optimize.least_squares(shortfalls, np.zeros(len(grid)), diff_step=1e-3).x
    return math.exp(float(printed(log_k, np.zeros(1))[0]))


def seeds_needed(difference: float, noise_at) -> int | None:
    """The fewest paired seeds (2 to MAX_SEEDS) whose MDD (`mdd`: calibrated where a run estimated the
    seeds' variance) is `difference` or less; `noise_at(seeds)` -> (ScoreNoise, alpha). None where none
    do: the test documents are the limit, or the seeds' noise with every seed required to agree."""
    noise, alpha = noise_at(MAX_SEEDS)
    # with the seeds' noise gone the documents' remains: below its normal-theory MDD no seed count will do
    if abs(difference) < (special.ndtri(1 - alpha / 2) + special.ndtri(POWER)) * math.sqrt(noise.fixed):
        return None
    lowest = math.inf
    for seeds in range(2, MAX_SEEDS + 1):
        noise, alpha = noise_at(seeds)
        # the MDD were the estimate the truth: a calibrated MDD is not below it (but for the calibration's
        # own noise, under 1% where the documents dominate: tests/test_power.py), so only the seed counts
        # it lets through pay for a calibration (seconds each)
        at_estimate = mdd(replace(noise, seed_df=None), seeds, alpha)
        if at_estimate is None:
            return None
        if at_estimate <= abs(difference) * SCREEN:
            printed = at_estimate if noise.seed_df is None else mdd(noise, seeds, alpha)
            if printed <= abs(difference):
                return seeds
        if at_estimate > lowest * 1.1:  # past its minimum: more seeds only raise it (every seed must agree)
            return None
        lowest = min(lowest, at_estimate)
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
