"""Job scripts for pretraining and evaluation come from one writer (slurm/jobs.py)."""

from configs.experiment import ExperimentConfig
from conftest import pretrain_experiment
from pretrain.submit import training_job
from slurm.jobs import render


def directives(script: str) -> dict[str, str]:
    out = {}
    for line in script.splitlines():
        if line.startswith("#SBATCH --"):
            key, _, value = line.removeprefix("#SBATCH --").partition("=")
            out[key] = value
    return out


def test_training_job_asks_for_the_configured_nodes_and_requeues(tmp_path):
    raw = pretrain_experiment(tmp_path, executor={"env_command": "module load cuda", "job_name_prefix": "exp"})
    raw["pretrain"]["slurm"] = {"nodes": 2, "gpus_per_node": 4, "partition": "h100", "mem_gb": 256, "time": "12:00:00"}
    config = ExperimentConfig.model_validate(raw)
    script = render(training_job(config, "exp.yaml", "a", 1), config)
    d = directives(script)
    assert d["job-name"] == "exp-train-a-model-seed1" and d["partition"] == "h100" and d["nodes"] == "2"
    assert d["gpus-per-node"] == "4" and d["mem"] == "256G" and d["time"] == "12:00:00"
    assert "requeue" in d and d["signal"] == "B:USR1@300" and d["open-mode"] == "append"
    assert "gpus" not in d and "array" not in d  # only what the job sets
    lines = script.splitlines()
    assert lines[0] == "#!/bin/bash" and "module load cuda" in lines
    assert "--nproc-per-node=4" in script and "-m pretrain.train" in script and "--rung model --arm a --seed 1" in script
    # srun gives the node's task the job's CPUs (Slurm >= 22.05 no longer passes sbatch's on)
    srun = next(line for line in lines if line.startswith("srun "))
    assert f"--cpus-per-task={config.pretrain.slurm.cpus_per_task}" in srun.split()


FAKE_SBATCH = """#!/usr/bin/env bash
cp "${@: -1}" "$FAKE_SBATCH_COPY"
echo 4242
"""


def test_a_container_training_job_runs_torchrun_inside_the_image_and_sees_what_it_needs(tmp_path, monkeypatch):
    """pretrain.submit through a fake `sbatch`: the submitted script starts torchrun in the
    configured pyxis image (docs/explanation/pretraining.md's recipe), with the repository, the output root, the config's
    folder and the listed folders mounted, and the container's environment in place of the host's.
    Everything the job reads or runs lies under a mount: the code, the config, the tokenizer and
    dataset, the run's folder, the environment it activates; an environment not mounted is refused."""
    import os
    import shlex
    import stat
    import subprocess
    from pathlib import Path

    import pytest
    from pydantic import ValidationError

    from pretrain.submit import submit
    from slurm.jobs import REPO

    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "sbatch").write_text(FAKE_SBATCH)
    (tmp_path / "bin" / "sbatch").chmod(stat.S_IRWXU)
    (tmp_path / "bin" / "squeue").write_text("#!/bin/sh\n")  # nothing queued (pretrain.submit.queued_job asks)
    (tmp_path / "bin" / "squeue").chmod(stat.S_IRWXU)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_SBATCH_COPY", str(tmp_path / "submitted.sbatch"))
    raw = pretrain_experiment(tmp_path / "out", executor={"env_command": "source /host/venv/bin/activate"})
    raw["pretrain"]["slurm"] = {"gpus_per_node": 8, "container_image": "nvcr.io#nvidia/pytorch:25.12-py3",
                                "container_mounts": ["/shared/xsuite-ngc:/shared/xsuite-ngc",
                                                     "/scratch/hf:/root/.cache/huggingface"],
                                "container_env": "source /shared/xsuite-ngc/bin/activate"}
    config = ExperimentConfig.model_validate(raw)
    config_file = tmp_path / "configs" / "exp.yaml"
    assert submit(config, str(config_file), [("model", "a", 1)], dry_run=False) == ["4242"]

    script = (tmp_path / "submitted.sbatch").read_text()
    assert subprocess.run(["bash", "-n", "-c", script]).returncode == 0
    assert "/host/venv" not in script  # the host's environment does not reach the container
    srun = shlex.split(next(line for line in script.splitlines() if line.startswith("srun ")).removesuffix(" &"))
    flags = dict(arg.removeprefix("--").split("=", 1) for arg in srun if arg.startswith("--container"))
    assert flags["container-image"] == "nvcr.io#nvidia/pytorch:25.12-py3"
    assert flags["container-workdir"] == str(REPO)
    out = (tmp_path / "out").resolve()
    mounts = flags["container-mounts"].split(",")
    assert mounts == [f"{REPO}:{REPO}", f"{config_file.parent}:{config_file.parent}", f"{out}:{out}",
                      "/shared/xsuite-ngc:/shared/xsuite-ngc", "/scratch/hf:/root/.cache/huggingface"]
    inside = srun[srun.index("bash") + 2]
    assert inside.startswith("source /shared/xsuite-ngc/bin/activate && exec torchrun ") and "--nproc-per-node=8" in inside
    assert "export MASTER_ADDR=" in script and "export MASTER_PORT=" in script  # read inside the container

    seen = [Path(m.split(":")[1]) for m in mounts]
    needed = [REPO / "pretrain" / "train.py", config_file, config.tokenizer_file(), Path(f"{config.dataset_prefix('a')}.bin"),
              config.run_dir("a", 1), Path("/shared/xsuite-ngc/bin/activate"),
              Path(shlex.split(inside)[shlex.split(inside).index("pretrain.train") + 1])]
    assert all(any(p.resolve().is_relative_to(m) for m in seen) for p in needed), needed

    raw["pretrain"]["slurm"]["container_mounts"] = ["/scratch/hf:/root/.cache/huggingface"]
    with pytest.raises(SystemExit, match="container_env names /shared/xsuite-ngc/bin/activate, which the container "
                                         "does not see: add it to pretrain.slurm.container_mounts"):
        submit(ExperimentConfig.model_validate(raw), str(config_file), [("model", "a", 1)], dry_run=True)
    raw["pretrain"]["slurm"] = {"container_env": "source /opt/xsuite/bin/activate"}
    with pytest.raises(ValidationError, match="container_mounts and container_env need a container_image"):
        ExperimentConfig.model_validate(raw)


