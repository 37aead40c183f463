"""The minimum detectable difference against hand computations: assumed noise on made-up item
counts, the two explicit parameters, and noise measured from a hand-made run."""

import math

import numpy as np
import pytest

from configs.experiment import ExperimentConfig
from conftest import metric_samples, pretrain_experiment, write_eval_run
from evaluation import power
from evaluation.power import PowerAssumptions, UnitNoise, column_variance, minimum_detectable_differences
from evaluation.suite import Suite, load_suite

Z = 1.959964 + 0.841621  # two-sided 95% + 80% power

SUITE = Suite.model_validate({"headline": "standard", "benchmarks": [
    {"name": "A", "category": "knowledge", "tasks": ["a"], "score": "acc", "chance": 0.25, "items": [100]},
    {"name": "B", "category": "knowledge", "tasks": ["b1", "b2"], "score": "acc", "chance": 0.25, "items": [200, 50]},
    {"name": "C", "category": "reasoning", "tasks": ["c"], "score": "acc", "chance": 0.5, "items": [400]},
    {"name": "D", "category": "reading", "tasks": ["d"], "score": "acc", "chance": 0.0, "items": [25]},
]})


def test_mdd_matches_a_hand_computation():
    items = {b.name: b.items for b in SUITE.benchmarks}
    mdd = minimum_detectable_differences(items, SUITE, seeds=4, a=PowerAssumptions(0.5, 0.5, 0.01))
    # item variance of a task: 2 x 0.5 x 0.5 x (1 - 0.5) / n = 0.25 / n; B is the mean of two tasks
    a, b, c, d = 0.25 / 100, (0.25 / 200 + 0.25 / 50) / 4, 0.25 / 400, 0.25 / 25
    seed = 2 * 0.01 ** 2 / 4
    assert mdd["average"] == pytest.approx(Z * math.sqrt((a + b + c + d) / 16 + seed / 4))
    assert mdd["knowledge"] == pytest.approx(Z * math.sqrt((a + b) / 4 + seed / 2))
    assert mdd["reading"] == pytest.approx(Z * math.sqrt(d + seed))
    assert mdd["B"] == pytest.approx(Z * math.sqrt(b + seed))
    assert mdd["average"] == pytest.approx(0.0854574, abs=1e-6)


def test_seed_by_document_share_and_seed_correlation_are_explicit():
    items = {b.name: b.items for b in SUITE.benchmarks}
    mdd = minimum_detectable_differences(items, SUITE, seeds=4, a=PowerAssumptions(0.5, 0.5, 0.01, 0.6, 0.5))
    # 60% of a document's paired variance is redrawn by each seed: x (0.4 + 0.6 / 4)
    a, b, c, d = (v * (0.4 + 0.6 / 4) for v in (0.25 / 100, (0.25 / 200 + 0.25 / 50) / 4, 0.25 / 400, 0.25 / 25))
    # four benchmarks' seed shifts correlated by 0.5: var of their mean = sigma^2 (1 + 3 x 0.5) / 4
    seed = 2 * 0.01 ** 2 / 4 * (1 + 3 * 0.5) / 4
    assert mdd["average"] == pytest.approx(Z * math.sqrt((a + b + c + d) / 16 + seed))


def test_more_seeds_and_items_shrink_the_mdd_and_offline_items_are_used(tmp_path):
    raw = pretrain_experiment(tmp_path, evaluation={"tasks": "offline", "offline_items": 40})
    config = ExperimentConfig.model_validate(raw)
    assert set(n for ns in power.task_items(config, load_suite()).values() for n in ns) == {40}
    few = power.power_report(config)["mdd"]["average"]
    raw["pretrain"]["seeds"] = [1, 2, 3, 4, 5]
    raw["evaluation"] = {"tasks": "hub"}
    many = power.power_report(ExperimentConfig.model_validate(raw))
    assert many["mdd"]["average"] < few and many["items"]["COPA"] == [100]


def test_column_variance_on_made_up_noise():
    units = {"x": {"x1": 1.0}, "y": {"y1": 0.5, "y2": 0.5}}
    items = {"x1": 10, "y1": 20, "y2": 40}
    noise = {"x": UnitNoise(0.2, 0.25, 0.5, 0.03), "y": UnitNoise(0.1, 0.5, 0.0, 0.01)}
    var = column_variance({"x": 0.5, "y": 0.5}, units, items, noise, seed_correlation=0.4, seeds=3)
    docs_x = 2 * 0.2 * 0.75 / 10 * (0.5 + 0.5 / 3)
    docs_y = 0.25 * (2 * 0.1 * 0.5 / 20 + 2 * 0.1 * 0.5 / 40)
    seeds = 2 / 3 * (0.25 * 0.03 ** 2 + 0.25 * 0.01 ** 2 + 2 * 0.4 * 0.5 * 0.03 * 0.5 * 0.01)
    assert var == pytest.approx(0.25 * docs_x + 0.25 * docs_y + seeds)
    # a column's own measured seed variance, where given, replaces the one built from the units'
    measured = column_variance({"x": 0.5, "y": 0.5}, units, items, noise, seed_correlation=0.4, seeds=3, seed_variance=0.002)
    assert measured == pytest.approx(0.25 * docs_x + 0.25 * docs_y + 2 * 0.002 / 3)


def test_power_from_a_run_equals_a_hand_computation(tmp_path):
    raw = pretrain_experiment(tmp_path, evaluation={"tasks": "offline"})
    raw["pretrain"]["seeds"] = [1, 2]
    config = ExperimentConfig.model_validate(raw)
    suite = load_suite()
    # every task, 4 documents: arm a's seed 2 is its seed 1 less 0.5 on every document (a pure seed
    # shift), arm b's seeds agree; no seed-by-document interaction anywhere
    values = {("a", 1): [1, 0, 1, 0], ("a", 2): [0.5, -0.5, 0.5, -0.5], ("b", 1): [1, 1, 1, 0], ("b", 2): [1, 1, 1, 0]}
    for (arm, seed), v in values.items():
        write_eval_run(config, arm, seed, 5, {t: metric_samples(suite.benchmark_of(t).score, v) for t in suite.all_tasks()})
    accuracy = power.run_power(config)["families"]["accuracy"]
    noise = accuracy["noise"]["MMLU"]
    # a document's variance: 1/3 in a's rows, 1/4 in b's: 7/24; paired differences, seed means [1/4, 5/4, 1/4, 1/4]:
    # variance 1/4, so 2 sigma^2 (1 - rho) = 1/4; seed SD pooled over a (0.125) and b (0): sqrt(0.0625)
    assert noise["item_variance"] == pytest.approx(7 / 24) and noise["seed_item_share"] == 0
    assert noise["item_correlation"] == pytest.approx(1 - 0.25 / (2 * 7 / 24)) and noise["seed_std"] == pytest.approx(0.25)
    assert accuracy["seed_correlation"] == pytest.approx(1.0)  # every benchmark shifts together
    # the average: 12 one-task benchmarks (1/4 / 4 documents) and ARC's two tasks (x 1/2), over 13^2; seeds: 2 x 0.0625 / S
    documents = (12 * 0.0625 + 0.03125) / 169
    assert accuracy["mdd"]["average"] == pytest.approx(Z * math.sqrt(documents + 2 * 0.0625 / 2))
    observed = accuracy["differences"]["b"]["average"]
    assert observed["difference"] == pytest.approx(0.5)
    needed = next(s for s in range(1, 100) if Z * math.sqrt(documents + 0.125 / s) <= 0.5)
    assert observed["seeds_needed"] == needed == 5
    assert np.isfinite(accuracy["mdd"]["MMLU"])
