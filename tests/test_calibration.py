"""bench/calibration.py, small: its JSON, and results that do not depend on how the replicates are
split over workers."""

import json

import numpy as np
import pytest

from bench import calibration, printed_mdd, rho_coverage
from evaluation import power_simulation
from evaluation.power_measured import measure_family


@pytest.mark.slow
def test_calibration_writes_every_setting_and_does_not_depend_on_the_split(tmp_path, monkeypatch):
    settings = (calibration.Setting("2 arms, 2 seeds", 2, 2), calibration.Setting("3 arms, 3 seeds, noisier", 3, 3, 3.0),
                calibration.Setting("2 arms, 3 seeds, at the MDD", 2, 3, at_mdd=True),
                calibration.Setting("3 arms, 1 seed, rung", 3, 1, named="rung"),
                calibration.Setting("2 arms, 2 seeds, from the run", 2, 2, from_run=True))
    monkeypatch.setattr(calibration, "SETTINGS", settings)
    monkeypatch.setattr(calibration, "FROM_RUN_DRAWS", 128)
    monkeypatch.setattr(calibration, "RHO_DRAWS", 20)
    out = tmp_path / "calibration.json"
    assert calibration.main(["--replicates", "6", "--workers", "1", "--out", str(out)]) == 0
    everything = json.loads(out.read_text())
    results, rows = everything[:len(settings)], everything[len(settings):]
    assert [r["setting"] for r in results] == [s.name for s in settings]
    # the coverage rows after them: the noisier arm's bits-per-byte intervals, the accuracy slope per shape
    coverage_names = [s.name for s in calibration.NOISY_ARMS] + [
        f"slope interval coverage: {a} arms, {s} seeds" + (f", a shared seed shift {c:g}x the arms' own" if c else "")
        for a, s, c in calibration.SLOPE_SETTINGS]
    rows, printed = rows[:len(coverage_names)], rows[len(coverage_names):]
    assert [r["setting"] for r in rows] == coverage_names
    noisy = rows[:len(calibration.NOISY_ARMS)]
    assert all(r["replicates"] == 6 and 0 <= r["noisy_arm_coverage"] <= 1 and r["noisy_arm_coverage_se"] >= 0 for r in noisy)
    assert all(r["replicates"] == 3 and 0 <= r["slope_coverage"] <= 1 for r in rows[len(noisy):])
    # power at the printed MDD ({decision table, primary} x {measured, known noise}) and rho, phi against planted
    assert [r["setting"].split(": ", 1)[1] for r in printed] == [
        "decision table, measured noise", "primary, measured noise", "primary, known noise",
        f"the primary pair's rho against the planted {calibration.planted_rho():.3f}",
        f"the primary pair's phi against the planted {calibration.planted_phi():.3f}"]
    assert all(r["replicates"] == 1 for r in printed[:3]) and 0 <= printed[0]["power_at_printed_mdd"] <= 1
    assert printed[3]["coverage"] in (0, 1) and abs(printed[4]["bias"]) < 0.2
    for r in results:
        assert r["replicates"] == 6 and 0 <= r["coverage"] <= 1 and 0 <= r["fwer"] <= 1
        assert set(r["fwer_by_table"]) >= {"decision table", "every pair", "format flags", "per-benchmark, accuracy"}
        assert 0 <= r["format_flag_rate"] <= 1
    assert results[0]["power_at_mdd"] is None and 0 <= results[2]["power_at_mdd"] <= 1 and results[2]["mdd"] > 0
    # one seed, decided against the variance of a second rung's two seeds: the intervals hold it and are counted
    assert results[3]["coverage_by_group"] and set(results[3]["snr_above_floor_by_score"]) == {
        "accuracy:average", "bpb:average", "clean_text:plain", "clean_text:markdown"}
    assert 0 <= results[4]["power_at_mdd"] <= 1 and set(results[4]["printed_mdd_over_true"]) == {"p10", "p50", "p90"}
    assert any("with the noisier arm" in group for group in results[1]["coverage_by_group"])
    assert all(r["untested_p_rate"] == 0 for r in results) and 0 <= results[4]["rho_coverage"] <= 1
    split = calibration.run(settings, 6, workers=2)
    assert json.loads(json.dumps(split)) == results


