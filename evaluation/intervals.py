"""Paired differences between two arms and their 95% intervals, sound with two or three seeds.

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
seeds. The seeds' part is 2 s^2 / S, with s^2 the variance of an arm's score across its seeds,
pooled over every arm of the run (`seed_variance`: with 2-3 seeds one pair of arms says almost
nothing about it), which holds the seed shift and again the interaction (over n documents).
So the interaction is counted once, on the seeds' side: the documents' part loses the pair's
own interaction, sum_t w_t^2 (sigma_int,ref^2 + sigma_int,other^2) / (n_t S), each sigma_int^2 the
residual mean square of the arm's seeds x documents two-way layout. s^2 is taken on the score
itself, so a seed that moves every benchmark together counts in the average's variance. Each
arm's seed shift is taken as independent of the other's: seeds paired across arms can only make
the true variance smaller, so the interval errs wide.

The interval is D ± t_{0.975, df} sqrt(Var(D)), with Satterthwaite's degrees of freedom from the
documents' part (Welch over tasks) and the seeds' (the pooled seeds − 1 of the arms). With one
seed per arm the seeds' part is unknown and left out (the interval covers the documents alone,
and the report says so). A seeded simulation (tests/test_intervals.py) checks coverage near 95%
with 2 and 3 seeds, small and large seed noise.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np
from scipy import stats

LEVEL = 0.95

Matrices = dict[str, np.ndarray]  # task -> seeds x documents, the same documents in every row


@dataclass(frozen=True)
class SeedVariance:
    """The variance of one weighted score across an arm's seeds, pooled over arms, and its degrees
    of freedom (0: no arm has two seeds)."""

    variance: float
    df: int


@dataclass(frozen=True)
class Interval:
    difference: float
    low: float
    high: float
    se: float
    df: float
    p: float  # two-sided, against no difference
    per_seed: list[float]  # the difference within each paired seed
    seeds_agree: bool  # every seed's difference has the sign of the mean (and none is zero)
    seed_part: float  # the share of Var(D) that training seeds make

    @property
    def resolved(self) -> bool:
        """The interval excludes zero (an interval of no width, from no measured variation, never does)."""
        return self.se > 0 and (self.low > 0 or self.high < 0)

    def to_json(self) -> dict:
        return asdict(self) | {"resolved": self.resolved}


def is_result(interval: dict) -> bool:
    """A difference the run resolves (an `Interval.to_json()`): its interval excludes zero and every
    seed agrees in sign."""
    return interval["resolved"] and interval["seeds_agree"]


def interaction_variance(x: np.ndarray) -> float:
    """sigma^2 of the seed-by-document interaction of one arm's seeds x documents matrix: the
    residual mean square of the two-way layout (0 with one seed or one document)."""
    seeds, docs = x.shape
    if seeds < 2 or docs < 2:
        return 0.0
    residual = x - x.mean(axis=1, keepdims=True) - x.mean(axis=0, keepdims=True) + x.mean()
    return float((residual ** 2).sum() / ((seeds - 1) * (docs - 1)))


def seed_variance(arms: list[Matrices], weights: dict[str, float]) -> SeedVariance:
    """s^2 of the score sum_t w_t mean_i x_{t,i} across seeds, pooled over arms (each arm: task ->
    its seeds x documents matrix); arms with one seed add nothing."""
    total, df = 0.0, 0
    for matrices in arms:
        seeds = len(next(iter(matrices.values())))
        if seeds > 1:
            score = sum(w * matrices[t].mean(axis=1) for t, w in weights.items())  # one value per seed
            total += (seeds - 1) * float(np.var(score, ddof=1))
            df += seeds - 1
    return SeedVariance(total / df if df else 0.0, df)


def paired_interval(reference: Matrices, other: Matrices, weights: dict[str, float], seeds: SeedVariance,
                    level: float = LEVEL) -> Interval:
    """other − reference on the score sum_t w_t mean(task t); both matrices of a task have the
    paired seeds as rows (in the same order) and the same documents as columns."""
    n_seeds = len(next(iter(reference.values())))
    difference, per_seed = 0.0, np.zeros(n_seeds)
    doc_var, doc_df_den, interaction = 0.0, 0.0, 0.0
    for task, w in weights.items():
        d = other[task] - reference[task]  # seeds x documents
        n = d.shape[1]
        difference += w * float(d.mean())
        per_seed += w * d.mean(axis=1)
        if n > 1:
            v = w ** 2 * float(np.var(d.mean(axis=0), ddof=1)) / n
            doc_var += v
            doc_df_den += v ** 2 / (n - 1)
        interaction += w ** 2 * (interaction_variance(reference[task]) + interaction_variance(other[task])) / n
    seed_var = 2 * seeds.variance / n_seeds if seeds.df else 0.0
    documents = max(0.0, doc_var - interaction / n_seeds) if seeds.df else doc_var
    var = documents + seed_var
    se = math.sqrt(var)
    # the documents' degrees of freedom are Welch's over tasks, scaled with what is left of their part
    den = (doc_df_den * (documents / doc_var) ** 2 if doc_var else 0.0) + (seed_var ** 2 / seeds.df if seeds.df else 0.0)
    df = var ** 2 / den if den > 0 else math.inf
    if se > 0:
        half = float(stats.t.ppf(0.5 + level / 2, df)) * se
        p = float(2 * stats.t.sf(abs(difference) / se, df))
    else:  # no variation measured (one document and one seed, or every one the same): nothing to judge it by
        half, p = 0.0, 1.0
    sign = np.sign(difference)
    return Interval(difference=difference, low=difference - half, high=difference + half, se=se, df=df, p=p,
                    per_seed=[float(x) for x in per_seed],
                    seeds_agree=bool(sign != 0 and all(np.sign(per_seed) == sign)),
                    seed_part=seed_var / var if var > 0 else 0.0)


def holm(pvalues: list[float]) -> list[float]:
    """Holm's step-down adjustment: family-wise error at most alpha over all the tests given."""
    order = sorted(range(len(pvalues)), key=lambda i: pvalues[i])
    adjusted, running = [0.0] * len(pvalues), 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(pvalues) - rank) * pvalues[i]))
        adjusted[i] = running
    return adjusted
