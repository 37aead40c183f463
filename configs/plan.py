"""`plan:`: the pilot of `python -m corpus.flow.plan` and the rates it assumes where nothing measured them."""

from __future__ import annotations

from pydantic import Field

from configs.base import StrictModel


class PlanConfig(StrictModel):
    """`python -m corpus.flow.plan`: the pilot's size, and the rates it assumes where neither the pilot
    (on this hardware) nor a GPU preflight (`python -m bench.preflight`) measured them. Every
    figure of a plan says which of the three it came from."""

    pilot_files: int = Field(4, ge=2)  # input files the pilot extracts and post-processes
    confidence: float = Field(0.95, gt=0, lt=1)  # of the interval on tokens per input file
    # the labeler's cost scales with the prompt tokens of a simplified page: the Dripper paper's
    # 3.08 pages/s on one A100 (Qwen3-0.6B, vLLM) at 6,960 prompt tokens a page on average
    labeler_prompt_tokens_per_gpu_s: float = Field(3.08 * 6960, gt=0)
    labeler_prompt_tokens_per_page: float = Field(6960, gt=0)  # where no pilot measured it
    # training throughput: MFU x peak / FLOPs per token; 40% of an H100's dense bf16 peak, MFU and
    # FLOPs per token both with causal attention (configs/model.py)
    gpu_peak_flops: float = Field(989e12, gt=0)
    training_mfu: float = Field(0.40, gt=0, le=1)
    evaluation_gpu_hours_per_checkpoint: float = Field(0.5, gt=0)  # the 13 benchmarks, full test sets
    # documents in a near-duplicate pair at full scale (what MinHash's clustering holds), where a
    # pilot's few files see only the pairs within them: the larger of this and the pilot's is used
    near_duplicate_share: float = Field(0.5, gt=0, le=1)
