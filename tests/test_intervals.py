"""The paired interval: coverage in a seeded simulation (2 and 3 seeds, small or large seed noise,
one arm noisier), the generalized interval against exact t quantiles, the tails a corrected table
reads, and Holm's adjustment on a hand example."""

import math

import numpy as np
import pytest
from scipy import stats

from evaluation.family_report import compare_arms
from evaluation.metrics import Family
from evaluation.statistics.intervals import (
    SeedVariance,
    TaskPair,
    arm_scores,
    critical_difference,
    holm,
    interaction_variance,
    intervals,
    paired_interval,
    seed_variance,
    tail_probability,
)
from evaluation.statistics.noise import studentised_range_quantile

ARMS, BENCHMARKS, DOCUMENTS = 5, 13, 100
EFFECT = 0.02  # arm 1 answers 2 points more often than arm 0, on every benchmark


def simulate(rng, seeds: int, seed_common: float, seed_own: float, noisier: float = 1.0) -> list[dict[str, np.ndarray]]:
    """Per arm: benchmark -> seeds x documents of 0/1 answers. A document's chance of being right
    is its difficulty (drawn anew each experiment), plus the arm's effect, plus the arm's own
    leaning on that document (fixed across seeds), plus the seed's shift: one part moves every
    benchmark of the arm together (`seed_common`), one part each benchmark alone (`seed_own`);
    arm 1's shifts are `noisier` times the others'."""
    difficulty = rng.uniform(0.2, 0.8, size=(BENCHMARKS, DOCUMENTS))
    arms = []
    for arm in range(ARMS):
        scale = noisier if arm == 1 else 1.0
        leaning = rng.normal(0, 0.05, size=(BENCHMARKS, DOCUMENTS))
        shift = scale * (rng.normal(0, seed_common, size=(seeds, 1)) + rng.normal(0, seed_own, size=(seeds, BENCHMARKS)))
        p = difficulty[None] + leaning[None] + shift[:, :, None] + (EFFECT if arm == 1 else 0.0)
        answers = (rng.random(p.shape) < np.clip(p, 0, 1)).astype(float)  # seeds x benchmarks x documents
        arms.append({f"b{b}": answers[:, b, :] for b in range(BENCHMARKS)})
    return arms


def interval(reference, other, weights):
    return paired_interval(reference, other, weights,
                           (seed_variance(arm_scores(reference, weights)), seed_variance(arm_scores(other, weights))))


@pytest.mark.parametrize("seeds", [2, 3])
@pytest.mark.parametrize("seed_common,seed_own,noisier", [(0.0, 0.002, 1.0), (0.015, 0.01, 1.0), (0.015, 0.01, 3.0)],
                         ids=["small seed noise", "large seed noise", "arm 1 3x noisier"])
@pytest.mark.slow
def test_interval_covers_the_true_difference_at_the_nominal_rate(seeds, seed_common, seed_own, noisier):
    rng = np.random.default_rng(1000 * seeds + int(1e4 * seed_common) + int(noisier))
    average = {f"b{b}": 1 / BENCHMARKS for b in range(BENCHMARKS)}
    single = {"b0": 1.0}
    covered = {"average": 0, "one benchmark": 0}
    experiments = 300
    for _ in range(experiments):
        arms = simulate(rng, seeds, seed_common, seed_own, noisier)
        for name, weights in (("average", average), ("one benchmark", single)):
            i = interval(arms[0], arms[1], weights)
            covered[name] += i.low <= EFFECT <= i.high
    for name, hits in covered.items():
        assert 0.93 <= hits / experiments <= 1.0, (name, hits / experiments)


def test_the_generalized_interval_is_a_t_where_one_part_is_all_the_noise():
    for df in (1, 2, 3, 7.5, 40):
        for alpha in (0.05, 0.05 / 16, 0.05 / 130):
            exact = stats.t.isf(alpha / 2, df)
            seeds_only = critical_difference(alpha, [0.0], [0.0], [1.0], [1.0], [df])[0]
            documents_only = critical_difference(alpha, [1.0], [0.0], [df], [0.0], [1.0])[0]
            # 1 degree of freedom at 0.05/130 is a t of quantile 1,655: resolved to 3%; the documents'
            # part has fewer nodes, and 2 degrees of freedom or (many) more: a task has 3 documents or more
            assert seeds_only == pytest.approx(exact, rel=0.03 if df == 1 else 2e-3)
            if df > 1:
                assert documents_only == pytest.approx(exact, rel=0.05 if df == 2 else 5e-3)
            assert tail_probability([seeds_only], [0.0], [0.0], [1.0], [1.0], [df])[0] == pytest.approx(alpha, rel=1e-6)


