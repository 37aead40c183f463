"""What every config section shares: strict models, the error type, the Slurm resources of a stage."""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, field_validator


class ConfigError(ValueError):
    """A config file that cannot be used; the message names the file and the key."""


class StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TaskResources(StrictModel):
    """Where each task of a stage runs on Slurm (ignored by the local executor)."""

    partition: str = Field("cpu", description="Slurm partition the stage's tasks are submitted to (`--partition`).")
    cpus_per_task: int = Field(1, ge=1, description="CPU cores Slurm gives each task (`--cpus-per-task`).")
    mem_per_cpu_gb: int = Field(2, ge=1, description="Memory per core in GB (`--mem-per-cpu`); a task gets "
                                "`cpus_per_task` x this. Raise it when a task is killed for memory.")
    gpus_per_task: int = Field(0, ge=0, description="GPUs Slurm gives each task (`--gpus-per-task`); 0 for a CPU stage.")
    time: str = Field("04:00:00", description="Slurm time limit of each task, `[days-]hours:minutes:seconds` "
                      "(e.g. `04:00:00`, `2-00:00:00`); another form is refused at load.")
    qos: str = Field("normal", description="Slurm quality of service of the tasks (`--qos`).")

    @field_validator("time")
    @classmethod
    def _slurm_time(cls, value: str) -> str:
        if not re.fullmatch(r"(\d+-)?\d+:\d{2}:\d{2}", value):
            raise ValueError(f"time {value!r}: give [days-]hours:minutes:seconds, e.g. 04:00:00 or 2-00:00:00")
        return value

    @property
    def mem_gb(self) -> int:
        return self.cpus_per_task * self.mem_per_cpu_gb

    @property
    def hours(self) -> float:
        """`time` ([days-]hh:mm:ss, Slurm's format) in hours."""
        days, _, clock = self.time.rpartition("-")
        parts = [int(p) for p in clock.split(":")]
        while len(parts) < 3:
            parts.append(0)
        return 24 * int(days or 0) + parts[0] + parts[1] / 60 + parts[2] / 3600


class Resources(TaskResources):
    """How many datatrove tasks a stage runs, and where.

    `tasks` splits the input files; `workers` is how many run at once (local processes, or the
    Slurm array's parallelism).
    """

    tasks: int = Field(1, ge=1, description="datatrove tasks the stage's input files are split among; more tasks, "
                       "smaller tasks.")
    workers: int = Field(1, ge=1, description="How many tasks run at once: local processes (capped at the machine's "
                         "cores), or the Slurm array's parallelism.")


def require_model_folder(value: str, marker: str, hint: str) -> str:
    if not (Path(value) / marker).is_file():
        raise ValueError(f"{value!r} is not a model folder (no {marker}); {hint}")
    return value


def check_local_model(value: str) -> str:
    """A model given as a path ('/', './', '../') must be a Hugging Face folder; anything else is
    a hub id, fetched by whoever loads it (a cluster job, never a test)."""
    if value.startswith(("/", "./", "../")):
        require_model_folder(value, "config.json", "build or download it first")
    return value
