"""A tiny randomly initialised Qwen3 decoder with a locally trained tokenizer, as a HF folder.

Tests and the offline demo use it to drive the real vLLM labeling path (engine, chat template,
regex-constrained decoding) without downloading weights. It exercises the machinery, not the
quality: its final norm is zeroed, so every logit is equal and greedy decoding takes the lowest
allowed token id. That makes its output deterministic, and it never spins on the optional
whitespace the answer regex allows (a random decoder does, until max_tokens).

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
    texts.append("<answer>" + "".join(f"{i}main{i + 1}other" for i in range(1, 400, 2)) + "</answer>")
    return texts


def build_random_model(out: Path, seed: int = 0, vocab_size: int = 1024, max_positions: int = 16384) -> Path:
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen3Config, Qwen3ForCausalLM

    out.mkdir(parents=True, exist_ok=True)
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(_training_text(seed), trainer)
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                        bos_token=None, unk_token=None)
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.save_pretrained(out)

    torch.manual_seed(seed)
    config = Qwen3Config(
        vocab_size=len(tokenizer), hidden_size=128, intermediate_size=256, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=32, max_position_embeddings=max_positions,
        tie_word_embeddings=True, eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
        bos_token_id=None, torch_dtype="float32",
    )
    model = Qwen3ForCausalLM(config)
    with torch.no_grad():
        model.model.norm.weight.zero_()
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
