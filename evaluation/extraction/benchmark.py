"""The extraction-quality benchmark: every arm's datatrove step on labelled pages, each page
scored against its gold (evaluation/extraction/metrics.py), the means by dataset, language,
difficulty and content type, and the files `python -m evaluation.extraction` writes (its
command and what it writes: evaluation/extraction/__main__.py)."""

from __future__ import annotations

import json
import math
import statistics
import time
from collections import defaultdict
from functools import lru_cache
from pathlib import Path

from datatrove.data import Document

from configs.durable import write_atomically
from configs.experiment import ExperimentConfig
from corpus.extractors import DripperArm, default_arm, standalone_kinds
from corpus.extractors.base import versions_text
from corpus.extractors.dripper.labelers.revision import recorded_labeler
from corpus.extractors.plain import plain_text
from corpus.sample.annotated import LabelledPage
from evaluation.extraction.metrics import rouge_n_f1, snippet_scores, token_f1


def resolve_arms(config: ExperimentConfig, names: list[str] | None) -> dict:
    """The named arms, or every extractor arm of the config: the gold bound and reference-corpus
    arms extract no pages (the bound would only score itself)."""
    extractors = {name: arm for name, arm in config.extractor_arms.items() if not arm.bound}
    arms = {}
    for name in names or list(extractors):
        if isinstance(arm := extractors.get(name), DripperArm):  # scored with the weights that labeled its corpus
            arms[name] = arm.model_copy(update={"labeler": recorded_labeler(arm.labeler, config.arm_dir(name))})
        elif name in extractors:
            arms[name] = extractors[name]
        elif name in config.arms:
            raise SystemExit(f"--arms: {name!r} is a bound or a reference corpus, not an extractor: it has no pages to score")
        elif name in standalone_kinds():
            arms[name] = default_arm(name)
        else:
            raise SystemExit(f"--arms: {name!r} is neither an arm of the config ({sorted(config.arms)}) "
                             f"nor an extractor kind ({', '.join(standalone_kinds())})")
    return arms


def run_step(step, pages: list[LabelledPage]) -> tuple[dict[str, Document], dict[str, int], float]:
    """(outputs by page key, the step's counters, seconds) for an arm's extractor step over the pages."""
    docs = (Document(text=p.html, id=p.key, metadata={"url": p.url}) for p in pages)
    start = time.perf_counter()
    outputs = {doc.id: doc for doc in step.run(docs)}
    seconds = time.perf_counter() - start
    counters = {k: int(v.total) for k, v in step.stats.stats.items() if k not in ("doc_len",)}
    return outputs, counters, seconds


def score_page(page: LabelledPage, prediction: str) -> dict:
    if page.with_snippets is not None:
        snippets = snippet_scores(prediction, list(page.with_snippets), list(page.without_snippets))
        return {"snippet_recall": snippets.recall, "snippet_leakage": snippets.leakage}
    return {"rouge5_f1": rouge_n_f1(prediction, page.gold), "token_f1": token_f1(prediction, page.gold),
            "rouge5_f1_plain": rouge_n_f1(plain_text(prediction), plain_view(page.gold))}


@lru_cache(maxsize=8192)  # every arm is scored against the same gold texts
def plain_view(gold: str) -> str:
    return plain_text(gold)


def _mean(values: list[float]) -> float | None:
    values = [v for v in values if v is not None and not math.isnan(v)]
    return statistics.fmean(values) if values else None


METRICS = ("rouge5_f1", "token_f1", "rouge5_f1_plain", "snippet_recall", "snippet_leakage")


def _group_means(rows: list[dict], key) -> dict:
    groups = defaultdict(list)
    for row in rows:
        for value in key(row):
            groups[value].append(row)
    return {value: {"pages": len(rs), **{m: _mean([r.get(m) for r in rs]) for m in METRICS}}
            for value, rs in sorted(groups.items(), key=lambda kv: str(kv[0]))}


def summarize(rows: list[dict], runs: dict[str, dict]) -> dict:
    summary = {}
    for arm, run in runs.items():
        arm_rows = [r for r in rows if r["arm"] == arm]
        datasets = _group_means(arm_rows, lambda r: [r["dataset"]])
        full_gold = [d["rouge5_f1"] for d in datasets.values() if d["rouge5_f1"] is not None]
        summary[arm] = {
            "versions": run["versions"],
            "pages": len(arm_rows),
            "pages_per_s": len(arm_rows) / run["seconds"] if run["seconds"] else None,
            "no_output": sum(1 for r in arm_rows if not r["extracted"]),
            "step_counters": run["counters"],
            "datasets": datasets,
            # ROUGE-5 over the full-gold sets: each set alike, and each page alike
            "rouge5_f1_mean_over_sets": _mean(full_gold),
            "rouge5_f1_mean_over_pages": _mean([r.get("rouge5_f1") for r in arm_rows]),
            "languages": _group_means(arm_rows, lambda r: [r["lang"] or "unknown"]),
            "difficulty": _group_means([r for r in arm_rows if r["difficulty"]], lambda r: [r["difficulty"]]),
            "content_types": _group_means(arm_rows, lambda r: r["content_types"]),
        }
    return summary


