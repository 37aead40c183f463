"""Pages/s per core of each arm's CPU work, on the same pages.

    python -m bench.extract_throughput [--max-pages 60] [--out bench/results/extract_throughput.json]

Trafilatura: the arm's `extract` call. Dripper: everything but the model call, timed per part:
mineru-html simplification (and prompt), mapping the labels back, and Markdown conversion with
each converter (html2text and mineru-html's). Labels are fixed (the first half of each page's
blocks main) so every converter gets the same main HTML. One process, so pages/s is per core.
Pages: the project's generated sample, and every `../shared/data/extraction` set when present.
"""

from __future__ import annotations

import argparse
import gzip
import itertools
import json
import statistics
import time
from pathlib import Path

from mineru_html.process.build_prompt import get_full_prompt

from corpus.extractors.base import installed_versions, versions_text
from corpus.extractors.dripper.step import main_html_from_labels, simplify_page
from corpus.extractors.trafilatura import TrafilaturaOptions, trafilatura_step
from corpus.markdown import html_to_markdown
from corpus.sample import generate_pages
from corpus.sample.annotated import SHARED_PAGE_SETS


def page_sets(max_pages: int) -> dict[str, list[tuple[str, str | None]]]:
    sets = {"generated-sample": [(p.html, p.url) for p in generate_pages(max_pages, seed=123)]}
    for path in sorted(SHARED_PAGE_SETS.glob("*/pages.jsonl.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as f:
            rows = [json.loads(line) for line in itertools.islice(f, max_pages)]
        sets[path.parent.name] = [(r["html"], r.get("url")) for r in rows]
    return sets


def timed(fn, *args):
    start = time.perf_counter()
    out = fn(*args)
    return out, time.perf_counter() - start


def measure(pages: list[tuple[str, str | None]]) -> dict:
    extract = trafilatura_step(TrafilaturaOptions()).extract
    parts = {k: [] for k in ("trafilatura", "simplify", "mapping", "markdown_html2text", "markdown_mineru")}
    errors = 0
    for html, url in pages:
        _, t = timed(extract, html)
        parts["trafilatura"].append(t)
        try:
            (simplified, map_html, ids), t = timed(simplify_page, html)
            get_full_prompt(simplified, "short_compact")
            parts["simplify"].append(t)
            labels = {i: "main" if n < len(ids) / 2 else "other" for n, i in enumerate(ids)}
            main_html, t = timed(main_html_from_labels, map_html, labels)
            parts["mapping"].append(t)
            _, t = timed(html_to_markdown, main_html, "html2text", url)
            parts["markdown_html2text"].append(t)
            _, t = timed(html_to_markdown, main_html, "mineru", url)
            parts["markdown_mineru"].append(t)
        except Exception:
            errors += 1
    mean = {k: statistics.fmean(v) if v else float("nan") for k, v in parts.items()}
    dripper_h2t = mean["simplify"] + mean["mapping"] + mean["markdown_html2text"]
    dripper_mineru = mean["simplify"] + mean["mapping"] + mean["markdown_mineru"]
    return {
        "pages": len(pages),
        "dripper_errors": errors,
        "seconds_per_page": mean,
        "pages_per_s_per_core": {
            "trafilatura": 1 / mean["trafilatura"],
            "dripper_cpu_html2text": 1 / dripper_h2t,
            "dripper_cpu_mineru": 1 / dripper_mineru,
        },
        "dripper_html2text_vs_trafilatura": mean["trafilatura"] / dripper_h2t,
    }


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.extract_throughput", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--max-pages", type=int, default=60, help="pages per set")
    parser.add_argument("--out", type=Path, default=Path("bench/results/extract_throughput.json"))
    args = parser.parse_args()
    results = {name: measure(pages) for name, pages in page_sets(args.max_pages).items()}
    versions = installed_versions(("trafilatura", "mineru-html", "html2text"))

    head = (f"{'set':24} {'pages':>5} {'traf p/s':>9} {'drip+h2t':>9} {'drip+mineru':>11} | "
            f"{'simplify':>8} {'mapping':>8} {'h2t':>7} {'mineru md':>9}  (ms/page)")
    print(f"releases: {versions_text(versions)}")
    print(head)
    print("-" * len(head))
    for name, r in results.items():
        pps, spp = r["pages_per_s_per_core"], r["seconds_per_page"]
        print(f"{name:24} {r['pages']:>5} {pps['trafilatura']:>9.1f} {pps['dripper_cpu_html2text']:>9.1f} "
              f"{pps['dripper_cpu_mineru']:>11.1f} | {spp['simplify'] * 1e3:>8.1f} {spp['mapping'] * 1e3:>8.1f} "
              f"{spp['markdown_html2text'] * 1e3:>7.1f} {spp['markdown_mineru'] * 1e3:>9.1f}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"versions": versions, "sets": results}, indent=2) + "\n")
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
