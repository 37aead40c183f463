"""The noise measured from a finished or partial run (`python -m evaluation.power CONFIG --from-run`; the
method: evaluation/power.py): every parameter per metric family and benchmark from the seeds x documents
layout of the report's comparison, and the MDDs and seeds needed it gives."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from itertools import combinations

import numpy as np
from scipy import special

from configs.experiment import ExperimentConfig
from evaluation.metrics import Family, families
from evaluation.power_simulation import ScoreNoise, UnitNoise, mdd, primary_level, seeds_needed, table_levels
from evaluation.runs import compare, load_runs
from evaluation.statistics.intervals import LEVEL, arm_scores, interaction_variance
from evaluation.tasks.clean_text import clean_text_tasks
from evaluation.tasks.suite import load_suite

RHO_RANGE = (0.0, 0.95)  # the one rule for a measured item correlation out of range: clipped into it


def clip_rho(rho: float) -> float:
    """A measured item correlation clipped to RHO_RANGE: a negative one (noise about 0) counts as 0, one
    of 1 (two arms that answered every document alike) as 0.95, so that no estimate makes a document's
    paired variance vanish or exceed twice its own."""
    return min(RHO_RANGE[1], max(RHO_RANGE[0], rho))


def _pooled(values: list[tuple[float, int]]) -> float:  # (value, weight) pairs
    total = sum(w for _, w in values)
    return sum(v * w for v, w in values) / total if total else 0.0


def pair_fixed(a: np.ndarray, b: np.ndarray, interaction: float) -> float:
    """One pair's per-document fixed paired variance of a task (seeds x documents each, the paired
    seeds as rows): the variance of its seed-mean differences less both arms' interaction over the
    seeds, not clipped at zero (an average over runs stays unbiased; clipped where used)."""
    return float(np.var((b - a).mean(axis=0), ddof=1)) - 2 * interaction / len(a)


def measured_noise(family: Family, matrices: dict[str, dict[str, np.ndarray]]) \
        -> tuple[dict[str, UnitNoise], dict[str, tuple[float, float]], float]:
    """Per unit of the family its noise (for display; rho clipped by `clip_rho`), per task its
    per-document fixed paired variance (pooled over every pair, not clipped at zero) and seed-by-
    document interaction (per arm), and rho_seed, from every arm's seeds x documents matrices
    (arm -> task -> matrix, the report's comparison)."""
    arms = list(matrices)
    pooled = _pooled
    interaction = task_interactions(family, matrices)
    fixed = {t: pooled([(pair_fixed(matrices[a][t], matrices[b][t], interaction[t]), 1) for a, b in combinations(arms, 2)])
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
        noise[unit] = UnitNoise(item_variance=sigma2, item_correlation=clip_rho(1 - paired / (2 * sigma2)) if sigma2 else 0.0,
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


def task_interactions(family: Family, matrices: dict[str, dict[str, np.ndarray]]) -> dict[str, float]:
    """Per task, the seed-by-document interaction variance pooled over the arms given."""
    return {t: _pooled([(interaction_variance(m[t]), len(m[t]) - 1) for m in matrices.values()]) for t in family.task_keys()}


# BCa reads its median bias z0 and its tail ends off the bootstrap draws, its acceleration off the jackknife; both
# corrections are near 0 here, so with 200-400 draws and 20 groups their Monte Carlo noise was most of what they
# moved: each end by about 6% of the interval's width from one bootstrap seed to the next (2% at these values), and
# the coverage with it (bench.rho_coverage; docs/explanation/evaluation.md)
RHO_DRAWS = 2000
JACKKNIFE_GROUPS = 200  # documents deleted a group at a time (one each where a task has fewer)
_DRAW_CHUNK = 250  # bootstrap draws resampled at once: a chunk's counts are documents x this


def bca_interval(point: float, resampled: np.ndarray, jackknife: np.ndarray) -> tuple[float, float]:
    """The 95% BCa bootstrap interval (Efron 1987) of an estimate from its bootstrap replicates and its
    leave-one-group-out jackknife values: the percentile interval moved by the replicates' median
    bias (z0) and skewed by how the estimate's spread changes with its value (the acceleration)."""
    z0 = special.ndtri(np.clip(np.mean(resampled < point) + np.mean(resampled == point) / 2,
                               0.5 / len(resampled), 1 - 0.5 / len(resampled)))
    spread = jackknife.mean() - jackknife
    denominator = 6 * float((spread ** 2).sum()) ** 1.5
    acceleration = float((spread ** 3).sum()) / denominator if denominator > 0 else 0.0
    z = z0 + special.ndtri(np.array([(1 - LEVEL) / 2, (1 + LEVEL) / 2]))
    low, high = np.quantile(resampled, special.ndtr(z0 + z / (1 - acceleration * z)))
    return float(low), float(high)


def _weighted_parts(x: np.ndarray, y: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row of `counts` (how often each document is drawn: a bootstrap resample, a jackknife
    deletion), one task's two arms' own document variance (mean over their seeds' rows), their mean
    interaction, and the pair's fixed paired variance (pair_fixed): the same estimates as on the
    documents drawn, from per-document sums, for every resample at once."""
    documents, seeds = counts.sum(axis=1), x.shape[0]
    d = (y - x).mean(axis=0)
    # every per-document value the estimates sum, summed over each row's documents by one product
    values = [v for z in (x, y) for v in (z, z ** 2, z.mean(axis=0, keepdims=True) ** 2)] + [d[None], d[None] ** 2]
    sums = np.split(counts @ np.vstack(values).T, np.cumsum([len(v) for v in values])[:-1], axis=1)
    own, inter = [], []
    for total, squares, mean_squares in (sums[0:3], sums[3:6]):  # resamples x seeds, x seeds, x 1
        own.append(((squares - total ** 2 / documents[:, None]) / (documents[:, None] - 1)).mean(axis=1))
        if seeds < 2:
            inter.append(np.zeros(len(counts)))
            continue
        residual = (squares.sum(axis=1) - seeds * mean_squares[:, 0] - (total ** 2).sum(axis=1) / documents
                    + total.sum(axis=1) ** 2 / (seeds * documents))
        inter.append(residual / ((seeds - 1) * (documents - 1)))
    spread = (sums[7][:, 0] - sums[6][:, 0] ** 2 / documents) / (documents - 1)
    interaction = (inter[0] + inter[1]) / 2
    return (own[0] + own[1]) / 2, interaction, spread - 2 * interaction / seeds


def _rho_phi(weights: dict[str, float], a: dict[str, np.ndarray], b: dict[str, np.ndarray],
             counts: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Per row of the tasks' `counts` (task -> rows x documents: how often each document is drawn), the
    pair's rho and phi on the documents drawn; rho nan where they did not vary or the arms answered them alike."""
    own = paired = interaction = np.zeros(len(next(iter(counts.values()))))
    for t, w in weights.items():
        documents = counts[t].sum(axis=1)
        o, i, fixed = _weighted_parts(a[t], b[t], counts[t])
        own = own + w ** 2 * o / documents
        paired = paired + w ** 2 * (np.maximum(0.0, fixed) + 2 * i) / documents
        interaction = interaction + w ** 2 * 2 * i / documents
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where((own > 0) & (paired > 0), 1 - paired / (2 * own), np.nan), interaction / paired


def _resampled_counts(rng: np.random.Generator, documents: int, draws: int) -> np.ndarray:
    """draws x documents: how often each document is drawn in each of `draws` resamples with replacement."""
    drawn = rng.integers(0, documents, (draws, documents)) + documents * np.arange(draws)[:, None]
    return np.bincount(drawn.ravel(), minlength=draws * documents).reshape(draws, documents).astype(float)


def pair_correlation(weights: dict[str, float], a: dict[str, np.ndarray], b: dict[str, np.ndarray],
                     draws: int = RHO_DRAWS, seed: int = 0) -> dict | None:
    """The item correlation rho of one pair of arms on a score (task -> weight) and its seed-by-document
    share phi, each with a 95% BCa interval from a bootstrap over each task's documents (the same
    documents for both arms and every seed; the interaction re-measured on each resample, as an estimate
    is): rho is 1 − the pair's paired document variance over twice the two arms' own, phi the share of
    that paired variance the interaction holds, each weighted w^2 / n as the score weighs it. rho and its
    interval's ends are clipped by `clip_rho` (an end clipped into the range never changes whether a rho
    inside the range is covered); `clipped` says where the estimate itself was, `unclipped` is its value
    before. None where the pair's documents did not vary or its two arms answered every document alike
    (nothing measured of rho)."""
    rng = np.random.default_rng(seed)
    n = {t: a[t].shape[1] for t in weights}
    groups = {t: rng.permutation(k) % min(JACKKNIFE_GROUPS, k) for t, k in n.items()}
    # row 0: every document once; then the jackknife's deletions
    rho, phi = _rho_phi(weights, a, b, {t: np.vstack([np.ones((1, k)), [groups[t] != g for g in range(JACKKNIFE_GROUPS)]])
                                        for t, k in n.items()})
    if np.isnan(rho[0]):
        return None
    estimate = float(rho[0])  # a Python float: the dict goes to report.json as it is, and numpy's bool is no JSON
    out = {"rho": clip_rho(estimate), "phi": float(phi[0]), "clipped": clip_rho(estimate) != estimate, "unclipped": estimate,
           "low": None, "high": None, "phi_low": None, "phi_high": None}
    resampled = [_rho_phi(weights, a, b, {t: _resampled_counts(rng, k, min(_DRAW_CHUNK, draws - start)) for t, k in n.items()})
                 for start in range(0, draws, _DRAW_CHUNK)]
    boot_rho, boot_phi = (np.concatenate([r[part] for r in resampled] or [np.zeros(0)]) for part in (0, 1))
    usable = ~np.isnan(boot_rho)
    if usable.sum() < 2 or np.isnan(rho[1:]).any():  # draws=0: the estimates alone
        return out
    low, high = bca_interval(estimate, boot_rho[usable], rho[1:])
    phi_low, phi_high = bca_interval(float(phi[0]), boot_phi[usable], phi[1:])
    return out | {"low": clip_rho(low), "high": clip_rho(high), "phi_low": max(0.0, phi_low), "phi_high": min(1.0, phi_high)}


def measured_score_noise(weights: dict[str, float], tasks: dict[str, tuple[float, float]], items: dict[str, int],
                         seed: tuple[float, float], seed_df: float | None = None) -> ScoreNoise:
    """A score's noise from its tasks' measured per-document parts and two arms' seed variances
    (their sum estimated on `seed_df`: ScoreNoise)."""
    terms = tuple((w ** 2 * max(0.0, tasks[t][0]) / items[t], w ** 2 * 2 * tasks[t][1] / items[t], items[t])
                  for t, w in weights.items())
    return ScoreNoise(sum(t[0] for t in terms), sum(t[1] for t in terms), terms, seed, seed_df)


def paired_seed_variance(scores: dict[str, np.ndarray]) -> tuple[float, float]:
    """Var(d_s) of a pair's paired seed difference of a score, and its degrees of freedom, from the
    arms' scores per paired seed (arm -> one value a seed, the seeds in the same order): the residual
    mean square of the arms x seeds layout, twice, on (K − 1)(S − 1) degrees of freedom. For two arms
    it is var_s(d_s) on S − 1, what the decision's interval takes; for more it pools every arm's, a
    seed's shift that all arms share (initial weights, data order) taken out as the pairs take it out."""
    x = np.array(list(scores.values()))
    arms, seeds = x.shape
    residual = x - x.mean(axis=1, keepdims=True) - x.mean(axis=0, keepdims=True) + x.mean()
    df = (arms - 1) * (seeds - 1)
    return 2 * float((residual ** 2).sum()) / df, float(df)


@dataclass(frozen=True)
class MeasuredFamily:
    """A family's noise measured from a run: every arm's seeds x documents matrices on the same
    paired seeds (measured_noise's parts, and each arm's score of every score per seed)."""

    units: dict[str, UnitNoise]
    tasks: dict[str, tuple[float, float]]
    seed_correlation: float
    items: dict[str, int]
    scores: dict[tuple[str, str], dict[str, float]]  # ("columns" | "units", name) -> its task weights
    seed_scores: dict[tuple[str, str], dict[str, np.ndarray]]  # score -> arm -> its value per paired seed
    seeds: int  # the paired seeds it was measured on
    pair_tasks: dict[frozenset, dict[str, tuple[float, float]]] = field(default_factory=dict)  # each pair's own `tasks`

    @property
    def seed_std_df(self) -> float:
        """The degrees of freedom of each unit's measured sigma_seed: every arm's variance across its
        seeds, pooled over the K arms, on K (S − 1)."""
        return float(len(next(iter(self.seed_scores.values()))) * (self.seeds - 1))

    @property
    def arm_seed(self) -> dict[tuple[str, str], dict[str, float]]:
        """score -> arm -> its variance across the seeds."""
        return {key: {arm: float(np.var(v, ddof=1)) for arm, v in by_arm.items()} for key, by_arm in self.seed_scores.items()}

    def noise(self, key: tuple[str, str], pair: tuple[str, str] | None = None) -> ScoreNoise:
        """A score's noise for a pair of arms, or for any pair: the seeds' part is what the decision
        estimates, the variance of the paired seed differences (`paired_seed_variance`: the pair's own
        on S − 1 degrees of freedom, or pooled over every arm on (K − 1)(S − 1)), split evenly between
        the two arms (only their sum counts)."""
        by_arm = self.seed_scores[key]
        variance, df = paired_seed_variance({arm: by_arm[arm] for arm in pair} if pair else by_arm)
        tasks = self.documents_of(key, pair)[0] if pair else self.tasks
        return measured_score_noise(self.scores[key], tasks, self.items, (variance / 2, variance / 2), df)

    def documents_of(self, key: tuple[str, str], pair: tuple[str, str]) -> tuple[dict[str, tuple[float, float]], bool]:
        """The per-document parts a pair's score is priced on: the pair's own where its documents'
        differences varied on some task of the score (True), else those pooled over every pair (False)."""
        own = self.pair_tasks.get(frozenset(pair))
        informative = own is not None and any(own[t][0] + 2 * own[t][1] / self.seeds > 0 for t in self.scores[key])
        return (own, True) if informative else (self.tasks, False)


def measure_family(family: Family, matrices: dict[str, dict[str, np.ndarray]]) -> MeasuredFamily:
    """The family's measured noise from every arm's matrices (arm -> task -> seeds x documents)."""
    noise, tasks, correlation = measured_noise(family, matrices)
    first = next(iter(matrices.values()))
    interaction = task_interactions(family, matrices)
    pair_tasks = {frozenset((a, b)): {t: (pair_fixed(matrices[a][t], matrices[b][t], interaction[t]), interaction[t])
                                      for t in family.task_keys()} for a, b in combinations(matrices, 2)}
    scores = {**{("columns", c): family.task_weights(c) for c in family.columns if c != "average_centered"},
              **{("units", u): dict(w) for u, w in family.units.items()}}
    seed_scores = {key: {arm: arm_scores(m, weights) for arm, m in matrices.items()} for key, weights in scores.items()}
    return MeasuredFamily(noise, tasks, correlation, {t: x.shape[1] for t, x in first.items()}, scores, seed_scores,
                          len(next(iter(first.values()))), pair_tasks)


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


@dataclass(frozen=True)
class RunNoise:
    """The noise `python -m evaluation.power --noise-from RUN` reads off a named run: per family and
    benchmark a document's noise and the seeds' (UnitNoise: sigma^2, rho, phi, sigma_seed), per family
    the seed correlation across benchmarks, and where it was measured."""

    units: dict[str, dict[str, UnitNoise]]
    seed_correlation: dict[str, float]
    source: str
    # per family, the degrees of freedom of each benchmark's measured sigma_seed (MeasuredFamily.seed_std_df); a
    # family without one: its sigma_seed taken as known
    seed_df: dict[str, float] = field(default_factory=dict)


def run_noise(config: ExperimentConfig) -> RunNoise:
    """Every family's noise measured on the evaluated runs of `config` (the report's comparison, on
    the seeds every arm has evaluated at the compared step): its largest rung with two arms or more
    on two seeds or more."""
    for rung in reversed(config.rungs()):
        summary, measured = run_matrices(config.for_rung(rung))
        if measured:
            fams = {name: measure_family(family, matrices) for name, (family, matrices) in measured.items()}
            return RunNoise({name: m.units for name, m in fams.items()},
                            {name: m.seed_correlation for name, m in fams.items()},
                            f"{config.name}, rung {rung} ({', '.join(summary['arms'])} on seeds "
                            f"{summary['measured_on_seeds']})",
                            {name: m.seed_std_df for name, m in fams.items()})
    raise SystemExit(f"evaluation.power --noise-from: {config.name}: no rung has two arms evaluated on two seeds "
                     "or more: nothing to measure the noise on; evaluate two arms on two seeds there first, or "
                     "leave --noise-from out (assumed noise)")


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
        out["primary"] = {"pair": list(primary.pair), "score": primary.score, "alpha": 1 - LEVEL,
                          "sides": primary.sides, "mdd": None, "rho": None}
        if family in measured_at and ("columns", column) in measured_at[family].scores:
            key = ("columns", column)
            pair = tuple(primary.pair) if set(primary.pair) <= set(arms) else None  # its own arms' seeds, where they ran
            out["primary"]["mdd"] = mdd(measured_at[family].noise(key, pair), seeds, primary_level(primary.sides))
            out["primary"]["rho"] = primary_rho(measured_at[family], measured[family][1], key, pair)
    return out


def primary_rho(m: MeasuredFamily, matrices: dict[str, dict[str, np.ndarray]], key: tuple[str, str],
                pair: tuple[str, str] | None) -> dict:
    """The item correlation the primary MDD is priced on and its source: the primary pair's own with its
    interval where the pair's documents are informative, else the mean over every pair of arms (stated; the
    report's comparison holds the primary pair's two arms alone, so there it is that pair's own, said so)."""
    # the bootstrap (seconds) only where the pair's documents can inform it
    own = pair_correlation(m.scores[key], matrices[pair[1]], matrices[pair[0]]) \
        if pair and m.documents_of(key, pair)[1] else None
    if own is not None:
        return own | {"source": f"the primary pair {pair[0]} − {pair[1]}"}
    pairs = list(combinations(matrices, 2))
    pooled = [r for a, b in pairs if (r := pair_correlation(m.scores[key], matrices[a], matrices[b], draws=0)) is not None]
    why = ("its arms did not both run" if pair is None else "its two arms answered every document alike")
    over = ("the pool over every pair of arms" if len(pairs) > 1
            else "the only pair of arms, {} − {}, without an interval".format(*pairs[0]))
    return {"rho": float(np.mean([r["rho"] for r in pooled])) if pooled else None, "low": None, "high": None,
            "source": f"{over} (the primary pair is uninformative: {why})"}
