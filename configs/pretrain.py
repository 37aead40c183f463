"""`pretrain:`: the decoders trained on every arm: one size or a ladder of rungs, their
hyper-parameters and Slurm jobs. The shapes are `configs.model`."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, field_validator, model_validator

from configs.base import PARTITION_HELP, QOS_HELP, SLURM_WORD, StrictModel
from configs.model import ModelConfig, named_model


class SlurmTraining(StrictModel):
    """One srun task per node, running torchrun over the node's GPUs."""

    nodes: int = Field(1, ge=1)
    gpus_per_node: int = Field(8, ge=1)
    partition: str = Field("gpu", pattern=SLURM_WORD, description=PARTITION_HELP)
    cpus_per_task: int = Field(64, ge=1)
    mem_gb: int = Field(512, ge=1)
    time: str = "48:00:00"
    qos: str = Field("normal", pattern=SLURM_WORD, description=QOS_HELP)
    # pyxis/enroot (`srun --container-image`), as most Megatron clusters run: an image with CUDA
    # torch and Transformer Engine (nvcr.io#nvidia/pytorch:<tag>, or a .sqsh file). The repository,
    # the output root and the config's folder are mounted at their own paths; list others here.
    container_image: str | None = None
    container_mounts: list[str] = []  # SRC:DST[:FLAGS]
    # run inside the container before torchrun, in place of executor.env_command (which runs on
    # the host): what makes the project's packages importable there (README: Transformer Engine)
    container_env: str | None = None

    @model_validator(mode="after")
    def _container(self) -> SlurmTraining:
        if self.container_image is None and (self.container_mounts or self.container_env):
            raise ValueError("container_mounts and container_env need a container_image")
        return self


class TrainingConfig(StrictModel):
    global_batch_size: int = Field(ge=1)  # sequences per optimizer step, over all GPUs
    micro_batch_size: int = Field(ge=1)  # sequences per forward pass per GPU
    lr: float = Field(3e-4, gt=0)
    min_lr_ratio: float = Field(0.1, ge=0, le=1)
    warmup_fraction: float = Field(0.01, ge=0, lt=1)
    weight_decay: float = Field(0.1, ge=0)
    adam_betas: tuple[float, float] = (0.9, 0.95)
    adam_eps: float = 1e-8
    clip_grad: float = Field(1.0, gt=0)
    checkpoint_every: int = Field(ge=1)  # steps; the last step is always saved
    log_every: int = Field(1, ge=1)
    peak_flops: float | None = None  # per device, for MFU where the GPU is not in the table (CPU)
    # the decoder's attention (pretrain/attention.py): Transformer Engine's layers, torch's SDPA
    # (flash-class) or megatron's unfused local attention; auto: te where it imports, else sdpa.
    # Pin it in an experiment that trains on GPUs: every run of a rung must run the same kernels,
    # and a run refuses to start beside runs of its rung that ran others (pretrain/train.py)
    attention: Literal["auto", "te", "sdpa", "unfused"] = "auto"
    # megatron-core's torch.compile fusions (SwiGLU, bias-dropout-add, cross-entropy); None: on a
    # GPU, off on CPU (where compiling costs more than it saves at the demo's sizes)
    fusions: bool | None = None
    # megatron-core DDP's overlap of communication with compute, where it applies (several ranks):
    # each gradient bucket's all-reduce (reduce-scatter with the GPU's distributed optimizer) starts
    # in the backward pass of the step's last micro-batch as soon as its gradients are complete;
    # with the distributed optimizer, each bucket's parameter all-gather waits for the next forward
    # pass to need it. The same sums either way: the losses do not depend on it
    overlap_grad_reduce: bool = True
    overlap_param_gather: bool = True
    # torch threads of a CPU run, fixed so that a config trains to the same losses on any machine
    # (float sums depend on how the work is split between threads)
    cpu_threads: int = Field(2, ge=1)


    @model_validator(mode="after")
    def _overlap(self) -> TrainingConfig:
        if self.overlap_param_gather and not self.overlap_grad_reduce:
            raise ValueError("overlap_param_gather needs overlap_grad_reduce (as Megatron-LM requires): turn "
                             "overlap_param_gather off too, or overlap_grad_reduce back on")
        return self


