"""A tiny randomly initialised Qwen3 decoder with a locally trained tokenizer, as a HF folder.

Tests and the offline demo use it to drive the real vLLM labeling path (engine, chat template,
regex-constrained decoding) without downloading weights. It exercises the machinery, not the
quality. Its random weights are steered (`steer_to_answer_tokens`, which the GPU bench applies to
random models of the released architectures too) so that, like a trained labeler, it writes the
answer in the tokenizer's own tokens (`1`, `main`, `2`, `other`, …; a plain random decoder spells
in odd pieces and spins on the whitespace the regex allows, until max_tokens) while the label of
each block still depends on the page: the sign of one hidden unit after the last layer, which
attention makes a function of the whole context. Greedy decoding then gives a different, fixed
answer per page, with a clear margin between the two labels.

    python -m corpus.extractors.dripper.random_model --out DIR [--seed 0]
"""

from __future__ import annotations

import argparse
from pathlib import Path

CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def _training_text(seed: int) -> list[str]:
    """Simplified pages and prompts, so that the tokenizer's merges fit what it will read."""
    from mineru_html.process.build_prompt import get_full_prompt

    from corpus.extractors.dripper.step import simplify_page
    from corpus.sample import generate_pages

    texts = []
    for page in generate_pages(24, seed):
        simplified, _, _ = simplify_page(page.html)
        texts.append(get_full_prompt(simplified, "short_compact"))
    texts.append(ANSWER_SAMPLE)
    return texts


ANSWER_SAMPLE = "<answer>" + "".join(f"{i}main{i + 1}other" for i in range(1, 400, 2)) + "</answer>"


def steer_to_answer_tokens(model, tokenizer, margin: float = 4.0) -> None:
    """Random weights that answer in canonical tokens, with page-dependent labels (in place; any
    Llama-shaped Hugging Face decoder: Qwen3, HunYuan). Hidden unit 1 carries a constant (every
    embedding's unit 1 is 1, and no attention or MLP output writes to it); the final norm keeps
    units 0 and 1 only; the (untied) output layer gives the answer's canonical tokens `margin` times
    unit 1, so the regex's choice among them is always one of them, and `main`/`other` plus and
    minus unit 0, so the label is the sign of unit 0: the context's, through every layer. The norm
    scales unit 1 down so that logits stay near 1: in bf16 a label's margin then survives rounding."""
    import torch

    preferred = set(tokenizer.encode(ANSWER_SAMPLE, add_special_tokens=False))
    preferred |= {t for t in [tokenizer.eos_token_id] if t is not None}
    (main,), (other,) = (tokenizer.encode(w, add_special_tokens=False) for w in ("main", "other"))
    inner = model.model
    with torch.no_grad():
        inner.embed_tokens.weight[:, 1] = 1.0
        for layer in inner.layers:
            layer.self_attn.o_proj.weight[1, :] = 0
            layer.mlp.down_proj.weight[1, :] = 0
        inner.norm.weight.zero_()
        inner.norm.weight[0], inner.norm.weight[1] = 1.0, 0.1
        head = model.lm_head.weight
        head.zero_()
        head[sorted(preferred), 1] = margin
        head[main, 0], head[other, 0] = 1.0, -1.0


def answer_tokenizer(texts, vocab_size: int):
    """A byte-level BPE trained on `texts`, digits one a token (as Qwen's and HunYuan's tokenizers
    split them), with the chat template the labeler's prompts use."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                                 pre_tokenizers.ByteLevel(add_prefix_space=False)])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(texts, trainer)
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                        bos_token=None, unk_token=None)
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def build_random_model(out: Path, seed: int = 0, vocab_size: int = 1024, max_positions: int = 16384) -> Path:
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    out.mkdir(parents=True, exist_ok=True)
    tokenizer = answer_tokenizer(_training_text(seed), vocab_size)
    tokenizer.save_pretrained(out)

    torch.manual_seed(seed)
    config = Qwen3Config(
        vocab_size=len(tokenizer), hidden_size=128, intermediate_size=256, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=32, max_position_embeddings=max_positions,
        tie_word_embeddings=False, eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
        bos_token_id=None, torch_dtype="float32",
    )
    model = Qwen3ForCausalLM(config)
    steer_to_answer_tokens(model, tokenizer)
    model.save_pretrained(out)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m corpus.extractors.dripper.random_model", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    print(f"wrote {build_random_model(args.out, args.seed)}")


if __name__ == "__main__":
    main()
