"""The comparison report: downstream scores per arm, the paired difference, and what led to them.

    python -m evaluation.report [CONFIG]        (default: configs/local.yaml)

Reads `<output_root>/eval/<arm>/seed<S>/step_*/` (results and per-document logs), and where they
exist the extraction-quality summary and the ledger. Prints Markdown and writes
`<output_root>/report/`: `report.md`, `summary.csv` (one row per arm), `tasks.csv` (one row per
benchmark and arm), `report.json`, `curves_average.png` and `curves_categories.png`.

- Scores are each arm's final checkpoint, mean over seeds ± the spread across seeds (sample
  standard deviation). A benchmark's score is its suite metric (ARC: the mean of Easy and
  Challenge); categories and the average are means over their benchmarks (the paper's Table 5).
  Centered accuracy, (score − chance) / (1 − chance), puts tasks with different chance levels on
  one scale; it is reported beside the raw average.
- Differences to the first arm of the config come with a 95% interval from a paired bootstrap:
  every replicate resamples the test documents of each task (the same documents for both arms)
  and, with several seeds, the seeds (seed s of one arm paired with seed s of the other: same
  initial weights and data order). A per-benchmark difference whose interval excludes zero is
  marked `*`.
- Missing pieces (runs not evaluated, tasks absent) are listed, and everything that exists is
  still reported.
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import sys
from pathlib import Path

import numpy as np

from configs.experiment import ExperimentConfig, load_experiment_or_exit
from configs.provenance import read_provenance
from corpus.accounting.ledger import BUDGET, EXTRACTION, READ, ledgers, rows_by_name, summary_line
from corpus.postprocess.steps import output_step
from corpus.read.reference import HUB, ReferenceArm
from evaluation.suite import CATEGORIES, CATEGORY_TITLES, Benchmark, Suite, load_suite

BOOTSTRAP_REPLICATES = 2000
COLUMNS = ("average", *CATEGORIES)
COLUMN_TITLES = {"average": "Avg", **CATEGORY_TITLES}
REPORTED_PACKAGES = ("datatrove", "trafilatura", "torch", "megatron-core", "lm-eval", "transformers", "vllm")


# ---------------------------------------------------------------- reading results


def load_runs(config: ExperimentConfig) -> list[dict]:
    """Every evaluated checkpoint of the config's (arm, seed) runs: its results.json, the folder
    holding its sample logs, and its training tokens (from the config, the one source of them)."""
    runs = []
    for arm, seed in config.runs():
        for path in sorted(config.eval_dir(arm, seed).glob("step_*/results.json")):
            result = json.loads(path.read_text())
            runs.append(result | {"dir": path.parent, "tokens": config.pretrain.tokens_at(result["step"])})
    return runs


def task_score(result: dict, task: str, metric: str) -> float | None:
    value = result["results"].get(task, {}).get(f"{metric},none")
    return None if value is None or value == "N/A" else float(value)


def benchmark_scores(result: dict, suite: Suite, form: str) -> dict[str, float | None]:
    """Each benchmark's score in `form` (cloze or standard); None where a task is missing."""
    out = {}
    for b in suite.benchmarks:
        values = [task_score(result, t, b.score) for t in b.form(form)]
        out[b.name] = None if None in values else sum(values) / len(values)
    return out


def centered(score: float, b: Benchmark) -> float:
    return (score - b.chance) / (1 - b.chance)


def category_means(scores: dict[str, float | None], suite: Suite, center: bool = False) -> dict[str, float | None]:
    """Average and per-category means over benchmarks; None where a benchmark is missing."""
    values = {b.name: (centered(scores[b.name], b) if center else scores[b.name]) if scores[b.name] is not None else None
              for b in suite.benchmarks}
    out = {}
    for column in COLUMNS:
        members = [values[b.name] for b in suite.benchmarks if column == "average" or b.category == column]
        out[column] = None if None in members else sum(members) / len(members)
    return out


