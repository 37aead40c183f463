"""The paired interval's coverage in a seeded simulation, with 2 and 3 seeds and small or large
seed noise, and Holm's adjustment on a hand example."""

import numpy as np
import pytest

from evaluation.intervals import holm, interaction_variance, paired_interval, seed_variance

ARMS, BENCHMARKS, DOCUMENTS = 5, 13, 100
EFFECT = 0.02  # arm 1 answers 2 points more often than arm 0, on every benchmark


def simulate(rng, seeds: int, seed_common: float, seed_own: float) -> list[dict[str, np.ndarray]]:
    """Per arm: benchmark -> seeds x documents of 0/1 answers. A document's chance of being right
    is its difficulty (drawn anew each experiment), plus the arm's effect, plus the arm's own
    leaning on that document (fixed across seeds), plus the seed's shift: one part moves every
    benchmark of the arm together (`seed_common`), one part each benchmark alone (`seed_own`)."""
    difficulty = rng.uniform(0.2, 0.8, size=(BENCHMARKS, DOCUMENTS))
    arms = []
    for arm in range(ARMS):
        leaning = rng.normal(0, 0.05, size=(BENCHMARKS, DOCUMENTS))
        shift = rng.normal(0, seed_common, size=(seeds, 1)) + rng.normal(0, seed_own, size=(seeds, BENCHMARKS))
        p = difficulty[None] + leaning[None] + shift[:, :, None] + (EFFECT if arm == 1 else 0.0)
        answers = (rng.random(p.shape) < np.clip(p, 0, 1)).astype(float)  # seeds x benchmarks x documents
        arms.append({f"b{b}": answers[:, b, :] for b in range(BENCHMARKS)})
    return arms


@pytest.mark.parametrize("seeds", [2, 3])
@pytest.mark.parametrize("seed_common,seed_own", [(0.0, 0.002), (0.015, 0.01)], ids=["small seed noise", "large seed noise"])
def test_interval_covers_the_true_difference_at_the_nominal_rate(seeds, seed_common, seed_own):
    rng = np.random.default_rng(1000 * seeds + int(1e4 * seed_common))
    average = {f"b{b}": 1 / BENCHMARKS for b in range(BENCHMARKS)}
    single = {"b0": 1.0}
    covered = {"average": 0, "one benchmark": 0}
    experiments = 400
    for _ in range(experiments):
        arms = simulate(rng, seeds, seed_common, seed_own)
        for name, weights in (("average", average), ("one benchmark", single)):
            interval = paired_interval(arms[0], arms[1], weights, seed_variance(arms, weights))
            covered[name] += interval.low <= EFFECT <= interval.high
    for name, hits in covered.items():
        assert 0.92 <= hits / experiments <= 0.985, (name, hits / experiments)


def test_variances_and_interval_match_a_hand_computation():
    ref = np.array([[1.0, 0.0, 1.0], [0.0, 0.0, 1.0]])  # 2 seeds x 3 documents
    # residuals x - row means - column means + grand mean: [[1/3, -1/6, -1/6], [-1/3, 1/6, 1/6]]
    assert interaction_variance(ref) == pytest.approx((2 * (1 / 9) + 4 * (1 / 36)) / 2)  # 1/6
    other = np.array([[1.0, 1.0, 1.0], [1.0, 0.0, 1.0]])  # seed means 1, 2/3; residuals +-1/6, +-1/3, 0
    assert interaction_variance(other) == pytest.approx(1 / 6)
    # seed means 2/3, 1/3 (variance 1/18) and 1, 2/3 (1/18): pooled over 2 degrees of freedom
    seeds = seed_variance([{"t": ref}, {"t": other}], {"t": 1.0})
    assert seeds.df == 2 and seeds.variance == pytest.approx(1 / 18)
    interval = paired_interval({"t": ref}, {"t": other}, {"t": 1.0}, seeds)
    # seed-mean differences per document: 1/2, 1/2, 0 (variance 1/12, over 3 documents: 1/36);
    # less the interaction (1/6 + 1/6) / (3 documents x 2 seeds) = 1/18: nothing left of the documents;
    # seeds: 2 x 1/18 / 2 = 1/18 on 2 degrees of freedom
    assert interval.difference == pytest.approx(1 / 3) and interval.se == pytest.approx(np.sqrt(1 / 18))
    assert interval.df == pytest.approx(2) and interval.seed_part == pytest.approx(1.0)
    assert interval.high == pytest.approx(1 / 3 + 4.302653 * np.sqrt(1 / 18), abs=1e-5)
    assert interval.per_seed == pytest.approx([1 / 3, 1 / 3]) and interval.seeds_agree


def test_interval_with_one_seed_covers_the_documents_alone():
    reference = {"t": np.array([[0.0, 1.0, 0.0, 1.0]])}
    other = {"t": np.array([[1.0, 1.0, 1.0, 1.0]])}
    interval = paired_interval(reference, other, {"t": 1.0}, seed_variance([reference, other], {"t": 1.0}))
    assert interval.difference == 0.5 and interval.seed_part == 0 and interval.df == pytest.approx(3)
    assert interval.se == pytest.approx(np.sqrt(np.var([1, 0, 1, 0], ddof=1) / 4))
    assert interval.seeds_agree and interval.per_seed == [0.5]


def test_no_measured_variation_is_never_a_result():
    reference, other = {"t": np.array([[0.0]])}, {"t": np.array([[1.0]])}  # one document, one seed
    interval = paired_interval(reference, other, {"t": 1.0}, seed_variance([reference, other], {"t": 1.0}))
    assert interval.difference == 1.0 and interval.se == 0 and interval.p == 1.0 and not interval.resolved


def test_holm_adjusts_step_down():
    assert holm([0.01, 0.04, 0.03, 0.5]) == pytest.approx([0.04, 0.09, 0.09, 0.5])