@pytest.mark.parametrize("documents_share", [0.03, 0.3, 3.0])
@pytest.mark.slow
def test_tails_stay_at_most_nominal_where_seeds_measured_on_two_degrees_of_freedom_dominate(documents_share):
    """Satterthwaite's t had 2-6x nominal tails here: a seed variance small by chance raised its
    degrees of freedom too. The generalized p-value may be conservative, never liberal."""
    rng = np.random.default_rng(7)
    n, df, documents_df = 100_000, 2, 300
    d = rng.normal(0, np.sqrt(documents_share + 1), n)  # the seeds' part is 1
    documents = documents_share * rng.chisquare(documents_df, n) / documents_df
    seeds = rng.chisquare(df, n) / df
    p = tail_probability(np.abs(d), documents, np.zeros(n), np.full(n, documents_df), seeds, np.full(n, df))
    for alpha in (0.05, 0.05 / 16):
        assert np.mean(p < alpha) <= 1.25 * alpha, (alpha, np.mean(p < alpha) / alpha)


def test_variances_and_interval_match_a_hand_computation():
    ref = np.array([[1.0, 0.0, 1.0], [0.0, 0.0, 1.0]])  # 2 seeds x 3 documents
    # residuals x - row means - column means + grand mean: [[1/3, -1/6, -1/6], [-1/3, 1/6, 1/6]]
    assert interaction_variance(ref) == pytest.approx((2 * (1 / 9) + 4 * (1 / 36)) / 2)  # 1/6
    # the other arm: the reference shifted by seed (+0.5, +0.1): every document moves alike, so the
    # documents' part is zero and the interval is a t on the seeds' part alone
    other = ref + np.array([[0.5], [0.1]])
    assert interaction_variance(other) == pytest.approx(1 / 6)
    seeds = seed_variance(arm_scores({"t": ref}, {"t": 1.0})), seed_variance(arm_scores({"t": other}, {"t": 1.0}))
    # seed means 2/3, 1/3 (variance 1/18) and 7/6, 13/30 (variance 0.269...), one degree of freedom each
    assert seeds[0].df == seeds[1].df == 1 and seeds[0].variance == pytest.approx(1 / 18)
    assert seeds[1].variance == pytest.approx(np.var([7 / 6, 13 / 30], ddof=1))
    i = paired_interval({"t": ref}, {"t": other}, {"t": 1.0}, seeds)
    # the seeds' part is the paired seed differences' (0.5, 0.1): variance 0.08 over 2 seeds, one degree
    # of freedom; the reference's own seed variation, which the other arm shares, cancels in them
    assert i.difference == pytest.approx(0.3) and i.se == pytest.approx(0.2)
    assert i.var_documents == pytest.approx(0, abs=1e-20) and i.var_interaction == pytest.approx(0, abs=1e-20)
    assert i.df_seeds == pytest.approx(1) and i.seed_part == pytest.approx(1.0)
    assert i.high == pytest.approx(0.3 + stats.t.isf(0.025, 1) * 0.2, rel=2e-3)  # the quadrature at 1 df
    assert i.per_seed == pytest.approx([0.5, 0.1]) and i.seeds_agree
    assert i.p == pytest.approx(2 * stats.t.sf(1.5, 1), rel=2e-3)


def test_one_seed_with_a_stated_seed_variance_takes_it_as_known():
    reference = {"t": np.array([[0.0, 1.0, 0.0, 1.0]])}
    other = {"t": reference["t"] + 0.5}  # every document shifted alike: no documents' noise
    stated = SeedVariance(0.01, math.inf, "stated in evaluation.seed_sd")
    i = paired_interval(reference, other, {"t": 1.0}, (stated, stated))
    assert i.seeds_measured and i.var_seeds == pytest.approx(0.02) and i.df_seeds is None
    assert i.high == pytest.approx(0.5 + stats.norm.isf(0.025) * math.sqrt(0.02), rel=1e-3)


