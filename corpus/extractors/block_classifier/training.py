"""Train the block classifier (`extractor: block_classifier`).

    python -m corpus.extractors.block_classifier.training --out DIR [--pages PATH...] [--generated N] \
        [--teacher CONFIG --arm ARM --warc PATH...] [--kind gbdt|sequence] [--max-seconds S]

Every source is a page with a reference text, and every label comes the same way: the page's
blocks (corpus.extractors.block_classifier.blocks) are aligned to that text with Web2Text's
aligner (corpus.extractors.alignment), and a block is main when more than `--threshold` of its
characters align.
- `--pages`: annotated page files (the shared sets, WebMainBench JSONL with its marks, the
  sample's gold.jsonl); the reference is the gold main content;
- `--generated N`: N pages of the project's generator (corpus.sample), gold from its templates;
- `--teacher`: any extractor arm of an experiment config (the Dripper LLM on a GPU, say) run on
  the records of `--warc`; the reference is what the teacher extracted (distillation).

Each page file, the generated pages and the teacher's pages are one source each: the trees'
second pass learns from first-pass labels of sources the first pass did not see (five folds of
pages when there is one source). Writes the model folder (`block_model.json` and the model files)
to DIR.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from corpus.extractors.alignment import aligned_shares
from corpus.extractors.block_classifier.blocks import page_blocks
from corpus.extractors.block_classifier.features import page_features
from corpus.extractors.block_classifier.model import PageExample, train

THRESHOLD = 0.5


def page_example(html: str, reference: str, source: str, threshold: float = THRESHOLD) -> PageExample | None:
    """The page's block features labelled by alignment to `reference`; None without blocks."""
    blocks = page_blocks(html)
    if not blocks:
        return None
    shares = np.array(aligned_shares([b.text for b in blocks], reference))
    return PageExample(blocks, page_features(blocks), (shares > threshold).astype(np.float32), source)


def examples_from_page_files(paths: Iterable[Path], threshold: float = THRESHOLD, limit: int | None = None):
    from corpus.sample.annotated import load_pages

    for path in paths:
        for page in load_pages(path, limit):
            if page.gold is not None:  # partial-gold pages (snippets) give no labels
                example = page_example(page.html, page.gold, f"{path.parent.name}/{path.name}", threshold)
                if example is not None:
                    yield example


def examples_from_generated(count: int, seed: int, threshold: float = THRESHOLD):
    from corpus.markdown import html2text_markdown
    from corpus.sample import generate_pages

    for page in generate_pages(count, seed):
        example = page_example(page.html, html2text_markdown(page.gold_html), "generated", threshold)
        if example is not None:
            yield example


def examples_from_teacher(step, documents, threshold: float = THRESHOLD):
    """`step` is a teacher arm's datatrove step; `documents` carry page HTML. The teacher's text
    of each page it extracted becomes that page's reference."""
    pages = {}

    def remember():
        for doc in documents:
            pages[doc.id] = doc.text
            yield doc

    for doc in step.run(remember()):
        example = page_example(pages.pop(doc.id), doc.text, "teacher", threshold)
        if example is not None:
            yield example


def warc_documents(config, warcs: list[Path]):
    """The records of `warcs` past the config's record guard, as documents of page HTML."""
    from corpus.extractors.prefilters import extractable_records

    for warc in warcs:
        yield from extractable_records(config, warc)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m corpus.extractors.block_classifier.training", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--pages", nargs="+", type=Path, default=[])
    parser.add_argument("--max-pages", type=int, help="at most this many pages per page file")
    parser.add_argument("--generated", type=int, default=0, help="generated pages to add")
    parser.add_argument("--seed", type=int, default=0, help="generator and training seed")
    parser.add_argument("--teacher", help="experiment config whose --arm labels the --warc records")
    parser.add_argument("--arm", help="the teacher arm")
    parser.add_argument("--warc", nargs="+", type=Path, default=[])
    parser.add_argument("--kind", choices=["gbdt", "sequence"], default="gbdt")
    parser.add_argument("--threshold", type=float, default=THRESHOLD,
                        help="aligned share of a block's characters to call it main")
    parser.add_argument("--max-seconds", type=float, default=300)
    args = parser.parse_args(argv)
    if bool(args.teacher) != bool(args.warc) or bool(args.teacher) != bool(args.arm):
        parser.error("--teacher, --arm and --warc go together")
    examples = list(examples_from_page_files(args.pages, args.threshold, args.max_pages))
    examples += examples_from_generated(args.generated, args.seed, args.threshold) if args.generated else []
    if args.teacher:
        from configs.experiment import load_experiment_or_exit

        config = load_experiment_or_exit(args.teacher)
        if args.arm not in config.extractor_arms:
            parser.error(f"--arm {args.arm!r} is not an extractor arm of {args.teacher}")
        examples += examples_from_teacher(config.extractor_arms[args.arm].step(), warc_documents(config, args.warc),
                                          args.threshold)
    if not examples:
        parser.error("no labelled pages: give --pages, --generated or a teacher")
    model = train(examples, args.kind, seed=args.seed, max_seconds=args.max_seconds)
    print(f"{model.describe()}: {model.save(args.out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
