"""What difference between two arms a run can resolve: before any GPU time is spent (assumed
noise), or from a finished or partial run (measured noise).

    python -m evaluation.power CONFIG [--item-correlation 0.5] [--seed-std 0.5] [--accuracy 0.5]
                                      [--seed-item-share 0] [--seed-correlation 0] [--difference POINTS]
    python -m evaluation.power CONFIG --from-run                            [--rung NAME] [--json]

A model ladder (`pretrain.ladder`) gets one table per rung: its own seeds and trained arms, its
noise measured from its own runs with `--from-run` (a small model's seeds spread differently from
a large one's, so one rung's noise says little about another's). Assumed noise is the same at every
rung, so there the rungs differ by their seeds only.

The report compares arms by the paired difference of their scores, mean over S seeds (seed s of
each arm shares initial weights and data order). Per benchmark b (a mean over its tasks) its
variance has three parts:

- test documents: both arms answer the same n documents of a task; a document's score varies
  with variance sigma^2 (p (1 - p) for an accuracy near p) and correlates by rho between arms, so
  the paired difference of one document varies by 2 sigma^2 (1 - rho). The share phi of that which
  is the seed-by-document interaction (which documents one trained model happens to get right)
  is drawn anew by every seed and shrinks with S; the rest is fixed by the documents:
  Var_docs = 2 sigma^2 (1 - rho) / n x ((1 - phi) + phi / S).
- training seeds: a seed shifts each arm's benchmark score by sigma_seed (net of the interaction,
  which the documents' part holds), independently per arm: 2 sigma_seed^2 / S.
- a category or the average is the mean of its k benchmarks: the documents' parts add up
  (/ k^2); the seed shifts correlate across benchmarks by rho_seed (a seed that moves every
  benchmark together): Var_seeds = 2 / S x sum_b sum_b' sigma_b sigma_b' rho_bb' / k^2.

The minimum detectable difference (MDD) is the true difference the report calls a result 80% of
the time, found by simulating the report's own decision on those noise parts: each arm's seed
variance estimated from its S seeds, the documents' part from its documents, the generalized
interval of evaluation/statistics/intervals.py, every seed agreeing in sign, and the level of the table the
score is decided in: a cell of the decision table (each arm against the reference on the
decision's scores) is tested at 0.05 / its cells, the first step of Holm's adjustment over that
table, a benchmark at 0.05 / (pairs x benchmarks) (its family's table), any other score (a
category) at 0.05, an interval and no decision. Normal quantiles with the noise known, as an MDD
is usually written, promise 80% where the decision then delivered 41-73% (2-5 arms, 2-3 seeds).
`seeds_needed` runs the same simulation for more seeds; requiring every seed to agree in sign
makes many seeds harder to agree, so past a point more seeds lower the power of a difference the
seeds' noise dominates, and the fewest seeds that reach 80% are given, up to MAX_SEEDS.

Assumed mode (what `plan` prints before a run): p = 0.5 (the largest document variance), rho =
0.5, sigma_seed = 0.5 points per benchmark, phi = 0 and rho_seed = 0 (stated with the result),
for the suite's accuracy. Item counts are each task's scored split (evaluation/tasks/suite.yaml), or
`evaluation.offline_items` / `evaluation.limit` where the config sets them.

`--from-run` reads the run's evaluated checkpoints (the report's comparison: evaluation/runs.py)
and measures every parameter per metric family and benchmark: sigma^2 (a document's variance
within one run), phi and rho (from the seeds x documents layout of every arm and every pair of
arms), each arm's seed variance of every score, rho_seed (shown, from the average's own seed
variance). It prints the minimum detectable difference of each score for the configured seeds,
and for every arm against the reference arm how many seeds its observed difference on the
decision table's scores would need.
It needs two evaluated seeds or more: with one, the seeds' noise is not measured, and it refuses.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import asdict, dataclass, replace
from itertools import combinations

import numpy as np
from scipy import optimize, special, stats
from scipy.stats import qmc

from configs.experiment import ExperimentConfig, load_experiment_or_exit
from evaluation.metrics import DECISION, Family, families
from evaluation.runs import compare, load_runs
from evaluation.statistics.intervals import LEVEL, arm_scores, critical_difference, interaction_variance
from evaluation.tasks.clean_text import clean_text_tasks
from evaluation.tasks.suite import CATEGORY_TITLES, Suite, load_suite

POWER = 0.80
PAPER_EFFECT = 0.0108  # Dripper - Trafilatura on the average, Table 5
MAX_SEEDS = 20
DRAWS = 4096  # simulated runs per power, a power of 2 (Sobol points, fixed: the same answer every time)


@dataclass(frozen=True)
class PowerAssumptions:
    accuracy: float = 0.5
    item_correlation: float = 0.5
    seed_std: float = 0.005  # per benchmark, as a fraction (0.5 points), net of the seed-by-document part
    seed_item_share: float = 0.0  # phi: the share of a document's paired variance a new seed redraws
    seed_correlation: float = 0.0  # rho_seed: of one seed's shifts across benchmarks


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
    # the degrees of freedom the seed variances were estimated on (from a run): () known (assumed);
    # one value: one estimate both arms share (pooled over a run's arms); two: each arm's own
    seed_df: tuple[float, ...] = ()

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


# ---------------------------------------------------------------- the decision, simulated


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
    u = np.clip(qmc.Sobol(2 * seeds + 1 + len(noise.seed_df), seed=0).random(draws), 1e-12, 1 - 1e-12)
    parts = [(f + i / seeds, n) for f, i, n in noise.terms if n > 1 and f + i > 0]
    df = sum(v for v, _ in parts) ** 2 / sum(v ** 2 / (n - 1) for v, n in parts) if parts else math.inf
    documents = (noise.fixed + noise.interaction / seeds) * (stats.chi2.ppf(u[:, 0], df) / df if np.isfinite(df)
                                                             else np.ones(draws))  # no documents' noise: known
    factors = [nu / stats.chi2.ppf(u[:, 1 + 2 * seeds + k], nu) for k, nu in enumerate(noise.seed_df)] or [1.0]
    true = [v * factors[k % len(factors)] * np.ones(draws) for k, v in enumerate(noise.seed)]
    shifts = [special.ndtri(u[:, 1 + k * seeds: 1 + (k + 1) * seeds]) * np.sqrt(v)[:, None] for k, v in enumerate(true)]
    a, b = (s.var(axis=1, ddof=1) / seeds for s in shifts)
    with np.errstate(invalid="ignore", divide="ignore"):
        seeds_df = np.where(a + b > 0, (a + b) ** 2 / (a ** 2 + b ** 2) * (seeds - 1), np.inf)
    spread = np.full(draws, noise.interaction / seeds)
    h = critical_difference(alpha, documents, spread, np.full(draws, df), a + b, seeds_df, tolerance=1e-4)
    residuals = (shifts[1] - shifts[1].mean(axis=1, keepdims=True)) - (shifts[0] - shifts[0].mean(axis=1, keepdims=True))
    return np.maximum(h, (-residuals).max(axis=1)), np.sqrt(noise.fixed + (true[0] + true[1]) / seeds)


def power_at(difference: float, threshold: tuple[np.ndarray, np.ndarray]) -> float:
    """The chance the report calls a true `difference` (> 0) a result in its direction."""
    h, sd = threshold
    return float(np.mean(special.ndtr((abs(difference) - h) / sd)))


def mdd(noise: ScoreNoise, seeds: int, alpha: float, draws: int | None = None) -> float | None:
    """The true difference the report calls a result 80% of the time (on average over the seed
    variances a run's estimate leaves possible, where `noise.seed_df` says it is one); None below
    two seeds (one seed does not measure the seeds' noise a result must beat) or without any noise
    (a score that never varies: the report calls nothing there a result)."""
    if seeds < 2 or noise.variance(seeds) == 0:
        return None
    threshold = decision_threshold(noise, seeds, alpha, draws)
    typical = float(np.median(threshold[0]) + np.median(threshold[1]))
    high = typical
    while power_at(high, threshold) < POWER:
        high *= 2
    return float(optimize.brentq(lambda d: power_at(d, threshold) - POWER, 0.0, high, xtol=1e-6 * typical))


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


# ---------------------------------------------------------------- assumed noise


def task_items(config: ExperimentConfig, suite: Suite) -> dict[str, list[int]]:
    """Items each benchmark's tasks will be scored on under this config."""
    evaluation = config.evaluation
    out = {}
    for b in suite.benchmarks:
        items = [evaluation.offline_items] * len(b.tasks) if evaluation and evaluation.tasks == "offline" else list(b.items)
        if evaluation and evaluation.limit:
            items = [min(n, evaluation.limit) for n in items]
        out[b.name] = items
    return out


def informative(measured: dict[str, UnitNoise] | None, unit: str) -> bool:
    """Whether a run measured a unit's item correlation: its documents' values varied, and some arm
    differed from another somewhere (a model that answers every document alike says nothing of rho)."""
    n = (measured or {}).get(unit)
    return n is not None and n.item_variance > 0 and n.item_correlation < 1


def assumed_noise(items: dict[str, list[int]], suite: Suite, a: PowerAssumptions = PowerAssumptions(),
                  family: Family | None = None, measured: dict[str, UnitNoise] | None = None) -> dict[str, ScoreNoise]:
    """The noise of every column (average, categories) and benchmark of a family (default: the
    suite's accuracy), with the same assumed noise for every benchmark; with `measured` (a run's,
    item_noise), each benchmark's item correlation rho as measured, and its document variance too
    where nothing is assumed for it (a continuous family; accuracy keeps p (1 − p) at `a.accuracy`,
    as a small model near chance says little of a large one's); the seed-by-document share and the
    seeds' noise stay assumed (`a`)."""
    family = family or families(suite, [])["accuracy"]
    tasks = {b.name: b.form(suite.headline) for b in suite.benchmarks}
    units = {u: {f"{u}/{i}": w for i, w in enumerate(ws.values())} for u, ws in family.units.items()}
    counts = {f"{u}/{i}": items[u][min(i, len(items[u]) - 1)] for u in family.units for i in range(len(tasks[u]))}
    same = UnitNoise(a.accuracy * (1 - a.accuracy), a.item_correlation, a.seed_item_share, a.seed_std)
    noise = {u: replace(same, item_correlation=measured[u].item_correlation,
                        item_variance=same.item_variance if family.name == "accuracy" else measured[u].item_variance)
             if informative(measured, u) else same for u in family.units}
    out = {c: score_noise(w, units, counts, noise, a.seed_correlation) for c, w in family.columns.items()
           if c != "average_centered"}
    return out | {u: score_noise({u: 1.0}, units, counts, noise, a.seed_correlation) for u in family.units}


def power_report(config: ExperimentConfig, a: PowerAssumptions = PowerAssumptions(), difference: float | None = None,
                 measured: tuple[dict[str, dict[str, UnitNoise]], str] | None = None) -> dict:
    """The MDD of every accuracy score of one rung (`config.for_rung`) for its seeds and trained
    arms, under assumed noise, and the primary decision's (`evaluation.primary`, alone at 0.05);
    with `difference` (a fraction), the seeds the average needs for it. `measured`: (family ->
    benchmark -> a document's noise, where it was measured) from item_noise: the accuracy family's
    documents take it, and the other families in points (p_gold) get their MDDs too; the seeds'
    noise stays assumed."""
    suite = load_suite()
    rung = config.pretrain.rung if config.pretrain else None
    seeds = len(rung.seeds) if rung else 1
    arms = len(config.trained_arms()) or len(config.arms)
    items = task_items(config, suite)
    clean = clean_text_tasks(config.evaluation.clean_text) if config.evaluation else []
    fams = families(suite, clean)
    levels = table_levels(fams, arms)
    by_unit, source = measured or ({}, None)
    shown = [name for name, f in fams.items() if name == "accuracy" or (name in by_unit and f.scale == 100)]
    noise = {name: assumed_noise(items, suite, a, fams[name], by_unit.get(name)) for name in shown}
    level = {name: {score: levels[name, "columns" if score in fams[name].columns else "units", score] for score in n}
             for name, n in noise.items()}
    mdds = {name: {score: mdd(x, seeds, level[name][score][0]) for score, x in n.items()} for name, n in noise.items()}
    out = {"method": "the report's decision simulated: generalized interval, every seed agreeing, at the level of "
                     "the table each score is decided in; 80% power; see evaluation/power.py",
           "rung": rung.name if rung else None, "assumptions": asdict(a), "item_noise": source,
           "item_correlation": {name: {u: n.item_correlation if informative(by_unit[name], u) else None
                                       for u, n in by_unit[name].items()} for name in shown if name in by_unit},
           "seeds": seeds, "arms": arms, "items": items, "mdd": mdds["accuracy"],
           "levels": {score: {"alpha": v[0], "table": v[1]} for score, v in level["accuracy"].items()},
           "families": {name: {"title": fams[name].title, "mdd": mdds[name],
                                "levels": {k: {"alpha": v[0], "table": v[1]} for k, v in level[name].items()}}
                        for name in shown},
           "paper_effect": PAPER_EFFECT,
           "resolves_paper_effect": mdds["accuracy"]["average"] is not None and mdds["accuracy"]["average"] <= PAPER_EFFECT}
    primary = config.evaluation.primary if config.evaluation else None
    if primary:
        family, column = primary.score.split(":")
        value = mdd(noise[family][column], seeds, 1 - LEVEL) if column in noise.get(family, {}) else None
        out["primary"] = {"pair": list(primary.pair), "score": primary.score, "alpha": 1 - LEVEL, "mdd": value,
                          # the same pair on every shown family's average: what the choice of score costs
                          "average_by_family": {name: mdd(n["average"], seeds, 1 - LEVEL) for name, n in noise.items()}}
    if difference is not None:
        out["difference"] = difference
        out["seeds_needed"] = seeds_needed(difference, lambda s: (noise["accuracy"]["average"],
                                                                  level["accuracy"]["average"][0]))
    return out


# ---------------------------------------------------------------- measured noise


def measured_noise(family: Family, matrices: dict[str, dict[str, np.ndarray]]) \
        -> tuple[dict[str, UnitNoise], dict[str, tuple[float, float]], float]:
    """Per unit of the family its noise (for display), per task its per-document fixed paired
    variance (not clipped at zero) and seed-by-document interaction (per arm), and rho_seed, from
    every arm's seeds x documents matrices (arm -> task -> matrix, the report's comparison)."""
    arms = list(matrices)

    def pooled(values: list[tuple[float, int]]) -> float:  # (value, weight) pairs
        total = sum(w for _, w in values)
        return sum(v * w for v, w in values) / total if total else 0.0

    interaction = {t: pooled([(interaction_variance(m[t]), len(m[t]) - 1) for m in matrices.values()])
                   for t in family.task_keys()}
    # unclipped (an average over runs stays unbiased); clipped at zero where used
    fixed = {t: pooled([(float(np.var((matrices[b][t] - matrices[a][t]).mean(axis=0), ddof=1))
                         - 2 * interaction[t] / len(matrices[a][t]), 1) for a, b in combinations(arms, 2)])
             for t in family.task_keys()}

    def seed_net(weights: dict[str, float]) -> float:
        """sigma_seed^2 of a weighted score, pooled over arms, less the interaction over its documents."""
        values = [(float(np.var(score, ddof=1)), len(score) - 1) for score in (arm_scores(m, weights) for m in matrices.values())]
        part = sum(w ** 2 * interaction[t] / next(iter(matrices.values()))[t].shape[1] for t, w in weights.items())
        return max(0.0, pooled(values) - part)

    noise = {}
    for unit, tasks in family.units.items():
        sigma2 = sum(w * pooled([(float(np.var(row, ddof=1)), 1) for m in matrices.values() for row in m[t]])
                     for t, w in tasks.items())
        inter = sum(w * 2 * interaction[t] for t, w in tasks.items())
        paired = sum(w * max(0.0, fixed[t]) for t, w in tasks.items()) + inter  # one seed's paired document variance
        noise[unit] = UnitNoise(item_variance=sigma2, item_correlation=1 - paired / (2 * sigma2) if sigma2 else 0.0,
                                seed_item_share=inter / paired if paired else 0.0, seed_std=math.sqrt(seed_net(tasks)))
    correlation = 0.0
    if "average" in family.columns and len(family.columns["average"]) > 1:
        weights = family.columns["average"]
        stds = {u: w * noise[u].seed_std for u, w in weights.items()}
        own = sum(s ** 2 for s in stds.values())
        cross = sum(stds.values()) ** 2 - own
        if cross > 0:
            correlation = min(1.0, max(-1.0, (seed_net(family.task_weights("average")) - own) / cross))
    return noise, {t: (fixed[t], interaction[t]) for t in fixed}, correlation


def measured_score_noise(weights: dict[str, float], tasks: dict[str, tuple[float, float]], items: dict[str, int],
                         seed: tuple[float, float], seed_df: tuple[float, ...] = ()) -> ScoreNoise:
    """A score's noise from its tasks' measured per-document parts and two arms' seed variances
    (estimated on `seed_df`: ScoreNoise)."""
    terms = tuple((w ** 2 * max(0.0, tasks[t][0]) / items[t], w ** 2 * 2 * tasks[t][1] / items[t], items[t])
                  for t, w in weights.items())
    return ScoreNoise(sum(t[0] for t in terms), sum(t[1] for t in terms), terms, seed, seed_df)


@dataclass(frozen=True)
class MeasuredFamily:
    """A family's noise measured from a run: every arm's seeds x documents matrices on the same
    paired seeds (measured_noise's parts, and each arm's seed variance of every score)."""

    units: dict[str, UnitNoise]
    tasks: dict[str, tuple[float, float]]
    seed_correlation: float
    items: dict[str, int]
    scores: dict[tuple[str, str], dict[str, float]]  # ("columns" | "units", name) -> its task weights
    arm_seed: dict[tuple[str, str], dict[str, float]]  # score -> arm -> its variance across the seeds
    seeds: int  # the paired seeds it was measured on

    def noise(self, key: tuple[str, str], pair: tuple[str, str] | None = None) -> ScoreNoise:
        """A score's noise for a pair of arms (each its own seed variance; their sum, what the pair's
        difference has, known on Welch's degrees of freedom from the two arms' seeds − 1, as the
        interval takes it), or for any pair (one variance pooled over the arms, on all their degrees
        of freedom). One fiducial draw for the pair's sum, not one per arm: two independent draws on
        one degree of freedom each let either arm's variance be many times its estimate at once,
        and printed a primary MDD 3.5x the true one at 2 arms x 2 seeds (median over pilots),
        power 0.96 there, in a review's simulation."""
        seed = self.arm_seed[key]
        if pair is None:
            return measured_score_noise(self.scores[key], self.tasks, self.items,
                                        (float(np.mean(list(seed.values()))),) * 2, (len(seed) * (self.seeds - 1),))
        a, b, nu = seed[pair[0]], seed[pair[1]], self.seeds - 1
        welch = (a + b) ** 2 / ((a ** 2 + b ** 2) / nu) if a + b > 0 else 2.0 * nu
        return measured_score_noise(self.scores[key], self.tasks, self.items, (a, b), (welch,))


def measure_family(family: Family, matrices: dict[str, dict[str, np.ndarray]]) -> MeasuredFamily:
    """The family's measured noise from every arm's matrices (arm -> task -> seeds x documents)."""
    noise, tasks, correlation = measured_noise(family, matrices)
    first = next(iter(matrices.values()))
    scores = {**{("columns", c): family.task_weights(c) for c in family.columns if c != "average_centered"},
              **{("units", u): dict(w) for u, w in family.units.items()}}
    arm_seed = {key: {arm: float(np.var(arm_scores(m, weights), ddof=1)) for arm, m in matrices.items()}
                for key, weights in scores.items()}
    return MeasuredFamily(noise, tasks, correlation, {t: x.shape[1] for t, x in first.items()}, scores, arm_seed,
                          len(next(iter(first.values()))))


def run_matrices(config: ExperimentConfig) -> tuple[dict, dict]:
    """One rung's comparison as power reads it: `(summary, {family: (Family, arm -> task -> seeds x
    documents)})`, on the seeds every arm has evaluated (the summary's `measured_on_seeds`), for the
    families every arm has every task of; no families while fewer than two arms have two such seeds."""
    suite = load_suite()
    clean = clean_text_tasks(config.evaluation.clean_text) if config.evaluation else []
    comparison = compare(load_runs(config), config.evaluation.average_last if config.evaluation else 1)
    arms = [arm for arm in config.arms if arm in comparison.by_arm]
    paired = sorted(set.intersection(*(set(comparison.by_arm[a]) for a in arms))) if arms else []
    summary = {"compared_steps": comparison.steps, "arms": arms, "measured_on_seeds": paired}
    if len(arms) < 2 or len(paired) < 2:
        return summary, {}
    out = {}
    for name, family in families(suite, clean).items():
        keys = family.task_keys()
        if all(comparison.documents(t, key) and set(arms) <= set(comparison.arms_with(t)) for t, key in keys.items()):
            out[name] = (family, {arm: {t: comparison.matrix(arm, paired, t, keys[t]) for t in keys} for arm in arms})
    return summary, out


def item_noise(config: ExperimentConfig) -> tuple[dict[str, dict[str, UnitNoise]], str]:
    """Per family and benchmark, a document's noise (sigma^2, rho, phi) measured on the evaluated
    runs of `config`: its largest rung with two arms or more on two seeds or more; and which rung."""
    for rung in reversed(config.rungs()):
        summary, measured = run_matrices(config.for_rung(rung))
        if measured:
            return ({name: measure_family(family, matrices).units for name, (family, matrices) in measured.items()},
                    f"{config.name}, rung {rung} ({', '.join(summary['arms'])} on seeds {summary['measured_on_seeds']})")
    raise SystemExit(f"evaluation.power --item-noise-from: {config.name}: no rung has two arms evaluated on two seeds "
                     "or more: nothing to measure a document's noise on")


def run_power(config: ExperimentConfig) -> dict:
    """Measured noise per family, the MDD of every column and unit for the configured seeds (on
    average over the seed variances the run's estimates leave possible), the primary decision's,
    and the seeds every arm's observed difference to the reference arm would need. With fewer than
    two seeds evaluated for every arm, `error` says so and nothing is measured."""
    summary, measured = run_matrices(config)
    arms, paired = summary["arms"], summary["measured_on_seeds"]
    seeds = len(config.pretrain.seeds)
    out = {"method": "the report's decision simulated with noise measured from the run, the seed variances' own "
                     "uncertainty included; see evaluation/power.py",
           "rung": config.pretrain.rung.name, "seeds": seeds, **summary, "families": {}}
    if arms and len(paired) < 2:
        out["error"] = (f"seed noise is not measured: {len(paired)} seed{'s' if len(paired) != 1 else ''} "
                        f"({paired}) evaluated for every arm at the compared step, and the seeds' noise needs 2 or more. "
                        "Until a second seed is evaluated, `python -m evaluation.power CONFIG` (without --from-run) "
                        "gives the power under assumed noise (--seed-std).")
        return out
    levels = table_levels({name: family for name, (family, _) in measured.items()}, len(arms))
    measured_at = {}
    for name, (family, matrices) in measured.items():
        m = measured_at[name] = measure_family(family, matrices)
        differences = {}
        for arm in arms[1:]:
            differences[arm] = {}
            for key, weights in m.scores.items():
                d = sum(w * float((matrices[arm][t] - matrices[arms[0]][t]).mean()) for t, w in weights.items())
                differences[arm][key[1]] = {"difference": d}
                if levels[name, *key][1] == "decision table":  # elsewhere the MDD alone (a scan costs seconds)
                    level = levels[name, *key][0]
                    differences[arm][key[1]]["seeds_needed"] = seeds_needed(
                        d, lambda s, k=key, a=arm, level=level, m=m: (m.noise(k, (arms[0], a)), level))
        out["families"][name] = {
            "title": family.title, "scale": family.scale, "unit": family.unit, "items": m.items,
            "noise": {u: asdict(n) for u, n in m.units.items()}, "seed_correlation": m.seed_correlation,
            "arm_seed_sd": {key[1]: {arm: math.sqrt(v) for arm, v in by_arm.items()} for key, by_arm in m.arm_seed.items()},
            "mdd": {key[1]: mdd(m.noise(key), seeds, levels[name, *key][0]) for key in m.scores},
            "levels": {key[1]: {"alpha": levels[name, *key][0], "table": levels[name, *key][1]} for key in m.scores},
            "titles": {key[1]: family.column_titles.get(key[1], key[1]) for key in m.scores},
            "differences": differences}
    primary = config.evaluation.primary if config.evaluation else None
    if primary:
        family, column = primary.score.split(":")
        out["primary"] = {"pair": list(primary.pair), "score": primary.score, "alpha": 1 - LEVEL, "mdd": None}
        if family in measured_at and ("columns", column) in measured_at[family].scores:
            pair = tuple(primary.pair) if set(primary.pair) <= set(arms) else None  # its own arms' seeds, where they ran
            out["primary"]["mdd"] = mdd(measured_at[family].noise(("columns", column), pair), seeds, 1 - LEVEL)
    return out


def mdd_text(value: float | None, scale: float, decimals: int) -> str:
    """An MDD in the score's unit; a fraction (shown in points) past 100 points is out of reach."""
    if value is None:
        return "-"
    return f">{100:.{decimals}f}" if scale == 100 and value > 1 else f"{scale * value:.{decimals}f}"


def print_primary(report: dict) -> None:
    primary = report.get("primary")
    if not primary:
        return
    family, _ = primary["score"].split(":")
    scale = 100 if family in ("accuracy", "p_gold") else 1
    value = primary["mdd"]
    shown = (f"{mdd_text(value, scale, 2 if scale == 100 else 3)}{' points' if scale == 100 else ''}" if value is not None
             else "not measured here" if "from_run" in report else
             f"nothing assumed for {family}'s documents: measure them on a run (--item-noise-from CONFIG)"
             if family not in report["families"] else "needs 2 seeds or more")
    print(f"  primary decision (evaluation.primary: {' − '.join(primary['pair'])} on {primary['score']}, alone at "
          f"{primary['alpha']:.2g}): {shown}" + (f"; +{100 * report['paper_effect']:.2f} points is "
                                                 f"{'within' if value <= report['paper_effect'] else 'out of'} reach"
                                                 if scale == 100 and value is not None and "paper_effect" in report else ""))
    if len(primary.get("average_by_family", {})) > 1:
        print("    the same pair on each family's average, alone at the same level: " + "; ".join(
            f"{name} {mdd_text(v, 100, 2)} points" for name, v in primary["average_by_family"].items()))


def print_power(report: dict) -> None:
    a = report["assumptions"]
    rung = f"rung {report['rung']}: " if report["rung"] else ""
    measured = {name: [v for v in r.values() if v is not None] for name, r in report["item_correlation"].items()}
    documents = (f"item correlation measured on {report['item_noise']} (mean over benchmarks "
                 + ", ".join(f"{name} {sum(v) / len(v):.2f}" for name, v in measured.items() if v)
                 + "; where every arm answered every document alike, 0.5 assumed)" if report["item_noise"] else
                 f"assumed accuracy {a['accuracy']:.2f}, item correlation {a['item_correlation']:.2f} (assumed)")
    print(f"{rung}Minimum detectable difference (the report calls it a result 80% of the time; {report['seeds']} paired "
          f"seeds, {report['arms']} arms; {documents}, seed std {100 * a['seed_std']:.2f} points per benchmark, "
          f"seed-by-document share {a['seed_item_share']:.2f}, seed correlation across benchmarks "
          f"{a['seed_correlation']:.2f} (assumed)):")
    print_primary(report)
    titles = {"average": "Avg", **CATEGORY_TITLES}
    for family in report["families"].values():
        if len(report["families"]) > 1:
            print(f"  {family['title']}:")
        for key, title in titles.items():
            if key not in family["mdd"]:
                continue
            value, level = family["mdd"][key], family["levels"][key]
            shown = f"{mdd_text(value, 100, 2):>7} points" if value is not None else "  needs 2 seeds or more"
            print(f"  {title:<18} {shown}  ({level['table']}, tested at {level['alpha']:.4g})")
    verdict = "can" if report["resolves_paper_effect"] else "cannot"
    print(f"  this run {verdict} resolve an effect the size of the paper's "
          f"+{100 * report['paper_effect']:.2f} points on the accuracy average in its decision table")
    if "difference" in report:
        needed = report["seeds_needed"]
        print(f"  {100 * report['difference']:.2f} points on the average: "
              + (f"{needed} paired seeds resolve it 80% of the time" if needed else f"no seed count up to {MAX_SEEDS} "
                 "resolves it 80% of the time (the test documents' noise, or the seeds' with every seed agreeing)"))


def print_run_power(report: dict) -> None:
    steps = report["compared_steps"]
    if not report["families"]:
        print("no two arms with evaluated checkpoints at a common step: nothing measured yet")
        return
    rung = f"rung {report['rung']}: " if report["rung"] else ""
    print(f"{rung}Noise measured at step {steps[-1] if steps else '-'} of {', '.join(report['arms'])} on seeds "
          f"{report['measured_on_seeds']}; minimum detectable difference with the configured {report['seeds']} paired "
          "seeds (the report calls it a result 80% of the time, at the level of the table that decides it; '>100': "
          "out of reach of a score in points). seed sd: net of the seed-by-document part (0: the seeds spread no "
          "more than that part explains); diff, seeds: each arm's difference to the reference and the fewest seeds "
          f"that resolve it 80% of the time (>{MAX_SEEDS}: none up to {MAX_SEEDS}):")
    print_primary(report | {"from_run": True})
    for f in report["families"].values():
        decimals = 2 if f["scale"] == 100 else 3
        print(f"\n{f['title']} ({f['unit']}); seed correlation across benchmarks {f['seed_correlation']:.2f}")
        print(f"  {'score':<28}{'MDD':>9}  {'tested at':<10} sigma2  rho   phi   seed sd"
              + "".join(f"  {arm + ': diff, seeds':>26}" for arm in f["differences"]))
        for score, value in f["mdd"].items():
            n = f["noise"].get(score)
            params = (f"  {n['item_variance']:.3f} {n['item_correlation']:5.2f} {n['seed_item_share']:5.2f} "
                      f"{f['scale'] * n['seed_std']:7.{decimals}f}") if n else " " * 31
            cells = ""
            for d in f["differences"].values():
                needed = "" if "seeds_needed" not in d[score] else d[score]["seeds_needed"] or (
                    f">{MAX_SEEDS}" if d[score]["difference"] else "-")
                cells += f"  {f['scale'] * d[score]['difference']:+14.{decimals}f}, {needed:>9}"
            shown = f"{mdd_text(value, f['scale'], decimals):>9}"
            print(f"  {f['titles'][score]:<28}{shown}  {f['levels'][score]['alpha']:<10.4g}{params}{cells}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m evaluation.power", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("config")
    parser.add_argument("--from-run", action="store_true", help="measure the noise from the run's evaluated checkpoints")
    parser.add_argument("--accuracy", type=float, default=PowerAssumptions.accuracy)
    parser.add_argument("--item-correlation", type=float)
    parser.add_argument("--seed-std", type=float, default=100 * PowerAssumptions.seed_std,
                        help="standard deviation of a benchmark's score across seeds, in points")
    parser.add_argument("--seed-item-share", type=float, default=PowerAssumptions.seed_item_share,
                        help="share of a document's paired variance that a new seed redraws (0-1)")
    parser.add_argument("--seed-correlation", type=float, default=PowerAssumptions.seed_correlation,
                        help="correlation of one seed's shifts across benchmarks (0-1)")
    parser.add_argument("--difference", type=float,
                        help="a true difference on the accuracy average, in points: the seeds each rung needs for it")
    parser.add_argument("--item-noise-from", metavar="CONFIG",
                        help="measure a document's noise per benchmark (item variance, item correlation rho, seed-by-"
                             "document share) on another config's evaluated runs (its largest rung with two arms on two "
                             "seeds) instead of assuming it; the seeds' noise stays assumed; with --item-correlation "
                             "given, that rho replaces the measured one")
    parser.add_argument("--rung", help="one rung of pretrain.ladder (default: every rung)")
    parser.add_argument("--json", action="store_true", help="print the JSON (by rung) instead of the tables")
    args = parser.parse_args(argv)
    config = load_experiment_or_exit(args.config)
    try:
        rungs = [config.for_rung(args.rung).rungs()[0]] if args.rung else config.rungs()
    except ValueError as e:
        raise SystemExit(f"evaluation.power: {e}") from None
    rho = PowerAssumptions.item_correlation if args.item_correlation is None else args.item_correlation
    assumptions = PowerAssumptions(args.accuracy, rho, args.seed_std / 100, args.seed_item_share, args.seed_correlation)
    measured = None
    if args.item_noise_from:
        by_unit, source = item_noise(load_experiment_or_exit(args.item_noise_from))
        if args.item_correlation is not None:
            by_unit = {f: {u: replace(n, item_correlation=rho) for u, n in units.items()} for f, units in by_unit.items()}
            source += f", item correlation {rho} (assumed)"
        measured = by_unit, source
    reports, refused = {}, 0
    for rung in rungs or [None]:
        one = config.for_rung(rung) if rung else config
        if args.from_run:
            report = run_power(one)
            if "error" in report:  # refused for this rung; the others are still measured
                print(f"evaluation.power --from-run{f' (rung {rung})' if rung else ''}: {report['error']}",
                      file=sys.stderr)
                refused += 1
                continue
        else:
            report = power_report(one, assumptions, args.difference / 100 if args.difference is not None else None, measured)
        reports[rung] = report
        if not args.json:
            (print_run_power if args.from_run else print_power)(report)
            print()
    if args.json:
        print(json.dumps(reports, indent=2))
    return 2 if refused and not reports else 0


if __name__ == "__main__":
    sys.exit(main())
