"""`python -m slurm.status`: an experiment's state from what the flow writes, at the states a run
passes through (built here file by file with the flow's own path helpers, as the flow writes them):
before anything ran, mid-extraction with a failed task, a marker whose output was removed, a task
run again, under Slurm (the fake squeue and sacct), mid-training, a failed evaluation task, all
done. The table's counts are the truth built (scaled figures marked as such), the failed task's
error line is named, the next command is the right one, --json round-trips, and the output root is
left as it was."""

import json
import re
from pathlib import Path

import pytest
import yaml

from configs.experiment import ExperimentConfig
from conftest import metric_samples, pretrain_experiment, write_eval_run
from corpus.flow.submit import job_name, queue_refusal, record, still_queued
from corpus.stage import rerun_task
from evaluation.evaluate import exported_checkpoints
from slurm import status as status_module
from slurm.status import array_size, experiment_status, flow_stages, last_error_line, main, shard_writers

TRACEBACK = """2026-12-07 01:00:00.000 | INFO     | datatrove.executor.base:_run_for_rank:98 - Launching pipeline for rank=1
2026-12-07 01:00:02.000 | ERROR    | datatrove.executor.base:_run_for_rank:150 - record 17 has no body
Traceback (most recent call last):

  File "/venv/lib/python3.11/site-packages/datatrove/executor/base.py", line 130, in _run_for_rank
    for _ in pipelined_data:
             └ <generator object ...>
  File "/repo/corpus/read/warc.py", line 200, in read
    raise ValueError(f"record {n} has no body")

ValueError: record 17 has no body
"""


