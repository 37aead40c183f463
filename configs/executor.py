"""`executor:`: how the stages' jobs are launched on Slurm."""

from __future__ import annotations

from pydantic import Field, model_validator

from configs.base import SAFE_NAME, StrictModel


class ExecutorConfig(StrictModel):
    """How jobs are launched on Slurm. Whether they are is decided by how a script is started
    (`sbatch slurm/<stage>.sh` submits, `bash slurm/<stage>.sh` runs here), not by this config."""

    # Slurm only: a command run before each task (e.g. `source .venv/bin/activate`).
    env_command: str | None = None
    job_name_prefix: str = Field("xsuite", pattern=SAFE_NAME, description=(
        "The start of every Slurm job's name (`<prefix>-<stage>`): letters, digits and _ . - only, since it "
        "reaches #SBATCH lines and shell commands."))
    # Slurm's MaxArraySize (1001 by default): a stage of more tasks is submitted as several arrays
    max_array_size: int = Field(1001, ge=1)
    # the most array tasks the flow holds queued at once (each counts as a job against a site's
    # per-user MaxSubmitJobs; leave room for your other jobs); null: no limit. Past it, the flow
    # submits what fits and one job that submits the rest when that has finished (corpus/flow/submit.py)
    max_queued_tasks: int | None = Field(None, ge=3)

    @model_validator(mode="before")
    @classmethod
    def _no_kind(cls, data):
        if isinstance(data, dict) and "kind" in data:
            raise ValueError("executor.kind is gone: `sbatch slurm/extract.sh` runs on Slurm, "
                             "`bash slurm/extract.sh` on this machine; drop the key")
        return data