class Rung(StrictModel):
    """One size of a model ladder: a decoder shape, the tokens it trains on, its seeds, and its
    hyper-parameters and Slurm job (`pretrain.training` and `pretrain.slurm` with the rung's own
    keys over them). Every rung trains on a prefix of each arm's token-matched dataset in the same
    order, so that rungs differ in model size and tokens only."""

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9_.-]*$")  # names folders: train/<arm>/<rung>/seed<S>
    model: ModelConfig
    # absolute, or per non-embedding parameter (Chinchilla's 20, DataDecide's 100); neither: the budget
    tokens: int | None = Field(None, ge=1)
    tokens_per_parameter: float | None = Field(None, gt=0)
    seeds: list[int] = Field(min_length=1)
    training: TrainingConfig
    slurm: SlurmTraining = SlurmTraining()

    @field_validator("model", mode="before")
    @classmethod
    def _named_size(cls, value):
        return named_model(value) if isinstance(value, str) else value

    @model_validator(mode="after")
    def _checks(self) -> Rung:
        if self.tokens is not None and self.tokens_per_parameter is not None:
            raise ValueError(f"rung {self.name!r}: give tokens or tokens_per_parameter, not both")
        if self.training.global_batch_size % self.training.micro_batch_size:
            raise ValueError(f"global_batch_size {self.training.global_batch_size} is not a multiple of "
                             f"micro_batch_size {self.training.micro_batch_size}")
        return self

    def training_tokens(self, budget: int) -> int:
        """The tokens this rung trains on, given the dataset's budget per arm."""
        if self.tokens is not None:
            return self.tokens
        if self.tokens_per_parameter is not None:
            return round(self.tokens_per_parameter * self.model.non_embedding_parameters)
        return budget


class PretrainConfig(StrictModel):
    """One decoder size (`model` and `seeds`: a one-rung ladder), or several (`ladder`), trained on
    the same token-matched datasets. `training` and `slurm` are every rung's; `arms` the arms trained
    (default: every arm). The last rung is the target the smaller ones are read against."""

    training: TrainingConfig
    slurm: SlurmTraining = SlurmTraining()
    arms: list[str] | None = None
    ladder: list[Rung] = Field(min_length=1)

    @model_validator(mode="before")
    @classmethod
    def _one_size_or_a_ladder(cls, data):
        if not isinstance(data, dict):
            return data
        data = dict(data)
        if "ladder" in data:
            if {"model", "seeds"} & set(data):
                raise ValueError("give model and seeds (one size) or ladder (several sizes), not both")
            rungs = data["ladder"]
        elif "model" in data:
            model = data.pop("model")
            rungs = [{"name": model if isinstance(model, str) else "model", "model": model,
                      "seeds": data.pop("seeds", [1, 2, 3])}]
        else:
            raise ValueError("give model (a size of configs/models/, or a shape) and seeds, or a ladder of rungs")
        dumped = [value.model_dump() if isinstance(value, BaseModel) else dict(value or {})
                  for value in (data.get("training"), data.get("slurm"))]
        training, slurm = dumped
        if isinstance(rungs, list):  # each rung's own keys over the shared ones
            data["ladder"] = [
                {**rung, "name": rung.get("name", rung.get("model") if isinstance(rung.get("model"), str) else None),
                 "training": {**training, **_as_dict(rung.get("training"))}, "slurm": {**slurm, **_as_dict(rung.get("slurm"))}}
                if isinstance(rung, dict) else rung for rung in rungs]
        return data

    @model_validator(mode="after")
    def _rungs(self) -> PretrainConfig:
        names = [r.name for r in self.ladder]
        if len(names) != len(set(names)):
            raise ValueError(f"ladder: rung names repeat: {names}")
        # Megatron cuts a dataset into samples of seq_length + 1 tokens and shuffles those: only at
        # one length is a smaller rung's data a prefix of a larger one's, in the same order
        lengths = {r.name: r.model.seq_length for r in self.ladder}
        if len(set(lengths.values())) > 1:
            raise ValueError(f"ladder: every rung needs the same model.seq_length, so that each trains on a prefix "
                             f"of the same sample order; got {lengths}")
        return self

    def rung_named(self, name: str) -> Rung:
        for rung in self.ladder:
            if rung.name == name:
                return rung
        raise ValueError(f"no rung {name!r} in pretrain.ladder ({[r.name for r in self.ladder]})")

    @property
    def rung(self) -> Rung:
        """The one rung of a one-size config (or of `ExperimentConfig.for_rung`)."""
        if len(self.ladder) > 1:
            raise ValueError(f"pretrain.ladder has {len(self.ladder)} rungs ({', '.join(r.name for r in self.ladder)}): "
                             "name one (--rung)")
        return self.ladder[0]

    @property
    def target(self) -> Rung:
        return self.ladder[-1]

    @property
    def model(self) -> ModelConfig:
        return self.rung.model

    @property
    def seeds(self) -> list[int]:
        return self.rung.seeds

    @property
    def tokens_per_step(self) -> int:
        return self.rung.training.global_batch_size * self.rung.model.seq_length

    def tokens_at(self, step: int) -> int:
        """Training tokens seen after `step` optimizer steps (the x axis of every curve)."""
        return step * self.tokens_per_step


def _as_dict(value) -> dict:
    return value.model_dump(exclude_unset=True) if isinstance(value, BaseModel) else dict(value or {})
