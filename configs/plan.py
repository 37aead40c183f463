"""`plan:`: the pilot of `python -m corpus.flow.plan` and the rates it assumes where nothing measured them."""

from __future__ import annotations

from pydantic import Field

from configs.base import StrictModel


class PlanConfig(StrictModel):
    """`python -m corpus.flow.plan`: the pilot's size, and the rates it assumes where neither the pilot
    (on this hardware) nor a GPU preflight (`python -m bench.preflight`) measured them. Every
    figure of a plan says which of the three it came from."""

    pilot_files: int = Field(4, ge=2, description="Input files the pilot extracts and post-processes to measure "
                             "the yield (tokens per input file); more files, a narrower interval, a longer pilot.")
    confidence: float = Field(0.95, gt=0, lt=1, description="Confidence level of the interval on tokens per input "
                              "file that the plan's projections use.")
    # the default: the Dripper paper's 3.08 pages/s on one A100 (Qwen3-0.6B, vLLM) x 6,960 prompt tokens a page
    labeler_prompt_tokens_per_gpu_s: float = Field(3.08 * 6960, gt=0, description="Prompt tokens of simplified "
                                                   "pages the Dripper labeler reads per GPU-second, where no "
                                                   "preflight measured it (the labeler's cost scales with them).")
    labeler_prompt_tokens_per_page: float = Field(6960, gt=0, description="Prompt tokens of one simplified page, "
                                                  "where no pilot of a Dripper arm measured it.")
    # 40% of an H100's dense bf16 peak; MFU and FLOPs per token both with causal attention (configs/model.py)
    gpu_peak_flops: float = Field(989e12, gt=0, description="Dense bf16 peak FLOP/s of one training GPU (the "
                                  "default: an H100's); training throughput is MFU x peak / FLOPs per token.")
    training_mfu: float = Field(0.40, gt=0, le=1, description="Model FLOPs utilisation assumed for training where "
                                "no preflight measured it, a fraction of `gpu_peak_flops`.")
    evaluation_gpu_hours_per_checkpoint: float = Field(0.5, gt=0, description="GPU-hours to evaluate one "
                                                       "checkpoint on the 13 benchmarks' full test sets.")
    near_duplicate_share: float = Field(0.5, gt=0, le=1, description="Share of documents in a near-duplicate pair "
                                        "at full scale (what MinHash's clustering holds in memory); a pilot's few "
                                        "files see only the pairs within them, so the larger of this and the "
                                        "pilot's share is used.")
