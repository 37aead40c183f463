"""Decoder shapes, and the parameter and FLOP arithmetic every stage (planning, training,
benchmarks) reads from them. Named sizes live in `configs/models/<name>.yaml`."""

from __future__ import annotations

from pathlib import Path

import yaml
from pydantic import Field, model_validator

from configs.base import StrictModel

MODELS_DIR = Path(__file__).resolve().parent / "models"
# how every MFU and training-compute figure of the project counts attention (ModelConfig.flops_per_token)
FLOPS_CONVENTION = "causal attention (Megatron-LM's): half the score matrix"


def named_model(name: str) -> dict:
    """The shape of `configs/models/<name>.yaml`, as a dict to validate."""
    path = MODELS_DIR / f"{name}.yaml"
    if not path.is_file():
        names = sorted(p.stem for p in MODELS_DIR.glob("*.yaml"))
        raise ValueError(f"no model size {name!r} (configs/models/ has {names})")
    return yaml.safe_load(path.read_text())


class ModelConfig(StrictModel):
    num_layers: int = Field(ge=1, description="Transformer layers.")
    hidden_size: int = Field(ge=8, description="Width of the residual stream; a multiple of `num_attention_heads`.")
    ffn_hidden_size: int = Field(ge=8, description="Width of each layer's SwiGLU MLP.")
    num_attention_heads: int = Field(ge=1, description="Attention heads per layer.")
    num_query_groups: int | None = Field(None, description="Key/value heads (grouped-query attention), dividing "
                                         "`num_attention_heads`; null: one per head (no GQA).")
    seq_length: int = Field(ge=8, description="Tokens per training sequence, and the exported model's context.")
    rope_base: int = Field(10000, description="Base of the rotary position embedding.")
    norm_eps: float = Field(1e-5, description="Epsilon of the RMSNorm layers.")
    init_std: float = Field(0.02, description="Standard deviation of the weights' normal initialisation.")
    tie_embeddings: bool = Field(False, description="Share the input embedding and the output layer's weights.")
    vocab_multiple: int = Field(128, description="The embedding is padded to a multiple of this many tokens "
                                "(tensor-core friendly).")

    @model_validator(mode="after")
    def _shapes(self) -> ModelConfig:
        if self.hidden_size % self.num_attention_heads:
            raise ValueError(f"hidden_size {self.hidden_size} is not divisible by num_attention_heads "
                             f"{self.num_attention_heads}")
        if self.num_query_groups is not None and self.num_attention_heads % self.num_query_groups:
            raise ValueError(f"num_attention_heads {self.num_attention_heads} is not divisible by num_query_groups "
                             f"{self.num_query_groups}")
        return self

    @property
    def kv_groups(self) -> int:
        return self.num_query_groups or self.num_attention_heads

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads

    @property
    def non_embedding_parameters(self) -> int:
        return self.parameters(1)["non_embedding"]  # independent of the vocabulary

    def padded_vocab(self, vocab_size: int) -> int:
        return -(-vocab_size // self.vocab_multiple) * self.vocab_multiple

    def parameters(self, vocab_size: int) -> dict[str, int]:
        """Parameter counts: per layer, embeddings, total."""
        h, kv = self.hidden_size, self.kv_groups * self.head_dim
        attention = h * h + 2 * h * kv + h * h  # q, k and v, output
        mlp = 3 * h * self.ffn_hidden_size  # gate, up, down
        layer = attention + mlp + 2 * h  # two RMSNorm weights
        vocab = self.padded_vocab(vocab_size)
        embeddings = vocab * h * (1 if self.tie_embeddings else 2)
        total = self.num_layers * layer + embeddings + h  # final norm
        return {"per_layer": layer, "embeddings": embeddings, "total": total,
                "non_embedding": total - embeddings}

    def flops_per_token(self, vocab_size: int, causal: bool = True) -> float:
        """Training FLOPs per token (forward + backward): 6 x every parameter but the input
        embedding (the matmuls, and the RMSNorm weights Megatron-LM leaves out: 6 x 92,160 FLOPs
        per token for `1b`, 0.008% of the total) + the attention score and value products, 6 x layers x
        hidden x seq under a causal mask, which needs only the half of the score matrix on and below
        the diagonal (Megatron-LM's `num_floating_point_operations`, the convention every MFU of
        this project is quoted in); `causal=False`: the full matrix, 12 x layers x hidden x seq
        (PaLM's appendix B, and Megatron-LM's before it halved it), for comparison with figures
        quoted that way."""
        p = self.parameters(vocab_size)
        matmul = p["non_embedding"] + self.padded_vocab(vocab_size) * self.hidden_size  # + output layer
        return 6 * matmul + (6 if causal else 12) * self.num_layers * self.hidden_size * self.seq_length