@pytest.mark.slow  # 3 calibrated MDDs and a few bootstrapped rho intervals
def test_the_printed_mdd_and_rho_coverage_benches_write_their_rows(tmp_path, monkeypatch):
    monkeypatch.setattr(printed_mdd, "FROM_RUN_DRAWS", 128)
    monkeypatch.setattr(power_simulation, "CALIBRATION_GRID", np.geomspace(1e-1, 1e1, 3))
    # the documents' part scaled to the seeds' part of Var(D), as the bench's middle row
    noise = printed_mdd.truth(2, 1.0)
    assert noise.fixed + noise.interaction / 2 == pytest.approx(sum(noise.seed) / 2)
    row = printed_mdd.power_over_pilots(noise, 2, 1.0, 0.05, pilots=200, points=3)
    assert 0 < row["power_at_printed_mdd"] < 1 and 0 < row["power_se"] < 0.05 and row["printed_over_true_median"] > 1
    out = tmp_path / "rho.json"
    assert rho_coverage.main(["--pilots", "3", "--draws", "20", "--settings", "2 arms", "--out", str(out)]) == 0
    [rho] = json.loads(out.read_text())
    assert rho["pilots"] == 3 and rho["coverage"] + rho["interval_below_planted"] + rho["interval_above_planted"] == 1
    assert rho["planted"] == pytest.approx(calibration.planted_rho()) and "bias_in_se" in rho
    # away from the clip: the documents' shared part resized so that the generator plants each rho given
    assert rho_coverage.main(["--pilots", "3", "--draws", "20", "--settings", "2 arms", "--planted", "0.6", "0.8",
                              "--out", str(out)]) == 0
    assert [r["planted"] for r in json.loads(out.read_text())] == pytest.approx([0.6, 0.8])


def test_the_brute_cells_plant_the_documents_share_their_truth_names():
    # the documents' variances scaled to half of Var(D) at 2 seeds, on one task of many documents: what the pilot
    # measures is the truth the cell's true MDD is priced on
    setting = printed_mdd.with_documents_share(calibration.Setting("one task", 2, 2, bpb_items=(4000,)), 0.5)
    assert printed_mdd.documents_share(setting) == pytest.approx(0.5)
    truth = calibration.true_noise(setting)
    run, _, _ = calibration.simulate(setting, np.random.default_rng(0))
    measured = measure_family(calibration.families(setting)["bpb"], run["bpb"]).noise(("columns", "average"))
    assert measured.fixed == pytest.approx(truth.fixed, rel=0.1)
    assert measured.interaction == pytest.approx(truth.interaction, rel=0.1)


def test_a_brute_cell_goes_on_from_the_pilots_its_record_holds(tmp_path, monkeypatch):
    monkeypatch.setattr(printed_mdd, "FROM_RUN_DRAWS", 64)
    monkeypatch.setattr(power_simulation, "CALIBRATION_GRID", np.geomspace(1e-1, 1e1, 3))
    monkeypatch.setattr(power_simulation, "DRAWS", 256)  # the truth's threshold
    cells = (printed_mdd.Cell(calibration.Setting("2 x 2 primary", 2, 2, bpb_items=(50, 50)), "primary", 0.5),
             printed_mdd.Cell(calibration.Setting("3 x 2 decision table", 3, 2, bpb_items=(50, 50)), "decision table", 0.5))
    whole, split = tmp_path / "whole.json", tmp_path / "split.json"
    printed_mdd.run_brute(cells, 2, whole)
    printed_mdd.run_brute(cells, 1, split)
    rows = printed_mdd.run_brute(cells, 2, split)
    assert [r["per_pilot"] for r in rows] == [r["per_pilot"] for r in json.loads(whole.read_text())]
    for row, alpha in zip(rows, (0.05, 0.05 / 8), strict=True):  # the table: 2 arms x 4 decision scores, Bonferroni
        assert row["pilots"] == 2 and row["alpha"] == pytest.approx(alpha) and 0 <= row["power_at_printed_mdd"] <= 1
        assert 0 <= row["model_power"] <= 1 and row["true_mdd"] > 0
    # --diagnose: the same pilots' seeds' estimates (w) drawn again; the evened power and the documents' cost
    printed_mdd.diagnose(cells, split, points=3)
    for row in json.loads(split.read_text()):
        assert row["seed_estimate_mean"] > 0 and -1 <= row["power_seed_draws_evened"] <= 2
        assert abs(row["documents_estimate_cost"]) < 0.5 and row["power_seed_draws_evened_se"] > 0
