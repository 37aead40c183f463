"""Submission to Slurm within a site's limits, with a fake `sbatch` that records what it is given
and refuses, as a real one does, a submission past MaxArraySize or past the tasks a user may have
queued, and a fake `squeue`:

- a stage of more tasks than `executor.max_array_size` becomes several arrays, its workers shared
  among them with none lost, and every stage waits (afterok) for every array of every stage it needs;
- with `executor.max_queued_tasks`, no submission goes past it: the flow submits what fits and a job
  that submits the rest when that has finished, round after round, every task once, every array
  still gated afterok;
- a re-submission is refused while jobs it recorded are queued or running, also after an sbatch
  that failed halfway through a submission (each job is recorded as its sbatch returns)."""

import json
import os
import re

import pytest

from conftest import FAKE_SQUEUE, install_fakes, make_config
from corpus.flow.run import run_corpus
from corpus.flow.stages import corpus_stages
from corpus.flow.submit import SubmissionFailed, SubmissionRefused, next_round, recorded_jobs, rounds, throttles
from corpus.read.inputs import resolve_inputs

FAKE_SBATCH = """#!/usr/bin/env python3
import json, os, re, sys, time
log, limit, max_array = os.environ["FAKE_SBATCH_LOG"], int(os.environ.get("FAKE_SBATCH_LIMIT", 0)), 1001
with open(log + ".calls", "a+") as f:  # FAKE_SBATCH_FAIL_AT=n: the n-th call times out, its job queued all the same
    f.write("x")
    f.seek(0)
    timed_out = len(f.read()) == int(os.environ.get("FAKE_SBATCH_FAIL_AT", 0))
args = sys.argv[1:]
script_at = next(i for i, a in enumerate(args) if not a.startswith("--"))
options, script = args[:script_at], open(args[script_at]).read()
def option(name):
    given = [a.split("=", 1)[1] for a in options if a.startswith(f"--{name}=")]
    in_script = re.findall(rf"#SBATCH --{name}=(\\S+)", script)
    return (given or in_script or [""])[-1]
jobs = [json.loads(line) for line in open(log)] if os.path.exists(log) else []
array = option("array")
tasks = int(re.match(r"0-(\\d+)", array).group(1)) + 1 if array else 1
if tasks > max_array:
    sys.exit("sbatch: error: Batch job submission failed: Invalid job array specification")
queued = sum(j["tasks"] for j in jobs if not j["finished"])
if limit and queued + tasks > limit:
    sys.exit("sbatch: error: Batch job submission failed: Job violates accounting/QOS policy "
             "(job submit limit, user's size and/or time limits)")
job = str(1000 + len(jobs))
pik = re.search(r"launch_pickled_pipeline (\\S+)", script)
offset = re.search(r"RUN_OFFSET=(\\d+)", " ".join(options))
jobs.append({"job": job, "name": option("job-name"), "dependency": option("dependency"), "array": array,
             "tasks": tasks, "finished": False, "logs": os.path.dirname(pik.group(1)) if pik else None,
             "offset": int(offset.group(1)) if offset else 0, "merge_stats": "merge_stats" in script,
             "args": args[script_at + 1:], "submit_time": time.strftime("%Y-%m-%dT%H:%M:%S")})
with open(log, "w") as f:
    f.writelines(json.dumps(j) + "\\n" for j in jobs)
if timed_out:
    sys.exit("sbatch: error: Batch job submission failed: Socket timed out on send/recv operation")
print(job if "--parsable" in options else f"Submitted batch job {job}")
"""

@pytest.fixture
def fake_slurm(tmp_path, monkeypatch):
    """The fake sbatch and squeue on PATH; returns (submitted jobs, squeue's rows file: `id|name|state|submit time`)."""
    install_fakes(tmp_path / "bin", monkeypatch, sbatch=FAKE_SBATCH, squeue=FAKE_SQUEUE)
    log, rows = tmp_path / "sbatch.jsonl", tmp_path / "squeue.txt"
    monkeypatch.setenv("FAKE_SBATCH_LOG", str(log))
    monkeypatch.setenv("FAKE_SQUEUE_ROWS", str(rows))
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    rows.write_text("")
    return log, rows


