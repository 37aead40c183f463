"""bench/calibration.py, small: its JSON, and results that do not depend on how the replicates are
split over workers."""

import json

from bench import calibration


def test_calibration_writes_every_setting_and_does_not_depend_on_the_split(tmp_path, monkeypatch):
    settings = (calibration.Setting("2 arms, 2 seeds", 2, 2), calibration.Setting("3 arms, 3 seeds, noisier", 3, 3, 3.0),
                calibration.Setting("2 arms, 3 seeds, at the MDD", 2, 3, at_mdd=True))
    monkeypatch.setattr(calibration, "SETTINGS", settings)
    out = tmp_path / "calibration.json"
    assert calibration.main(["--replicates", "6", "--workers", "1", "--out", str(out)]) == 0
    results = json.loads(out.read_text())
    assert [r["setting"] for r in results] == [s.name for s in settings]
    for r in results:
        assert r["replicates"] == 6 and 0 <= r["coverage"] <= 1 and 0 <= r["fwer"] <= 1
        assert set(r["fwer_by_table"]) >= {"decision table", "every pair", "format flags", "per-benchmark, accuracy"}
        assert 0 <= r["format_flag_rate"] <= 1
    assert results[0]["power_at_mdd"] is None and 0 <= results[2]["power_at_mdd"] <= 1 and results[2]["mdd"] > 0
    assert any("with the noisier arm" in group for group in results[1]["coverage_by_group"])
    split = calibration.run(settings, 6, workers=2)
    assert json.loads(json.dumps(split)) == results
