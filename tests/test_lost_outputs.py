"""A completion marker never outlives its output: a finished task whose documents are gone runs
again, with a message (corpus.flow.execute.rerun_lost_tasks)."""

from __future__ import annotations

import gzip
import json

from datatrove.pipeline.writers import JsonlWriter

from configs.base import Resources
from corpus.flow.execute import lost_outputs, rerun_lost_tasks
from corpus.stage import Stage


def finished_stage(tmp_path, written: dict[int, int]) -> Stage:
    """A two-task stage whose tasks finished, each having written `written[rank]` documents."""
    output, logs = tmp_path / "output", tmp_path / "logs"
    writer = JsonlWriter(str(output), output_filename="${rank}.jsonl.gz")
    for folder in (output, logs / "completions", logs / "stats"):
        folder.mkdir(parents=True)
    for rank, documents in written.items():
        (logs / "completions" / f"{rank:05d}").write_text("")
        stats = [{"name": f"{writer.type}: {writer.name}", "stats": {"total": documents}}]
        (logs / "stats" / f"{rank:05d}.json").write_text(json.dumps(stats))
        if documents:
            (output / f"{rank:05d}.jsonl.gz").write_bytes(gzip.compress(b'{"text": "x"}\n' * documents))
    return Stage("extract", "a", [writer], Resources(tasks=len(written)), logs, outputs=[output])


def test_finished_tasks_with_their_outputs_are_kept(tmp_path):
    stage = finished_stage(tmp_path, {0: 3, 1: 0})  # task 1 wrote nothing: no file expected
    assert lost_outputs(stage) == {}
    assert rerun_lost_tasks([stage]) == []


def test_a_finished_task_whose_output_is_gone_runs_again_with_a_message(tmp_path):
    stage = finished_stage(tmp_path, {0: 3, 1: 2})
    (tmp_path / "output" / "00001.jsonl.gz").unlink()
    assert rerun_lost_tasks([stage]) == [
        f"run again: extract-a task 1, finished but its output is gone (2 documents recorded, no file 00001* in "
        f"{tmp_path / 'output'})"]
    assert (stage.logs / "completions" / "00000").is_file() and not (stage.logs / "completions" / "00001").exists()


def test_an_emptied_output_file_counts_as_gone(tmp_path):
    stage = finished_stage(tmp_path, {0: 3})
    (tmp_path / "output" / "00000.jsonl.gz").write_bytes(b"")
    assert list(lost_outputs(stage)) == [0]


def test_a_writer_folder_is_listed_once_whatever_the_tasks_and_shard_files_count(tmp_path, monkeypatch):
    # a listing per task costs tasks x files (70 s at 2,000 tasks on the development machine)
    stage = finished_stage(tmp_path, {rank: rank % 3 for rank in range(12)})  # every third wrote nothing
    output = tmp_path / "output"
    (output / "00004.jsonl.gz").rename(output / "00004_00001.jsonl.gz")  # a task's second shard file
    (output / "00005.jsonl.gz").unlink()
    writer = stage.pipeline[0]
    listings = []
    listed = writer.output_folder.ls
    monkeypatch.setattr(writer.output_folder, "ls", lambda *a, **k: listings.append(a) or listed(*a, **k))
    assert list(lost_outputs(stage)) == [5]
    assert len(listings) == 1
