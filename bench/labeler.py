"""The encoder labeler against Trafilatura and the aligned-label ceiling, leave-one-dataset-out.

    python -m bench.labeler [--max-pages 150] [--train-seconds 300] [--held-out cleanportaleval ...]

For each held-out full-gold set of ../shared/data/extraction: build aligned block labels for every
set (the Web2Text method, corpus.labels), train the encoder on all the *other* sets, and score on
the held-out pages (ROUGE-5 F1, WebMainBench protocol):
- the dripper arm with the encoder labeler,
- the dripper arm with the aligned labels themselves (oracle: the ceiling any labeler reaches),
- Trafilatura;
plus pages/s per core of the whole arm (one process). Prints a table, writes JSON.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from corpus.extractors import DripperArm, default_arm
from corpus.labelers import BlockLabeler, PageLabels
from corpus.labels import examples_from_pages
from corpus.labelers.encoder import WindowSettings
from corpus.labelers.train import train
from evaluation.extraction import run_step, score_page
from evaluation.pages import SHARED_PAGE_SETS, load_pages

FULL_GOLD = ["cleaneval", "cleanportaleval", "dragnet", "htmltotext-benchmark", "readability", "webmainbench-sample"]


class OracleLabeler(BlockLabeler):
    """Answers with the aligned labels of the page (looked up by its simplified HTML)."""

    def __init__(self, examples):
        self.by_page = {e.simplified_html: e.labels for e in examples}

    def label(self, pages):
        return [PageLabels(labels=self.by_page[p.simplified_html]) if p.simplified_html in self.by_page
                else PageLabels(error="labeler_error") for p in pages]


def arm_scores(arm, pages, labeler=None) -> dict:
    outputs, counters, seconds = run_step(arm.step(labeler) if labeler is not None else arm.step(), pages)
    scores = [score_page(p, outputs[p.key].text if p.key in outputs else "")["rouge5_f1"] for p in pages]
    fallbacks = sum(v for k, v in counters.items() if k.startswith("fallback_"))
    return {"rouge5_f1": statistics.fmean(scores), "pages_per_s": len(pages) / seconds, "fallbacks": fallbacks}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--max-pages", type=int, default=150, help="pages per set (labels and scoring)")
    parser.add_argument("--train-seconds", type=float, default=300)
    parser.add_argument("--held-out", nargs="+", default=FULL_GOLD)
    parser.add_argument("--hidden", type=int, default=128, help="encoder hidden size (heads of 32 dims)")
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--max-block-tokens", type=int, default=48)
    parser.add_argument("--out", type=Path, default=Path("bench/results/labeler.json"))
    args = parser.parse_args()
    files = {name: SHARED_PAGE_SETS / name / "pages.jsonl.gz" for name in FULL_GOLD if (SHARED_PAGE_SETS / name / "pages.jsonl.gz").is_file()}
    if not files:
        print(f"no page sets under {SHARED_PAGE_SETS}", file=sys.stderr)
        return 1
    start = time.perf_counter()
    examples = {name: [e for e in examples_from_pages(path, 0.667, args.max_pages) if not isinstance(e, Exception) and e]
                for name, path in files.items()}
    print(f"labels for {sum(map(len, examples.values()))} pages in {time.perf_counter() - start:.0f}s")
    traf = default_arm("trafilatura")
    results = {}
    for held in args.held_out:
        if held not in files:
            continue
        pages = [p for p in load_pages(files[held], args.max_pages) if p.gold is not None]
        train_examples = [e for name, ex in examples.items() if name != held for e in ex]
        with tempfile.TemporaryDirectory() as model_dir:
            size = {"hidden_size": args.hidden, "num_hidden_layers": args.layers,
                    "num_attention_heads": max(1, args.hidden // 32), "intermediate_size": 2 * args.hidden}
            _, report = train(train_examples, Path(model_dir), WindowSettings(max_block_tokens=args.max_block_tokens),
                              max_seconds=args.train_seconds, size=size, log=lambda *_: None)
            dripper = DripperArm(extractor="dripper", labeler={"kind": "encoder", "model": model_dir})
            results[held] = {
                "pages": len(pages), "train_pages": len(train_examples), "train_steps": report["steps"],
                "dripper_encoder": arm_scores(dripper, pages),
                "dripper_oracle": arm_scores(dripper, pages, OracleLabeler(examples[held])),
                "trafilatura": arm_scores(traf, pages),
            }
        r = results[held]
        print(f"{held:22} pages {r['pages']:4}  encoder {r['dripper_encoder']['rouge5_f1']:.4f} "
              f"({r['dripper_encoder']['pages_per_s']:.1f} p/s)  oracle {r['dripper_oracle']['rouge5_f1']:.4f}  "
              f"trafilatura {r['trafilatura']['rouge5_f1']:.4f} ({r['trafilatura']['pages_per_s']:.1f} p/s)", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
