"""`sbatch slurm/extract.sh CONFIG` on a real one-node Slurm (slurm-wlm + munge from Debian),
started with the scripts in ../shared/slurm; skipped where those or root are missing.

The whole corpus flow is submitted at once: extraction arrays, then the shared tokenizer,
post-processing, tokenisation and the budget, each job waiting on the ones it needs."""

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

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not (SLURM_SCRIPTS / "start-local-slurm.sh").is_file(), reason="../shared/slurm absent"),
    pytest.mark.skipif(os.geteuid() != 0, reason="slurmd must run as root"),
]


@pytest.fixture(scope="module")
def slurm_env():
    state = Path(f"/tmp/xs-slurm-{os.getpid()}")  # unix socket paths must stay short
    env = {**os.environ, "FAKE_GPUS": "1", "CTLD_PORT": "7917", "SLURMD_PORT": "7918"}
    start = subprocess.run(["bash", str(SLURM_SCRIPTS / "start-local-slurm.sh"), str(state)], env=env,
                           capture_output=True, text=True, timeout=300)
    if start.returncode != 0:
        pytest.skip(f"could not start a local Slurm: {start.stderr[-500:]}")
    yield {**os.environ, "SLURM_CONF": str(state / "slurm.conf")}
    subprocess.run(["bash", str(SLURM_SCRIPTS / "stop-local-slurm.sh"), str(state)], capture_output=True, timeout=120)


def one_node_sections(resources: dict) -> dict:
    """Post-processing, tokenizer and dataset sections whose every stage fits the test's one node
    (the whole-arm stages' defaults are sized for the paper's shape)."""
    node = {"mem_per_cpu_gb": 1, "time": "00:10:00", "partition": "cpu"}
    return {"postprocess": {"minhash": {"num_buckets": 2, "buckets_resources": node, "cluster_resources": node},
                            "exact_dedup": {"find_resources": node}, "resources": resources},
            "tokenizer": {"kind": "sentencepiece", "vocab_size": 500, "sample_chars_per_arm": 20000, "resources": node},
            "dataset": {"tokens_per_arm": 2000, "resources": node}}


def test_sbatch_extract_runs_every_stage_as_dependent_jobs_and_resumes(tmp_path, sample_dir, slurm_env):
    config_path = tmp_path / "exp.yaml"
    resources = {"tasks": 1, "workers": 1, "mem_per_cpu_gb": 1, "time": "00:10:00"}
    config_path.write_text(yaml.safe_dump({
        "name": "slurm-test", "output_root": str(tmp_path / "out"),
        "inputs": {"warc": [str(sample_dir / "sample.warc.gz")]},
        "executor": {"env_command": f"source {sys.prefix}/bin/activate"},
        "arms": {
            "cpu_arm": {"extractor": "trafilatura", "resources": {**resources, "partition": "cpu"}},
            "gpu_arm": {"extractor": "trafilatura", "resources": {**resources, "partition": "gpu", "gpus_per_task": 1}},
        },
        **one_node_sections(resources),
    }))
    config = load_experiment(config_path)

    def submit_and_wait():
        subprocess.run(["sbatch", "--wait", f"--output={tmp_path}/launcher-%j.out", "slurm/extract.sh", str(config_path)],
                       cwd=REPO, env=slurm_env, check=True, capture_output=True, timeout=300)
        deadline = time.time() + 400
        while time.time() < deadline:
            if manifest_path(config).is_file() and not squeue(slurm_env):  # the budget's job may still be ending
                return [summarize_arm(config, arm) for arm in config.arms]
            time.sleep(2)
        raise AssertionError(f"the budget stage did not finish; logs in {tmp_path}")

    summaries = submit_and_wait()
    assert all(s["balanced"] and s["records"] == summaries[0]["records"] for s in summaries)
    assert all(arm_ledger(config, arm)["balanced"] for arm in config.arms)
    stats = [config.arm_dir("cpu_arm") / "logs" / "stats" / "00000.json",
             config.output_root / "logs" / "budget" / "stats" / "00000.json"]
    first = [s.stat().st_mtime_ns for s in stats]
    submit_and_wait()  # a re-run finds every task complete and runs nothing
    assert [s.stat().st_mtime_ns for s in stats] == first


def squeue(env) -> list[str]:
    out = subprocess.run(["squeue", "--noheader", "--format=%i %j %T"], env=env, check=True, capture_output=True, text=True)
    return out.stdout.split("\n")[:-1]


