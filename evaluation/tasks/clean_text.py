"""Clean text: how well a model predicts clean main content of web pages it never saw.

Extraction changes what a model reads most directly; this family measures it directly, in bits
per byte like lm-eval's `wikitext`, in the same lm-eval call as the suite, on the same
checkpoints, with the same logs. Each set of `evaluation.clean_text.sets` becomes one lm-eval
task per view (`clean_text_<set>_<view>`, from `lm_eval_tasks/_clean_text_template`), its
documents written under `<output_root>/eval/clean_text/`:

- `generated`: the gold main content of English pages the project's generator writes with a seed
  the training sample does not use, as the gold arm writes it (html2text Markdown);
- `jsonl` / `parquet` files or a `huggingface` dataset: a field of clean text (for example the
  Markdown gold of WebMainBench), the first `max_documents` non-empty ones.

Two views of one reference: `markdown` (as given) and `plain` (its marks removed by
`corpus.extractors.plain.plain_text`, the function `extraction.text_format: plain` applies to
every arm). A model trained on one extractor's Markdown dialect is helped or hurt by the
reference's marks; where the two views disagree about a pair of arms, the report says the
ranking is format-dependent. lm-eval's own perplexity tasks (`clean_text.lm_eval_tasks`) run by
name, in the one view they have.
"""

from __future__ import annotations

import glob
import json
from dataclasses import dataclass
from pathlib import Path

from configs.evaluation import CleanTextConfig, CleanTextSet
from corpus.extractors.plain import plain_text
from evaluation.tasks.offline import write_local_task
from evaluation.tasks.suite import TASKS_DIR

TEMPLATE = TASKS_DIR / "_clean_text_template"
VIEW_TITLES = {"plain": "plain text", "markdown": "Markdown"}


@dataclass(frozen=True)
class CleanTextTask:
    task: str  # the lm-eval task name
    set: str  # the set's name, or the lm-eval task's
    view: str | None  # plain, markdown; None for lm-eval's own tasks


def clean_text_tasks(options: CleanTextConfig) -> list[CleanTextTask]:
    """Every clean-text task the config runs, in order: each set's views, then lm-eval's tasks."""
    return ([CleanTextTask(f"clean_text_{s.name}_{view}", s.name, view) for s in options.sets for view in s.views]
            + [CleanTextTask(task, task, None) for task in options.lm_eval_tasks])


def reference_texts(reference: CleanTextSet) -> list[str]:
    """The set's documents as given (Markdown or plain text, per `format`)."""
    if reference.generated is not None:
        from corpus.markdown import html2text_markdown
        from corpus.sample import generate_pages

        g, n = reference.generated, reference.generated.pages
        while len(pages := [p for p in generate_pages(n, g.seed) if p.lang == "en"]) < g.pages:  # no Chinese pages
            n += g.pages
        texts = [html2text_markdown(p.gold_html) for p in pages[: g.pages]]
    elif reference.huggingface is not None:
        import datasets

        h = reference.huggingface
        # the config names the data set (data, not code: datasets runs no loading script since 4.0)
        rows = datasets.load_dataset(h.dataset, h.subset, split=h.split, streaming=True)  # nosec B615  # see above
        texts = (row[reference.field] for row in rows)
    elif reference.parquet is not None:
        import pyarrow.parquet as pq

        paths = sorted(p for pattern in reference.parquet for p in glob.glob(pattern))
        texts = (t for p in paths for t in pq.read_table(p, columns=[reference.field]).column(reference.field).to_pylist())
    else:
        paths = sorted(p for pattern in reference.jsonl for p in glob.glob(pattern))
        texts = (json.loads(line).get(reference.field) for p in paths for line in _lines(p))
    out = []
    for text in texts:
        if isinstance(text, str) and text.strip():
            out.append(text.strip())
            if len(out) == reference.max_documents:
                break
    return out


def _lines(path: str):
    import gzip

    with (gzip.open(path, "rt") if path.endswith(".gz") else open(path)) as f:
        yield from f


def write_clean_text_tasks(out: Path, options: CleanTextConfig) -> Path:
    """Data and YAML of every set's views under `out` (an lm-eval include_path); returns `out`."""
    out.mkdir(parents=True, exist_ok=True)
    for reference in options.sets:
        texts = reference_texts(reference)
        for view in reference.views:
            docs = [{"text": plain_text(t) if view == "plain" and reference.format == "markdown" else t} for t in texts]
            write_local_task(out, f"clean_text_{reference.name}_{view}", TEMPLATE, {"test": docs})
    return out
