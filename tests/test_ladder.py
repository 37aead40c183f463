"""A model ladder's analysis (evaluation/ladder.py): scaling fits recover known curves, and decision
agreement across rungs on hand-made verdicts with known signs."""

import math

import numpy as np
import pytest

from evaluation.ladder import Decision, agreement, fit_curve, fit_scaling


@pytest.mark.parametrize("lower_is_better", [True, False])
def test_the_power_law_fit_recovers_known_parameters_from_noisy_seeds(lower_is_better):
    a, b, e = 40.0, 0.12, 0.9 if lower_is_better else 0.75
    sign = 1 if lower_is_better else -1
    rng = np.random.default_rng(0)
    compute = np.repeat(np.logspace(16, 20, 6), 3)  # 6 rungs x 3 seeds
    scores = e + sign * a * compute ** -b + rng.normal(0, 0.002, compute.size)
    fit = fit_curve(compute, scores, lower_is_better)
    assert fit.form == "power law"
    assert fit.params["b"] == pytest.approx(b, rel=0.15) and fit.params["e"] == pytest.approx(e, abs=0.03)
    target = 1e21
    assert fit(target) == pytest.approx(e + sign * a * target ** -b, abs=0.01)


def test_the_prediction_interval_covers_the_truth_and_is_wider_with_more_noise():
    a, b, e = 40.0, 0.12, 0.9
    truth = e + a * 1e21 ** -b
    widths = []
    for sd in (0.002, 0.02):
        rng = np.random.default_rng(1)
        points = {c: list(e + a * c ** -b + rng.normal(0, sd, 3)) for c in np.logspace(16, 20, 5)}
        result = fit_scaling(points, 1e21, lower_is_better=True, resamples=200)
        low, high = result["interval"]
        assert low <= truth <= high and result["failed_resamples"] < 100
        widths.append(high - low)
    assert widths[1] > 3 * widths[0]


def test_two_compute_points_give_a_line_in_log_compute_and_one_seed_no_interval():
    result = fit_scaling({1e16: [1.5, 1.52], 1e18: [1.3, 1.31]}, 1e20, lower_is_better=True)
    assert result["form"] == "log-linear"
    assert result["prediction"] == pytest.approx(1.51 - 2 * 0.205, abs=1e-9)  # the line through the two means
    one_seed = fit_scaling({1e16: [1.5], 1e18: [1.3]}, 1e20, lower_is_better=True)
    assert math.isnan(one_seed["interval"][0])
    assert fit_scaling({1e16: [1.5, 1.6]}, 1e20, lower_is_better=True) is None  # one compute value: no curve


def test_agreement_counts_signs_and_resolved_verdicts_against_the_target_rung():
    pair = ("ref", "x")
    decisions = {
        "150m": {("accuracy", pair): Decision(0.8, "better"), ("clean text", pair): Decision(-0.01, "noise"),
                 ("accuracy", ("ref", "y")): Decision(-0.5, "worse")},
        "530m": {("accuracy", pair): Decision(1.1, "noise"), ("clean text", pair): Decision(-0.02, "worse"),
                 ("accuracy", ("ref", "y")): Decision(0.4, "noise")},
        "1b": {("accuracy", pair): Decision(1.0, "better"), ("clean text", pair): Decision(-0.03, "worse"),
               ("accuracy", ("ref", "y")): Decision(-0.6, "worse")},
    }
    result = agreement(decisions, target="1b")
    assert set(result) == {"150m", "530m"}
    small = result["150m"]["by_metric"]
    assert small["accuracy"] == {"pairs": 2, "sign_agrees": 2, "decision_accuracy": 1.0, "target_resolved": 2,
                                 "resolved_same": 2, "called_noise": 0, "resolved_opposite": 0}
    assert small["clean text"]["sign_agrees"] == 1 and small["clean text"]["called_noise"] == 1
    middle = result["530m"]["by_metric"]["accuracy"]
    assert middle["decision_accuracy"] == 0.5 and middle["called_noise"] == 2 and middle["resolved_same"] == 0
    # a difference of exactly zero (accuracy on few items ties) has no sign to agree with
    tie = agreement({"s": {("accuracy", pair): Decision(0.0, "noise")}, "l": {("accuracy", pair): Decision(1.0, "better")}},
                    target="l")
    assert tie["s"]["by_metric"]["accuracy"]["sign_agrees"] == 0


def test_the_primary_decision_is_decided_at_its_deciding_rung_and_described_at_the_others():
    from evaluation.ladder import primary_agreement

    def report(difference, result, why=None, deciding=False):
        interval = None if difference is None else {"difference": difference, "low": difference - 1, "high": difference + 1}
        return {"primary": {"arm": "x", "reference": "ref", "score": "bpb:average", "interval": interval, "result": result,
                            "why": why or (None if deciding else "descriptive: the deciding rung is m"),
                            "deciding": deciding}}

    reports = {"s": report(-0.02, None), "m": report(-0.01, None, deciding=True), "l": report(0.03, None),
               "one": report(None, None, "x: no evaluated run at the compared step", deciding=False)}
    out = primary_agreement(reports, ["s", "m", "one", "l"], "l")
    assert (out["arm"], out["reference"], out["score"]) == ("x", "ref", "bpb:average")
    rungs = out["rungs"]
    assert rungs["m"]["verdict"] == "noise" and rungs["m"]["verdict_agrees"] and rungs["m"]["sign_agrees"]
    # the other rungs: no verdict of their own, their sign beside the deciding rung's
    assert rungs["s"]["verdict"] == "descriptive" and rungs["s"]["sign_agrees"] and rungs["s"]["verdict_agrees"] is None
    assert rungs["l"]["verdict"] == "descriptive" and rungs["l"]["sign_agrees"] is False
    assert rungs["one"]["verdict"] == "not decided" and rungs["one"]["sign_agrees"] is None
    assert primary_agreement({"l": {"primary": None}}, ["l"], "l") is None
