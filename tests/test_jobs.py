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
    assert d["job-name"] == "exp-train-a-seed1" and d["partition"] == "h100" and d["nodes"] == "2"
    assert d["gpus-per-node"] == "4" and d["mem"] == "256G" and d["time"] == "12:00:00"
    assert "requeue" in d and d["signal"] == "B:USR1@300" and d["open-mode"] == "append"
    assert "gpus" not in d and "array" not in d  # only what the job sets
    lines = script.splitlines()
    assert lines[0] == "#!/bin/bash" and "module load cuda" in lines
    assert "--nproc-per-node=4" in script and "-m pretrain.train" in script and "--arm a --seed 1" in script