def _failures(arm_summary: dict) -> str:
    """Pages without output, with the step's reasons (timeouts, errors, empty results)."""
    c = arm_summary["step_counters"]
    reasons = {"timeout": c.get("timeout", 0) + c.get("dropped_fallback_timeout", 0),
               "error": c.get("clean_error", 0) + c.get("broken_process", 0) + c.get("dropped_fallback_error", 0)}
    detail = ", ".join(f"{k} {v}" for k, v in reasons.items() if v)
    return f"{arm_summary['no_output']}" + (f" ({detail})" if detail else "")


def markdown_table(summary: dict) -> str:
    arms = list(summary)
    datasets = sorted({ds for s in summary.values() for ds in s["datasets"]})

    def cell(arm: str, ds: str) -> str:
        d = summary[arm]["datasets"].get(ds)
        if d is None:
            return "-"
        if d["rouge5_f1"] is not None:
            return f"{d['rouge5_f1']:.4f}"
        return f"rec {d['snippet_recall']:.3f} / leak {d['snippet_leakage']:.3f}"

    def mean(value: float | None) -> str:
        return "-" if value is None else f"{value:.4f}"

    lines = ["| dataset | pages | " + " | ".join(arms) + " |", "|---|---:|" + "---:|" * len(arms),
             "| extractor | | " + " | ".join(versions_text(summary[a]["versions"]) or "-" for a in arms) + " |"]
    for ds in datasets:
        pages = next(s["datasets"][ds]["pages"] for s in summary.values() if ds in s["datasets"])
        lines.append(f"| {ds} | {pages} | " + " | ".join(cell(a, ds) for a in arms) + " |")
    lines.append("| mean over sets | | " + " | ".join(mean(summary[a]["rouge5_f1_mean_over_sets"]) for a in arms) + " |")
    lines.append("| mean over pages | | " + " | ".join(mean(summary[a]["rouge5_f1_mean_over_pages"]) for a in arms) + " |")
    lines.append("| pages/s | | " + " | ".join(f"{summary[a]['pages_per_s']:.1f}" for a in arms) + " |")
    lines.append("| no output | | " + " | ".join(_failures(summary[a]) for a in arms) + " |")
    lines.append("")
    lines.append("Full-gold sets: mean ROUGE-5 F1 (WebMainBench protocol); the means are over them. Partial-gold sets: "
                 "snippet recall / leakage.")
    return "\n".join(lines)


def bar_charts(summary: dict, out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = []
    datasets = sorted({ds for s in summary.values() for ds in s["datasets"]})
    for ds in datasets:
        arms = [a for a in summary if ds in summary[a]["datasets"]]
        metric = "rouge5_f1" if summary[arms[0]]["datasets"][ds]["rouge5_f1"] is not None else "snippet_recall"
        values = [summary[a]["datasets"][ds][metric] or 0.0 for a in arms]
        fig, ax = plt.subplots(figsize=(1.2 + 1.1 * len(arms), 3.2))
        ax.bar(arms, values, color="#4C72B0")
        for i, v in enumerate(values):
            ax.text(i, v + 0.01, f"{v:.3f}", ha="center", fontsize=8)
        ax.set_ylim(0, 1.05)
        ax.set_ylabel("ROUGE-5 F1" if metric == "rouge5_f1" else "snippet recall")
        ax.set_title(f"{ds} ({summary[arms[0]]['datasets'][ds]['pages']} pages)")
        ax.tick_params(axis="x", labelrotation=30)
        fig.tight_layout()
        path = out / f"{ds}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        paths.append(path)
    return paths


def evaluate(arms: dict, pages: list[LabelledPage], out: Path, progress=None) -> dict:
    """Every arm on every page, scored; `progress(1)` after each arm."""
    out.mkdir(parents=True, exist_ok=True)
    rows, runs = [], {}
    for name, arm in arms.items():
        outputs, counters, seconds = run_step(arm.step(), pages)
        runs[name] = {"counters": counters, "seconds": seconds, "versions": arm.versions()}
        if progress:
            progress(1)
        for page in pages:
            doc = outputs.get(page.key)
            prediction = doc.text if doc is not None else ""
            rows.append({
                "arm": name, "dataset": page.dataset, "id": page.id, "lang": page.lang,
                "difficulty": page.difficulty, "content_types": list(page.content_types),
                "extracted": doc is not None, "extraction": doc.metadata.get("extraction") if doc else None,
                **score_page(page, prediction),
            })
    with open(out / "pages.jsonl", "w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    summary = summarize(rows, runs)
    write_atomically(out / "summary.json", json.dumps(summary, indent=2, ensure_ascii=False) + "\n")
    table = markdown_table(summary)
    (out / "summary.md").write_text(table + "\n")
    bar_charts(summary, out)
    return summary
