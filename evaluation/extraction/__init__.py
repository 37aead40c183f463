"""Extraction quality, measured directly on annotated pages: `benchmark.py` (every arm's extractor
on the pages, scored; `python -m evaluation.extraction`), `metrics.py` (ROUGE-N over jieba tokens,
token F1, snippets)."""