def submitted(log) -> list[dict]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.is_file() else []


def queue(rows, *jobs: tuple[dict, str]) -> None:
    """What the fake squeue answers: each (job, state)."""
    rows.write_text("".join(f"{job['job']}|{job['name']}|{state}|{job['submit_time']}\n" for job, state in jobs))


def experiment(tmp_path, sample_dir, **executor):
    return make_config(tmp_path / "out", sample_dir / "sample.warc.gz",
                       {"a": {"extractor": "trafilatura", "resources": {"tasks": 5, "workers": 2}},
                        "b": {"extractor": "html2text", "resources": {"tasks": 2, "workers": 4}}},
                       executor={"max_array_size": 2, "job_name_prefix": "t", **executor},
                       postprocess={"resources": {"tasks": 3, "workers": 3}, "exact_dedup": {"finder_tasks": 3},
                                    "minhash": {"num_buckets": 4}},
                       tokenizer={"kind": "sentencepiece", "vocab_size": 600}, dataset={"tokens_per_arm": 1000})


def waits_for(job: dict) -> set[str]:
    return {j for part in re.findall(r"afterok:([\d:]+)", job["dependency"]) for j in part.split(":")}


def test_workers_are_shared_among_a_stage_s_arrays_with_none_lost():
    assert sum(throttles(256, 47)) == 256 and sorted(set(throttles(256, 47))) == [5, 6]
    assert throttles(4, 2) == [2, 2] and throttles(1, 3) == [1, 1, 1]


