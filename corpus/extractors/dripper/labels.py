"""Block labels for training labelers: main/other for every mineru-html block of a page.

Sources, all producing the same example format (simplified HTML, block ids, labels):
- aligned text (the Web2Text method): block texts are aligned to the gold main text with
  web2textpy's aligner (unique anchors split the problem, dynamic programming inside the
  segments); a block is main when more than `threshold` of its characters align;
- annotation marks: WebMainBench's `cc-select="true"` subtrees, and the generated sample's
  pages, whose templates mark their main blocks the same way;
- a teacher: the labels any `BlockLabeler` (the Dripper LLM) gives (distillation).

    python -m corpus.extractors.dripper.labels build --pages PATH... --out DIR [--threshold 0.667]
    python -m corpus.extractors.dripper.labels build --warc PATH... --teacher CONFIG [--arm dripper] --out DIR

writes `DIR/examples.jsonl` (one page per line) and `DIR/stats.json`.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path

from corpus.extractors.alignment import aligned_shares
from corpus.extractors.dripper.items import block_elements, block_texts
from corpus.extractors.dripper.labelers.base import MAIN, OTHER
from corpus.extractors.dripper.step import simplify_page

SELECTED = "cc-select"


@dataclass
class LabelledBlocks:
    """One training example: what a labeler sees and what it should answer."""

    id: str
    dataset: str
    source: str  # align | marks | teacher
    simplified_html: str
    item_ids: list[int]
    labels: dict[int, str]

    def to_json(self) -> str:
        return json.dumps({**asdict(self), "labels": {str(k): v for k, v in self.labels.items()}}, ensure_ascii=False)

    @classmethod
    def from_json(cls, line: str) -> LabelledBlocks:
        row = json.loads(line)
        row["labels"] = {int(k): v for k, v in row["labels"].items()}
        return cls(**row)


def align_labels(map_html: str, item_ids: list[int], gold_text: str, threshold: float = 0.667) -> dict[int, str]:
    """Main when more than `threshold` of a block's characters align to gold."""
    texts = block_texts(map_html)
    shares = aligned_shares([texts.get(i, "") for i in item_ids], gold_text)
    return {i: MAIN if share > threshold else OTHER for i, share in zip(item_ids, shares, strict=True)}


def mark_labels(map_html: str, item_ids: list[int]) -> dict[int, str]:
    """A block is main when it lies in (or is) a `cc-select="true"` subtree."""
    labels = {}
    elements = block_elements(map_html)
    for i in item_ids:
        el = elements.get(i)
        selected = el is not None and (el.get(SELECTED) == "true" or any(a.get(SELECTED) == "true" for a in el.iterancestors())
                                       or any(d.get(SELECTED) == "true" for d in el.iterdescendants() if isinstance(d.tag, str)))
        labels[i] = MAIN if selected else OTHER
    return labels


def example_from_marked_html(page_id: str, dataset: str, marked_html: str) -> LabelledBlocks | None:
    """Labels read off the marks; the labeler's input is the page with the marks removed (the
    answer must not leak into it), whose blocks must be the marked page's blocks."""
    from corpus.sample.annotated import strip_annotation_marks

    simplified, _, ids = simplify_page(strip_annotation_marks(marked_html))
    _, marked_map, marked_ids = simplify_page(marked_html)
    if not ids:
        return None
    if ids != marked_ids:
        raise ValueError("the marks change how mineru-html splits the page into blocks")
    return LabelledBlocks(page_id, dataset, "marks", simplified, list(ids), mark_labels(marked_map, list(ids)))


def example_from_gold_text(page_id: str, dataset: str, html: str, gold: str, threshold: float) -> LabelledBlocks | None:
    simplified, map_html, ids = simplify_page(html)
    if not ids:
        return None
    return LabelledBlocks(page_id, dataset, "align", simplified, list(ids), align_labels(map_html, list(ids), gold, threshold))


