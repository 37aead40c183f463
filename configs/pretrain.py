"""`pretrain:`: the decoders trained on every arm: one size or a ladder of rungs, their
hyper-parameters and Slurm jobs. The shapes are `configs.model`."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, field_validator, model_validator

from configs.base import StrictModel
from configs.model import ModelConfig, named_model


class SlurmTraining(StrictModel):
    """One srun task per node, running torchrun over the node's GPUs."""

    nodes: int = Field(1, ge=1, description="Nodes of one training job (one per arm and seed).")
    gpus_per_node: int = Field(8, ge=1, description="GPUs per node; torchrun starts one rank per GPU.")
    partition: str = Field("gpu", description="Slurm partition of the training jobs.")
    cpus_per_task: int = Field(64, ge=1, description="CPU cores of the one srun task per node (torchrun and its ranks).")
    mem_gb: int = Field(512, ge=1, description="Memory per node in GB (`--mem`).")
    time: str = Field("48:00:00", description="Slurm time limit of a training job, `[days-]hours:minutes:seconds`.")
    qos: str = Field("normal", description="Slurm quality of service of the training jobs.")
    container_image: str | None = Field(None, description="Run training in a pyxis/enroot container (`srun "
                                        "--container-image`), as most Megatron clusters do: an image with CUDA torch "
                                        "and Transformer Engine (`nvcr.io#nvidia/pytorch:<tag>`, or a `.sqsh` file). "
                                        "null: on the host, after `executor.env_command`.")
    container_mounts: list[str] = Field([], description="More mounts, `SRC:DST[:FLAGS]`; the repository, the output "
                                        "root and the config's folder are mounted at their own paths already. Needs "
                                        "`container_image`.")
    container_env: str | None = Field(None, description="A shell command run inside the container before torchrun, "
                                      "in place of `executor.env_command` (which runs on the host): what makes the "
                                      "project's packages importable there. Needs `container_image`; the paths it "
                                      "names must be mounted.")

    @model_validator(mode="after")
    def _container(self) -> SlurmTraining:
        if self.container_image is None and (self.container_mounts or self.container_env):
            raise ValueError("container_mounts and container_env need a container_image")
        return self


class TrainingConfig(StrictModel):
    global_batch_size: int = Field(ge=1, description="Sequences per optimizer step, over all GPUs; a multiple of "
                                   "`micro_batch_size`.")
    micro_batch_size: int = Field(ge=1, description="Sequences per forward pass per GPU; lower it when a GPU runs "
                                  "out of memory (the gradients are accumulated to the global batch).")
    lr: float = Field(3e-4, gt=0, description="Peak learning rate, reached after the warmup.")
    min_lr_ratio: float = Field(0.1, ge=0, le=1, description="The cosine decay ends at `lr` x this at the last step.")
    warmup_fraction: float = Field(0.01, ge=0, lt=1, description="Share of the steps of the linear warmup to `lr`.")
    weight_decay: float = Field(0.1, ge=0, description="AdamW weight decay.")
    adam_betas: tuple[float, float] = Field((0.9, 0.95), description="AdamW's (beta1, beta2).")
    adam_eps: float = Field(1e-8, description="AdamW's epsilon.")
    clip_grad: float = Field(1.0, gt=0, description="Gradients are clipped to this global norm.")
    checkpoint_every: int = Field(ge=1, description="Steps between two checkpoints (each one is exported and "
                                  "evaluated); the last step is always saved.")
    log_every: int = Field(1, ge=1, description="Steps between two lines of the run's `log.jsonl` (loss, learning "
                           "rate, tokens/s, MFU); the last step is always logged.")
    peak_flops: float | None = Field(None, description="Peak FLOP/s of one device, for the MFU, where the GPU is "
                                     "not in the suite's table (and on CPU, where there is none); null: the table's.")
    # a run refuses to start beside runs of its rung that ran other kernels (pretrain/train.py)
    attention: Literal["auto", "te", "sdpa", "unfused"] = Field("auto", description="The decoder's attention "
                                                                "(`pretrain/attention.py`): Transformer Engine's "
                                                                "layers (`te`), torch's SDPA (`sdpa`) or "
                                                                "megatron's unfused local attention (`unfused`); "
                                                                "`auto`: te where it imports, else sdpa. Pin it in "
                                                                "an experiment that trains on GPUs: every run of a "
                                                                "rung must run the same kernels.")
    fusions: bool | None = Field(None, description="megatron-core's torch.compile fusions (SwiGLU, "
                                 "bias-dropout-add, cross-entropy); null: on a GPU, off on CPU (where compiling "
                                 "costs more than it saves at the demo's sizes).")
    # the same sums either way: the losses do not depend on them
    overlap_grad_reduce: bool = Field(True, description="With several ranks: each gradient bucket's all-reduce "
                                      "(reduce-scatter with the distributed optimizer) starts in the backward pass "
                                      "of the step's last micro-batch as soon as its gradients are complete.")
    overlap_param_gather: bool = Field(True, description="With the distributed optimizer: each bucket's parameter "
                                       "all-gather waits for the next forward pass to need it. Needs "
                                       "`overlap_grad_reduce`.")
    cpu_threads: int = Field(2, ge=1, description="torch threads of a CPU run, fixed so that a config trains to the "
                             "same losses on any machine (float sums depend on how work is split among threads).")

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

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9_.-]*$", description="The rung's name, unique in the ladder; it "
                      "names folders (`train/<arm>/<rung>/seed<S>`) and `--rung`. Where `model` names a size, its name "
                      "by default.")
    model: ModelConfig = Field(description="The decoder: a size of `configs/models/` by name (`nano`, `tiny`, "
                               "`mini`, `20m`, `60m`, `150m`, `300m`, `530m`, `1b`) or a shape. Every rung needs "
                               "the same `seq_length`.")
    tokens: int | None = Field(None, ge=1, description="Training tokens of the rung, a prefix of each arm's "
                               "budget; null with no `tokens_per_parameter`: the whole `dataset.tokens_per_arm`.")
    tokens_per_parameter: float | None = Field(None, gt=0, description="Training tokens per non-embedding "
                                               "parameter instead of `tokens` (Chinchilla's 20, DataDecide's 100).")
    seeds: list[int] = Field(min_length=1, description="Seeds of the rung: one training run per arm and seed.")
    training: TrainingConfig = Field(description="`pretrain.training` with the keys given here over it.")
    slurm: SlurmTraining = Field(SlurmTraining(), description="`pretrain.slurm` with the keys given here over it.")

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

    training: TrainingConfig = Field(description="Hyper-parameters of every rung (a rung's own `training` keys "
                                     "replace these).")
    slurm: SlurmTraining = Field(SlurmTraining(), description="The Slurm job of every training run (a rung's own "
                                 "`slurm` keys replace these).")
    arms: list[str] | None = Field(None, description="The arms trained (names of `arms`); null: every arm.")
    ladder: list[Rung] = Field(min_length=1, description="Model sizes from the least training compute (parameters "
                               "x tokens) to the most; the last is the target the others are read against. Instead "
                               "of `model` and `seeds`.")

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
