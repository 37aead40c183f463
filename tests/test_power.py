"""The minimum detectable difference against a hand computation on made-up item counts."""

import math

import pytest

from configs.experiment import ExperimentConfig
from conftest import pretrain_experiment
from evaluation.power import PowerAssumptions, minimum_detectable_differences, power_report, task_items
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


def test_more_seeds_and_items_shrink_the_mdd_and_offline_items_are_used(tmp_path):
    raw = pretrain_experiment(tmp_path, evaluation={"tasks": "offline", "offline_items": 40})
    config = ExperimentConfig.model_validate(raw)
    assert set(n for ns in task_items(config, load_suite()).values() for n in ns) == {40}
    few = power_report(config)["mdd"]["average"]
    raw["pretrain"]["seeds"] = [1, 2, 3, 4, 5]
    raw["evaluation"] = {"tasks": "hub"}
    many = power_report(ExperimentConfig.model_validate(raw))
    assert many["mdd"]["average"] < few and many["items"]["COPA"] == [100]
