"""Extraction quality: score arms directly on labelled pages (WebMainBench protocol).

    python -m evaluation.extraction --config CONFIG --pages PATH... [--arms A B] [--out DIR]

Each arm runs the very datatrove step the corpus stage runs (the arm's `step()`), fallbacks and
timeouts included. `--arms` takes arms of the config, or an extractor kind that runs without
options (corpus.extractors: trafilatura, resiliparse, readability, justext, html2text).

Writes to DIR (default `<output_root>/extraction_quality/`): `pages.jsonl` (one row per arm and
page), `summary.json` (means per dataset, language, difficulty, content type; errors, timeouts,
fallbacks and pages/s per arm), `summary.md` (the table printed) and `<dataset>.png` bar charts.
Full-gold pages get ROUGE-5 F1 and token F1, and ROUGE-5 F1 in the plain view (prediction and gold
without their Markdown marks, corpus/extractors/plain.py: what is left of a difference there is
content, not dialect); partial-gold pages snippet recall and leakage.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from configs.experiment import load_experiment_or_exit
from corpus.sample.annotated import load_pages
from evaluation.extraction.benchmark import evaluate, markdown_table, resolve_arms
from slurm import console


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m evaluation.extraction", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", required=True, help="experiment YAML (its arms are the extractors)")
    parser.add_argument("--pages", nargs="+", required=True, type=Path, help="labelled page files (JSONL or .jsonl.gz)")
    parser.add_argument("--arms", nargs="+", help="arms of the config or extractor kinds (default: the config's arms)")
    parser.add_argument("--out", type=Path, help="output folder (default: <output_root>/extraction_quality)")
    parser.add_argument("--max-pages", type=int, help="at most this many pages per file")
    console.add_verbose_flag(parser)
    args = parser.parse_args(argv)
    console.apply_verbose_flag(args)
    config = load_experiment_or_exit(args.config)
    for path in args.pages:
        if not path.is_file():
            raise SystemExit(f"--pages: no such file {path}")
    pages = [p for path in args.pages for p in load_pages(path, args.max_pages)]
    out = args.out or config.output_root / "extraction_quality"
    arms = resolve_arms(config, args.arms)
    log = config.output_root / "logs" / "extraction-quality.log"
    with console.stage("extraction quality", log, "arms", len(arms)) as bar:
        summary = evaluate(arms, pages, out, progress=bar.update)
    print(markdown_table(summary))
    console.closing_line("extraction quality", f"{len(arms)} arms × {len(pages)} pages",
                         f"{out}/ (pages.jsonl, summary.json, summary.md, a PNG per dataset)", log)
    return 0


if __name__ == "__main__":
    sys.exit(main())
