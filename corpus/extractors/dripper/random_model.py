"""A tiny randomly initialised Qwen3 decoder with a locally trained tokenizer, as a HF folder.

Tests and the offline demo use it to drive the real vLLM labeling path (engine, chat template,
regex-constrained decoding) without downloading weights. It exercises the machinery, not the
quality. Its random weights are steered (`steer_to_answer_tokens`, which the GPU bench applies to
random models of the released architectures too) so that, like a trained labeler, it writes the
answer in the tokenizer's own tokens (`1`, `main`, `2`, `other`, …, the longest piece where two are
allowed; a plain random decoder spells in odd pieces and spins on the whitespace the regex allows,
until max_tokens) while the label of each block still depends on its context: the sign of the last
hidden state's projection on a direction calibrated on a few prompts. Greedy decoding then gives a
fixed answer per page whose labels change from block to block, with clear margins.

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


def steer_to_answer_tokens(model, tokenizer, prompts: list[str], margin: float = 4.0, spread: float = 3.0) -> None:
    """Random weights that answer in canonical tokens, with page-dependent labels (in place; any
    Llama-shaped Hugging Face decoder: Qwen3, HunYuan).

    Hidden unit 1 carries a constant (every embedding's unit 1 is 1, and no attention or MLP output
    writes to it), which the (untied) output layer turns into `margin` for each of the answer's
    canonical tokens and nothing for any other token: the regex's choice is always a canonical
    token. `main` and `other` add plus and minus the last hidden state's projection on the direction
    along which it varies most at the label positions of `prompts` (answered with alternating
    labels), centred on its median there and scaled to a standard deviation of `spread`: about half
    the labels are main, they change from page to page and block to block, and two labels' logits
    are rarely close. The attention outputs are scaled up so that the hidden state is the
    context's more than the current token's."""
    import torch

    preferred = set(tokenizer.encode(ANSWER_SAMPLE, add_special_tokens=False))
    preferred |= {t for t in [tokenizer.eos_token_id] if t is not None}
    (main,), (other,) = (tokenizer.encode(w, add_special_tokens=False) for w in ("main", "other"))
    inner = model.model
    with torch.no_grad():
        inner.embed_tokens.weight[:, 1] = 1.0
        for layer in inner.layers:
            layer.self_attn.o_proj.weight.mul_(10.0)
            layer.self_attn.o_proj.weight[1, :] = 0
            layer.mlp.down_proj.weight[1, :] = 0
        inner.norm.weight.fill_(1.0)
        states = torch.cat([_label_states(model, tokenizer, prompt) for prompt in prompts]).float()
        states[:, 1] = 0
        centred = states - states.mean(0)
        direction = torch.linalg.svd(centred, full_matrices=False).Vh[0]
        projection = states @ direction
        direction *= spread / projection.std()
        offset = (projection * spread / projection.std()).median()
        unit = states.new_tensor(0.0) + _unit_one(model, tokenizer, prompts[0])
        head = model.lm_head.weight
        head.zero_()
        for token in preferred:  # a longer piece a little more: where two are allowed, the tokenizer's own
            head[token, 1] = margin * (1 + len(tokenizer.decode([token])) / 100) / unit
        head[main] += direction.to(head.dtype)
        head[other] -= direction.to(head.dtype)
        head[main, 1] -= offset / unit
        head[other, 1] += offset / unit


def _answered(tokenizer, prompt: str) -> tuple[list[int], list[int]]:
    """The chat-templated prompt answered with alternating labels, and where each label is predicted."""
    text = tokenizer.apply_chat_template([{"role": "user", "content": prompt}], tokenize=False, add_generation_prompt=True)
    ids = tokenizer.encode(text + "<answer>", add_special_tokens=False)
    positions = []
    for i in range(1, 41):
        ids += tokenizer.encode(str(i), add_special_tokens=False)
        positions.append(len(ids) - 1)
        ids += tokenizer.encode("main" if i % 2 else "other", add_special_tokens=False)
    return ids, positions


def _label_states(model, tokenizer, prompt: str):
    """The last hidden state (after the final norm) where the model writes a label."""
    import torch

    ids, positions = _answered(tokenizer, prompt)
    out = model(torch.tensor([ids], device=model.device), output_hidden_states=True)
    return out.hidden_states[-1][0, positions]


def _unit_one(model, tokenizer, prompt: str) -> float:
    """Unit 1 of the last hidden state at the label positions (nearly constant: the norm of a
    residual stream whose unit 1 is 1)."""
    return float(_label_states(model, tokenizer, prompt)[:, 1].float().mean())


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
    steer_to_answer_tokens(model, tokenizer, _training_text(seed + 1)[:6])
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
