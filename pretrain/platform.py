"""Where training runs: CUDA GPUs (NCCL, bf16, megatron's distributed optimizer) or CPU (gloo,
fp32, torch AdamW). Every workaround megatron-core needs on CPU lives here and nowhere else, and
every reach into torch's private API (`sdpa_kernel`).

On CPU megatron-core 0.16 still calls a few CUDA functions: `torch.cuda.current_device()` (RoPE,
attention buffers, DDP buckets), `torch.cuda.synchronize()` (dist_checkpointing save) and the
unfused softmax's default causal mask (built on `device="cuda"`); its optimizer wrappers allocate
on `device='cuda'`. `use_cpu()` redirects the first three to the CPU, and `build_optimizer` uses
torch's AdamW there (with torch's gradient clipping).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Platform:
    device: torch.device
    name: str  # the GPU's name, or "cpu"
    backend: str  # torch.distributed backend
    dtype: torch.dtype  # parameters and activations
    peak_flops: float | None  # per device, for MFU

    @property
    def is_cuda(self) -> bool:
        return self.device.type == "cuda"

    def synchronize(self) -> None:
        """Wait for the work queued on the device (a GPU runs behind the host): a time read after
        it covers that work. Nothing to wait for on CPU."""
        if self.is_cuda:
            torch.cuda.synchronize(self.device)


# dense bf16 peak FLOP/s of common training GPUs: the spec sheets' figures with sparsity, halved.
# The first name the device's name contains wins: the PCIe and NVL boards (lower clocks and power)
# before the SXM ones, whose names are the bare "H100" ("NVIDIA H100 80GB HBM3") and "H200".
PEAK_BF16_FLOPS = {"H100 PCIe": 756e12, "H100 NVL": 835e12, "H200 NVL": 835e12, "H100": 989e12, "H200": 989e12,
                   "A100": 312e12, "L40S": 362e12, "A10": 125e12, "B200": 2250e12}


def spec_peak_flops(device_name: str) -> float | None:
    """The spec sheet's dense bf16 peak of a GPU by its name; None where the table has none."""
    return next((v for k, v in PEAK_BF16_FLOPS.items() if k in device_name), None)


def detect(peak_flops: float | None = None, cpu_threads: int | None = None) -> Platform:
    """The local accelerator, or the CPU (with `cpu_threads` torch threads when given). `peak_flops`
    overrides the table (and is the only source on CPU, where there is no sensible table)."""
    if torch.cuda.is_available():
        local_rank = int(os.environ.get("LOCAL_RANK", 0))
        torch.cuda.set_device(local_rank)
        name = torch.cuda.get_device_name(local_rank)
        return Platform(torch.device("cuda", local_rank), name, "nccl", torch.bfloat16,
                        peak_flops or spec_peak_flops(name))
    use_cpu()
    if cpu_threads:
        torch.set_num_threads(cpu_threads)
    return Platform(torch.device("cpu"), "cpu", "gloo", torch.float32, peak_flops)


def use_cpu() -> None:
    from functools import lru_cache

    from megatron.core.fusions import fused_softmax

    torch.cuda.current_device = lambda: torch.device("cpu")
    torch.cuda.synchronize = lambda *args, **kwargs: None
    fused_softmax.get_default_causal_mask = lru_cache(maxsize=4)(
        lambda sq: torch.triu(torch.ones(sq, sq), diagonal=1).bool())


def sdpa_kernel(query, key, value, attn_mask, dropout_p: float, is_causal: bool, scale: float) -> str:
    """The kernel torch's SDPA dispatches this very call to: flash, cudnn, efficient or math (on
    CPU, flash is torch's fused CPU kernel). Asked with the call's own tensors, so that batch,
    dtype, mask and whether gradients are needed weigh in as they do in the call."""
    from torch.nn.attention import SDPBackend

    # the dispatcher SDPA itself consults (private in torch 2.5-2.13; no public way to ask)
    choice = SDPBackend(torch._fused_sdp_choice(query, key, value, attn_mask, dropout_p, is_causal, scale=scale))
    return {SDPBackend.FLASH_ATTENTION: "flash", SDPBackend.CUDNN_ATTENTION: "cudnn",
            SDPBackend.EFFICIENT_ATTENTION: "efficient", SDPBackend.MATH: "math"}.get(choice, choice.name.lower())