def examples_from_pages(path: Path, threshold: float, limit: int | None = None):
    """Examples from a page file in any format corpus.sample.annotated reads: labels from the marks
    where the page has them, else aligned to the gold text (partial-gold pages are skipped)."""
    from corpus.sample.annotated import load_pages

    for page in load_pages(path, limit):
        try:
            if page.marked_html is not None:
                yield example_from_marked_html(page.key, page.dataset, page.marked_html)
            elif page.gold is not None:
                yield example_from_gold_text(page.key, page.dataset, page.html, page.gold, threshold)
        except Exception as e:  # one unparseable page is counted, not fatal
            yield e


def examples_from_teacher(warcs: list[Path], config_path: str, arm_name: str):
    from configs.experiment import load_experiment_or_exit
    from corpus.extractors import DripperArm
    from corpus.extractors.dripper.labelers import get_labeler
    from corpus.extractors.prefilters import extractable_records

    config = load_experiment_or_exit(config_path)
    arm = config.arms.get(arm_name)
    if not isinstance(arm, DripperArm):
        raise SystemExit(f"--arm {arm_name!r} is not a dripper arm of {config_path}")
    labeler = get_labeler(arm.labeler)
    batch = []
    for warc in warcs:
        for doc in extractable_records(config, warc):
            try:
                simplified, _, ids = simplify_page(doc.text)
            except Exception as e:
                yield e
                continue
            if ids:
                batch.append((doc.id, simplified, ids))
            if len(batch) >= arm.batch_pages:
                yield from _teach(labeler, batch, warc.name)
                batch = []
        yield from _teach(labeler, batch, warc.name)
        batch = []


def _teach(labeler, batch, dataset: str):
    from corpus.extractors.dripper.labelers import BlockPage

    results = labeler.label([BlockPage(s, ids) for _, s, ids in batch]) if batch else []
    for (doc_id, simplified, ids), result in zip(batch, results, strict=True):
        if result.ok:
            yield LabelledBlocks(doc_id, dataset, "teacher", simplified, list(ids), result.labels)
        else:
            yield ValueError(result.error)


def build(examples, out: Path) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    stats = Counter()
    with open(out / "examples.jsonl", "w", encoding="utf-8") as f:
        for ex in examples:
            if isinstance(ex, Exception) or ex is None:
                stats["skipped_" + (type(ex).__name__ if ex is not None else "no_blocks")] += 1
                continue
            f.write(ex.to_json() + "\n")
            stats[f"pages_{ex.source}"] += 1
            stats["blocks"] += len(ex.item_ids)
            stats["main_blocks"] += sum(v == MAIN for v in ex.labels.values())
    (out / "stats.json").write_text(json.dumps(dict(stats), indent=2) + "\n")
    return dict(stats)


def read_examples(path: Path) -> list[LabelledBlocks]:
    with open(path, encoding="utf-8") as f:
        return [LabelledBlocks.from_json(line) for line in f]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m corpus.extractors.dripper.labels", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="write labelled block examples")
    b.add_argument("--pages", nargs="+", type=Path, default=[], help="page files (shared sets, WebMainBench, sample gold)")
    b.add_argument("--warc", nargs="+", type=Path, default=[], help="WARC files to label with --teacher")
    b.add_argument("--teacher", help="experiment config whose dripper arm's labeler is the teacher")
    b.add_argument("--arm", default="dripper")
    b.add_argument("--threshold", type=float, default=0.667, help="aligned share of a block's characters to call it main")
    b.add_argument("--max-pages", type=int, help="at most this many pages per file")
    b.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    if bool(args.warc) != bool(args.teacher):
        parser.error("--warc and --teacher go together")
    if not args.pages and not args.warc:
        parser.error("give --pages or --warc with --teacher")

    def all_examples():
        for path in args.pages:
            yield from examples_from_pages(path, args.threshold, args.max_pages)
        if args.warc:
            yield from examples_from_teacher(args.warc, args.teacher, args.arm)

    stats = build(all_examples(), args.out)
    print(json.dumps(stats, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