def test_every_stage_waits_for_every_array_of_the_stages_it_needs(tmp_path, sample_dir, fake_slurm):
    log, _ = fake_slurm
    config = experiment(tmp_path, sample_dir)
    run_corpus(config, executor="slurm")

    jobs = submitted(log)
    assert not any(job["merge_stats"] for job in jobs)  # nothing waits on a stats-merging job
    arrays: dict[str, list[dict]] = {}
    for job in jobs:
        arrays.setdefault(job["name"].removeprefix("t-"), []).append(job)
    stages = corpus_stages(config, *resolve_inputs(config))
    assert set(arrays) == {stage.label for stage in stages}  # no limit: everything at once, no job to continue
    parts = [stage.part_label for stage in stages]
    assert all(parts[i] == parts[i + 1] or parts[i] not in parts[i + 1:] for i in range(len(parts) - 1))  # in one piece
    for stage in stages:
        jobs = arrays[stage.label]
        assert len(jobs) == -(-stage.tasks // 2), stage.label  # arrays of at most max_array_size tasks
        assert sum(j["tasks"] for j in jobs) == stage.tasks
        for need in stage.needs:
            assert all({j["job"] for j in arrays[need]} <= waits_for(job) for job in jobs), (stage.label, need)
        throttle = [int(j["array"].split("%")[1]) for j in jobs]
        if len(jobs) <= stage.resources.workers:  # run together, the workers shared: none lost
            assert sum(throttle) == stage.resources.workers and "afterany" not in "".join(j["dependency"] for j in jobs)
        else:  # more arrays than workers: one task at a time each, `workers` of them at once
            assert throttle == [1] * len(jobs)
            workers = stage.resources.workers
            for i, job in enumerate(jobs):
                assert (f"afterany:{jobs[i - workers]['job']}" in job["dependency"]) == (i >= workers)
    assert len(arrays["extract-a"]) == 3 and len(arrays["exact-find-a"]) == 2 and len(arrays["minhash-buckets-b"]) == 2
    assert [int(j["array"].split("%")[1]) for j in arrays["extract-b"]] == [4]


def finish(jobs: list[dict]) -> None:
    """What Slurm does when the jobs run: each array task's rank completes (its datatrove marker)."""
    for job in jobs:
        if job["logs"] is None:
            continue
        ranks = json.loads(open(os.path.join(job["logs"], "ranks_to_run.json")).read())
        for index in range(job["tasks"]):
            completions = os.path.join(job["logs"], "completions")
            os.makedirs(completions, exist_ok=True)
            open(os.path.join(completions, f"{ranks[index + 2 * job['offset']]:05d}"), "w").close()


def test_no_submission_goes_past_the_queued_task_limit_and_every_array_still_waits_afterok(
        tmp_path, sample_dir, fake_slurm, monkeypatch):
    log, _ = fake_slurm
    limit = 7
    monkeypatch.setenv("FAKE_SBATCH_LIMIT", str(limit))
    config = experiment(tmp_path, sample_dir, max_queued_tasks=limit)
    stages = corpus_stages(config, *resolve_inputs(config))
    total = sum(stage.tasks for stage in stages)
    by_label = {stage.label: stage for stage in stages}
    planned = rounds(stages, limit)
    # the places kept: the job that submits the next round, and the one running this round
    assert len(planned) > 3 and all(sum(r.values()) <= limit - 2 for r in planned[:-1])

    ran: dict[str, list[int]] = {}
    for n in range(len(planned)):
        before = len(submitted(log))
        run_corpus(config, executor="slurm")  # the first by hand, the others by the job that continues
        this_round = submitted(log)[before:]
        assert sum(j["tasks"] for j in this_round) <= limit - 1  # and the fake sbatch refused nothing
        arrays = {}
        for job in this_round:
            arrays.setdefault(job["name"].removeprefix("t-"), []).append(job)
        assert {label: sum(j["tasks"] for j in jobs) for label, jobs in arrays.items() if label != "continue"} == planned[n]
        for label, jobs in arrays.items():
            if label == "continue":
                continue
            for need in by_label[label].needs:  # what it needs ran in an earlier round, or waits afterok here
                assert need in arrays or all(r in ran[need] for r in range(by_label[need].tasks)), (label, need)
                assert all({j["job"] for j in arrays.get(need, [])} <= waits_for(job) for job in jobs), (label, need)
            for job in jobs:
                ranks = json.loads(open(os.path.join(job["logs"], "ranks_to_run.json")).read())
                ran.setdefault(label, []).extend(ranks[2 * job["offset"]: 2 * job["offset"] + job["tasks"]])
        others = [j["job"] for j in this_round if j["name"] != "t-continue"]
        if n + 1 < len(planned):  # the rest, once every job of this round has finished well
            (resubmit,) = arrays["continue"]
            assert waits_for(resubmit) == set(others) and resubmit["args"][1:] == ["--allow-short", "--until", "dataset"]
            assert json.loads(open(resubmit["args"][0]).read()) == json.loads(config.model_dump_json())
            monkeypatch.setenv("SLURM_JOB_ID", resubmit["job"])  # the next round runs inside it
        else:
            assert "continue" not in arrays
        finish(this_round)
        jobs = submitted(log)
        for job in jobs:  # every job has ended but the one that continues: it runs the next round
            job["finished"] = n + 1 == len(planned) or job["job"] != resubmit["job"]
        log.write_text("".join(json.dumps(j) + "\n" for j in jobs))
    assert {label: sorted(r) for label, r in ran.items()} == {s.label: list(range(s.tasks)) for s in stages}  # each once
    assert sum(map(len, ran.values())) == total


def test_a_resubmission_is_refused_while_its_jobs_are_queued_or_running(tmp_path, sample_dir, fake_slurm, monkeypatch):
    log, rows = fake_slurm
    config = experiment(tmp_path, sample_dir, max_queued_tasks=10)
    run_corpus(config, executor="slurm")
    jobs = submitted(log)
    first, resubmit = jobs[0], next(j for j in jobs if j["name"] == "t-continue")
    again = len(jobs)

    queue(rows, (first, "RUNNING"), (resubmit, "PENDING"))
    with pytest.raises(SubmissionRefused) as refused:
        run_corpus(config, executor="slurm")
    assert f"scancel --state=PENDING {resubmit['job']}" in str(refused.value)
    assert f"scancel {first['job']}" in str(refused.value) and len(submitted(log)) == again  # nothing submitted

    # the same names, but jobs this root never recorded (another experiment's), or jobs that ended
    queue(rows, (first | {"job": "99"}, "RUNNING"), (first, "COMPLETED"))
    run_corpus(config, executor="slurm")
    assert len(submitted(log)) > again

    # the job that continues the submission does not refuse itself
    queue(rows, (resubmit, "RUNNING"))
    monkeypatch.setenv("SLURM_JOB_ID", resubmit["job"])
    run_corpus(config, executor="slurm")


def test_the_plan_s_rounds_are_the_submission_s(tmp_path, sample_dir):
    config = experiment(tmp_path, sample_dir)
    stages = corpus_stages(config, *resolve_inputs(config))
    assert rounds(stages, None) == [{stage.label: stage.tasks for stage in stages}]
    first = next_round(stages, {stage.label: stage.tasks for stage in stages}, 7)
    # places kept for the job that continues and for the one submitting
    assert sum(first.values()) == 5 and list(first) == ["extract-a", "extract-b"]


def test_an_sbatch_failing_halfway_loses_no_record_and_the_resubmission_is_still_refused(
        tmp_path, sample_dir, fake_slurm, monkeypatch):
    log, rows = fake_slurm
    config = experiment(tmp_path, sample_dir)
    monkeypatch.setenv("FAKE_SBATCH_FAIL_AT", "4")  # a busy slurmctld: the 4th sbatch times out, its job queued anyway
    with pytest.raises(SubmissionFailed, match="t-extract-b failed .*Every job queued before it is recorded"):
        run_corpus(config, executor="slurm")
    jobs = submitted(log)
    assert [j["name"] for j in jobs] == ["t-extract-a"] * 3 + ["t-extract-b"]
    assert recorded_jobs(config) == {"t-extract-a": {j["job"] for j in jobs[:3]}}  # each as its sbatch returned

    monkeypatch.delenv("FAKE_SBATCH_FAIL_AT")
    queue(rows, *((job, "PENDING") for job in jobs))
    with pytest.raises(SubmissionRefused) as refused:
        run_corpus(config, executor="slurm")
    assert f"scancel --state=PENDING {' '.join(j['job'] for j in jobs)}" in str(refused.value)
    # the timed-out sbatch's job alone: submitted while it ran, so it counts though no id came back
    queue(rows, (jobs[3], "PENDING"))
    with pytest.raises(SubmissionRefused, match=f"scancel --state=PENDING {jobs[3]['job']}\n"):
        run_corpus(config, executor="slurm")
    assert len(submitted(log)) == 4  # nothing submitted twice

    # a job of that name submitted at another time is not this root's; once the queue is clear, all is submitted
    queue(rows, (jobs[3] | {"job": "99", "submit_time": "2020-01-01T00:00:00"}, "PENDING"))
    run_corpus(config, executor="slurm")
    assert len(submitted(log)) > 4


def test_a_local_run_is_refused_while_the_root_s_submitted_jobs_are_queued(tmp_path, sample_dir, fake_slurm):
    log, rows = fake_slurm
    config = experiment(tmp_path, sample_dir, max_queued_tasks=10)
    run_corpus(config, executor="slurm")
    queue(rows, (submitted(log)[0], "RUNNING"))
    with pytest.raises(SubmissionRefused, match=r"refused: 1 job of .* still queued or running"):
        run_corpus(config)  # local: it would run the tasks the jobs run