def init_distributed(platform: Platform) -> None:
    """torch.distributed and megatron's model-parallel state (data parallel only). Works under
    torchrun (RANK, WORLD_SIZE, MASTER_ADDR set) and as a plain single process, even one whose
    environment has MASTER_ADDR/PORT (a Slurm job script exports them for torchrun)."""
    import torch.distributed as dist
    from megatron.core import parallel_state

    if not dist.is_initialized():
        if "WORLD_SIZE" in os.environ:  # launched by torchrun (RANK, WORLD_SIZE, MASTER_ADDR/PORT set)
            dist.init_process_group(platform.backend)
        else:  # a lone process: an in-memory store, no port to collide with a parallel test or run
            dist.init_process_group(platform.backend, store=dist.HashStore(), rank=0, world_size=1)
    if not parallel_state.model_parallel_is_initialized():
        parallel_state.initialize_model_parallel(tensor_model_parallel_size=1, pipeline_model_parallel_size=1)


def seed_everything(seed: int) -> None:
    import random

    import numpy as np
    from megatron.core import tensor_parallel

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    tensor_parallel.model_parallel_cuda_manual_seed(seed, inference_rng_tracker=not torch.cuda.is_available())


def transformer_flags(platform: Platform) -> dict:
    """TransformerConfig settings that depend on the platform: fused kernels need CUDA."""
    if platform.is_cuda:
        return {"bf16": True, "params_dtype": torch.bfloat16}
    return {"use_cpu_initialization": True, "gradient_accumulation_fusion": False, "bias_activation_fusion": False,
            "bias_dropout_fusion": False, "masked_softmax_fusion": False, "apply_rope_fusion": False,
            "persist_layer_norm": False}


def build_optimizer(model, platform: Platform, lr: float, weight_decay: float, betas: tuple[float, float],
                    eps: float, clip_grad: float):
    """megatron's distributed optimizer on GPU; on CPU torch AdamW over the same gradients. Both:
    decoupled weight decay on matrices only (not on norms), `step() -> (ok, grad_norm, _)`."""
    if platform.is_cuda:
        from megatron.core.optimizer import OptimizerConfig, get_megatron_optimizer

        config = OptimizerConfig(optimizer="adam", lr=lr, weight_decay=weight_decay, adam_beta1=betas[0],
                                 adam_beta2=betas[1], adam_eps=eps, clip_grad=clip_grad, bf16=True,
                                 params_dtype=platform.dtype, use_distributed_optimizer=True)
        return get_megatron_optimizer(config, [model])
    return CpuAdamW(model, lr, weight_decay, betas, eps, clip_grad)


class CpuAdamW:
    """torch AdamW stepping on megatron DDP's gradient buffers (`main_grad`), clipped by torch."""

    def __init__(self, model, lr: float, weight_decay: float, betas, eps: float, clip_grad: float):
        self.params = [p for p in model.parameters() if p.requires_grad]
        decay = [p for p in self.params if p.dim() >= 2]
        no_decay = [p for p in self.params if p.dim() < 2]
        self.optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": weight_decay},
                                            {"params": no_decay, "weight_decay": 0.0}], lr=lr, betas=betas, eps=eps)
        self.clip_grad = clip_grad

    @property
    def param_groups(self):
        return self.optimizer.param_groups

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None

    def step(self) -> tuple[bool, float, None]:
        for p in self.params:
            p.grad = p.main_grad
        grad_norm = torch.nn.utils.clip_grad_norm_(self.params, self.clip_grad)
        self.optimizer.step()
        return True, float(grad_norm), None

    def state_dict(self) -> dict:
        return self.optimizer.state_dict()

    def load_state_dict(self, state: dict) -> None:
        self.optimizer.load_state_dict(state)
