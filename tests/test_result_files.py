"""Result and record files are written whole (configs.durable.write_atomically), and a cut one is
never taken as done: evaluation redoes it, the report names it and the command that redoes it."""

from __future__ import annotations

import io
import json
import os

import pytest

from configs.durable import write_atomically
from configs.experiment import ExperimentConfig
from conftest import metric_samples, pretrain_experiment, write_eval_run
from evaluation.evaluate import pending
from slurm import console


def test_a_write_killed_before_its_rename_leaves_the_old_file_whole(tmp_path, monkeypatch):
    path = tmp_path / "results.json"
    write_atomically(path, '{"old": true}\n')

    def killed(*args):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", killed)
    with pytest.raises(OSError):
        write_atomically(path, '{"new": true}\n')
    assert json.loads(path.read_text()) == {"old": True}
    assert [p.name for p in tmp_path.iterdir()] == ["results.json"]  # no temporary file left


def exported(config: ExperimentConfig, arm: str, seed: int, step: int):
    """What pretrain.export leaves: an hf/step_* folder with its xsuite.json."""
    folder = config.run_dir(arm, seed) / "hf" / f"step_{step:07d}"
    folder.mkdir(parents=True)
    info = {"experiment": config.name, "arm": arm, "rung": config.pretrain.rung.name, "seed": seed, "step": step}
    (folder / "xsuite.json").write_text(json.dumps(info))
    return folder


@pytest.fixture
def config(tmp_path) -> ExperimentConfig:
    return ExperimentConfig.model_validate(pretrain_experiment(tmp_path / "out", evaluation={}))


@pytest.mark.parametrize("damage", ["cut", "empty", "another step"])
def test_a_damaged_results_file_is_evaluated_again_with_a_message(config, monkeypatch, damage):
    monkeypatch.setattr(console, "TERMINAL", terminal := io.StringIO())
    checkpoint = exported(config, "a", 1, 10)
    out = write_eval_run(config, "a", 1, 10, {"arc_easy": metric_samples("acc", [1, 0])})
    assert pending(config) == []
    results = out / "results.json"
    text = results.read_text()
    results.write_text({"cut": text[: len(text) // 2], "empty": "",
                        "another step": text.replace('"step": 10', '"step": 20')}[damage])
    assert pending(config) == [checkpoint]
    assert f"evaluated again: {results}: " in terminal.getvalue()


def test_the_report_names_a_damaged_results_file_and_the_command_that_redoes_it(config, tmp_path, capsys):
    from evaluation.report import main

    out = write_eval_run(config, "a", 1, 10, {"arc_easy": metric_samples("acc", [1, 0])})
    (out / "results.json").write_text((out / "results.json").read_text()[:40])
    path = tmp_path / "exp.yaml"
    path.write_text(json.dumps(pretrain_experiment(tmp_path / "out", evaluation={})))
    assert main([str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and f"{out / 'results.json'}: damaged (JSONDecodeError" in err
    assert err.endswith(f"redo it: python -m evaluation.evaluate CONFIG --checkpoint {config.run_dir('a', 1) / 'hf' / out.name}")