def test_scancel_in_the_middle_of_the_arrays_then_resubmit_gives_the_uninterrupted_outputs(tmp_path, slurm_env):
    """scancel every job while the extraction arrays run (tasks killed mid-way, later stages never
    start), re-submit: the outputs are byte-identical to an uninterrupted run's, ledgers balance."""
    from conftest import output_hashes
    from corpus.flow.run import run_corpus
    from corpus.sample import write_sample

    for seed in (1, 2):
        write_sample(tmp_path / "warc" / str(seed), 40, seed=seed)
    resources = {"tasks": 2, "workers": 1, "mem_per_cpu_gb": 1, "time": "00:10:00", "partition": "cpu"}
    raw = {"name": "scancel-test", "output_root": str(tmp_path / "out"),
           "inputs": {"warc": [str(tmp_path / "warc" / "*" / "sample.warc.gz")]},
           "executor": {"env_command": f"source {sys.prefix}/bin/activate"},
           "arms": {"trafilatura": {"extractor": "trafilatura", "resources": resources},
                    "justext": {"extractor": "justext", "resources": resources}},
           **one_node_sections(resources)}
    config_path = tmp_path / "exp.yaml"
    config_path.write_text(yaml.safe_dump(raw))
    config = load_experiment(config_path)
    reference = load_experiment(config_path).model_copy(update={"output_root": tmp_path / "uninterrupted"})
    run_corpus(reference)

    subprocess.run(["sbatch", "--wait", f"--output={tmp_path}/launcher-%j.out", "slurm/extract.sh", str(config_path)],
                   cwd=REPO, env=slurm_env, check=True, capture_output=True, timeout=300)
    deadline = time.time() + 120
    while time.time() < deadline and not any("extract" in job and "RUNNING" in job for job in squeue(slurm_env)):
        time.sleep(0.2)
    subprocess.run(["scancel", "--user", "root"], env=slurm_env, check=True)
    while squeue(slurm_env):
        time.sleep(1)
    assert not manifest_path(config).is_file(), "the scancel came after the whole flow"

    subprocess.run(["sbatch", "--wait", f"--output={tmp_path}/launcher-%j.out", "slurm/extract.sh", str(config_path)],
                   cwd=REPO, env=slurm_env, check=True, capture_output=True, timeout=300)
    deadline = time.time() + 400
    while time.time() < deadline and not manifest_path(config).is_file():
        time.sleep(2)
    while squeue(slurm_env):  # the budget's job may still be writing its completion marker
        time.sleep(1)
    expected = {f: h for f, h in output_hashes(reference.output_root).items()
                if not f.endswith("summary.json")}  # written by a local run only (python -m corpus.accounting.summary on Slurm)
    assert output_hashes(config.output_root) == expected
    assert all(arm_ledger(config, arm)["balanced"] for arm in config.arms)


def test_sbatch_pretrain_trains_on_a_gpu_node_and_skips_finished_runs(tmp_path, slurm_env):
    """The launcher submits one job per (arm, seed); the job runs srun -> torchrun -> the loop
    (here on the node's CPU: the fake GPU of the test cluster is a gres, not a device)."""
    from conftest import build_pretrain_corpus, pretrain_experiment


    build_pretrain_corpus(tmp_path / "out")
    raw = pretrain_experiment(tmp_path / "out", executor={"env_command": f"source {sys.prefix}/bin/activate"})
    raw["pretrain"]["slurm"] = {"nodes": 1, "gpus_per_node": 1, "partition": "gpu", "cpus_per_task": 1, "mem_gb": 2,
                                "time": "00:10:00"}
    config_path = tmp_path / "exp.yaml"
    config_path.write_text(yaml.safe_dump(raw))
    config = load_experiment(config_path)
    steps, _ = config.training_steps()

    def submit():
        return subprocess.run(["sbatch", "--wait", f"--output={tmp_path}/launcher-%j.out", "slurm/pretrain.sh",
                               str(config_path), "a", "1"], cwd=REPO, env=slurm_env, check=True, capture_output=True,
                              timeout=300)

    submit()
    log = config.run_dir("a", 1) / "log.jsonl"
    deadline = time.time() + 300
    while time.time() < deadline and not (config.run_dir("a", 1) / "hf" / f"step_{steps:07d}" / "xsuite.json").is_file():
        time.sleep(2)
    assert len(log.read_text().splitlines()) == steps, list(config.run_dir("a", 1).glob("slurm-*.out"))
    submit()
    launcher = sorted(tmp_path.glob("launcher-*.out"))[-1].read_text()
    assert "a model seed 1: finished already" in launcher


def test_sbatch_evaluate_runs_one_array_task_per_checkpoint(tmp_path, slurm_env):
    from conftest import build_pretrain_corpus, pretrain_experiment
    from evaluation.evaluate import pending
    from pretrain.train import train

    build_pretrain_corpus(tmp_path / "out")
    raw = pretrain_experiment(tmp_path / "out", training={"checkpoint_every": 4},
                              executor={"env_command": f"source {sys.prefix}/bin/activate"},
                              evaluation={"tasks": "offline", "offline_items": 4, "batch_size": 8, "max_gen_toks": 4,
                                          "slurm": {"partition": "gpu", "gpus": 1, "cpus_per_task": 1, "mem_gb": 2,
                                                    "time": "00:10:00"}})
    raw["pretrain"]["model"] = {**raw["pretrain"]["model"], "seq_length": 128}
    config_path = tmp_path / "exp.yaml"
    config_path.write_text(yaml.safe_dump(raw))
    config = load_experiment(config_path)
    train(config, "a", seed=1)
    todo = pending(config)
    assert len(todo) >= 2  # every checkpoint_every steps, and the last
    subprocess.run(["sbatch", "--wait", f"--output={tmp_path}/launcher-%j.out", "slurm/evaluate.sh", str(config_path)],
                   cwd=REPO, env=slurm_env, check=True, capture_output=True, timeout=300)
    deadline = time.time() + 400
    while time.time() < deadline and pending(config):
        time.sleep(3)
    assert pending(config) == [], sorted((config.output_root / "eval" / "slurm").glob("*.out"))
