"""`sbatch slurm/extract.sh CONFIG` on a real one-node Slurm (slurm-wlm + munge from Debian),
started with the scripts in ../shared/slurm; skipped where those or root are missing.

The whole corpus flow is submitted at once: extraction arrays, then the shared tokenizer,
post-processing, tokenisation and the budget, each job waiting on the ones it needs. Every job is a
Python process of its own: the flow runs once for the module (scancelled in the middle, then
submitted again to the end) and its tests read it; so does the training run that pretraining's and
evaluation's tests share."""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from configs.experiment import load_experiment
from corpus.accounting.ledger import arm_ledger
from corpus.accounting.summary import summarize_arm
from corpus.tokens.budget import manifest_path

REPO = Path(__file__).resolve().parents[1]
SLURM_SCRIPTS = REPO.parent / "shared" / "slurm"
# a job still to end: pending, running or on its way out (scontrol's JobState)
NOT_ENDED = {"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "REQUEUED", "RESIZING", "SUSPENDED"}

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not (SLURM_SCRIPTS / "start-local-slurm.sh").is_file(), reason="../shared/slurm absent"),
    pytest.mark.skipif(os.geteuid() != 0, reason="slurmd must run as root"),
]


@pytest.fixture(scope="module")
def slurm_env():
    state = Path(f"/tmp/xs-slurm-{os.getpid()}")  # unix socket paths must stay short
    # two fake GPUs: the evaluation's two array tasks run side by side, as the two CPUs allow
    env = {**os.environ, "FAKE_GPUS": "2", "CTLD_PORT": "7917", "SLURMD_PORT": "7918"}
    start = subprocess.run(["bash", str(SLURM_SCRIPTS / "start-local-slurm.sh"), str(state)], env=env,
                           capture_output=True, text=True, timeout=300)
    if start.returncode != 0:
        pytest.skip(f"could not start a local Slurm: {start.stderr[-500:]}")
    yield {**os.environ, "SLURM_CONF": str(state / "slurm.conf")}
    subprocess.run(["bash", str(SLURM_SCRIPTS / "stop-local-slurm.sh"), str(state)], capture_output=True, timeout=120)


def wait_until(done, seconds: float, what: str, every: float = 0.5) -> None:
    """Poll `done()` every `every` seconds: Slurm shows a job's end at once, and the tests wait on many."""
    deadline = time.time() + seconds
    while not done():
        if time.time() > deadline:
            raise AssertionError(f"not within {seconds} s: {what}")
        time.sleep(every)


def squeue(env) -> list[str]:
    out = subprocess.run(["squeue", "--noheader", "--format=%i %j %T"], env=env, check=True, capture_output=True, text=True)
    return out.stdout.split("\n")[:-1]


def job_state(job: str, env) -> dict[str, str]:
    out = subprocess.run(["scontrol", "show", "job", "--oneliner", job], env=env, check=True, capture_output=True, text=True)
    return dict(field.split("=", 1) for field in out.stdout.split() if "=" in field)


def sbatch_and_wait(script: str, args: list[str], logs: Path, env) -> str:
    """`sbatch SCRIPT ARGS` and wait for the job to end, as `sbatch --wait` does but without its
    sleeps (2 s, then 8, then 32 between looks); fails unless it completed with exit 0."""
    done = subprocess.run(["sbatch", "--parsable", f"--output={logs}/launcher-%j.out", script, *args], cwd=REPO, env=env,
                          check=True, capture_output=True, text=True, timeout=60)
    job = done.stdout.strip().split(";")[0]
    wait_until(lambda: job_state(job, env)["JobState"] not in NOT_ENDED, 300, f"job {job} ({script}) ended")
    state = job_state(job, env)
    assert (state["JobState"], state["ExitCode"]) == ("COMPLETED", "0:0"), (state, (logs / f"launcher-{job}.out").read_text())
    return job


def one_node_sections(resources: dict) -> dict:
    """Post-processing, tokenizer and dataset sections whose every stage fits the test's one node
    (the whole-arm stages' defaults are sized for the paper's shape)."""
    node = {"mem_per_cpu_gb": 1, "time": "00:10:00", "partition": "cpu"}
    return {"postprocess": {"minhash": {"num_buckets": 2, "buckets_resources": node, "cluster_resources": node},
                            "exact_dedup": {"find_resources": node}, "resources": resources},
            "tokenizer": {"kind": "sentencepiece", "vocab_size": 500, "sample_chars_per_arm": 20000, "resources": node},
            "dataset": {"tokens_per_arm": 2000, "resources": node}}


