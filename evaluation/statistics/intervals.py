"""Paired differences between two arms, their 95% intervals and p-values, sound with two or three seeds.

A score is a weighted mean of per-document values over tasks (a benchmark: its tasks; a category
or the average: its benchmarks), here averaged over the paired training seeds. Seed s of every
arm shares initial weights and data order, and every seed answers the same test documents, so
the difference other − reference, D = sum_t w_t mean_{s,i} d_{s,t,i}, has three sources of noise:

- test documents, drawn once and shared by all seeds and arms (which documents the benchmark
  happens to hold);
- the seed-by-document interaction: which documents one trained model happens to get right;
- training seeds: a seed shifts an arm's whole score.

The documents' part is var_i(mean_s d_{s,t,i}) / n_t per task, what an item bootstrap at fixed
seeds estimates (without its Monte-Carlo noise); it holds the interaction too, shrunk by the S
seeds. The seeds' part is var_s(d_s) / S, d_s the difference of the score within paired seed s
(S − 1 degrees of freedom), which holds both arms' seed shifts and again the interaction (over n
documents). So the interaction is counted once, on the seeds' side: the documents' part loses the
pair's own interaction, sum_t w_t^2 sigma_int,t^2 / (n_t S), sigma_int,t^2 the residual mean
square of the seeds x documents layout of the pair's differences d_{s,t,i}. Both are taken on the
differences themselves, so a seed that moves every benchmark together counts in the average's
variance, and what the two arms' seed s share (initial weights, data order) cancels in d_s.

The seeds' part is always the pair's own, never pooled over the other arms of the run, and never
built from the two arms' separate variances. Pooling gains degrees of freedom, but it is right
only when every arm is as noisy across seeds as the others, and 2-3 seeds cannot show that one is
not: an F test at the 5% level of one arm against four others finds an arm 3x noisier in 41% of
runs at 2 seeds, 63% at 3; in a review's simulation that arm's pairs covered 85-89% with the
pooled variance. The two arms' own variances, (s_a^2 + s_b^2) / S on Welch's degrees of freedom,
undercover too where one arm is much noisier: Welch's degrees of freedom are computed from the
estimates, and they rise towards 2 (S − 1) exactly when the noisy arm's variance comes out small
by chance. With the seeds all the noise and 3 seeds, that interval covered 0.947 where one arm's
seed variance is 9x the other's (3x the SD) and 0.940 at 30x (100,000 simulated pairs). var_s(d_s)
is a chi-square on S − 1 whatever the two arms' variances are, so the interval is exact there;
the price is power where the arms are equally noisy (S − 1 degrees of freedom, not up to 2 (S − 1)).
With one paired seed, each arm's seed variance is one named for it (measured at another rung, or
stated): their sum over S on Welch's degrees of freedom from theirs (a stated one known).

The interval is a generalized (fiducial) interval (Weerahandi 1993). Each part of Var(D) is known
through an estimate on some degrees of freedom nu, so its true value is taken as the estimate x
nu / W, W ~ chi2(nu): the seeds' part on S − 1, the documents' part (interaction included) on
Satterthwaite's over its tasks, less the interaction, measured on many more degrees of freedom and
taken as known (never below zero). The seeds' part holds that interaction, so it is never taken
below it: two seeds of a 0/1 benchmark of n documents tie on a grid of 1 / n often enough (their
differences equal, var_s(d_s) = 0) that, with the interaction taken out of the documents' part and
nothing left on the seeds' side, the accuracy per-benchmark table at 5 arms x 2 seeds (one arm 3x
noisier) showed a result that is not there in 15% of runs (bench/calibration.py, 500 replicates;
2% with the floor). The floor costs width where the seeds' part is mostly that interaction: one
task of 2,000 documents, the seeds' shift a tenth of the interaction's share, covered 0.982 at 3
seeds and 0.994 at 2 in a review's simulation (0.976 and 0.986 without the floor):

    p(x) = E_{W_d, W_s}[ 2 Phi( −x / sqrt(max(0, V_d nu_d / W_d − I) + max(I, V_s nu_s / W_s)) ) ],
    the interval: D ± x with p(x) = 0.05,

by quadrature over the two W. It is exactly a t where one part is all the noise (a t on nu_s, or
on nu_d), and conservative between. The plain t with Satterthwaite's degrees of freedom, which
this replaces, lets a seed variance that comes out small by chance raise the degrees of freedom
too: its p-value tails were 2-3x nominal in a review's simulation, and a table corrected for many
comparisons reads exactly those tails (bench/calibration.py measures the tables and the noisier
arm's coverage, tests/test_intervals.py the tails). At 2 seeds the seeds' part rests on one degree
of freedom, and a difference whose noise is mostly seeds is resolved only when it is many times its
standard error. With one seed per arm and nothing named the seeds' part is unknown and left out
(the interval covers the documents alone, and the report says so).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import special, stats

LEVEL = 0.95

Matrices = dict[str, np.ndarray]  # task -> seeds x documents, the same documents in every row

# A variance estimated on nu degrees of freedom is taken as its estimate x nu / W, W ~ chi2(nu), by
# quadrature over W's probability u: Gauss-Legendre nodes in log u on (1e-14, 1), dense where W is
# small (a variance far above its estimate), which the tails come from. The factors nu / W(u) are
# tabulated on a grid of nu and interpolated in log nu (Welch's degrees of freedom are not integers).
_LOG_U_MIN = math.log(1e-14)
_DF_GRID = np.unique(np.concatenate([np.arange(1.0, 11.0), np.geomspace(0.5, 1e7, 400)]))
_LOG_DF_GRID = np.log(_DF_GRID)


def _quadrature(nodes: int) -> tuple[np.ndarray, np.ndarray]:
    x, w = np.polynomial.legendre.leggauss(nodes)
    u = np.exp((x + 1) / 2 * -_LOG_U_MIN + _LOG_U_MIN)
    return w * -_LOG_U_MIN / 2 * u, np.log(_DF_GRID[:, None] / stats.chi2.ppf(u[None, :], _DF_GRID[:, None]))


_SEED_WEIGHTS, _SEED_FACTORS = _quadrature(32)
_DOCUMENT_WEIGHTS, _DOCUMENT_FACTORS = _quadrature(16)


@dataclass(frozen=True)
class SeedVariance:
    """The variance of one arm's score across its seeds and its degrees of freedom (0: one seed, not
    measured; inf: stated, taken as known); `source`: where a variance not measured on the arm's own
    seeds at this rung comes from ("": its own seeds)."""

    variance: float
    df: float
    source: str = ""

    def to_json(self) -> dict:
        return {"variance": self.variance, "df": self.df if math.isfinite(self.df) else None, "source": self.source}

    @classmethod
    def from_json(cls, d: dict) -> SeedVariance:
        return cls(d["variance"], math.inf if d["df"] is None else d["df"], d["source"])


@dataclass(frozen=True)
class TaskPair:
    """One task of a pair of arms over their paired seeds: what every score built on it needs."""

    per_seed: np.ndarray  # the difference of the task's means, per paired seed
    documents: float  # var_i(mean_s d_{s,i}) / n
    interaction: float  # sigma_int^2 / n, the interaction of the seeds x documents differences
    n: int


@dataclass(frozen=True)
class Interval:
    difference: float
    low: float
    high: float
    se: float
    p: float  # two-sided, against no difference
    per_seed: list[float]  # the difference within each paired seed
    seeds_agree: bool  # every seed's difference has the sign of the mean (and none is zero)
    seed_part: float  # the share of Var(D) that training seeds make
    var_documents: float  # var_i(mean_s d) / n over tasks, the seed-by-document interaction in it
    var_interaction: float  # what of it is the pair's interaction, counted with the seeds (0: not measured)
    df_documents: float | None  # Satterthwaite's, of var_documents over tasks (None: no documents' noise)
    var_seeds: float  # var_s(d_s) / S of the paired seed differences; one paired seed: (s_a^2 + s_b^2) named (0: none)
    df_seeds: float | None  # S − 1; one paired seed: Welch's of the named variances (None: not measured, or known)
    seeds_measured: bool  # the seeds' part is in the interval (measured, or named for a one-seed arm)

    @property
    def resolved(self) -> bool:
        """The interval excludes zero (an interval of no width, from no measured variation, never does)."""
        return self.se > 0 and (self.low > 0 or self.high < 0)

    def to_json(self) -> dict:
        return dict(vars(self), resolved=self.resolved)


def interaction_variance(x: np.ndarray) -> float:
    """sigma^2 of the seed-by-document interaction of one arm's seeds x documents matrix: the
    residual mean square of the two-way layout (0 with one seed or one document)."""
    seeds, docs = x.shape
    if seeds < 2 or docs < 2:
        return 0.0
    residual = x - x.mean(axis=1, keepdims=True) - x.mean(axis=0, keepdims=True) + x.mean()
    return float((residual ** 2).sum() / ((seeds - 1) * (docs - 1)))


def seed_variance(per_seed: np.ndarray) -> SeedVariance:
    """s^2 of one arm's score across its seeds (one value per seed)."""
    return SeedVariance(float(np.var(per_seed, ddof=1)), len(per_seed) - 1) if len(per_seed) > 1 else SeedVariance(0.0, 0)


