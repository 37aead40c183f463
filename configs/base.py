"""What every config section shares: strict models, the error type, the Slurm resources of a stage."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field


class ConfigError(ValueError):
    """A config file that cannot be used; the message names the file and the key."""


class StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Resources(StrictModel):
    """How many datatrove tasks a stage runs, and where.

    `tasks` splits the input files; `workers` is how many run at once (local processes, or the
    Slurm array's parallelism). The Slurm fields are ignored by the local executor.
    """

    tasks: int = Field(1, ge=1)
    workers: int = Field(1, ge=1)
    partition: str = "cpu"
    cpus_per_task: int = Field(1, ge=1)
    mem_per_cpu_gb: int = Field(2, ge=1)
    gpus_per_task: int = Field(0, ge=0)
    time: str = "04:00:00"
    qos: str = "normal"


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
