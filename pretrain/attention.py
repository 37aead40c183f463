"""Which attention the decoder runs, and a flash-class core attention for megatron-core's local spec.

`pretrain.training.attention` picks one of:
- `te`: Transformer Engine's layer spec (its fused attention and fused norm + linear layers);
- `sdpa`: megatron-core's local spec with `SdpaAttention`, torch's `scaled_dot_product_attention`
  (a flash or cuDNN kernel on Ampere and newer GPUs, a fused kernel on CPU);
- `unfused`: the local spec as megatron-core ships it, whose `DotProductAttention` materialises the
  sequence x sequence score matrix of every head (baddbmm, softmax, bmm) and keeps it for the
  backward pass: ~6 GB per sample for the 1b shape;
- `auto`: `te` where Transformer Engine imports on a CUDA node, `sdpa` otherwise.

`SdpaAttention` has no parameters of its own and the same module tree as `DotProductAttention`,
so a checkpoint trained with one loads into the other. It records the kernel SDPA dispatched its
first call with gradients to (`kernel`), which `run.json` reports.
"""

from __future__ import annotations

from contextlib import nullcontext

import torch
import torch.nn.functional as F
from megatron.core import tensor_parallel
from megatron.core.transformer.dot_product_attention import DotProductAttention
from megatron.core.transformer.enums import AttnMaskType

from pretrain.platform import sdpa_kernel

ATTENTION_CHOICES = ("auto", "te", "sdpa", "unfused")


def transformer_engine_available() -> bool:
    try:
        import transformer_engine.pytorch  # noqa: F401
    except ImportError:
        return False
    return True


def resolve_attention(choice: str, cuda: bool) -> str:
    """The attention `choice` runs on this node: `te`, `sdpa` or `unfused`."""
    te = cuda and transformer_engine_available()
    if choice == "auto":
        return "te" if te else "sdpa"
    if choice == "te" and not te:
        raise SystemExit("pretrain.training.attention: te needs Transformer Engine on a CUDA node "
                         f"({'it does not import here' if cuda else 'this node has no GPU'}); "
                         "use sdpa, or run in a container that has it (docs/explanation/pretraining.md)")
    return choice


class SdpaAttention(DotProductAttention):
    """megatron-core's core attention computed by `torch.nn.functional.scaled_dot_product_attention`.

    Same inputs and output as `DotProductAttention`: query [sq, b, heads, d], key and value
    [sk, b, groups, d] -> context [sq, b, heads x d]. Key/value groups are repeated to the query
    heads (as megatron does) so that every SDPA kernel applies, flash included.
    """

    def __init__(self, config, layer_number, attn_mask_type, attention_type, attention_dropout=None,
                 softmax_scale=None, cp_comm_type=None, pg_collection=None):
        super().__init__(config, layer_number, attn_mask_type, attention_type, attention_dropout, softmax_scale,
                         cp_comm_type, pg_collection)
        if self.config.window_size is not None or self.config.softmax_type != "vanilla":
            raise ValueError("SdpaAttention: sliding windows and non-vanilla softmax need attention: unfused or te")
        # query-key layer scaling divides the scale by the layer number and the unfused softmax
        # multiplies it back (an fp16 overflow guard): the product is the plain scale
        self.scale = self.softmax_scale * (self.layer_number if self.config.apply_query_key_layer_scaling else 1)
        self.kernel: str | None = None  # what the first training call ran: flash, cudnn, efficient or math

    def forward(self, query, key, value, attention_mask, attn_mask_type=None, attention_bias=None,
                packed_seq_params=None):
        if packed_seq_params is not None or attention_bias is not None:
            raise ValueError("SdpaAttention: packed sequences and attention bias need attention: te")
        repeat = self.num_attention_heads_per_partition // self.num_query_groups_per_partition
        if repeat > 1:
            key = key.repeat_interleave(repeat, dim=2)
            value = value.repeat_interleave(repeat, dim=2)
        q, k, v = (t.permute(1, 2, 0, 3) for t in (query, key, value))  # [b, heads, s, d]
        mask_type = attn_mask_type or self.attn_mask_type
        # as the unfused softmax does: a given mask is used as it is (True = masked out, the
        # opposite of SDPA's boolean mask); without one, a causal layer masks the future
        mask = None if attention_mask is None else ~attention_mask
        causal = attention_mask is None and mask_type == AttnMaskType.causal and q.size(2) > 1
        dropout = self.attention_dropout.p if self.training else 0.0
        if self.kernel is None and torch.is_grad_enabled():
            self.kernel = sdpa_kernel(q, k, v, mask, dropout, causal, self.scale)
        with tensor_parallel.get_cuda_rng_tracker().fork() if dropout else nullcontext():
            context = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout, is_causal=causal,
                                                     scale=self.scale)
        sq, b = query.size(0), query.size(1)
        return context.permute(2, 0, 1, 3).reshape(sq, b, self.hidden_size_per_partition)


def sdpa_kernels(model) -> str | None:
    """The kernel(s) the model's SDPA layers ran in their first training call ("flash", or
    several joined by "+"); None for a model without SDPA layers or before its first step."""
    kernels = sorted({m.kernel for m in model.modules() if isinstance(m, SdpaAttention) and m.kernel})
    return "+".join(kernels) or None