def test_the_floor_is_the_range_with_known_noise_and_rises_with_the_arms_own_spread():
    r = np.ptp(np.random.default_rng(0).standard_normal((200_000, 5)), axis=1)
    # the seeds' noise stated (known) and no documents' part: the range of 5 normal draws over sqrt(2) of one
    stated = [SeedVariance(1.0, math.inf)] * 5
    assert studentised_range_quantile(0.95, 0.0, stated, [1] * 5, [0.0] * 5) == pytest.approx(
        np.quantile(r, 0.95) / math.sqrt(2), rel=0.02)
    # the documents alone, likewise
    assert studentised_range_quantile(0.95, 1.0, [SeedVariance(0.0, 1)] * 5, [2] * 5, [0.0] * 5) == pytest.approx(
        np.quantile(r, 0.95) / math.sqrt(2), rel=0.02)
    # each seed variance on one degree of freedom: arms' means spread far apart say the noise is larger than the
    # seeds measured, and the floor rises (where it is not measured twice, as the seeds' own estimate is)
    one = [SeedVariance(1.0, 1)] * 5
    close, far = (studentised_range_quantile(0.95, 0.1, one, [2] * 5, [0.0, 0.1, 0.2, 0.3, s]) for s in (0.4, 10.0))
    assert far > close


def test_interval_with_one_seed_covers_the_documents_alone():
    reference = {"t": np.array([[0.0, 1.0, 0.0, 1.0]])}
    other = {"t": np.array([[1.0, 1.0, 1.0, 1.0]])}
    i = interval(reference, other, {"t": 1.0})
    assert i.difference == 0.5 and i.seed_part == 0 and i.df_documents == pytest.approx(3) and i.df_seeds is None
    assert i.se == pytest.approx(np.sqrt(np.var([1, 0, 1, 0], ddof=1) / 4))
    assert i.high == pytest.approx(0.5 + stats.t.isf(0.025, 3) * i.se, rel=1e-4)
    assert i.seeds_agree and i.per_seed == [0.5] and not i.seeds_measured


def test_the_bounds_are_where_the_p_value_crosses_five_percent():
    rng = np.random.default_rng(3)
    arms = simulate(rng, 3, 0.015, 0.01)
    i = interval(arms[0], arms[2], {f"b{b}": 1 / BENCHMARKS for b in range(BENCHMARKS)})
    parts = [i.var_documents], [i.var_interaction], [i.df_documents], [i.var_seeds], [i.df_seeds]
    assert tail_probability([i.high - i.difference], *parts)[0] == pytest.approx(0.05, rel=1e-6)
    assert i.high - i.difference == pytest.approx(i.difference - i.low)


def test_no_measured_variation_is_never_a_result():
    reference, other = {"t": np.array([[0.0]])}, {"t": np.array([[1.0]])}  # one document, one seed
    i = interval(reference, other, {"t": 1.0})
    assert i.difference == 1.0 and i.se == 0 and i.p == 1.0 and not i.resolved


def test_holm_adjusts_step_down():
    assert holm([0.01, 0.04, 0.03, 0.5]) == pytest.approx([0.04, 0.09, 0.09, 0.5])


def test_the_noisier_arms_pairs_cover_at_the_nominal_rate_where_seeds_are_all_the_noise():
    """One arm's seed variance 30x the other's at 3 seeds, no documents' noise: Welch's degrees of
    freedom from the two arms' estimates covered 0.940 here; the paired seed differences are a t on 2."""
    rng = np.random.default_rng(30)
    runs, seeds = 6000, 3
    reference = rng.normal(0, 1, (runs, seeds))
    other = rng.normal(0, math.sqrt(30), (runs, seeds))
    known = SeedVariance(1.0, 2)  # what each arm's own seeds say is not used with two paired seeds or more
    batch = [({"t": TaskPair(per_seed=other[r] - reference[r], documents=0.0, interaction=0.0, n=100)}, {"t": 1.0},
              known, known) for r in range(runs)]
    found = intervals(batch, bounds=False)
    assert all(i.df_seeds == 2 for i in found)
    # the true difference is 0: each interval's p-value is its p-value at the truth
    assert np.mean([i.p > 0.05 for i in found]) == pytest.approx(0.95, abs=0.009)  # 3 Monte Carlo standard errors


