"""What the language pre-filter saves and what it loses, on every shared annotated set, per threshold.

    python -m bench.language_prefilter [--thresholds 0.01 0.02 0.05 0.1 0.2] [--out bench/results/language_prefilter.json]

The pre-filter (corpus.extractors.prefilters) drops a record before any extractor when fastText
lid-176 gives every configured language (here English) a probability below the threshold on the
whole page's plain text (resiliparse, main_content=False). For each page of each set this runs it,
and runs post-processing's language filter on the page's gold main content (P(en) >= 0.65, the
regimen's own threshold; partial-gold pages (trafilatura-eval) are judged by their main-content
snippets joined): a page the pre-filter drops whose gold that filter would keep is a page lost.
Per set and threshold: pages, pages whose gold is not English (what the pre-filter exists to save),
pages dropped, pages lost; and the pre-filter's milliseconds per page.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from datatrove.data import Document

from corpus.extractors.prefilters import whole_page_text
from corpus.language import LocalFastTextLID, default_lid_model
from corpus.sample.annotated import SHARED_PAGE_SETS, load_pages

KEEP = 0.65  # post-processing's language threshold (configs: postprocess.language.threshold)


def english(lid: LocalFastTextLID, text: str) -> float:
    return lid.predict(Document(text=text, id=""))[1]["en"]


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.language_prefilter", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--thresholds", nargs="+", type=float, default=[0.01, 0.02, 0.05, 0.1, 0.2])
    parser.add_argument("--out", type=Path, default=Path("bench/results/language_prefilter.json"))
    args = parser.parse_args()
    files = sorted(SHARED_PAGE_SETS.glob("*/pages.jsonl.gz"))
    if not files:
        sys.exit(f"no page sets under {SHARED_PAGE_SETS} (each set a folder with pages.jsonl.gz): nothing to measure")
    lid = LocalFastTextLID(default_lid_model(), ["en"])
    results = {}
    for path in files:
        pages = [p for p in load_pages(path) if p.gold is not None or p.with_snippets]
        start = time.perf_counter()
        whole = [english(lid, whole_page_text(p.html)) for p in pages]
        ms = 1000 * (time.perf_counter() - start) / max(len(pages), 1)
        kept = [english(lid, p.gold if p.gold is not None else "\n".join(p.with_snippets)) >= KEEP for p in pages]
        name = path.parent.name
        results[name] = {"pages": len(pages), "gold_not_english": kept.count(False), "ms_per_page": ms, "thresholds": {
            str(t): {"dropped": sum(w < t for w in whole), "lost": sum(w < t and k for w, k in zip(whole, kept, strict=True))}
            for t in args.thresholds}}
    total = {"pages": sum(r["pages"] for r in results.values()),
             "gold_not_english": sum(r["gold_not_english"] for r in results.values()),
             "thresholds": {str(t): {k: sum(r["thresholds"][str(t)][k] for r in results.values()) for k in ("dropped", "lost")}
                            for t in args.thresholds}}
    print(f"{'set':24s} {'pages':>6s} {'not en':>7s}  " + "  ".join(f"{'P<' + str(t):>15s}" for t in args.thresholds)
          + "   ms/page")
    for name, r in {**results, "all sets": total}.items():
        cells = "  ".join(f"{r['thresholds'][str(t)]['dropped']:>6,} lost {r['thresholds'][str(t)]['lost']:>3,}"
                          for t in args.thresholds)
        ms = f"{r['ms_per_page']:8.1f}" if "ms_per_page" in r else ""
        print(f"{name:24s} {r['pages']:>6,} {r['gold_not_english']:>7,}  {cells} {ms}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"sets": results, "all": total}, indent=2) + "\n")
    print(f"dropped: pages the pre-filter removes; lost: of those, pages whose gold post-processing keeps; wrote {args.out}")


if __name__ == "__main__":
    main()
