"""The block classifier against Trafilatura and Resiliparse, leave-one-dataset-out.

    python -m bench.labeler [--max-pages 400] [--held-out cleaneval ...] [--generated 0] [--sequence-seconds 60]

For each held-out full-gold set of ../shared/data/extraction: label the blocks (corpus.extractors.block_classifier.blocks) of
every set by aligning them to the gold (corpus.extractors.block_classifier.training), train the classifier on all the
*other* sets (plus `--generated` generated pages), and score on the held-out pages (ROUGE-5 F1,
WebMainBench protocol):
- the block_classifier arm with the gradient-boosted trees (the arm's model kind, two passes), run
  through the arm's own datatrove step (parse to Markdown, one process): ROUGE-5 and pages/s;
- the same blocks with that model's first pass alone (P(main) > 0.5), and with the sequence model
  (the kind that lost), for the record;
- the same blocks with the aligned labels themselves (oracle: the ceiling of these blocks);
- Trafilatura and Resiliparse through their arms' steps: ROUGE-5 and pages/s.
Prints a table and the means over the held-out sets, writes JSON.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from corpus.extractors import default_arm
from corpus.extractors.alignment import aligned_shares
from corpus.extractors.base import installed_versions, versions_text
from corpus.extractors.block_classifier import BlockClassifierArm
from corpus.extractors.block_classifier.blocks import blocks_markdown, page_blocks
from corpus.extractors.block_classifier.features import page_features
from corpus.extractors.block_classifier.model import PageExample, train
from corpus.extractors.block_classifier.training import THRESHOLD, examples_from_generated
from corpus.sample.annotated import SHARED_PAGE_SETS, load_pages
from evaluation.extraction.benchmark import run_step, score_page

FULL_GOLD = ["cleaneval", "cleanportaleval", "dragnet", "htmltotext-benchmark", "readability", "webmainbench-sample"]


def labelled_set(path: Path, max_pages: int) -> list[tuple]:
    """(page, blocks, features, labels) of every full-gold page of a set."""
    rows = []
    for page in load_pages(path, max_pages):
        if page.gold is None:
            continue
        blocks = page_blocks(page.html)
        shares = aligned_shares([b.text for b in blocks], page.gold) if blocks else []
        rows.append((page, blocks, page_features(blocks), (np.array(shares) > THRESHOLD).astype(np.float32)))
    return rows


def rouge_of_choices(rows, choose) -> float:
    """Mean ROUGE-5 of the pages' blocks that `choose(blocks, features)` keeps."""
    return statistics.fmean(score_page(page, blocks_markdown([b for b, k in zip(blocks, choose(blocks, x), strict=True) if k]))
                            ["rouge5_f1"] for page, blocks, x, _ in rows)


def first_pass_choice(model):
    """The blocks a two-pass model's first pass alone keeps (P > 0.5)."""
    return lambda blocks, x: model.booster.predict(x) > 0.5


def oracle_rows(rows):
    """The rows with the aligned labels as the features, for the oracle's choice."""
    return [(page, blocks, y, y) for page, blocks, _, y in rows]


def arm_scores(arm, pages) -> dict:
    outputs, _, seconds = run_step(arm.step(), pages)
    scores = [score_page(p, outputs[p.key].text if p.key in outputs else "")["rouge5_f1"] for p in pages]
    return {"rouge5_f1": statistics.fmean(scores), "pages_per_s": len(pages) / seconds}


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.labeler", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--max-pages", type=int, default=400, help="pages per set (labels and scoring)")
    parser.add_argument("--held-out", nargs="+", default=FULL_GOLD)
    parser.add_argument("--generated", type=int, default=0, help="generated pages added to every training set")
    parser.add_argument("--sequence-seconds", type=float, default=60, help="training time of the sequence model")
    parser.add_argument("--out", type=Path, default=Path("bench/results/labeler.json"))
    args = parser.parse_args()
    files = {name: SHARED_PAGE_SETS / name / "pages.jsonl.gz" for name in FULL_GOLD
             if (SHARED_PAGE_SETS / name / "pages.jsonl.gz").is_file()}
    if not files:
        print(f"no page sets under {SHARED_PAGE_SETS}", file=sys.stderr)
        return 1
    start = time.perf_counter()
    sets = {name: labelled_set(path, args.max_pages) for name, path in files.items()}
    generated = list(examples_from_generated(args.generated, seed=1000)) if args.generated else []
    print(f"blocks and labels of {sum(map(len, sets.values()))} pages in {time.perf_counter() - start:.0f}s")
    traf, resiliparse = default_arm("trafilatura"), default_arm("resiliparse")
    versions = traf.versions() | resiliparse.versions() | installed_versions(BlockClassifierArm.packages)
    print(f"releases: {versions_text(versions)}")
    results = {}
    for held in [h for h in args.held_out if h in sets]:
        rows = sets[held]
        pages = [r[0] for r in rows]
        train_examples = [PageExample(blocks, x, y, name) for name, s in sets.items() if name != held
                          for _, blocks, x, y in s if len(blocks)] + generated
        gbdt = train(train_examples, "gbdt")
        sequence = train(train_examples, "sequence", max_seconds=args.sequence_seconds)
        with tempfile.TemporaryDirectory() as model_dir:
            arm = BlockClassifierArm(extractor="block_classifier", model=str(gbdt.save(Path(model_dir))))
            results[held] = {
                "pages": len(pages), "train_pages": len(train_examples),
                "block_classifier": arm_scores(arm, pages),
                "first_pass": {"rouge5_f1": rouge_of_choices(rows, first_pass_choice(gbdt))},
                "sequence_model": {"rouge5_f1": rouge_of_choices(rows, sequence.main_blocks),
                                   "epochs": sequence.report["epochs"]},
                "oracle": {"rouge5_f1": rouge_of_choices(oracle_rows(rows), lambda blocks, y: y > 0)},
                "trafilatura": arm_scores(traf, pages),
                "resiliparse": arm_scores(resiliparse, pages),
            }
        r = results[held]
        print(f"{held:22} pages {r['pages']:4}  block_classifier {r['block_classifier']['rouge5_f1']:.4f} "
              f"({r['block_classifier']['pages_per_s']:.1f} p/s)  first pass {r['first_pass']['rouge5_f1']:.4f}  "
              f"sequence {r['sequence_model']['rouge5_f1']:.4f}  "
              f"oracle {r['oracle']['rouge5_f1']:.4f}  trafilatura {r['trafilatura']['rouge5_f1']:.4f} "
              f"({r['trafilatura']['pages_per_s']:.1f} p/s)  resiliparse {r['resiliparse']['rouge5_f1']:.4f} "
              f"({r['resiliparse']['pages_per_s']:.1f} p/s)", flush=True)
    means = {arm: {k: statistics.fmean(r[arm][k] for r in results.values()) for k in results[next(iter(results))][arm]
                   if k != "epochs"}
             for arm in ("block_classifier", "first_pass", "sequence_model", "oracle", "trafilatura", "resiliparse")}
    print("\nmean over held-out sets: " + "  ".join(
        f"{arm} {m['rouge5_f1']:.4f}" + (f" ({m['pages_per_s']:.1f} p/s)" if "pages_per_s" in m else "")
        for arm, m in means.items()))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"versions": versions, "held_out": results, "means": means, "max_pages": args.max_pages,
                                    "generated": args.generated}, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