def leaf_tasks(result: dict, task: str) -> list[str]:
    """A task, or the tasks under a group (lm-eval's group_subtasks, recursively)."""
    children = result.get("group_subtasks", {}).get(task)
    if not children:
        return [task]
    return [leaf for child in children for leaf in leaf_tasks(result, child)]


def item_scores(run: dict, task: str, metric: str) -> dict[tuple[str, int], float]:
    """Per-document metric values of a task (all subtasks of a group), keyed by (subtask, doc_id)."""
    out = {}
    for leaf in leaf_tasks(run, task):
        path = run["dir"] / f"samples_{leaf}.jsonl"
        if path.is_file():
            for line in path.read_text().splitlines():
                sample = json.loads(line)
                if metric in sample:
                    out[(leaf, int(sample["doc_id"]))] = float(sample[metric])
    return out


# ---------------------------------------------------------------- statistics


def mean_and_spread(values: list[float]) -> tuple[float, float]:
    return statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else 0.0


def paired_bootstrap(reference: list[dict], other: list[dict], suite: Suite, form: str,
                     replicates: int = BOOTSTRAP_REPLICATES, seed: int = 0) -> dict:
    """Difference other − reference (raw and centered) per benchmark, category and average,
    with 95% intervals. `reference`/`other` are the final runs of each arm; seeds are paired by
    their number and only seeds both arms have count; documents by (task, doc_id)."""
    ref_by_seed = {r["seed"]: r for r in reference}
    other_by_seed = {r["seed"]: r for r in other}
    seeds = sorted(set(ref_by_seed) & set(other_by_seed))
    if not seeds:
        return {}
    rng = np.random.default_rng(seed)
    seed_draw = rng.integers(0, len(seeds), size=(replicates, len(seeds)))
    bench_diffs, observed = {}, {}
    for b in suite.benchmarks:
        task_diffs, task_observed = [], []
        for task in b.form(form):
            items_ref = [item_scores(ref_by_seed[s], task, b.score) for s in seeds]
            items_other = [item_scores(other_by_seed[s], task, b.score) for s in seeds]
            common = sorted(set.intersection(*(set(i) for i in items_ref + items_other)))
            if not common:
                break
            a = np.array([[items[k] for k in common] for items in items_ref])  # seeds x documents
            c = np.array([[items[k] for k in common] for items in items_other])
            draw = rng.integers(0, len(common), size=(replicates, len(common)))
            per_seed = np.stack([(c[s][draw] - a[s][draw]).mean(axis=1) for s in range(len(seeds))])  # seeds x B
            task_diffs.append(per_seed[seed_draw, np.arange(replicates)[:, None]].mean(axis=1))
            task_observed.append(float((c - a).mean()))
        else:
            bench_diffs[b.name] = np.mean(task_diffs, axis=0)
            observed[b.name] = float(np.mean(task_observed))
    out = {"seeds": seeds, "benchmarks": {}, "columns": {}, "centered_columns": {}}
    for name, draws in bench_diffs.items():
        out["benchmarks"][name] = _interval(observed[name], draws)
    for center, key in ((False, "columns"), (True, "centered_columns")):
        for column in COLUMNS:
            members = [b for b in suite.benchmarks if column == "average" or b.category == column]
            if all(b.name in bench_diffs for b in members):
                scale = [1 / (1 - b.chance) if center else 1.0 for b in members]
                draws = np.mean([bench_diffs[b.name] * k for b, k in zip(members, scale, strict=True)], axis=0)
                point = float(np.mean([observed[b.name] * k for b, k in zip(members, scale, strict=True)]))
                out[key][column] = _interval(point, draws)
    return out


def _interval(point: float, draws: np.ndarray) -> dict:
    low, high = np.percentile(draws, [2.5, 97.5])
    return {"difference": point, "ci_low": float(low), "ci_high": float(high),
            "significant": bool(low > 0 or high < 0)}


# ---------------------------------------------------------------- the report


