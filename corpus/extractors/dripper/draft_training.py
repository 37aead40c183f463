"""Train the speculative Dripper labeler's draft: the block classifier on Dripper's own blocks.

    python -m corpus.extractors.dripper.labels build --pages PAGES... --out LABELS
    python -m corpus.extractors.dripper.draft_training --labels LABELS [LABELS...] --out DIR [--kind gbdt|sequence]

Each example of LABELS/examples.jsonl (a simplified page, its block ids and their main/other
labels: the annotation marks, the gold text aligned, or a teacher's labels) becomes the block
classifier's blocks (corpus.extractors.dripper.items) and features; the classifier trains as the
block_classifier arm's does (corpus.extractors.block_classifier.model), each dataset one source
for the trees' second pass. Writes the model folder (`block_model.json`, `unit: items`) to DIR: the
Dripper labeler's `draft_model`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from corpus.extractors.block_classifier.features import page_features
from corpus.extractors.block_classifier.model import PageExample, train
from corpus.extractors.dripper.items import item_blocks
from corpus.extractors.dripper.labelers.base import MAIN
from corpus.extractors.dripper.labels import LabelledBlocks, read_examples


def draft_example(example: LabelledBlocks) -> PageExample:
    blocks = item_blocks(example.simplified_html, example.item_ids)
    labels = np.array([example.labels[i] == MAIN for i in example.item_ids], dtype=np.float32)
    return PageExample(blocks, page_features(blocks), labels, example.dataset)


def draft_examples(examples: Iterable[LabelledBlocks]) -> list[PageExample]:
    return [draft_example(e) for e in examples if e.item_ids]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m corpus.extractors.dripper.draft_training", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--labels", nargs="+", type=Path, required=True,
                        help="folders of python -m corpus.extractors.dripper.labels build (their examples.jsonl)")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--kind", choices=["gbdt", "sequence"], default="gbdt")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-seconds", type=float, default=300)
    args = parser.parse_args(argv)
    examples = draft_examples(e for folder in args.labels for e in read_examples(folder / "examples.jsonl"))
    if not examples:
        parser.error("no labelled pages in --labels")
    model = train(examples, args.kind, seed=args.seed, max_seconds=args.max_seconds, unit="items")
    print(f"{model.describe()}: {model.save(args.out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