def _one_task_family() -> Family:
    return Family("f", "f", False, 1, "units", units={"u": {"t": 1.0}}, keys={"u": "f"},
                  columns={"average": {"u": 1.0}}, column_titles={"average": "average"})


@pytest.mark.parametrize("seeds_a,seeds_b,paired", [([1, 2, 3], [1, 2], [1, 2]), ([3, 1, 2], [2, 3], [2, 3]),
                                                    ([1, 2], [2, 3], [2]), ([1], [2], [])],
                         ids=["3 seeds and 2", "listed in another order", "one seed in common", "none in common"])
def test_arms_on_different_seed_lists_are_paired_by_seed_number(seeds_a, seeds_b, paired):
    """Every seed's row of a task's matrix holds the seed's number 10 x s, plus 1 in arm b: a pair
    matched by row position instead of by seed number would show a seed difference other than 1."""
    rng = np.random.default_rng(5)
    docs = rng.normal(0, 1, 40)

    def matrix(seeds: list[int], plus: float) -> np.ndarray:
        return np.array([10.0 * s + plus + docs + rng.normal(0, 0.1, 40) for s in seeds])

    matrices = {"a": {"t": matrix(seeds_a, 0.0)}, "b": {"t": matrix(seeds_b, 1.0)}}
    pair = compare_arms(_one_task_family(), matrices, {"a": seeds_a, "b": seeds_b})["pairs"]["b − a"]
    assert pair["seeds"] == paired
    if not paired:
        assert pair["not_compared"].startswith("no seed in common") and pair["columns"] == {}
        return
    cell = pair["columns"]["average"]
    assert cell["seeds"] == paired and cell["per_seed"] == pytest.approx([1.0] * len(paired), abs=0.1)
    assert cell["low"] <= 1.0 <= cell["high"] and cell["seeds_measured"]
    if len(paired) > 1:  # the paired seed differences, on S − 1
        assert cell["df_seeds"] == len(paired) - 1 and cell["var_seeds"] < 1e-3
    else:  # one paired seed: each arm's own seed variance over all its seeds (10 x s apart), on Welch's
        assert cell["var_seeds"] == pytest.approx(2 * 50, rel=0.02) and 1 <= cell["df_seeds"] <= 2


def test_two_seeds_that_tie_on_a_binary_benchmark_keep_the_interaction_they_hold():
    """Two seeds of 0/1 answers whose pair differences come out equal (a tie of two means on a grid of
    1 / n, common on small benchmarks): var_s(d_s) is 0, but the seeds' part still holds the
    seed-by-document interaction, measured on the documents. The difference is then decided on the
    documents' part with the interaction in it, not on what is left once the interaction is taken out."""
    rng = np.random.default_rng(8)
    n, p = 100, rng.uniform(0.25, 0.75, 100)
    reference, other = ((rng.random((2, n)) < p).astype(float) for _ in range(2))
    # make seed 2's difference equal seed 1's: move answers of the other arm's seed 2 until the means tie
    gap = int(round(n * ((other[0] - reference[0]).mean() - (other[1] - reference[1]).mean())))
    flip = np.flatnonzero(other[1] == (0 if gap > 0 else 1))[:abs(gap)]
    other[1, flip] = 1 - other[1, flip]
    i = paired_interval({"t": reference}, {"t": other}, {"t": 1.0}, (SeedVariance(0.0, 1), SeedVariance(0.0, 1)))
    assert i.per_seed[0] == pytest.approx(i.per_seed[1]) and i.var_seeds == pytest.approx(0, abs=1e-15)
    assert i.var_interaction > 0.5 * i.var_documents  # the documents' part is mostly the interaction
    assert i.se == pytest.approx(math.sqrt(i.var_documents))
    assert i.p == pytest.approx(2 * stats.norm.sf(abs(i.difference) / i.se), rel=0.05)