def final_runs(runs: list[dict]) -> dict[str, list[dict]]:
    """Per arm, the last evaluated checkpoint of each seed."""
    last: dict[tuple[str, int], dict] = {}
    for run in runs:
        key = (run["arm"], run["seed"])
        if key not in last or run["step"] > last[key]["step"]:
            last[key] = run
    out: dict[str, list[dict]] = {}
    for (arm, _), run in sorted(last.items()):
        out.setdefault(arm, []).append(run)
    return out


def missing_pieces(config: ExperimentConfig, runs: list[dict], suite: Suite) -> list[str]:
    notes = []
    evaluated = {(r["arm"], r["seed"]) for r in runs}
    for arm, seed in config.runs():
        if (arm, seed) not in evaluated:
            notes.append(f"{arm} seed {seed}: no evaluated checkpoint")
    for run in runs:
        absent = [t for t in suite.all_tasks() if t not in run["results"]]
        if absent:
            notes.append(f"{run['arm']} seed {run['seed']} step {run['step']}: tasks missing {absent}")
    return notes


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.2f}"


def _mean_cell(values: list[float | None]) -> str:
    present = [v for v in values if v is not None]
    if not present:
        return "-"
    mean, spread = mean_and_spread(present)
    return f"{100 * mean:.2f} ± {100 * spread:.2f}" if len(present) > 1 else f"{100 * mean:.2f}"


def _diff_cell(interval: dict | None) -> str:
    if not interval:
        return "-"
    mark = "*" if interval["significant"] else ""
    low, point, high = (round(100 * interval[k], 2) + 0.0 for k in ("ci_low", "difference", "ci_high"))  # no "-0.00"
    return f"{point:+.2f}{mark} [{low:+.2f}, {high:+.2f}]"


def arm_source(arm) -> str:
    if isinstance(arm, ReferenceArm):
        where = arm.dataset + (f"/{arm.subset}" if arm.subset else "") if arm.corpus == HUB else f"{arm.corpus} files"
        return f"corpus: {where}" + (", post-processed here" if arm.postprocess else "")
    return f"extractor: {arm.extractor}"


def extraction_context(config: ExperimentConfig, ledgers: list[dict]) -> dict:
    """Where each arm's text comes from, ROUGE-5 per arm (extraction benchmark) and
    documents/tokens kept (ledger), where present."""
    context = {name: {"source": arm_source(arm)} for name, arm in config.arms.items()}
    quality = config.output_root / "extraction_quality" / "summary.json"
    if quality.is_file():
        summary = json.loads(quality.read_text())
        for arm, s in summary.items():
            scores = [d["rouge5_f1"] for d in s["datasets"].values() if d.get("rouge5_f1") is not None]
            if scores:
                context.setdefault(arm, {})["rouge5_f1"] = sum(scores) / len(scores)
                context[arm]["rouge5_datasets"] = sorted(s["datasets"])
    for ledger in ledgers:
        if ledger["rows"]:
            rows = rows_by_name(ledger)
            entry = context.setdefault(ledger["arm"], {})
            if EXTRACTION in rows:
                entry["records"] = rows[EXTRACTION]["documents_in"]
            # a reference corpus that joins after post-processing was filtered by its makers
            post = rows.get(output_step().name) or rows.get(READ)
            if post:
                entry["documents_post_processed"] = post["documents_out"]
                entry["tokens_post_processed"] = post["tokens_out"]
            if BUDGET in rows:
                entry["documents_in_budget"] = rows[BUDGET]["documents_out"]
                entry["tokens_in_budget"] = rows[BUDGET]["tokens_out"]
    return context