def test_a_ladder_submits_one_job_per_rung_arm_and_seed_shaped_by_its_rung(tmp_path, monkeypatch):
    """`sbatch slurm/pretrain.sh` of a ladder, through a fake `sbatch`: each rung's jobs ask for its
    own nodes, GPUs and time, and run torchrun on that rung."""
    import os
    import stat

    from configs.experiment import ExperimentConfig
    from conftest import PRETRAIN_MODEL
    from pretrain.submit import submit
    from pretrain.train import selected_runs

    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "sbatch").write_text('#!/usr/bin/env bash\ncp "${@: -1}" "$FAKE_SBATCH_DIR/$(date +%s%N).sbatch"\n'
                                             "echo 7\n")
    (tmp_path / "bin" / "sbatch").chmod(stat.S_IRWXU)
    (tmp_path / "bin" / "squeue").write_text("#!/bin/sh\n")  # nothing queued (pretrain.submit.queued_job asks)
    (tmp_path / "bin" / "squeue").chmod(stat.S_IRWXU)
    (tmp_path / "jobs").mkdir()
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_SBATCH_DIR", str(tmp_path / "jobs"))
    raw = pretrain_experiment(tmp_path / "out")
    raw["pretrain"] = {"training": raw["pretrain"]["training"], "slurm": {"partition": "h100", "gpus_per_node": 8},
                       "ladder": [{"name": "small", "model": PRETRAIN_MODEL | {"hidden_size": 16, "ffn_hidden_size": 32},
                                   "tokens": 2000, "seeds": [1, 2, 3], "slurm": {"gpus_per_node": 1, "time": "02:00:00"}},
                                  {"name": "large", "model": PRETRAIN_MODEL, "seeds": [1], "slurm": {"nodes": 4}}]}
    config = ExperimentConfig.model_validate(raw)
    runs = selected_runs(config, "exp.yaml", None, None)
    assert runs == [("small", "a", 1), ("small", "a", 2), ("small", "a", 3), ("small", "b", 1), ("small", "b", 2),
                    ("small", "b", 3), ("large", "a", 1), ("large", "b", 1)]
    assert len(submit(config, "exp.yaml", runs, dry_run=False)) == 8
    scripts = [p.read_text() for p in sorted((tmp_path / "jobs").iterdir())]
    shapes = {}
    for script in scripts:
        d = directives(script)
        rung = d["job-name"].split("-")[-2]
        shapes.setdefault(rung, set()).add((d["nodes"], d["gpus-per-node"], d["time"], d["partition"]))
        assert f"--rung {rung} " in script and d["job-name"].startswith("xsuite-train-")
    assert shapes == {"small": {("1", "1", "02:00:00", "h100")}, "large": {("4", "8", "48:00:00", "h100")}}


def test_a_run_whose_job_is_queued_or_running_is_not_submitted_again(tmp_path, monkeypatch, capsys):
    import os
    import stat

    from pretrain.submit import submit

    config = ExperimentConfig.model_validate(pretrain_experiment(tmp_path / "out"))
    script = (config.run_dir("a", 1) / "train.sbatch").resolve()
    (tmp_path / "bin").mkdir()
    for name, body in (("squeue", f"echo '71|COMPLETED|{script}'\necho '77|RUNNING|{script}'\n"),
                       ("sbatch", "echo 4243\n")):
        (tmp_path / "bin" / name).write_text(f"#!/bin/sh\n{body}")
        (tmp_path / "bin" / name).chmod(stat.S_IRWXU)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    assert submit(config, str(tmp_path / "exp.yaml"), [("model", "a", 1)], dry_run=False) == []
    assert "queued or running already, job 77" in capsys.readouterr().out
    assert submit(config, str(tmp_path / "exp.yaml"), [("model", "a", 2)], dry_run=False) == ["4243"]  # another run
