"""One way to write and submit a Slurm batch job: the `#SBATCH` header from a `BatchJob`, the
experiment's environment command, then the job's own commands.

Used by `pretrain.submit` (one GPU job per (arm, seed)) and `evaluation.evaluate --submit` (one
array task per checkpoint). Scripts are written next to the outputs they make, then submitted
with `sbatch --parsable`.
"""

from __future__ import annotations

import os
import shlex
import socket
import subprocess  # nosec B404  # sbatch is run with an argument list, never through a shell
from dataclasses import dataclass
from pathlib import Path

from configs.experiment import ExperimentConfig
from slurm.lock import CLAIM_ENV

REPO = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class BatchJob:
    name: str  # after the experiment's job_name_prefix
    partition: str
    qos: str
    time: str
    cpus_per_task: int
    mem_gb: int
    output: Path  # Slurm's %j / %A_%a patterns allowed
    commands: str  # the job's body, run from the repository root after the environment command
    nodes: int | None = None
    ntasks_per_node: int | None = None
    gpus_per_node: int | None = None
    gpus: int | None = None
    array: str | None = None
    requeue: bool = False
    signal: str | None = None  # e.g. B:USR1@300: a signal to the batch shell ahead of the time limit
    open_mode: str | None = None  # append: a requeued job's output continues the same file
    env_command: str | None = None  # in place of the experiment's (a job whose commands set up their own)


def render(job: BatchJob, config: ExperimentConfig) -> str:
    directives = {
        "job-name": f"{config.executor.job_name_prefix}-{job.name}", "partition": job.partition, "qos": job.qos,
        "nodes": job.nodes, "ntasks-per-node": job.ntasks_per_node, "gpus-per-node": job.gpus_per_node,
        "gpus": job.gpus, "cpus-per-task": job.cpus_per_task, "mem": f"{job.mem_gb}G", "time": job.time,
        "array": job.array, "requeue": job.requeue or None, "signal": job.signal, "open-mode": job.open_mode,
        "output": job.output,
    }
    header = [f"#SBATCH --{key}" if value is True else f"#SBATCH --{key}={value}"
              for key, value in directives.items() if value is not None]
    env = job.env_command or config.executor.env_command or f"source {shlex.quote(f'{REPO}/.venv/bin/activate')}"
    # the job runs under the claim of the driver that submits it (slurm.lock): it takes no lock of its own
    claim = f"export {CLAIM_ENV}={shlex.quote(f'{socket.gethostname()}:{os.getpid()}')}"
    return "\n".join(["#!/bin/bash", *header, "set -eo pipefail", f"cd {shlex.quote(str(REPO))}", env, claim,
                      job.commands.strip(), ""])


def sbatch(script: Path, options: list[str] = (), args: list[str] = ()) -> str:
    """Submit a job script (sbatch `options` before it, the script's `args` after it); returns the
    job id. The launcher job's own SLURM_* variables stay out (its --mem-per-cpu would clash with
    the job's --mem); SLURM_CONF says which cluster."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_") or k == "SLURM_CONF"}
    out = subprocess.run(["sbatch", "--parsable", *options, str(script), *args], check=True, capture_output=True, text=True,
                         env=env)
    return out.stdout.strip().split(";")[0]


def write_job(job: BatchJob, config: ExperimentConfig, script: Path) -> Path:
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text(render(job, config))
    return script