def build_report(config: ExperimentConfig, suite: Suite | None = None, replicates: int = BOOTSTRAP_REPLICATES) -> dict:
    suite = suite or load_suite()
    runs = load_runs(config)
    arm_ledgers = ledgers(config)
    finals = final_runs(runs)
    arms = [arm for arm in config.arms if arm in finals]
    table = {}
    for arm in arms:
        per_seed = [benchmark_scores(r, suite, suite.headline) for r in finals[arm]]
        standard = [benchmark_scores(r, suite, "standard") for r in finals[arm]]
        means = [category_means(scores, suite) for scores in per_seed]
        centered_means = [category_means(scores, suite, center=True) for scores in per_seed]
        table[arm] = {
            "seeds": [r["seed"] for r in finals[arm]],
            "steps": [r["step"] for r in finals[arm]],
            "tokens": [r["tokens"] for r in finals[arm]],
            "benchmarks": {b.name: [s[b.name] for s in per_seed] for b in suite.benchmarks},
            "standard_form": {b.name: [s[b.name] for s in standard] for b in suite.benchmarks if b.cloze},
            "columns": {c: [m[c] for m in means] for c in COLUMNS},
            "centered_columns": {c: [m[c] for m in centered_means] for c in COLUMNS},
        }
    differences = {}
    if arms:
        reference = arms[0]
        for arm in arms[1:]:
            differences[arm] = paired_bootstrap(finals[reference], finals[arm], suite, suite.headline, replicates)
    curves = {}
    for run in runs:
        means = category_means(benchmark_scores(run, suite, suite.headline), suite)
        point = curves.setdefault(run["arm"], {}).setdefault(run["tokens"], {c: [] for c in COLUMNS})
        for column in COLUMNS:
            if means[column] is not None:
                point[column].append(means[column])
    return {"experiment": config.name, "headline_form": suite.headline, "arms": arms,
            "reference_arm": arms[0] if arms else None, "table": table, "differences": differences,
            "curves": {arm: {str(t): v for t, v in sorted(curves[arm].items())} for arm in config.arms if arm in curves},
            "extraction": extraction_context(config, arm_ledgers), "ledgers": arm_ledgers,
            "missing": missing_pieces(config, runs, suite),
            "made_by": made_by(config)}


def render_markdown(report: dict, suite: Suite) -> str:
    arms, table, diffs, ref = report["arms"], report["table"], report["differences"], report["reference_arm"]
    lines = [f"# {report['experiment']}: downstream scores per arm", ""]
    if not arms:
        return "\n".join(lines + ["No evaluated checkpoints yet."]) + "\n"
    form = {"cloze": "cloze forms (MMLU: mmlu_continuation, CommonsenseQA: commonsense_qa_cloze)",
            "standard": "standard (letter-choice) forms"}[report["headline_form"]]
    lines += [f"Final checkpoint of each seed, mean ± spread across seeds, in %. Headline uses the {form}.", "",
              "| arm | seeds | tokens | " + " | ".join(COLUMN_TITLES[c] for c in COLUMNS) + " | Avg (centered) |",
              "|---|---:|---:|" + "---:|" * (len(COLUMNS) + 1)]
    for arm in arms:
        t = table[arm]
        lines.append(f"| {arm} | {len(t['seeds'])} | {max(t['tokens']):,} | "
                     + " | ".join(_mean_cell(t["columns"][c]) for c in COLUMNS)
                     + f" | {_mean_cell(t['centered_columns']['average'])} |")
    for arm, d in diffs.items():
        lines.append(f"| {arm} − {ref} | {len(d.get('seeds', []))} | | "
                     + " | ".join(_diff_cell(d.get("columns", {}).get(c)) for c in COLUMNS)
                     + f" | {_diff_cell(d.get('centered_columns', {}).get('average'))} |")
    lines += ["", "Differences: paired bootstrap over test documents"
              + (" and seeds" if any(len(d.get("seeds", [])) > 1 for d in diffs.values()) else "")
              + ", 95% interval in brackets; `*`: the interval excludes zero.", "",
              "| benchmark | category | metric | " + " | ".join(arms)
              + "".join(f" | {a} − {ref}" for a in diffs) + " |",
              "|---|---|---|" + "---:|" * (len(arms) + len(diffs))]
    for b in suite.benchmarks:
        tasks = "+".join(b.form(report["headline_form"]))
        lines.append(f"| {b.name} ({tasks}) | {b.category} | {b.score} | "
                     + " | ".join(_mean_cell(table[a]["benchmarks"][b.name]) for a in arms)
                     + "".join(f" | {_diff_cell(diffs[a].get('benchmarks', {}).get(b.name))}" for a in diffs) + " |")
        if b.cloze and report["headline_form"] == "cloze":
            lines.append(f"| {b.name} ({'+'.join(b.tasks)}, letter choice) | {b.category} | {b.score} | "
                         + " | ".join(_mean_cell(table[a]["standard_form"][b.name]) for a in arms)
                         + " |" * len(diffs) + " |")
    extraction = report["extraction"]
    if extraction:
        lines += ["", "## What each arm trained on", "",
                  "| arm | source | ROUGE-5 F1 (extraction benchmark) | records | documents post-processed "
                  "| tokens post-processed | documents in budget | tokens in budget |",
                  "|---|---|---:|---:|---:|---:|---:|---:|"]
        for arm in arms:
            e = extraction.get(arm, {})
            counts = " | ".join(f"{e[key]:,}" if e.get(key) is not None else "-" for key in (
                "records", "documents_post_processed", "tokens_post_processed", "documents_in_budget", "tokens_in_budget"))
            rouge = f"{e['rouge5_f1']:.4f}" if "rouge5_f1" in e else "-"
            lines.append(f"| {arm} | {e.get('source', '-')} | {rouge} | {counts} |")
    return "\n".join(lines) + "\n"


