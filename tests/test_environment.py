"""Problems with the machine are reported before any work starts, with what to do about them."""

import shutil
from collections import namedtuple

import pytest

from configs.base import ConfigError
from configs.experiment import ExperimentConfig
from conftest import make_config, pretrain_experiment
from corpus.flow.run import run_corpus


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


def test_a_folder_resumed_by_another_config_keeps_its_first_maker(tmp_path, sample_dir):
    from configs.evaluation import EvaluationConfig
    from configs.provenance import config_sha256, read_provenance, write_provenance

    config = make_config(tmp_path / "out", sample_dir / "sample.warc.gz", {"t": {"extractor": "trafilatura"}})
    elsewhere = make_config(tmp_path / "elsewhere", sample_dir / "sample.warc.gz", {"t": {"extractor": "trafilatura"}})
    assert config_sha256(config) == config_sha256(elsewhere)  # where a run writes is not what made it
    gold = {"name": "t", "inputs": {"sample": {}}, "arms": {"t": {"extractor": "trafilatura"}, "g": {"extractor": "gold"}}}
    assert config_sha256(ExperimentConfig.model_validate({**gold, "output_root": str(tmp_path / "out")})) == config_sha256(
        ExperimentConfig.model_validate({**gold, "output_root": str(tmp_path / "moved")}))  # its gold files lie under it
    folder = tmp_path / "folder"
    assert write_provenance(folder, config, "corpus") is None and write_provenance(folder, config, "corpus") is None
    downstream = config.model_copy(update={"name": "variant", "evaluation": EvaluationConfig(tasks="offline")})
    assert write_provenance(folder, downstream, "corpus") is None  # nothing a corpus folder is made from
    other = make_config(tmp_path / "out", sample_dir / "sample.warc.gz", {"t": {"extractor": "trafilatura"}},
                        extraction={"max_html_bytes": 1000})
    assert "begun with another config (corpus part)" in write_provenance(folder, other, "corpus")
    made = read_provenance(folder)
    assert made["config_sha256"] == config_sha256(other) and made["begun_by"]["config_sha256"] == config_sha256(downstream)
    assert made["made_from_sha256"] == config_sha256(other, "corpus") != made["config_sha256"]


CONSOLE_SCRIPT = """
import os, sys
from pathlib import Path
from slurm import console

log = Path(sys.argv[1])
with console.stage("quiet", log, "docs", 2) as bar:
    print("a library line on stdout")
    os.write(2, b"a C extension line on fd 2\\n")
    bar.update(2)
console.closing_line("quiet", "2 documents", "somewhere", log)
with console.stage("failing", log, "docs"):
    print("the last words before the error")
    raise RuntimeError("boom")
"""


@pytest.mark.parametrize("verbose", [False, True])
def test_library_output_goes_to_the_log_and_errors_to_the_console(tmp_path, verbose):
    import os
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": str(repo)} | ({"XSUITE_VERBOSE": "1"} if verbose else {})
    done = subprocess.run([sys.executable, "-c", CONSOLE_SCRIPT, str(tmp_path / "stage.log")], capture_output=True,
                          text=True, env=env, cwd=repo)
    assert done.returncode == 1 and "RuntimeError: boom" in done.stderr
    console = done.stdout + done.stderr
    assert "✓ quiet: 2 documents → somewhere" in console
    if verbose:
        assert "a library line on stdout" in console and "a C extension line on fd 2" in console
        assert not (tmp_path / "stage.log").exists()
    else:
        before_error = done.stdout + done.stderr.split("✗")[0]  # the error then shows the end of the log
        assert "a library line" not in before_error and "a C extension line" not in before_error
        log = (tmp_path / "stage.log").read_text()
        assert "a library line on stdout" in log and "a C extension line on fd 2" in log
        assert f"✗ failing failed: RuntimeError: boom\n  log: {tmp_path / 'stage.log'}" in done.stderr
        assert "the last words before the error" in done.stderr  # the end of the log, on the console


def test_a_world_writable_output_root_is_refused_and_files_are_made_at_most_group_writable(tmp_path):
    import os
    import stat

    from configs.base import ConfigError
    from configs.environment import check_output_root

    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    with pytest.raises(ConfigError, match="writable by every user.*chmod o-w"):
        check_output_root(shared, min_free=0)
    previous = os.umask(0o000)
    try:
        check_output_root(tmp_path / "own", min_free=0)
        (tmp_path / "own" / "f").write_text("x")
        assert not (tmp_path / "own").stat().st_mode & stat.S_IWOTH
        assert not (tmp_path / "own" / "f").stat().st_mode & stat.S_IWOTH
    finally:
        os.umask(previous)


def test_a_world_writable_model_folder_is_refused(tmp_path):
    from configs.base import require_model_folder

    (tmp_path / "block_model.json").write_text("{}")
    assert require_model_folder(str(tmp_path), "block_model.json", "hint") == str(tmp_path)
    tmp_path.chmod(0o777)
    with pytest.raises(ValueError, match="writable by every user"):
        require_model_folder(str(tmp_path), "block_model.json", "hint")