def arm_scores(matrices: Matrices, weights: dict[str, float]) -> np.ndarray:
    """One arm's score sum_t w_t mean_i x_{t,i}, one value per seed (row)."""
    return sum(w * matrices[t].mean(axis=1) for t, w in weights.items())


def task_pair(reference: np.ndarray, other: np.ndarray) -> TaskPair:
    """A task's seeds x documents matrices of two arms, the paired seeds as rows in the same order."""
    d = other - reference
    n = d.shape[1]
    return TaskPair(per_seed=d.mean(axis=1), documents=float(np.var(d.mean(axis=0), ddof=1)) / n if n > 1 else 0.0,
                    interaction=interaction_variance(d) / n, n=n)


def intervals(pairs: list[tuple[dict[str, TaskPair], dict[str, float], SeedVariance, SeedVariance]],
              level: float = LEVEL, bounds: bool = True) -> list[Interval]:
    """other − reference on the score sum_t w_t mean(task t), for many pairs and scores at once:
    each (its tasks' TaskPair, the task weights, the reference's and the other's seed variance of
    that score, which only a pair of one paired seed uses). `bounds=False` leaves low and high at
    nan (a simulation that needs only the p-values: the interval is the set of differences whose
    p-value exceeds 1 − level)."""
    difference, per_seed, documents, interaction, documents_df, seeds, seeds_df, known = ([] for _ in range(8))
    for tasks, weights, a, b in pairs:
        n_seeds = len(next(iter(tasks.values())).per_seed)
        per_seed.append(sum(w * tasks[t].per_seed for t, w in weights.items()))
        difference.append(float(np.mean(per_seed[-1])))
        parts = {t: w ** 2 * tasks[t].documents for t, w in weights.items()}
        den = sum(v ** 2 / (tasks[t].n - 1) for t, v in parts.items() if tasks[t].n > 1)
        documents.append(sum(parts.values()))
        documents_df.append(documents[-1] ** 2 / den if den > 0 else math.inf)
        measured = n_seeds > 1 or (a.df > 0 and b.df > 0)
        interaction.append(sum(w ** 2 * tasks[t].interaction for t, w in weights.items()) / n_seeds if measured else 0.0)
        if n_seeds > 1:  # the paired seed differences: a chi-square on S − 1, however noisy either arm
            seeds.append(float(np.var(per_seed[-1], ddof=1)) / n_seeds)
            seeds_df.append(n_seeds - 1.0)
        else:  # one paired seed: the variances named for its arms
            va, vb = (a.variance, b.variance) if measured else (0.0, 0.0)
            welch = va ** 2 / a.df + vb ** 2 / b.df if measured else 0.0
            seeds.append(va + vb)
            seeds_df.append((va + vb) ** 2 / welch if welch > 0 else math.inf)  # 0: none, or both stated
        known.append(measured)
    difference, documents, interaction, documents_df, seeds, seeds_df = map(
        np.array, (difference, documents, interaction, documents_df, seeds, seeds_df))
    se = np.sqrt(np.maximum(documents - interaction, 0) + np.maximum(seeds, interaction))
    varied = se > 0
    half, p = np.zeros(len(se)), np.ones(len(se))
    if varied.any():
        args = documents[varied], interaction[varied], documents_df[varied], seeds[varied], seeds_df[varied]
        p[varied] = tail_probability(np.abs(difference[varied]), *args)
        half[varied] = critical_difference(1 - level, *args) if bounds else np.nan
    out = []
    for i, d in enumerate(difference):
        sign = np.sign(d)
        out.append(Interval(
            difference=float(d), low=float(d - half[i]), high=float(d + half[i]), se=float(se[i]), p=float(p[i]),
            per_seed=[float(x) for x in per_seed[i]], seeds_agree=bool(sign != 0 and all(np.sign(per_seed[i]) == sign)),
            seed_part=float(max(seeds[i], interaction[i]) / se[i] ** 2) if se[i] > 0 else 0.0,
            var_documents=float(documents[i]), var_interaction=float(interaction[i]),
            df_documents=float(documents_df[i]) if documents[i] > 0 and np.isfinite(documents_df[i]) else None,
            var_seeds=float(seeds[i]), df_seeds=float(seeds_df[i]) if seeds[i] > 0 and np.isfinite(seeds_df[i]) else None,
            seeds_measured=known[i]))
    return out