def render_ledger(report: dict) -> str:
    """Every arm's documents through the corpus flow, one line each (corpus.accounting.ledger)."""
    ledgers = report["ledgers"]
    if not any(ledger["rows"] for ledger in ledgers):
        return ""
    stages = [r["stage"] for r in ledgers[0]["rows"]]
    return "\n".join(["## Every record accounted for", "", "documents: in → after " + " → ".join(stages),
                      *(summary_line(ledger, stages) for ledger in ledgers)]) + "\n"


def render_outputs(config: ExperimentConfig) -> str:
    root = config.output_root
    where = {"extracted documents": root / "extract", "post-processed documents and what was removed": root / "post",
             "tokenizer": config.tokenizer_dir(), "token-matched datasets": root / "datasets",
             "checkpoints and training logs": root / "train", "lm-eval results and samples": root / "eval",
             "library logs": root / "logs"}
    return "\n".join(["## Where everything is", "", *(f"  {what}: {path}" for what, path in where.items() if path.exists())])


def render_missing(report: dict) -> str:
    return "\n".join(["## Missing", "", *[f"- {m}" for m in report["missing"]]]) + "\n" if report["missing"] else ""


def made_by(config: ExperimentConfig) -> dict[str, dict]:
    """The provenance of every output folder the numbers come from, by folder."""
    folders = [config.output_root / "datasets"]
    folders += [d for arm, seed in config.runs() for d in (config.run_dir(arm, seed), config.eval_dir(arm, seed))]
    return {config.relative(f): p for f in folders if (p := read_provenance(f))}


def render_provenance(report: dict) -> str:
    """Commit, config hash, package set and seeds; every folder made differently is named."""
    made = report["made_by"]
    if not made:
        return ""
    key = ("git_commit", "config_sha256", "package_set_sha256")
    groups: dict[tuple, list[str]] = {}
    for folder, p in made.items():
        groups.setdefault(tuple(p.get(k) for k in key), []).append(folder)
    first = next(iter(made.values()))
    packages = ", ".join(f"{k} {v}" for k, v in first["packages"].items() if k in REPORTED_PACKAGES)
    lines = ["## What made these numbers", "", f"- packages: {packages}; python {first['python']}",
             "- seeds: " + ", ".join(f"{k} {v}" for k, v in first["seeds"].items())]
    for (commit, config_hash, package_set), folders in groups.items():
        where = "every output" if len(groups) == 1 else ", ".join(folders)
        lines.append(f"- {where}: commit {commit}, config {config_hash[:12]}, package set {package_set[:12]}")
    if len(groups) > 1:
        lines.append("- **outputs made by different commits, configs or package sets: compare with care**")
    return "\n".join(lines) + "\n"