@pytest.fixture
def experiment(tmp_path, monkeypatch):
    """The demo's shape at test size: two extractor arms of 2 tasks, post-processing, tokenizer,
    budget, a tiny decoder at one seed per arm, evaluation; the YAML's path and the config."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    spec = pretrain_experiment(tmp_path / "out", evaluation={"tasks": "offline"}, executor={"job_name_prefix": "t"})
    spec["arms"] = {arm: {"extractor": "trafilatura", "resources": {"tasks": 2, "workers": 2}} for arm in ("a", "b")}
    path = tmp_path / "experiment.yaml"
    path.write_text(yaml.safe_dump(spec))
    return str(path), ExperimentConfig.model_validate(spec)


def finish(stage, rank: int, documents: int = 5, seconds: float = 3.0) -> None:
    """A finished task as datatrove leaves it: stats, output shard, completion marker."""
    reader = {"documents": documents, **({"response_records": documents + 1} if stage.name == "extract" else {})}
    steps = [{"name": "📖 - READER: 🐿 Jsonl", "time_stats": {"total": seconds - 1}, "stats": reader},
             {"name": "💽 - WRITER: 🐿 Jsonl", "time_stats": {"total": 1.0}, "stats": {"total": documents}}]
    for folder, name in (("stats", f"{rank:05d}.json"), ("completions", f"{rank:05d}")):
        (stage.logs / folder).mkdir(parents=True, exist_ok=True)
        (stage.logs / folder / name).write_text(json.dumps(steps) if folder == "stats" else "")
    for shards in shard_writers(stage):
        shards.mkdir(parents=True, exist_ok=True)
        (shards / f"{rank:05d}.jsonl.gz").write_bytes(b"")


def fail(stage, rank: int) -> None:
    (stage.logs / "logs").mkdir(parents=True, exist_ok=True)
    (stage.logs / "logs" / f"task_{rank:05d}.log").write_text(TRACEBACK)


def rows(status: dict) -> dict[str, dict]:
    return {r["stage"]: r for r in status["rows"]}


def finish_corpus(config: ExperimentConfig) -> None:
    for stage in flow_stages(config):
        for rank in range(stage.tasks):
            finish(stage, rank)
    config.tokenizer_file().parent.mkdir(parents=True, exist_ok=True)
    config.tokenizer_file().write_text("")
    for arm in config.arms:
        for suffix in (".bin", ".idx"):
            config.dataset_prefix(arm).parent.mkdir(parents=True, exist_ok=True)
            config.dataset_prefix(arm).with_name(config.dataset_prefix(arm).name + suffix).write_bytes(b"")


def train(config: ExperimentConfig, arm: str, seed: int, step: int) -> None:
    """What pretrain.train leaves at `step`: log.jsonl, a complete checkpoint, the exported ones."""
    run_dir = config.run_dir(arm, seed)
    every = config.pretrain.training.checkpoint_every
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "log.jsonl").write_text("".join(
        json.dumps({"step": s, "loss": 6.0 - s / 10, "lr": 1e-3, "grad_norm": 1.0, "tokens": s * 128,
                    "tokens_per_s": 1000.0 + s, "mfu": 0.25, "seconds": 0.5}) + "\n" for s in range(1, step + 1)))
    for s in sorted({*range(every, step + 1, every), step}):
        checkpoint = run_dir / "checkpoints" / f"step_{s:07d}"
        checkpoint.mkdir(parents=True)
        (checkpoint / "metadata.json").write_text(json.dumps({"sharded_backend": "torch_dist"}))
        exported = run_dir / "hf" / f"step_{s:07d}"
        exported.mkdir(parents=True)
        (exported / "xsuite.json").write_text(json.dumps({"arm": arm, "rung": config.pretrain.rung.name, "seed": seed,
                                                          "step": s}))
    (run_dir / "checkpoints" / "latest").write_text(str(step))


def train_every_run(config: ExperimentConfig) -> list[int]:
    """Every run of the first rung trained to its last step; the steps of its exported checkpoints."""
    one = config.for_rung(config.rungs()[0])
    steps = one.training_steps()[0]
    for arm, seed in one.runs():
        train(one, arm, seed, steps)
    return [int(c.name.removeprefix("step_")) for c in sorted((one.run_dir("a", 1) / "hf").glob("step_*"))]


def test_before_anything_ran_every_stage_waits_and_the_next_command_is_the_corpus_flow(experiment):
    path, config = experiment
    status = experiment_status(config, path)
    assert not config.output_root.exists()  # read-only: not even the output root is made
    assert all(r["done"] == r["failed"] == r["running"] == r["pending"] == 0 for r in status["rows"])
    assert rows(status)["extract-a"]["tasks"] == 2 and rows(status)["train-a-" + config.rungs()[0] + "-seed1"]["tasks"] == 1
    assert status["next"] == f"bash slurm/extract.sh {path}  (only the tasks without a completion marker run)"
    assert not status["slurm"] and status["failures"] == []


def test_mid_extraction_a_failed_task_is_named_with_its_error_line(experiment):
    path, config = experiment
    a, b = flow_stages(config)[:2]
    finish(a, 0, documents=7)
    fail(a, 1)
    finish(b, 0, documents=4)
    finish(b, 1, documents=3)
    status = experiment_status(config, path)
    extract_a, extract_b = rows(status)["extract-a"], rows(status)["extract-b"]
    assert (extract_a["done"], extract_a["failed"], extract_b["done"], extract_b["failed"]) == (1, 1, 2, 0)
    assert extract_a["produced"] == {"records": 8, "documents_in": 7, "documents_out": 7}
    assert extract_b["produced"]["documents_out"] == 7
    assert extract_a["cpu_hours"] == pytest.approx(3.0 / 3600)
    assert extract_a["eta_s"] == pytest.approx(3.0 / 2) and extract_b["eta_s"] is None  # b: done
    assert status["failures"] == [{"stage": "extract-a", "task": "00001", "log": str(a.logs / "logs" / "task_00001.log"),
                                   "error": "ValueError: record 17 has no body"}]
    assert status["next"] == ("fix what failed (the error lines above), then: "
                              f"bash slurm/extract.sh {path}  (only the tasks without a completion marker run)")


def test_a_marker_whose_output_was_removed_counts_as_failed_not_done(experiment):
    path, config = experiment
    a = flow_stages(config)[0]
    finish(a, 0)
    finish(a, 1)
    assert rows(experiment_status(config, path))["extract-a"]["done"] == 2  # and cached for the next call
    (shard_writers(a)[0] / "00000.jsonl.gz").unlink()
    status = experiment_status(config, path)
    assert (rows(status)["extract-a"]["done"], rows(status)["extract-a"]["failed"]) == (1, 1)
    assert rows(status)["extract-a"]["produced"]["documents_out"] == 5
    assert status["failures"][0]["task"] == "00000" and "without its output" in status["failures"][0]["error"]
    assert status["next"] == (f"remove the completion markers whose outputs are gone: rm {a.logs / 'completions' / '00000'}; "
                              f"then: bash slurm/extract.sh {path}  (only the tasks without a completion marker run)")
    (a.logs / "completions" / "00001").unlink()  # a task the flow will run again: the cache forgets it
    assert rows(experiment_status(config, path))["extract-a"]["done"] == 0


def test_under_slurm_pending_tasks_show_their_reason_and_held_jobs_get_the_submission_guard_s_scancel(experiment, fake_queue):
    path, config = experiment
    squeue, sacct = fake_queue
    stages = flow_stages(config)
    a, b = stages[:2]
    finish(a, 0)
    fail(a, 1)
    later = stages[3]  # a post-processing stage of arm a: held for good behind the failed task
    for job, label in (("1000", a.label), ("1001", b.label), ("1002", later.label)):
        record(config, {"submitted": "2026-12-07T00:00:00", "jobs": {job_name(config, label): [job]}})
    squeue.write_text(f"1001|{job_name(config, b.label)}|RUNNING|2026-12-07T00:00:00|0|None|5:00\n"
                      f"1001|{job_name(config, b.label)}|RUNNING|2026-12-07T00:00:00|1|None|5:00\n"
                      f"1002|{job_name(config, later.label)}|PENDING|2026-12-07T00:00:00|0-1%2|DependencyNeverSatisfied|0:00\n")
    sacct.write_text(f"1000_0|{job_name(config, a.label)}|COMPLETED|360|1|billing=1,cpu=1,mem=4G,node=1\n"
                     f"1000_1|{job_name(config, a.label)}|FAILED|720|1|billing=1,cpu=1,mem=4G,node=1\n"
                     f"1001_0|{job_name(config, b.label)}|RUNNING|300|8|cpu=8,gres/gpu=1\n")
    status = experiment_status(config, path)
    table = rows(status)
    assert status["slurm"] and status["accounting"]
    assert (table["extract-a"]["done"], table["extract-a"]["failed"], table["extract-a"]["cpu_hours"]) == (1, 1, 0.3)
    assert (table["extract-b"]["running"], table["extract-b"]["cpu_hours"], table["extract-b"]["gpu_hours"]) == \
        (2, 300 * 8 / 3600, 300 / 3600)
    assert (table[later.part_label]["pending"], table[later.part_label]["reasons"]) == (2, {"DependencyNeverSatisfied": 2})
    queued = still_queued(config, [("1001", job_name(config, b.label), "RUNNING", "2026-12-07T00:00:00"),
                                   ("1002", job_name(config, later.label), "PENDING", "2026-12-07T00:00:00")])
    assert status["next"] == queue_refusal(config, queued)
    assert "scancel --state=PENDING 1002" in status["next"]


def test_mid_training_shows_the_step_speed_loss_and_newest_checkpoint(experiment):
    path, config = experiment
    finish_corpus(config)
    rung = config.rungs()[0]
    one = config.for_rung(rung)
    train(one, "a", 1, 12)
    status = experiment_status(config, path)
    steps = one.training_steps()[0]
    assert all(r["done"] == r["tasks"] and not r["failed"] for r in status["rows"] if r["stage"] in status["corpus_parts"])
    run = next(t for t in status["training"] if t["run"] == f"train-a-{rung}-seed1")
    assert run | {"checkpoint": None} == {"run": f"train-a-{rung}-seed1", "step": 12, "steps": steps, "tokens_per_s": 1012.0,
                                          "mfu": 0.25, "loss": pytest.approx(4.8), "checkpoint": None}
    assert run["checkpoint"].endswith("step_0000012")
    assert rows(status)[f"train-a-{rung}-seed1"]["eta_s"] == pytest.approx((steps - 12) * 0.5)
    assert status["next"] == f"bash slurm/pretrain.sh {path}"


def test_when_everything_is_done_the_next_command_is_nothing_and_evaluation_counts_every_checkpoint(experiment):
    path, config = experiment
    finish_corpus(config)
    checkpoints = train_every_run(config)
    one = config.for_rung(config.rungs()[0])
    status = experiment_status(config, path)
    assert status["next"] == f"bash slurm/evaluate.sh {path}"
    for arm, seed in one.runs():
        for step in checkpoints:
            write_eval_run(one, arm, seed, step, {"arc_easy": metric_samples("acc", [1, 0]), "piqa": metric_samples("acc", [1])})
    assert experiment_status(config, path)["next"] == f"python -m evaluation.report {path}"
    config.report_dir().mkdir(parents=True)
    (config.report_dir() / "report.md").write_text("")
    status = experiment_status(config, path)
    assert rows(status)["evaluate"] | {"produced": None} == rows(status)["evaluate"] | {
        "done": 2 * len(checkpoints), "tasks": 2 * len(checkpoints), "produced": None}
    assert rows(status)["evaluate"]["produced"] == {"checkpoints": 2 * len(checkpoints), "tasks_scored": 4 * len(checkpoints)}
    assert all(r["done"] == r["tasks"] for r in status["rows"])
    assert status["next"] == f"nothing: every stage is done; the report: {config.report_dir() / 'report.md'}"


def test_json_round_trips_and_plain_text_names_the_failure(experiment, capsys):
    path, config = experiment
    a = flow_stages(config)[0]
    finish(a, 0)
    fail(a, 1)
    assert main([path, "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed | {"at": None} == experiment_status(config, path) | {"at": None}
    assert main([path]) == 0
    text = capsys.readouterr().out
    assert re.search(r"^extract-a +1/2 +1 ", text, re.M)
    assert "ValueError: record 17 has no body" in text and "next: fix what failed" in text


def test_the_error_line_is_the_exception_not_the_traceback(tmp_path):
    log = tmp_path / "task.log"
    log.write_text(TRACEBACK + "\nDuring handling of the above exception, another exception occurred:\n\n"
                   "Traceback (most recent call last):\n  File \"x.py\", line 1\nOSError: [Errno 28] No space left on device\n")
    assert last_error_line(log) == "OSError: [Errno 28] No space left on device"
    log.write_text("rank=3\nslurmstepd: error: *** JOB 1234 ON n1 CANCELLED AT 2026-12-07T01:00:00 DUE TO TIME LIMIT ***\n")
    assert last_error_line(log).startswith("slurmstepd: error: *** JOB 1234")
    log.write_text("2026 | INFO | all well\n")
    assert last_error_line(log) is None


def test_a_pending_array_counts_every_task_of_its_range():
    assert [array_size(k) for k in ("0-99%10", "3,5-9", "7", "N/A")] == [100, 6, 1, 1]


def test_under_slurm_a_task_that_finished_once_is_not_failed_and_a_failed_training_job_is_named(experiment, fake_queue):
    path, config = experiment
    _, sacct = fake_queue
    finish_corpus(config)
    a = flow_stages(config)[0]
    (a.logs / "completions" / "00001").unlink()  # to run again: its log says it finished once
    (a.logs / "logs").mkdir(exist_ok=True)
    (a.logs / "logs" / "task_00001.log").write_text("... | SUCCESS | Processing done for rank=1\n")
    rung = config.rungs()[0]
    one = config.for_rung(rung)
    train(one, "a", 1, 12)
    (one.run_dir("a", 1) / "slurm-5001.out").write_text(
        "step 12\nTraceback (most recent call last):\n  File \"train.py\"\ntorch.OutOfMemoryError: CUDA out of memory.\n")
    sacct.write_text(f"5000|t-train-a-{rung}-seed1|COMPLETED|100|16|cpu=16,gres/gpu=8\n"
                     f"5001|t-train-a-{rung}-seed1|FAILED|200|16|cpu=16,gres/gpu=8\n")
    status = experiment_status(config, path)
    assert (rows(status)["extract-a"]["done"], rows(status)["extract-a"]["failed"]) == (1, 0)
    assert status["failures"] == [{"stage": f"train-a-{rung}-seed1", "task": "5001",
                                   "log": str(one.run_dir("a", 1) / "slurm-5001.out"),
                                   "error": "torch.OutOfMemoryError: CUDA out of memory."}]
    assert rows(status)[f"train-a-{rung}-seed1"]["gpu_hours"] == pytest.approx(300 * 8 / 3600)
    assert status["next"].startswith("sbatch slurm/extract.sh")


def test_a_finished_corpus_without_its_datasets_gets_the_training_s_own_refusal(experiment):
    from pretrain.train import missing_inputs, missing_inputs_refusal, selected_runs

    path, config = experiment
    for stage in flow_stages(config):
        for rank in range(stage.tasks):
            finish(stage, rank)
    status = experiment_status(config, path)
    assert all(r["done"] == r["tasks"] for r in status["rows"] if r["stage"] in status["corpus_parts"])
    missing = missing_inputs(config, selected_runs(config, path, None, None))
    assert len(missing) == 5 and status["next"] == missing_inputs_refusal(path, missing)


def test_the_plan_s_hours_stand_beside_each_part_s(experiment):
    path, config = experiment
    rung = config.rungs()[0]
    config.plan_dir().mkdir(parents=True)
    (config.plan_dir() / "plan.json").write_text(json.dumps({"costs": {"stages": [
        {"stage": "extraction", "arm": "a", "cpu_hours": 2.0, "gpu_hours": 0.5},
        {"stage": "post-processing", "arm": "b", "cpu_hours": 4.0, "gpu_hours": 0.0},
        {"stage": "evaluation", "arm": f"{rung}: 8 checkpoints", "cpu_hours": 0.0, "gpu_hours": 3.0}],
        "rungs": {rung: {"gpu_hours_per_run": 1.5}}}}))
    table = rows(experiment_status(config, path))
    assert (table["extract-a"]["planned_cpu_hours"], table["extract-a"]["planned_gpu_hours"]) == (2.0, 0.5)
    assert table["postprocess-b"]["planned_cpu_hours"] == 4.0 and table["extract-b"]["planned_cpu_hours"] is None
    assert table[f"train-a-{rung}-seed1"]["planned_gpu_hours"] == 1.5 and table["evaluate"]["planned_gpu_hours"] == 3.0


def test_a_failed_evaluation_array_task_is_counted_with_its_error_line_and_the_evaluation_is_submitted_again(
        experiment, fake_queue):
    path, config = experiment
    _, sacct = fake_queue
    finish_corpus(config)
    train_every_run(config)
    one = config.for_rung(config.rungs()[0])
    checkpoints = exported_checkpoints(config)
    failed = 1  # the array task of the second checkpoint: no results.json
    for i, checkpoint in enumerate(checkpoints):
        if i != failed:
            info = json.loads((checkpoint / "xsuite.json").read_text())
            write_eval_run(one, info["arm"], info["seed"], info["step"], {"piqa": metric_samples("acc", [1])})
    folder = config.output_root / "eval" / "slurm"  # what evaluation.evaluate --submit leaves
    folder.mkdir(parents=True)
    (folder / "checkpoints.txt").write_text("".join(f"{c.resolve()}\n" for c in checkpoints))
    (folder / f"evaluate-7000_{failed}.out").write_text(
        "Traceback (most recent call last):\n  File \"evaluate.py\"\nRuntimeError: CUDA error: an illegal memory access\n")
    sacct.write_text("".join(f"7000_{i}|t-evaluate|{'FAILED' if i == failed else 'COMPLETED'}|60|4|cpu=4,gres/gpu=1\n"
                             for i in range(len(checkpoints))))
    status = experiment_status(config, path)
    evaluate = rows(status)["evaluate"]
    assert (evaluate["done"], evaluate["tasks"], evaluate["failed"]) == (len(checkpoints) - 1, len(checkpoints), 1)
    assert evaluate["gpu_hours"] == pytest.approx(len(checkpoints) * 60 / 3600)
    assert status["failures"] == [{"stage": "evaluate", "task": str(checkpoints[failed].resolve()),
                                   "log": str(folder / f"evaluate-7000_{failed}.out"),
                                   "error": "RuntimeError: CUDA error: an illegal memory access"}]
    assert status["next"] == f"sbatch slurm/evaluate.sh {path}"


def test_a_task_run_again_shows_its_new_figures_on_the_next_call_with_the_cache_on(experiment):
    path, config = experiment
    a = flow_stages(config)[0]
    finish(a, 0, documents=5)
    finish(a, 1, documents=5)
    assert rows(experiment_status(config, path))["extract-a"]["produced"]["documents_out"] == 10
    rerun_task(a.logs, 0)  # the flow runs it again: new stats, a new marker, between two calls
    finish(a, 0, documents=9, seconds=7.0)
    extract_a = rows(experiment_status(config, path))["extract-a"]
    assert (extract_a["done"], extract_a["produced"]["documents_out"]) == (2, 14)
    assert extract_a["cpu_hours"] == pytest.approx((7.0 + 3.0) / 3600)


def test_past_the_sample_figures_are_scaled_and_marked_until_read_and_exact_reads_them_all(experiment, monkeypatch, capsys):
    path, config = experiment
    monkeypatch.setattr(status_module, "SAMPLE", 1)
    a = flow_stages(config)[0]
    finish(a, 0, documents=4)
    finish(a, 1, documents=6)
    assert main([path]) == 0
    text = capsys.readouterr().out
    assert re.search(r"^extract-a +2/2 .* documents_out ~(8|12) ", text, re.M)
    assert "~ estimated: the stats of 1 of 2 finished tasks are not read yet; their figures are scaled from 1" in text
    extract_a = rows(experiment_status(config, path))["extract-a"]  # the cache holds one: this call reads the other
    assert (extract_a["estimated"], extract_a["produced"]["documents_out"]) == (0, 10)
    assert main([path, "--exact", "--no-cache"]) == 0
    assert re.search(r"^extract-a +2/2 .* documents_out 10 ", capsys.readouterr().out, re.M)


def test_past_the_sample_a_task_run_again_is_read_again_and_the_others_stay_read(experiment, monkeypatch):
    path, config = experiment
    monkeypatch.setattr(status_module, "SAMPLE", 1)
    a = flow_stages(config)[0]
    finish(a, 0, documents=4)
    finish(a, 1, documents=6)
    experiment_status(config, path)
    assert rows(experiment_status(config, path))["extract-a"]["estimated"] == 0  # both read, one a call
    rerun_task(a.logs, 0)
    finish(a, 0, documents=9, seconds=7.0)
    extract_a = rows(experiment_status(config, path))["extract-a"]
    assert (extract_a["estimated"], extract_a["produced"]["documents_out"]) == (0, 15)
    assert extract_a["cpu_hours"] == pytest.approx((7.0 + 3.0) / 3600)


def test_the_eta_of_a_row_scaled_from_a_sample_is_marked(experiment, monkeypatch, capsys):
    path, config = experiment
    spec = yaml.safe_load(Path(path).read_text())
    spec["arms"]["a"]["resources"]["tasks"] = 3
    config = ExperimentConfig.model_validate(spec)
    monkeypatch.setattr(status_module, "SAMPLE", 1)
    a = flow_stages(config)[0]
    finish(a, 0, documents=4)
    finish(a, 1, documents=6)
    text = status_module.plain_text(experiment_status(config, path, use_cache=False))
    assert re.search(r"^extract-a +2/3 .*documents_out ~(8|12) .* ~\d+m$", text, re.M)


def test_with_no_cache_the_estimate_line_does_not_promise_more_read_each_call(experiment, monkeypatch, capsys):
    path, config = experiment
    monkeypatch.setattr(status_module, "SAMPLE", 1)
    a = flow_stages(config)[0]
    finish(a, 0, documents=4)
    finish(a, 1, documents=6)
    assert main([path, "--no-cache"]) == 0
    text = capsys.readouterr().out
    assert "With --no-cache each call reads the same sample; --exact reads them all." in text
    assert "Each call reads" not in text
