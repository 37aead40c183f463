"""The decoder: megatron-core's GPTModel in the Llama shape, and its one-to-one Hugging Face twin.

`build_model` makes the GPTModel with the attention `pretrain.training.attention` resolves to
(pretrain/attention.py: Transformer Engine's layer spec, or the local spec with SDPA or unfused
attention). `hf_config` and `hf_state_dict` map the same model to `LlamaForCausalLM`: the
fused QKV weight is split per query group ([q x heads-per-group, k, v] rows per group) and the
SwiGLU `linear_fc1` into gate and up halves.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from configs.model import ModelConfig
from pretrain.platform import Platform, transformer_flags


def transformer_config(model: ModelConfig, platform: Platform, fused: bool):
    from megatron.core.transformer.transformer_config import TransformerConfig

    return TransformerConfig(
        num_layers=model.num_layers, hidden_size=model.hidden_size, ffn_hidden_size=model.ffn_hidden_size,
        num_attention_heads=model.num_attention_heads, num_query_groups=model.kv_groups,
        kv_channels=model.head_dim, init_method_std=model.init_std, layernorm_epsilon=model.norm_eps,
        normalization="RMSNorm", gated_linear_unit=True, activation_func=F.silu, add_bias_linear=False,
        add_qkv_bias=False, hidden_dropout=0.0, attention_dropout=0.0,
        **transformer_flags(platform) | (MEGATRON_FUSIONS if fused else {}),
    )


# megatron-core's own elementwise fusions, compiled by torch.compile (megatron.core.jit): SwiGLU,
# the residual's bias-dropout-add, the cross-entropy. No Transformer Engine or Apex needed.
MEGATRON_FUSIONS = {"bias_activation_fusion": True, "bias_dropout_fusion": True, "cross_entropy_loss_fusion": True}


class RMSNorm(torch.nn.RMSNorm):
    """The local spec's RMSNorm (torch's, as megatron-core's WrappedTorchNorm builds it) with its
    weight in the parameters' dtype. WrappedTorchNorm leaves the weight in fp32 beside bf16
    activations, which keeps torch off its fused kernel: the norm ran op by op in fp32, the largest
    share of a 1b step's elementwise time on an H200 (bench/gpu_check.sh)."""

    def __init__(self, config, hidden_size: int, eps: float = 1e-5, **_):
        super().__init__(hidden_size, eps=eps, dtype=config.params_dtype)


def layer_spec(attention: str, num_layers: int):
    """The decoder's block spec for a resolved attention (`te`, `sdpa` or `unfused`:
    pretrain/attention.py)."""
    from megatron.core.models.gpt.gpt_layer_specs import (
        get_gpt_layer_local_spec,
        get_gpt_layer_with_transformer_engine_spec,
    )
    from megatron.core.transformer.transformer_block import TransformerBlockSubmodules

    if attention == "te":
        return get_gpt_layer_with_transformer_engine_spec()
    layer = get_gpt_layer_local_spec(normalization="RMSNorm")
    layer.submodules.input_layernorm = layer.submodules.pre_mlp_layernorm = RMSNorm
    if attention == "sdpa":
        from pretrain.attention import SdpaAttention

        layer.submodules.self_attention.submodules.core_attention = SdpaAttention
    return TransformerBlockSubmodules(layer_specs=[layer] * num_layers, layer_norm=RMSNorm)


def build_model(model: ModelConfig, vocab_size: int, platform: Platform, attention: str, fused: bool | None = None):
    """The GPTModel with a resolved `attention` (`pretrain.attention.resolve_attention`); `fused`
    (default: on a GPU) turns on megatron-core's torch.compile fusions, which need a compiler at
    run time (Triton on a GPU; the CPU runs without them)."""
    from megatron.core.models.gpt import GPTModel

    gpt = GPTModel(
        config=transformer_config(model, platform, platform.is_cuda if fused is None else fused),
        transformer_layer_spec=layer_spec(attention, model.num_layers),
        vocab_size=model.padded_vocab(vocab_size), max_sequence_length=model.seq_length,
        share_embeddings_and_output_weights=model.tie_embeddings, position_embedding_type="rope",
        rotary_base=model.rope_base,
    )
    return gpt.to(platform.device)


def hf_config(model: ModelConfig, vocab_size: int, bos_id: int | None, eos_id: int | None):
    from transformers import LlamaConfig

    return LlamaConfig(
        vocab_size=model.padded_vocab(vocab_size), hidden_size=model.hidden_size,
        intermediate_size=model.ffn_hidden_size, num_hidden_layers=model.num_layers,
        num_attention_heads=model.num_attention_heads, num_key_value_heads=model.kv_groups,
        head_dim=model.head_dim, max_position_embeddings=model.seq_length, rms_norm_eps=model.norm_eps,
        rope_theta=float(model.rope_base), tie_word_embeddings=model.tie_embeddings, attention_bias=False,
        mlp_bias=False, hidden_act="silu", initializer_range=model.init_std, bos_token_id=bos_id,
        eos_token_id=eos_id, torch_dtype="float32",
    )


def hf_state_dict(megatron: dict[str, torch.Tensor], model: ModelConfig) -> dict[str, torch.Tensor]:
    """Megatron local/TE-spec GPTModel weights (tensor parallel 1) -> LlamaForCausalLM names."""
    heads, groups, d = model.num_attention_heads, model.kv_groups, model.head_dim
    per_group = heads // groups
    out = {"model.embed_tokens.weight": megatron["embedding.word_embeddings.weight"],
           "model.norm.weight": megatron["decoder.final_layernorm.weight"]}
    if not model.tie_embeddings:
        out["lm_head.weight"] = megatron["output_layer.weight"]
    for i in range(model.num_layers):
        src, dst = f"decoder.layers.{i}.", f"model.layers.{i}."
        # TE's spec fuses the norms into the following linear layers
        out[dst + "input_layernorm.weight"] = megatron.get(src + "input_layernorm.weight",
                                                           megatron.get(src + "self_attention.linear_qkv.layer_norm_weight"))
        out[dst + "post_attention_layernorm.weight"] = megatron.get(src + "pre_mlp_layernorm.weight",
                                                                    megatron.get(src + "mlp.linear_fc1.layer_norm_weight"))
        qkv = megatron[src + "self_attention.linear_qkv.weight"].view(groups, per_group + 2, d, model.hidden_size)
        out[dst + "self_attn.q_proj.weight"] = qkv[:, :per_group].reshape(heads * d, model.hidden_size)
        out[dst + "self_attn.k_proj.weight"] = qkv[:, per_group].reshape(groups * d, model.hidden_size)
        out[dst + "self_attn.v_proj.weight"] = qkv[:, per_group + 1].reshape(groups * d, model.hidden_size)
        out[dst + "self_attn.o_proj.weight"] = megatron[src + "self_attention.linear_proj.weight"]
        gate, up = megatron[src + "mlp.linear_fc1.weight"].chunk(2, dim=0)
        out[dst + "mlp.gate_proj.weight"] = gate
        out[dst + "mlp.up_proj.weight"] = up
        out[dst + "mlp.down_proj.weight"] = megatron[src + "mlp.linear_fc2.weight"]
    return {k: v.detach().to(torch.float32).contiguous().clone() for k, v in out.items()}