def paired_interval(reference: Matrices, other: Matrices, weights: dict[str, float],
                    seeds: tuple[SeedVariance, SeedVariance], level: float = LEVEL) -> Interval:
    """other − reference on the score sum_t w_t mean(task t); both matrices of a task have the
    paired seeds as rows (in the same order) and the same documents as columns; `seeds`: the
    reference's and the other's seed variance of the score, what a single paired seed is decided
    against (named for it: another rung's, or stated)."""
    tasks = {t: task_pair(reference[t], other[t]) for t in weights}
    return intervals([(tasks, weights, *seeds)], level)[0]


# ---------------------------------------------------------------- the generalized interval, vectorised


def _factors(df: np.ndarray, table: np.ndarray) -> np.ndarray:
    """nu / W at every quadrature node of `table`: (len(df), nodes)."""
    x = np.log(np.clip(df, _DF_GRID[0], _DF_GRID[-1]))
    i = np.clip(np.searchsorted(_LOG_DF_GRID, x) - 1, 0, len(_DF_GRID) - 2)
    t = ((x - _LOG_DF_GRID[i]) / (_LOG_DF_GRID[i + 1] - _LOG_DF_GRID[i]))[:, None]
    return np.exp(table[i] * (1 - t) + table[i + 1] * t)


def fiducial_variances(documents, interaction, documents_df, seeds, seeds_df) -> np.ndarray:
    """Var(D) at every pair of quadrature nodes, (n, document nodes x seed nodes), their weights
    `NODE_WEIGHTS`. The documents' part is its estimate (interaction included) taken up or down by
    its fiducial factor, less the interaction (measured on many more degrees of freedom: as known),
    never below zero; the seeds' part its estimate by its own factor, never below the interaction
    it holds (two seeds of a 0/1 benchmark can tie exactly, and then var_s(d_s) is 0)."""
    as_array = (np.asarray(a, dtype=float) for a in (documents, interaction, documents_df, seeds, seeds_df))
    documents, interaction, documents_df, seeds, seeds_df = as_array
    part = np.maximum(documents[:, None] * _factors(documents_df, _DOCUMENT_FACTORS) - interaction[:, None], 0.0)
    seeds_part = np.maximum(seeds[:, None] * _factors(seeds_df, _SEED_FACTORS), interaction[:, None])
    return (part[:, :, None] + seeds_part[:, None, :]).reshape(len(documents), -1)


