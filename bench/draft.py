"""The speculative Dripper labeler's draft, leave-one-dataset-out: how often the block classifier's
label for a Dripper block equals the gold label, on sets it did not train on.

    python -m bench.draft [--max-pages 300] [--held-out cleaneval ...] [--out bench/results/draft.json]

For each full-gold set of ../shared/data/extraction: Dripper's blocks of every page and their
gold labels (corpus.extractors.dripper.labels: the annotation marks where a page has them, else the
gold text aligned), the draft trained on all the *other* sets
(corpus.extractors.dripper.draft_training), and on the held-out pages: the share of blocks whose
drafted label is the gold one (what a labeler that answered the gold would accept), the share of
pages drafted without a single wrong block, wrong blocks per page, and the draft's CPU time per
page. The GPU bench (bench.labeler_gpu) drafts its pages the same way. Prints a table and the means
over the held-out sets, writes JSON.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

FULL_GOLD = ["cleaneval", "cleanportaleval", "dragnet", "htmltotext-benchmark", "readability", "webmainbench-sample"]
THRESHOLD = 0.667  # corpus.extractors.dripper.labels' default


def labelled_sets(max_pages: int) -> dict[str, list]:
    """Every shared full-gold set's pages as LabelledBlocks (Dripper's blocks, gold labels)."""
    from corpus.extractors.dripper.labels import LabelledBlocks, examples_from_pages
    from corpus.sample.annotated import SHARED_PAGE_SETS

    sets = {}
    for name in FULL_GOLD:
        path = SHARED_PAGE_SETS / name / "pages.jsonl.gz"
        if path.is_file():
            sets[name] = [e for e in examples_from_pages(path, THRESHOLD, max_pages) if isinstance(e, LabelledBlocks)]
    return sets


def held_out_drafts(sets: dict[str, list], held: str, trees: int = 400) -> tuple[list[dict], float]:
    """The draft's labels for every page of `held`, from a model trained on the other sets; and the
    drafting's CPU seconds a page."""
    import tempfile

    from corpus.extractors.block_classifier.model import train
    from corpus.extractors.dripper.draft_training import draft_examples
    from corpus.extractors.dripper.labelers import BlockPage
    from corpus.extractors.dripper.labelers.draft import BlockDraft

    model = train(draft_examples(e for name, s in sets.items() if name != held for e in s), "gbdt", trees=trees, unit="items")
    with tempfile.TemporaryDirectory() as folder:
        draft = BlockDraft(model.save(Path(folder)))
    started = time.process_time()
    drafts = [draft.labels(BlockPage(e.simplified_html, tuple(e.item_ids))) for e in sets[held]]
    return drafts, (time.process_time() - started) / max(len(drafts), 1)


def agreement(examples: list, drafts: list[dict]) -> dict:
    wrong = [sum(d[i] != e.labels[i] for i in e.item_ids) for e, d in zip(examples, drafts, strict=True)]
    blocks = sum(len(e.item_ids) for e in examples)
    return {"pages": len(examples), "blocks": blocks, "block_agreement": 1 - sum(wrong) / max(blocks, 1),
            "pages_without_a_wrong_block": sum(w == 0 for w in wrong) / max(len(wrong), 1),
            "wrong_blocks_per_page": statistics.fmean(wrong) if wrong else 0.0,
            "blocks_per_page": blocks / max(len(examples), 1)}


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.draft", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--max-pages", type=int, default=300, help="pages per set")
    parser.add_argument("--held-out", nargs="+", default=FULL_GOLD)
    parser.add_argument("--trees", type=int, default=400)
    parser.add_argument("--out", type=Path, default=Path("bench/results/draft.json"))
    args = parser.parse_args()
    started = time.perf_counter()
    sets = labelled_sets(args.max_pages)
    if len(sets) < 2:
        print("fewer than two shared page sets under ../shared/data/extraction: nothing to hold out", file=sys.stderr)
        return 1
    print(f"Dripper blocks and gold labels of {sum(map(len, sets.values()))} pages in {time.perf_counter() - started:.0f}s")
    results = {}
    print(f"{'held out':22} {'pages':>5} {'blocks/page':>11} {'block agreement':>15} {'pages all right':>15} "
          f"{'wrong/page':>10} {'draft ms/page':>13}")
    for held in [h for h in args.held_out if h in sets]:
        drafts, seconds = held_out_drafts(sets, held, args.trees)
        r = agreement(sets[held], drafts) | {"draft_cpu_ms_per_page": 1000 * seconds}
        results[held] = r
        print(f"{held:22} {r['pages']:5} {r['blocks_per_page']:11.1f} {r['block_agreement']:15.4f} "
              f"{r['pages_without_a_wrong_block']:15.3f} {r['wrong_blocks_per_page']:10.2f} {r['draft_cpu_ms_per_page']:13.1f}",
              flush=True)
    means = {k: statistics.fmean(r[k] for r in results.values()) for k in next(iter(results.values())) if k != "pages"}
    print(f"{'mean over sets':22} {'':5} {means['blocks_per_page']:11.1f} {means['block_agreement']:15.4f} "
          f"{means['pages_without_a_wrong_block']:15.3f} {means['wrong_blocks_per_page']:10.2f} "
          f"{means['draft_cpu_ms_per_page']:13.1f}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"held_out": results, "means": means, "max_pages": args.max_pages,
                                    "trees": args.trees}, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
