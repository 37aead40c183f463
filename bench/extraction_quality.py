"""Extraction quality of every CPU arm on all of ../shared/data/extraction (WebMainBench protocol).

    python -m bench.extraction_quality [--max-pages N] [--out bench/results/extraction_quality]

Runs `evaluation.extraction.benchmark.evaluate` with every extractor kind that needs no model (Trafilatura,
Resiliparse, readability-lxml, jusText, whole page through html2text) and prints the Markdown table; the
folder gets per-page rows, summary.json and a chart per dataset. The Dripper arm needs a
labeling model: score it with `python -m evaluation.extraction --config ... --arms dripper`.
Reference (WebMainBench paper, its own 7,809 pages): Dripper 0.8779, magic-html 0.7138,
Readability 0.6543, Trafilatura 0.6402, Resiliparse 0.6290, whole-page html2text 0.6042.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from corpus.extractors import default_arm, standalone_kinds
from corpus.sample.annotated import SHARED_PAGE_SETS, load_pages
from evaluation.extraction.benchmark import evaluate, markdown_table


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.extraction_quality", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--max-pages", type=int, help="at most this many pages per set")
    parser.add_argument("--out", type=Path, default=Path("bench/results/extraction_quality"))
    args = parser.parse_args()
    files = sorted(SHARED_PAGE_SETS.glob("*/pages.jsonl.gz"))
    if not files:
        print(f"no page sets under {SHARED_PAGE_SETS}", file=sys.stderr)
        return 1
    pages = [p for f in files for p in load_pages(f, args.max_pages)]
    arms = {name: default_arm(name) for name in standalone_kinds()}
    summary = evaluate(arms, pages, args.out)
    print(markdown_table(summary))
    print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