def _scales(*parts) -> np.ndarray:
    """1 / sqrt(2 Var(D)) at every pair of quadrature nodes."""
    with np.errstate(divide="ignore"):
        return 1 / np.sqrt(2 * fiducial_variances(*parts))


NODE_WEIGHTS = np.outer(_DOCUMENT_WEIGHTS, _SEED_WEIGHTS).ravel()


def _tail(x: np.ndarray, scales: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        z = x[:, None] * scales
    np.copyto(z, 0.0, where=np.isnan(z))  # 0 x inf: no variance at a node, x = 0 (erfc takes the infinities)
    return special.erfc(z) @ NODE_WEIGHTS


def tail_probability(x, documents, interaction, documents_df, seeds, seeds_df) -> np.ndarray:
    """P(|D − delta| >= x): the two-sided p-value of a difference x from delta. `documents`: the
    documents' part of Var(D) as measured, interaction included, on `documents_df` degrees of
    freedom; `interaction`: what of it is counted with the seeds instead; `seeds`: the seeds' part,
    on `seeds_df` degrees of freedom. Arrays of one length, x > 0."""
    return _tail(np.asarray(x, dtype=float), _scales(documents, interaction, documents_df, seeds, seeds_df))


def critical_difference(alpha: float, documents, interaction, documents_df, seeds, seeds_df,
                        tolerance: float = 1e-10) -> np.ndarray:
    """The x with `tail_probability(x, ...)` = alpha: the half-width of the 1 − alpha interval, and
    the smallest |difference| whose p-value is alpha or less (same arguments; `tolerance`: on
    log p)."""
    scales = _scales(documents, interaction, documents_df, seeds, seeds_df)
    interaction = np.asarray(interaction, float)
    se = np.sqrt(np.maximum(np.asarray(documents, float) - interaction, 0) + np.maximum(np.asarray(seeds, float), interaction))

    def g(log_x: np.ndarray, rows: np.ndarray) -> np.ndarray:
        return np.log(np.maximum(_tail(np.exp(log_x), scales[rows]), 1e-300)) - math.log(alpha)

    every = np.arange(len(se))
    # a bracket: p above alpha at lo, below at hi, each moved by factors of 2 until it holds
    lo = np.log(stats.norm.isf(alpha / 2) * se)
    f_lo = g(lo, every)
    hi = lo + math.log(2)
    f_hi = g(hi, every)
    for _ in range(200):
        down, up = f_lo < 0, f_hi > 0
        if not (down.any() or up.any()):
            break
        lo[down] -= math.log(2)
        f_lo[down] = g(lo[down], every[down])
        lo[up], f_lo[up] = hi[up], f_hi[up]
        hi[up] += math.log(2)
        f_hi[up] = g(hi[up], every[up])
    # Illinois (regula falsi that halves the stale end) on log x
    a, fa, b, fb = lo, f_lo, hi, f_hi
    active = np.abs(fb) > tolerance
    for _ in range(100):
        if not active.any():
            break
        rows = np.flatnonzero(active)
        c = b[rows] - fb[rows] * (b[rows] - a[rows]) / (fb[rows] - fa[rows])
        fc = g(c, rows)
        flip = fc * fb[rows] < 0
        a[rows[flip]], fa[rows[flip]] = b[rows[flip]], fb[rows[flip]]
        fa[rows[~flip]] /= 2
        b[rows], fb[rows] = c, fc
        active[rows] = (np.abs(fc) > tolerance) & (np.abs(b[rows] - a[rows]) > 1e-12)
    return np.exp(b)


def holm(pvalues: list[float]) -> list[float]:
    """Holm's step-down adjustment: family-wise error at most alpha over all the tests given."""
    order = sorted(range(len(pvalues)), key=lambda i: pvalues[i])
    adjusted, running = [0.0] * len(pvalues), 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(pvalues) - rank) * pvalues[i]))
        adjusted[i] = running
    return adjusted


def decidable_beyond(interval: dict, alpha: float) -> float:
    """The smallest |difference| whose p-value is alpha or less with an interval's (`to_json()`)
    noise: what a table that tests at alpha can call a result at this run's size."""
    return float(critical_difference(alpha, [interval["var_documents"]], [interval["var_interaction"]],
                                     [interval["df_documents"] or math.inf], [interval["var_seeds"]],
                                     [interval["df_seeds"] or math.inf])[0])
