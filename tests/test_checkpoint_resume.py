"""A checkpoint is complete only with every file written at its recorded size; training resumes from
the newest complete and loadable one, saying which it skipped and why."""

from __future__ import annotations

import io
import json
import os

import pytest

from configs.experiment import ExperimentConfig
from conftest import build_pretrain_corpus, pretrain_experiment
from pretrain.checkpoint import SHARDS_RECORD, incomplete_reason, record_shards
from slurm import console


def fake_checkpoint(path):
    path.mkdir(parents=True)
    (path / "metadata.json").write_text(json.dumps({"sharded_backend": "torch_dist"}))
    (path / "__0_0.distcp").write_bytes(b"x" * 1000)
    (path / "common.pt").write_bytes(b"y" * 10)
    record_shards(path)
    return path


def test_a_recorded_checkpoint_is_complete_and_a_cut_shard_makes_it_incomplete(tmp_path):
    path = fake_checkpoint(tmp_path / "step_0000010")
    assert incomplete_reason(path) is None
    os.truncate(path / "__0_0.distcp", 600)
    assert incomplete_reason(path) == "__0_0.distcp: 600 bytes, 1,000 recorded"
    (path / "__0_0.distcp").unlink()
    assert incomplete_reason(path) == "__0_0.distcp missing"


def test_a_save_cut_before_its_metadata_is_incomplete_and_a_folder_without_a_record_is_judged_by_loading(tmp_path):
    path = fake_checkpoint(tmp_path / "step_0000010")
    (path / SHARDS_RECORD).unlink()
    assert incomplete_reason(path) is None  # saved before records existed: resume's load is the test
    (path / "metadata.json").unlink()
    assert incomplete_reason(path) == "no readable metadata.json (the save was cut)"


@pytest.mark.slow
def test_a_cut_shard_of_the_newest_checkpoint_resumes_from_the_one_before_with_the_same_losses(tmp_path, monkeypatch):
    from pretrain.train import train

    build_pretrain_corpus(tmp_path)
    config = ExperimentConfig.model_validate(pretrain_experiment(tmp_path))
    whole = train(config, "a", seed=1, stop_at=20)
    cut = train(config, "b", seed=1, stop_at=20)  # arm b holds the same data
    shard = max((cut / "checkpoints" / "step_0000020").glob("*.distcp"), key=lambda p: p.stat().st_size)
    os.truncate(shard, shard.stat().st_size // 2)
    monkeypatch.setattr(console, "TERMINAL", terminal := io.StringIO())
    train(config, "b", seed=1, stop_at=20)
    said = terminal.getvalue()
    assert f"{shard.parent}: skipped, {shard.name}: " in said and "recorded; resuming from an older checkpoint" in said
    assert f"resumed from {cut / 'checkpoints' / 'step_0000010'} (step 10/" in said
    assert incomplete_reason(shard.parent) is None
    def losses(run_dir):
        return [json.loads(line)["loss"] for line in (run_dir / "log.jsonl").read_text().splitlines()]

    assert losses(cut) == losses(whole)
