"""What the console shows when a corpus stage fails: a known refusal and a full disk in one line,
without the end of the stage's log; an unexpected error with it."""

from __future__ import annotations

import errno
import io

import pytest
from datatrove.pipeline.writers import JsonlWriter

from configs.base import Resources
from conftest import make_config
from corpus.flow import execute
from corpus.flow.execute import DiskFull, run_local
from corpus.stage import Stage
from corpus.tokens.budget import BudgetError
from slurm import console


@pytest.fixture
def failing_stage(tmp_path, monkeypatch):
    """A one-task stage whose executor raises what the test sets, with a log that has lines in it;
    returns (config, stage, set_error, console text)."""
    (warc := tmp_path / "in.warc.gz").write_bytes(b"")
    config = make_config(tmp_path / "out", warc, {"a": {"extractor": "trafilatura"}})
    stage = Stage("budget", None, [JsonlWriter(str(tmp_path / "docs"))], Resources(), tmp_path / "logs")
    log = config.output_root / "logs" / "budget.log"
    log.parent.mkdir(parents=True)
    log.write_text("diagnostic line\n" * 30)
    raised = {}

    def run(self):
        raise raised["error"]

    monkeypatch.setattr(execute.ConsoleExecutor, "run", run)
    monkeypatch.setattr(console, "TERMINAL", terminal := io.StringIO())
    monkeypatch.delenv(console.VERBOSE_ENV, raising=False)
    return config, stage, lambda e: raised.update(error=e), terminal


def test_a_known_refusal_inside_a_stage_is_shown_without_the_log_s_end(failing_stage):
    config, stage, fail, terminal = failing_stage
    fail(BudgetError("dataset.tokens_per_arm = 60,000 but not every arm has that many tokens"))
    with pytest.raises(BudgetError):
        run_local(config, [stage])
    assert "not every arm has that many tokens" in terminal.getvalue()
    assert "last lines" not in terminal.getvalue() and "diagnostic line" not in terminal.getvalue()


def test_an_unexpected_error_shows_the_log_s_end(failing_stage):
    config, stage, fail, terminal = failing_stage
    fail(KeyError("surprise"))
    with pytest.raises(KeyError):
        run_local(config, [stage])
    assert "last lines:" in terminal.getvalue() and "diagnostic line" in terminal.getvalue()


def test_a_full_disk_is_one_line_naming_the_path_the_plan_s_need_and_that_a_rerun_resumes(failing_stage, tmp_path):
    config, stage, fail, terminal = failing_stage
    shard = tmp_path / "docs" / "00000.jsonl.gz"
    fail(OSError(errno.ENOSPC, "No space left on device", str(shard)))
    with pytest.raises(DiskFull) as e:
        run_local(config, [stage])
    assert str(e.value).startswith(f"{shard}: no space left on the device (")
    assert "no plan says what budget needs (python -m corpus.flow.plan CONFIG projects it)" in str(e.value)
    assert str(e.value).endswith("finished tasks are kept, the rest resumes") and "\n" not in str(e.value)
    assert "last lines" not in terminal.getvalue()