@pytest.fixture(scope="module")
def interrupted_flow(tmp_path_factory, slurm_env) -> dict:
    """The corpus flow of two arms (one on the cpu partition, one on the gpu partition with a GPU a
    task) over two WARC files: submitted with sbatch, every job scancelled while the extraction arrays
    run (a task killed mid-way, later stages never started), submitted again and run to the end;
    beside it, the same config run here uninterrupted."""
    from corpus.flow.run import run_corpus
    from corpus.sample import write_sample

    tmp_path = tmp_path_factory.mktemp("flow")
    for seed in (1, 2):
        write_sample(tmp_path / "warc" / str(seed), 40, seed=seed)
    node = {"workers": 1, "mem_per_cpu_gb": 1, "time": "00:10:00"}
    # two extraction tasks (a file each): the scancel finds one at work and one still to start. The
    # later stages never start before the scancel, so one task each holds their part of the property
    raw = {"name": "scancel-test", "output_root": str(tmp_path / "out"),
           "inputs": {"warc": [str(tmp_path / "warc" / "*" / "sample.warc.gz")]},
           "executor": {"env_command": f"source {sys.prefix}/bin/activate"},
           "arms": {"trafilatura": {"extractor": "trafilatura", "resources": {**node, "tasks": 2, "partition": "cpu"}},
                    "justext": {"extractor": "justext",
                                "resources": {**node, "tasks": 2, "partition": "gpu", "gpus_per_task": 1}}},
           **one_node_sections({**node, "tasks": 1, "partition": "cpu"})}
    config_path = tmp_path / "exp.yaml"
    config_path.write_text(yaml.safe_dump(raw))
    config = load_experiment(config_path)
    reference = load_experiment(config_path).model_copy(update={"output_root": tmp_path / "uninterrupted"})
    run_corpus(reference)

    sbatch_and_wait("slurm/extract.sh", [str(config_path)], tmp_path, slurm_env)
    # the moment an extraction task has begun writing its documents: it dies with its output half written
    outputs = [config.arm_dir(arm) / "output" for arm in config.arms]
    wait_until(lambda: any(any(folder.glob("*")) for folder in outputs if folder.is_dir()), 120,
               "an extraction task writes its documents", every=0.1)
    subprocess.run(["scancel", "--user", "root"], env=slurm_env, check=True)
    wait_until(lambda: not squeue(slurm_env), 120, "every job cancelled")
    finished_before_scancel = manifest_path(config).is_file()

    sbatch_and_wait("slurm/extract.sh", [str(config_path)], tmp_path, slurm_env)
    # the budget's job may still be writing its completion marker when the manifest is there
    wait_until(lambda: manifest_path(config).is_file() and not squeue(slurm_env), 400,
               f"the budget stage finished; logs in {tmp_path}")
    return {"config": config, "config_path": config_path, "reference": reference, "logs": tmp_path,
            "finished_before_scancel": finished_before_scancel}


def test_scancel_in_the_middle_of_the_arrays_then_resubmit_gives_the_uninterrupted_outputs(interrupted_flow):
    """scancel every job while the extraction arrays run, re-submit: the outputs are byte-identical
    to an uninterrupted run's, ledgers balance."""
    from conftest import output_hashes

    config, reference = interrupted_flow["config"], interrupted_flow["reference"]
    assert not interrupted_flow["finished_before_scancel"], "the scancel came after the whole flow"
    expected = {f: h for f, h in output_hashes(reference.output_root).items()
                if not f.endswith("summary.json")}  # written by a local run only (python -m corpus.accounting.summary on Slurm)
    assert output_hashes(config.output_root) == expected
    assert all(arm_ledger(config, arm)["balanced"] for arm in config.arms)


