"""Train the encoder block labeler from scratch on labelled block examples (CPU is enough).

    python -m corpus.extractors.dripper.training --data DIR --out MODEL_DIR [--max-seconds 120] [--epochs 3]

DIR holds `examples.jsonl` from `python -m corpus.extractors.dripper.labels build`. Trains the project's HTML
tokenizer on the examples, then a small ModernBERT token classifier on `[BLK]` positions
(AdamW, linear warmup and decay, class-balanced loss), and writes an ordinary Hugging Face
folder that `labeler: {kind: encoder, model: MODEL_DIR}` loads. Training stops at `--epochs`
or `--max-seconds`, whichever comes first; the loss is printed as it goes.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

from corpus.extractors.dripper.labelers.base import MAIN
from corpus.extractors.dripper.labelers.encoder import (
    WindowSettings,
    build_encoder,
    pad_batch,
    page_blocks,
    page_windows,
    save_labeler,
    train_tokenizer,
)
from corpus.extractors.dripper.labels import LabelledBlocks, read_examples


def training_windows(examples: list[LabelledBlocks], tokenizer, settings: WindowSettings):
    """(input ids, labels) per window; labels are -100 except at [BLK] positions (1 = main)."""
    windows = []
    for ex in examples:
        for ids, positions in page_windows(tokenizer, page_blocks(ex.simplified_html), settings):
            labels = [-100] * len(ids)
            for pos, item_id in positions:
                labels[pos] = int(ex.labels.get(item_id) == MAIN)
            windows.append((ids, labels))
    return windows


def train(examples: list[LabelledBlocks], out: Path, settings: WindowSettings | None = None, epochs: int = 3,
          max_seconds: float | None = None, batch_size: int = 16, lr: float = 1e-3, seed: int = 0,
          size: dict | None = None, log=print):
    """Returns (the trained model, the training report); both are also written to `out`."""
    import torch

    torch.manual_seed(seed)
    rng = random.Random(seed)
    blocks = [text for ex in examples for _, text in page_blocks(ex.simplified_html)]
    tokenizer = train_tokenizer(blocks)
    settings = settings or WindowSettings()
    windows = training_windows(examples, tokenizer, settings)
    if not windows:
        raise ValueError("no training windows: the examples have no blocks")
    model = build_encoder(tokenizer, settings, size)
    n_main = sum(label == 1 for _, labels in windows for label in labels)
    n_blocks = sum(label >= 0 for _, labels in windows for label in labels)
    # balance the classes: boilerplate blocks usually outnumber main ones
    weight = torch.tensor([n_blocks / max(1, 2 * (n_blocks - n_main)), n_blocks / max(1, 2 * n_main)])
    loss_fn = torch.nn.CrossEntropyLoss(weight=weight, ignore_index=-100)
    steps_total = epochs * -(-len(windows) // batch_size)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    warmup = max(1, steps_total // 20)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min((s + 1) / warmup, max(0.0, (steps_total - s) / max(1, steps_total - warmup))))
    start, step, losses = time.perf_counter(), 0, []
    model.train()
    for epoch in range(epochs):
        rng.shuffle(windows)
        for b in range(0, len(windows), batch_size):
            batch = windows[b : b + batch_size]
            input_ids, mask = pad_batch([ids for ids, _ in batch], tokenizer.pad_token_id)
            labels, _ = pad_batch([labels for _, labels in batch], -100)
            labels[mask == 0] = -100
            logits = model(input_ids=input_ids, attention_mask=mask).logits
            loss = loss_fn(logits.view(-1, 2), labels.view(-1))
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            schedule.step()
            optimizer.zero_grad()
            losses.append(loss.item())
            step += 1
            if step % 20 == 0 or step == 1:
                log(f"epoch {epoch} step {step}/{steps_total} loss {sum(losses[-20:]) / len(losses[-20:]):.4f}")
            if max_seconds is not None and time.perf_counter() - start > max_seconds:
                break
        else:
            continue
        break
    model.eval()
    save_labeler(model, tokenizer, settings, out)
    report = {"pages": len(examples), "windows": len(windows), "blocks": n_blocks, "main_blocks": n_main,
              "steps": step, "seconds": round(time.perf_counter() - start, 1),
              "first_loss": losses[0], "last_loss": sum(losses[-20:]) / len(losses[-20:])}
    (out / "training.json").write_text(json.dumps(report, indent=2) + "\n")
    return model, report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m corpus.extractors.dripper.training", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, required=True, help="folder with examples.jsonl")
    parser.add_argument("--out", type=Path, required=True, help="model folder to write")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--max-seconds", type=float, help="stop training after this long")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--window", type=int, default=512, help="tokens per window (the encoder's context)")
    parser.add_argument("--max-block-tokens", type=int, default=48, help="tokens kept of each block's HTML")
    parser.add_argument("--hidden", type=int, default=128, help="hidden size (heads of 32 dims)")
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    examples_file = args.data / "examples.jsonl"
    if not examples_file.is_file():
        raise SystemExit(f"--data: no {examples_file}; build it with python -m corpus.extractors.dripper.labels build")
    size = {"hidden_size": args.hidden, "num_hidden_layers": args.layers, "num_attention_heads": max(1, args.hidden // 32),
            "intermediate_size": 2 * args.hidden}
    _, report = train(read_examples(examples_file), args.out, WindowSettings(args.window, args.max_block_tokens),
                      args.epochs, args.max_seconds, args.batch_size, args.lr, args.seed, size)
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
