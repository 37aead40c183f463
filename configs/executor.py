"""`executor:`: how the stages' jobs are launched on Slurm."""

from __future__ import annotations

from pydantic import Field, model_validator

from configs.base import StrictModel


class ExecutorConfig(StrictModel):
    """How jobs are launched on Slurm. Whether they are is decided by how a script is started
    (`sbatch slurm/<stage>.sh` submits, `bash slurm/<stage>.sh` runs here), not by this config."""

    env_command: str | None = Field(None, description="Slurm only: a shell command run before each task or job, "
                                    "e.g. `source .venv/bin/activate`; null: none.")
    job_name_prefix: str = Field("xsuite", description="Start of every Slurm job name the suite submits "
                                 "(`<prefix>-<stage>`), to find its jobs in `squeue`.")
    max_array_size: int = Field(1001, ge=1, description="Your site's Slurm MaxArraySize (1001 is Slurm's default): "
                                "a corpus stage of more tasks is submitted as several arrays.")
    max_queued_tasks: int | None = Field(None, ge=3, description="The most array tasks the corpus flow holds queued "
                                         "at once (each counts against a site's per-user MaxSubmitJobs: leave room "
                                         "for your other jobs); past it, it submits what fits and one job that "
                                         "submits the rest when that has finished. null: no limit.")

    @model_validator(mode="before")
    @classmethod
    def _no_kind(cls, data):
        if isinstance(data, dict) and "kind" in data:
            raise ValueError("executor.kind is gone: `sbatch slurm/extract.sh` runs on Slurm, "
                             "`bash slurm/extract.sh` on this machine; drop the key")
        return data