def test_sbatch_extract_runs_every_stage_as_dependent_jobs_and_resumes(interrupted_flow, slurm_env):
    """Every stage ran as a job array after the ones it needs (an arm on each partition); every
    record is accounted for; a re-run finds every task complete and runs nothing."""
    config = interrupted_flow["config"]
    summaries = [summarize_arm(config, arm) for arm in config.arms]
    assert all(s["balanced"] and s["records"] == summaries[0]["records"] for s in summaries)
    assert all(arm_ledger(config, arm)["balanced"] for arm in config.arms)
    stats = [config.arm_dir("trafilatura") / "logs" / "stats" / "00000.json",
             config.output_root / "logs" / "budget" / "stats" / "00000.json"]
    first = [s.stat().st_mtime_ns for s in stats]
    sbatch_and_wait("slurm/extract.sh", [str(interrupted_flow["config_path"])], interrupted_flow["logs"], slurm_env)
    assert not squeue(slurm_env), "the re-run submitted jobs"
    assert [s.stat().st_mtime_ns for s in stats] == first


@pytest.fixture(scope="module")
def trained_on_slurm(tmp_path_factory, slurm_env) -> dict:
    """`sbatch slurm/pretrain.sh CONFIG a 1`: the launcher submits the training job, which runs srun ->
    torchrun -> the loop (here on the node's CPU: a fake GPU of the test cluster is a gres, not a
    device) and exports a checkpoint every 4 steps and at the last."""
    from conftest import build_pretrain_corpus, pretrain_experiment

    tmp_path = tmp_path_factory.mktemp("pretrain")
    build_pretrain_corpus(tmp_path / "out")
    # one torch thread a job: a tiny model gains nothing from a second, and the node has two cores
    raw = pretrain_experiment(tmp_path / "out", training={"checkpoint_every": 4, "cpu_threads": 1},
                              executor={"env_command": f"source {sys.prefix}/bin/activate"},
                              evaluation={"tasks": "offline", "offline_items": 4, "batch_size": 8, "max_gen_toks": 4,
                                          "cpu_threads": 1,
                                          "slurm": {"partition": "gpu", "gpus": 1, "cpus_per_task": 1, "mem_gb": 2,
                                                    "time": "00:10:00"}})
    raw["pretrain"]["model"] = {**raw["pretrain"]["model"], "seq_length": 128}
    raw["pretrain"]["slurm"] = {"nodes": 1, "gpus_per_node": 1, "partition": "gpu", "cpus_per_task": 1, "mem_gb": 2,
                                "time": "00:10:00"}
    config_path = tmp_path / "exp.yaml"
    config_path.write_text(yaml.safe_dump(raw))
    config = load_experiment(config_path)
    steps, _ = config.training_steps()
    sbatch_and_wait("slurm/pretrain.sh", [str(config_path), "a", "1"], tmp_path, slurm_env)
    last_export = config.run_dir("a", 1) / "hf" / f"step_{steps:07d}" / "xsuite.json"
    wait_until(lambda: last_export.is_file() and not squeue(slurm_env), 300,
               f"the training job ended: {sorted(config.run_dir('a', 1).glob('slurm-*.out'))}")
    return {"config": config, "config_path": config_path, "steps": steps, "logs": tmp_path}


def test_sbatch_pretrain_trains_on_a_gpu_node_and_skips_finished_runs(trained_on_slurm, slurm_env):
    config, steps = trained_on_slurm["config"], trained_on_slurm["steps"]
    log = config.run_dir("a", 1) / "log.jsonl"
    assert len(log.read_text().splitlines()) == steps, list(config.run_dir("a", 1).glob("slurm-*.out"))
    logs = trained_on_slurm["logs"]
    job = sbatch_and_wait("slurm/pretrain.sh", [str(trained_on_slurm["config_path"]), "a", "1"], logs, slurm_env)
    assert "a model seed 1: finished already" in (logs / f"launcher-{job}.out").read_text()


def test_sbatch_evaluate_runs_one_array_task_per_checkpoint(trained_on_slurm, slurm_env):
    from evaluation.evaluate import pending

    config = trained_on_slurm["config"]
    todo = pending(config)
    assert len(todo) >= 2  # every checkpoint_every steps, and the last
    sbatch_and_wait("slurm/evaluate.sh", [str(trained_on_slurm["config_path"])], trained_on_slurm["logs"], slurm_env)
    # and every task ended: one may still be writing its samples when the last results.json is there
    wait_until(lambda: not pending(config) and not squeue(slurm_env), 400, f"every checkpoint evaluated: "
               f"{sorted((config.output_root / 'eval' / 'slurm').glob('*.out'))}")