def write_tables(report: dict, suite: Suite, out: Path) -> None:
    with open(out / "summary.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["arm", "seeds", *(f"{c}_{k}" for c in COLUMNS for k in ("mean", "std")),
                         "average_centered_mean", "average_centered_std"])
        for arm in report["arms"]:
            t = report["table"][arm]
            row = [arm, len(t["seeds"])]
            for c in (*COLUMNS,):
                row += _stats(t["columns"][c])
            writer.writerow(row + _stats(t["centered_columns"]["average"]))
    with open(out / "tasks.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["benchmark", "category", "tasks", "metric", "arm", "mean", "std", "difference_to_reference",
                         "ci_low", "ci_high", "significant"])
        for b in suite.benchmarks:
            for arm in report["arms"]:
                d = report["differences"].get(arm, {}).get("benchmarks", {}).get(b.name, {})
                writer.writerow([b.name, b.category, "+".join(b.form(report["headline_form"])), b.score, arm,
                                 *_stats(report["table"][arm]["benchmarks"][b.name]),
                                 d.get("difference"), d.get("ci_low"), d.get("ci_high"), d.get("significant")])


def _stats(values: list[float | None]) -> list:
    present = [v for v in values if v is not None]
    return list(mean_and_spread(present)) if present else [None, None]


def plot_curves(report: dict, out: Path) -> list[Path]:
    """Score against training tokens per arm, mean over seeds with a min-max band (Figures 4, 5)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = []
    for name, columns in (("average", ["average"]), ("categories", list(CATEGORIES))):
        fig, axes = plt.subplots(1, len(columns), figsize=(5 * len(columns), 3.6), squeeze=False)
        for ax, column in zip(axes[0], columns, strict=True):
            for arm, points in report["curves"].items():
                xs = [int(t) for t, v in points.items() if v[column]]
                ys = [[100 * x for x in points[str(t)][column]] for t in xs]
                if not xs:
                    continue
                line, = ax.plot(xs, [statistics.fmean(y) for y in ys], marker="o", label=arm)
                ax.fill_between(xs, [min(y) for y in ys], [max(y) for y in ys], alpha=0.2, color=line.get_color())
            ax.set_title(COLUMN_TITLES[column])
            ax.set_xlabel("training tokens")
            ax.set_ylabel("score (%)")
            ax.grid(alpha=0.3)
        axes[0][0].legend()
        fig.tight_layout()
        path = out / f"curves_{name}.png"
        fig.savefig(path, dpi=120)
        plt.close(fig)
        paths.append(path)
    return paths


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m evaluation.report", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("config", nargs="?", default="configs/local.yaml")
    args = parser.parse_args(argv)
    config = load_experiment_or_exit(args.config)
    suite = load_suite()
    report = build_report(config, suite)
    out = config.output_root / "report"
    out.mkdir(parents=True, exist_ok=True)
    markdown = render_markdown(report, suite)
    provenance, missing = render_provenance(report), render_missing(report)
    (out / "report.md").write_text("\n".join(filter(None, [markdown, provenance, missing])))
    # the console gets the headline table; report.md has every benchmark and what each arm read
    print("\n".join(filter(None, [markdown.split("\nDifferences:")[0] + "\n", render_ledger(report), provenance,
                                   missing, render_outputs(config)])))
    (out / "report.json").write_text(json.dumps(report, indent=2, default=str) + "\n")
    write_tables(report, suite, out)
    if report["curves"]:
        plot_curves(report, out)
    print(f"  report: {out}/report.md (every benchmark), report.json, summary.csv, tasks.csv"
          + (", curves_*.png" if report["curves"] else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
