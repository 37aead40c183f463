"""Problems with the machine are reported before any work starts, with what to do about them."""

import shutil
from collections import namedtuple

import pytest
from conftest import make_config, pretrain_experiment

from configs.base import ConfigError
from corpus.extract import run_corpus


def test_an_output_root_that_cannot_be_written_fails_before_any_work(tmp_path, sample_dir):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    config = make_config(blocker / "out", sample_dir / "sample.warc.gz", {"t": {"extractor": "trafilatura"}})
    with pytest.raises(ConfigError, match=r"a-file/out: cannot write there \(Not a directory\)"):
        run_corpus(config)


def test_a_full_output_root_fails_before_any_work(tmp_path, sample_dir, monkeypatch):
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda path: usage(10 << 30, (10 << 30) - (5 << 20), 5 << 20))
    config = make_config(tmp_path / "out", sample_dir / "sample.warc.gz", {"t": {"extractor": "trafilatura"}})
    with pytest.raises(ConfigError, match=r"5 MiB free, at least 1 GiB needed"):
        run_corpus(config)
    assert not (tmp_path / "out" / "extract").exists()


def test_training_without_the_corpus_names_what_is_missing(tmp_path, capsys):
    import json

    from pretrain.train import main

    path = tmp_path / "exp.json"
    path.write_text(json.dumps(pretrain_experiment(tmp_path / "out")))
    with pytest.raises(SystemExit) as e:
        main([str(path), "--arm", "a"])
    message = str(e.value)
    assert "tokenizer.json: no tokenizer" in message and "a_text_document.bin: no dataset for arm 'a'" in message
    assert "bash slurm/extract.sh" in message and "arm 'b'" not in message
