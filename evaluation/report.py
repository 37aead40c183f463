"""The comparison report: downstream scores per arm, the paired differences, and what led to them.

    python -m evaluation.report [CONFIG]        (default: configs/local.yaml)

Reads `<output_root>/eval/<arm>/seed<S>/step_*/` (results and per-document logs), and where they
exist the extraction-quality summary and the ledger. Prints the headline table and the decision
table, and writes `<output_root>/report/`: `report.md` (everything below), `summary.csv` (one row
per arm), `tasks.csv` (one row per benchmark or clean-text task, metric family and arm),
`report.json` (every figure: per arm, seed, checkpoint, benchmark and metric; the paired
difference of every pair of arms) and `curves_<family>.png`.

- Every run is compared at the largest step all evaluated runs reached (evaluation/runs.py; with
  `evaluation.average_last` k, the mean over the last k such steps, said wherever it is used).
- The headline is the paper's Table 5 layout: per arm the suite's accuracy (lm-eval's own
  numbers), mean ± spread across seeds, and centered accuracy beside the raw average.
- Beside accuracy, continuous scores from the same logs (evaluation/metrics/): bits per byte
  of the gold answer and the probability on it per benchmark, and bits per byte on clean web
  text in two views (evaluation/tasks/clean_text.py), its own category.
- Differences between every pair of arms come with 95% intervals sound with 2-3 seeds
  (evaluation/statistics/intervals.py: each pair's own seed variance, a generalized interval). The decision
  table opens the comparison, per arm against the reference arm (the config's first): a
  difference is a result when it stays resolved after Holm's adjustment over every cell of the
  table and every seed agrees in sign; the every-pair table is adjusted over its own cells, the
  per-benchmark marks over every pair and benchmark of the family.
- Noise measured from the run and the signal-to-noise ratio per family and score, beside the
  floor it has with no difference (evaluation/statistics/noise.py); the clean-text pairs whose difference
  itself changes with the view (the view-by-arm interaction, Holm over pairs and sets) are
  flagged as format-dependent.
- Notes on what the numbers rest on where it is less than the method assumes: one seed, arms that
  share no seed, seeds that change nothing, cells not decidable at this many seeds, headline
  differences that are not the difference of the rows above them.
- Missing pieces (runs not evaluated, tasks absent, checkpoints or documents that differ between
  runs) are listed, and everything that exists is still reported.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import statistics
import sys
from itertools import combinations
from pathlib import Path

import numpy as np

from configs.durable import write_atomically
from configs.experiment import ExperimentConfig, load_experiment_or_exit
from configs.provenance import read_provenance
from corpus.accounting.ledger import BUDGET, EXTRACTION, READ, ledgers, minhash_scope_line, rows_by_name
from corpus.extractors.base import versions_text
from corpus.postprocess.steps import output_step
from corpus.read.reference import HUB, ReferenceArm
from evaluation import markdown
from evaluation.evaluate import DamagedResult
from evaluation.ladder import ladder_report
from evaluation.metrics import DECISION, Family, families
from evaluation.plots import plot_curves, plot_ladder
from evaluation.runs import Comparison, Run, compare, load_runs, run_score, short_log
from evaluation.statistics.intervals import (
    LEVEL,
    Matrices,
    SeedVariance,
    decidable_beyond,
    holm,
    interaction_variance,
    intervals,
    seed_variance,
    task_pair,
)
from evaluation.statistics.noise import signal_and_noise
from evaluation.tasks.clean_text import CleanTextTask, clean_text_tasks
from evaluation.tasks.suite import COLUMNS, Benchmark, Suite, load_suite

# ---------------------------------------------------------------- the headline: lm-eval's accuracies


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


def _mean_over_steps(per_step: list[dict[str, float | None]]) -> dict[str, float | None]:
    return {k: None if any(s[k] is None for s in per_step) else statistics.fmean(s[k] for s in per_step)
            for k in per_step[0]}


def headline_table(comparison: Comparison, suite: Suite, arms: list[str]) -> dict:
    """Per arm and seed, the suite's accuracies as lm-eval reports them (results.json), at the
    compared step (the mean over the compared steps with evaluation.average_last)."""
    table = {}
    for arm in arms:
        seeds = sorted(comparison.by_arm[arm])
        runs = [comparison.by_arm[arm][s] for s in seeds]
        per_seed = [_mean_over_steps([benchmark_scores(r.result, suite, suite.headline) for r in rs]) for rs in runs]
        standard = [_mean_over_steps([benchmark_scores(r.result, suite, "standard") for r in rs]) for rs in runs]
        table[arm] = {
            "seeds": seeds,
            "steps": [max(r.step for r in rs) for rs in runs],
            "tokens": [max(r.tokens for r in rs) for rs in runs],
            "benchmarks": {b.name: [s[b.name] for s in per_seed] for b in suite.benchmarks},
            "standard_form": {b.name: [s[b.name] for s in standard] for b in suite.benchmarks if b.cloze},
            "columns": {c: [category_means(s, suite)[c] for s in per_seed] for c in COLUMNS},
            "centered_columns": {c: [category_means(s, suite, center=True)[c] for s in per_seed] for c in COLUMNS},
        }
    return table


# ---------------------------------------------------------------- every family: scores, pairs, noise


def checkpoint_scores(comparison: Comparison, family: Family) -> dict:
    """family scores of every evaluated checkpoint: arm -> seed -> step -> units and columns. A
    checkpoint whose samples log of a task is short has no score there (the curves and the noise
    skip it), and the comparison's notes say so."""
    keys, out = family.task_keys(), {}
    for run in comparison.runs:
        entry = {kind: {} for kind in ("units", "columns")}
        for (kind, name), weights in family.scores().items():
            for note in filter(None, (short_log(run, task) for task in weights)):
                comparison.note(note)
            score = run_score(run, weights, keys)
            entry[kind][name] = None if score is None else score - family.offsets.get(name, 0.0)
        out.setdefault(run.arm, {}).setdefault(str(run.seed), {})[str(run.step)] = entry
    return out


def last_checkpoints(scores: dict, kind: str, name: str, last_step: int, k: int) -> list[list[float]]:
    """Per run, its score at its last k evaluated checkpoints at or before `last_step`."""
    out = []
    for seeds in scores.values():
        for steps in seeds.values():
            values = [steps[s][kind][name] for s in sorted(steps, key=int) if int(s) <= last_step]
            out.append([v for v in values[-k:] if v is not None])
    return out


def compare_arms(family: Family, matrices: dict[str, Matrices], seeds_of: dict[str, list[int]],
                 views: dict[str, dict[str, np.ndarray]] | None = None, bounds: bool = True,
                 named: dict[tuple[str, str], dict[str, SeedVariance]] | None = None) -> dict:
    """Every score of a family per arm and seed, and the paired difference of every pair of arms on
    it, from per-document values: `matrices`, arm -> task -> its seeds x documents (rows in the
    order of `seeds_of[arm]`, the same documents for every arm that has the task; a task an arm
    lacks absent). Each pair is compared on the scores whose tasks both arms have; the others are
    named in its `dropped`. `views`: clean-text set -> arm -> seeds x documents of plain − Markdown,
    on the documents both views share: the view-by-arm interaction of every pair. `named`: (kind,
    score) -> arm -> the seed variance named for an arm with one seed (another rung's, or the
    config's); without one, its pairs' intervals cover the documents alone and decide nothing.
    Per-benchmark differences are Holm-adjusted over every pair and benchmark of the family whose
    seeds' noise is in the interval. `bounds=False`: p-values without the intervals' bounds
    (bench/calibration.py, thousands of runs)."""
    arms = list(matrices)
    finals: dict[str, dict] = {"units": {}, "columns": {}}
    variances: dict[tuple[str, str], dict[str, SeedVariance]] = {}
    means = {arm: {t: x.mean(axis=1) for t, x in m.items()} for arm, m in matrices.items()}
    for (kind, name), weights in family.scores().items():
        have = [arm for arm in arms if set(weights) <= set(matrices[arm])]
        if not have:
            continue
        per_seed = {arm: sum(w * means[arm][t] for t, w in weights.items()) for arm in have}
        offset = family.offsets.get(name, 0.0)
        finals[kind][name] = {arm: [float(v) - offset for v in values] for arm, values in per_seed.items()}
        variances[kind, name] = {arm: seed_variance(values) if len(values) > 1 else
                                 (named or {}).get((kind, name), {}).get(arm, seed_variance(values))
                                 for arm, values in per_seed.items()}
    view_variances = {s: {arm: seed_variance(m.mean(axis=1)) for arm, m in by_arm.items()} for s, by_arm in (views or {}).items()}
    pairs: dict[str, dict] = {}
    interactions: dict[str, dict] = {s: {} for s in views or {}}
    batch, where = [], []
    known: dict[tuple, float] = {}  # (arm, task, rows) -> its interaction variance, shared by the arm's pairs

    def interaction(arm: str, task: str, rows: list[int]) -> float:
        key = (arm, task, tuple(rows))
        if key not in known:
            known[key] = interaction_variance(matrices[arm][task][rows])
        return known[key]

    for a, b in combinations(arms, 2):
        name = f"{b} − {a}"
        paired = sorted(set(seeds_of[a]) & set(seeds_of[b]))
        pairs[name] = {"units": {}, "columns": {}, "seeds": paired, "dropped": {}}
        if not paired:
            pairs[name]["not_compared"] = f"no seed in common ({a}: seeds {seeds_of[a]}, {b}: seeds {seeds_of[b]})"
            continue
        present = set(matrices[a]) & set(matrices[b])
        rows = {arm: [seeds_of[arm].index(s) for s in paired] for arm in (a, b)}
        tasks = {t: task_pair(matrices[a][t][rows[a]], matrices[b][t][rows[b]],
                              (interaction(a, t, rows[a]), interaction(b, t, rows[b]))) for t in present}
        for (kind, score), by_arm in variances.items():
            weights = family.scores()[kind, score]
            if not set(weights) <= present:
                lacking = {arm: sorted(set(weights) - set(matrices[arm])) for arm in (a, b)}
                pairs[name]["dropped"][f"{kind}:{score}"] = "; ".join(
                    f"{arm} has no documents of {', '.join(t)}" for arm, t in lacking.items() if t)
                continue
            batch.append((tasks, weights, by_arm[a], by_arm[b]))
            source = "; ".join(f"{arm}: {by_arm[arm].source}" for arm in (a, b) if by_arm[arm].source)
            where.append((pairs[name][kind], score, paired, source))
        for s, by_arm in (views or {}).items():
            if a not in by_arm or b not in by_arm:
                continue
            view = {s: task_pair(by_arm[a][rows[a]], by_arm[b][rows[b]])}
            batch.append((view, {s: 1.0}, view_variances[s][a], view_variances[s][b]))
            where.append((interactions[s], name, paired, ""))
    for (target, key, paired, source), interval in zip(where, intervals(batch, bounds=bounds), strict=True):
        target[key] = interval.to_json() | {"seeds": paired, "seed_source": source}
    tests = [(pair, unit) for pair, p in pairs.items() for unit, cell in p["units"].items() if cell["seeds_measured"]]
    for (pair, unit), adjusted in zip(tests, holm([pairs[pair]["units"][unit]["p"] for pair, unit in tests]), strict=True):
        cell = pairs[pair]["units"][unit]
        cell |= {"p_holm": adjusted, "resolved_holm": adjusted < 1 - LEVEL,
                 "result_holm": adjusted < 1 - LEVEL and cell["seeds_agree"]}
    seed_variances: dict[str, dict] = {"units": {}, "columns": {}}  # each arm's, as its pairs use it
    for (kind, score), by_arm in variances.items():
        seed_variances[kind][score] = {arm: v.to_json() for arm, v in by_arm.items()}
    unvaried = [arm for arm, m in matrices.items() if len(seeds_of[arm]) > 1 and any(x.size for x in m.values())
                and all(np.ptp(x, axis=0).max() == 0 for x in m.values() if x.size)]
    return {"title": family.title, "lower_is_better": family.lower_is_better, "scale": family.scale, "unit": family.unit,
            "decimals": family.decimals, "units": {u: sorted(t) for u, t in family.units.items()},
            "columns": {c: family.column_titles[c] for c in family.columns},
            "finals": finals, "pairs": pairs, "interactions": interactions, "unvaried_seeds": unvaried,
            "seed_variances": seed_variances,
            "holm_tests": len(tests)}


def view_differences(comparison: Comparison, arms: list[str], seeds_of: dict[str, list[int]],
                     clean: list[CleanTextTask]) -> dict[str, dict[str, np.ndarray]]:
    """Per clean-text set with both views: arm -> seeds x documents of plain − Markdown, on the
    documents (by doc_id: the same page in both views) both views compared."""
    out = {}
    for name in dict.fromkeys(t.set for t in clean):
        tasks = {t.view: t.task for t in clean if t.set == name}
        if set(tasks) != {"plain", "markdown"}:
            continue
        docs = {view: comparison.documents(task, "clean_bpb") for view, task in tasks.items()}
        position = {view: {doc_id: i for i, (_, doc_id) in enumerate(d)} for view, d in docs.items()}
        shared = sorted(set(position["plain"]) & set(position["markdown"]))
        if len(shared) < 2:
            continue
        if len(shared) < max(len(d) for d in docs.values()):
            comparison.note(f"clean text {name}: the views are compared on the {len(shared)} documents both logged")
        columns = {view: [position[view][i] for i in shared] for view in tasks}
        having = set(comparison.arms_with(tasks["plain"])) & set(comparison.arms_with(tasks["markdown"]))
        out[name] = {arm: comparison.matrix(arm, seeds_of[arm], tasks["plain"], "clean_bpb")[:, columns["plain"]]
                     - comparison.matrix(arm, seeds_of[arm], tasks["markdown"], "clean_bpb")[:, columns["markdown"]]
                     for arm in arms if arm in having}
    return out


def family_report(family: Family, comparison: Comparison, arms: list[str], noise_k: int,
                  clean: list[CleanTextTask] = (), named: dict[tuple[str, str], dict[str, SeedVariance]] | None = None) \
        -> dict:
    """A family's scores at every checkpoint, its final scores per arm and seed, the paired
    difference of every pair of arms, and its signal and noise; `named`: the seed variances named
    for its one-seed arms (compare_arms)."""
    keys = family.task_keys()
    scores = checkpoint_scores(comparison, family)
    seeds_of = {arm: sorted(comparison.by_arm[arm]) for arm in arms}
    matrices = {arm: {t: comparison.matrix(arm, seeds_of[arm], t, keys[t]) for t in keys
                      if comparison.documents(t, keys[t]) and arm in comparison.arms_with(t)} for arm in arms}
    views = view_differences(comparison, arms, seeds_of, clean) if family.name == "clean_text" else None
    compared = compare_arms(family, matrices, seeds_of, views, named=named)
    noise: dict[str, dict] = {"units": {}, "columns": {}}
    for kind, by_name in compared["finals"].items():
        for name, finals in by_name.items():
            pairs = [p[kind][name] for p in compared["pairs"].values() if name in p[kind] and p[kind][name]["se"] > 0]
            seeds = {arm: SeedVariance.from_json(v) for arm, v in compared["seed_variances"][kind][name].items()}
            noise[kind][name] = signal_and_noise(finals, last_checkpoints(scores, kind, name, comparison.steps[-1], noise_k),
                                                 pairs, seeds)
    return compared | {"checkpoints": scores, "noise": noise}


# ---------------------------------------------------------------- the tables a user reads as decisions


def _decide(cells: list[dict], lower_is_better: list[bool]) -> None:
    """Holm over the cells of one table (intervals, copied) whose seeds' noise is in the interval
    (measured, or named for a one-seed arm): each gets `p_holm` and its `result`, better or worse for
    the arm where the adjusted p is below 0.05 and every seed agrees, else None. A cell without it
    is no test: no `p_holm`, no result, and not in the count (`tests`) Holm adjusts for."""
    tested = [i for i, c in enumerate(cells) if c["seeds_measured"]]
    for cell in cells:
        cell |= {"p_holm": None, "tests": len(tested), "result": None}
    for i, adjusted in zip(tested, holm([cells[i]["p"] for i in tested]), strict=True):
        cell = cells[i]
        better = (cell["difference"] < 0) == lower_is_better[i]
        cell |= {"p_holm": adjusted,
                 "result": ("better" if better else "worse") if adjusted < 1 - LEVEL and cell["seeds_agree"] else None}


def _table(report: dict, pairs: list[tuple[str, str]]) -> list[dict]:
    """One row per pair (arm, reference) on the decision's scores, Holm over every cell shown; a
    score the pair is not compared on is None, and `dropped` lists [score, why]."""
    rows, cells, lower = [], [], []
    for arm, ref in pairs:
        row: dict = {"arm": arm, "reference": ref, "dropped": []}
        for family, column in DECISION:
            fam = report["families"].get(family, {})
            pair = fam.get("pairs", {}).get(f"{arm} − {ref}", {})
            interval = pair.get("columns", {}).get(column)
            row[f"{family}:{column}"] = dict(interval) if interval else None
            if interval:
                cells.append(row[f"{family}:{column}"])
                lower.append(fam["lower_is_better"])
            elif why := pair.get("dropped", {}).get(f"columns:{column}"):
                row["dropped"].append([f"{family}:{column}", why])
        rows.append(row)
    _decide(cells, lower)
    return rows


def decision_rows(report: dict) -> list[dict]:
    """Per arm against the reference arm: accuracy average, continuous average (bits per byte of
    the gold answers), clean-text bits per byte in each view; Holm over every cell of the table."""
    ref = report["reference_arm"]
    return _table(report, [(arm, ref) for arm in report["arms"][1:]])


def every_pair_rows(report: dict) -> list[dict]:
    """Every pair of arms on the decision's scores; Holm over every cell of this table."""
    return _table(report, [(b, a) for a, b in combinations(report["arms"], 2)])


def format_flags(report: dict) -> list[dict]:
    """Every pair of arms whose clean-text difference changes with the view: the paired interval of
    plain − Markdown (the view-by-arm interaction) resolved after Holm over every pair and set, and
    every seed agreeing. Two differences of the same size in both views are no flag, whatever each
    view's own verdict."""
    family = report["families"].get("clean_text")
    if not family:
        return []
    tests = [(s, pair, dict(i)) for s, by_pair in family["interactions"].items() for pair, i in by_pair.items()
             if i["seeds_measured"]]  # one seed: the view-by-arm interaction's seeds' part is not measured, no test
    flags = []
    for (s, pair, interaction), adjusted in zip(tests, holm([i["p"] for _, _, i in tests]), strict=True):
        interaction |= {"p_holm": adjusted, "tests": len(tests)}
        if adjusted < 1 - LEVEL and interaction["seeds_agree"]:
            plain, markdown = (family["pairs"][pair]["units"].get(f"clean_text_{s}_{view}") for view in ("plain", "markdown"))
            flipped = plain and markdown and (plain["difference"] > 0) != (markdown["difference"] > 0)
            flags.append({"set": s, "pair": pair, "plain": plain, "markdown": markdown, "interaction": interaction,
                          "why": "the sign flips" if flipped else
                          f"{'larger' if abs(plain['difference']) > abs(markdown['difference']) else 'smaller'} in plain text"})
    return flags


def headline_differences(report: dict) -> dict[str, dict[str, str]]:
    """Per arm and headline column where the paired difference is not the difference of the arms'
    rows above it (lm-eval's scores, every seed and document), why not."""
    out: dict[str, dict[str, str]] = {}
    table, ref, accuracy = report["table"], report["reference_arm"], report["families"]["accuracy"]
    for arm in report["arms"][1:]:
        pair = accuracy["pairs"][f"{arm} − {ref}"]
        for column in (*COLUMNS, "average_centered"):
            rows = [table[a]["centered_columns" if column == "average_centered" else "columns"][column.replace("_centered", "")]
                    for a in (arm, ref)]
            interval = pair["columns"].get(column)
            if not interval or any(v is None for r in rows for v in r):
                continue
            gap = statistics.fmean(rows[0]) - statistics.fmean(rows[1]) - interval["difference"]
            if abs(gap) * accuracy["scale"] < 0.5 * 10 ** -accuracy["decimals"]:
                continue
            seeds = [table[a]["seeds"] for a in (arm, ref)]
            why = (f"on the paired seeds {pair['seeds']} (the rows: {arm} {seeds[0]}, {ref} {seeds[1]})"
                   if seeds[0] != pair["seeds"] or seeds[1] != pair["seeds"] else
                   "on the documents every compared run logged alike (the rows: lm-eval's scores over every document "
                   "it scored; see Missing or left out)")
            out.setdefault(arm, {})[column] = why
    return out


def statistics_notes(report: dict) -> list[str]:
    """What the intervals and decisions rest on, where it is less than the method assumes."""
    notes, fams, table = [], report["families"], report["table"]
    for pair, p in fams.get("accuracy", {}).get("pairs", {}).items():
        if "not_compared" in p:
            notes.append(f"{pair}: not compared, {p['not_compared']}.")
    for arm in (a for a in report["arms"] if len(table[a]["seeds"]) == 1):
        sources = {v["source"] or None for f in fams.values() for by_score in f["seed_variances"].values()
                   for by_arm in by_score.values() for a, v in by_arm.items() if a == arm}
        named = sorted(s for s in sources if s)
        if not named:
            notes.append(f"{arm}: one seed and no seed variance named for it, so the seeds' noise of its pairs is not "
                         "measured: their intervals cover the test documents alone, and no table decides them (train a "
                         "second seed, measure it at another rung of the ladder, or state evaluation.seed_sd).")
        else:
            notes.append(f"{arm}: one seed; its pairs are decided against its seed variance {' and '.join(named)}"
                         + (" (where none is named for a score, that score is not decided)" if None in sources else "")
                         + ": a result there is one against that named variance, not this rung's own seeds (the "
                         "cells say which: ‡).")
    unvaried = {name: f["unvaried_seeds"] for name, f in fams.items() if f.get("unvaried_seeds")}
    if unvaried:
        notes.append("Every seed gave the same value on every document (" + "; ".join(
            f"{', '.join(arms)} on {markdown.FAMILY_SHORT[name]}" for name, arms in unvaried.items())
            + "): the seeds measured no noise there. Check that the seed reaches the initial weights and the data order; "
            "where both arms of a pair are so, its interval covers the test documents alone.")
    undecided = []
    for row in report["decision"]:
        for key, cell in row.items():
            if isinstance(cell, dict) and not cell["result"] and cell["df_seeds"] is not None and cell["df_seeds"] < 3 \
                    and cell["seed_part"] > 0.5:
                family, column = key.split(":")
                fam = fams[family]
                beyond = decidable_beyond(cell, (1 - LEVEL) / cell["tests"])
                bound = ("never: it would take more than 100 points" if fam["scale"] == 100 and beyond > 1
                         else f"only beyond ±{fam['scale'] * beyond:.{fam['decimals']}f}")
                undecided.append(f"{row['arm']} − {row['reference']} on {markdown.FAMILY_SHORT[family]}, "
                                 f"{fam['columns'][column]} ({bound})")
    if undecided:
        notes.append("Not decided at this many seeds: " + "; ".join(undecided) + ". Seeds make most of their noise, and "
                     "each arm's seed variance rests on its seeds − 1 degrees of freedom, so the table can call such a "
                     "difference a result only beyond the bound given (`python -m evaluation.power CONFIG --from-run` "
                     "says how many seeds would resolve it).")
    return notes


# ---------------------------------------------------------------- where each arm's text came from


def arm_source(config: ExperimentConfig, name: str, arm) -> str:
    """The corpus, or the extractor with the releases its extraction ran (its folder's provenance)."""
    if isinstance(arm, ReferenceArm):
        where = arm.dataset + (f"/{arm.subset}" if arm.subset else "") if arm.corpus == HUB else f"{arm.corpus} files"
        return f"corpus: {where}" + (", post-processed here" if arm.postprocess else "")
    versions = versions_text(((read_provenance(config.arm_dir(name)) or {}).get("extractors") or {}).get(name, {}))
    return f"extractor: {arm.extractor}" + (f" ({versions})" if versions else "")


def extraction_context(config: ExperimentConfig, ledgers: list[dict]) -> dict:
    """Where each arm's text comes from, ROUGE-5 per arm (extraction benchmark) and
    documents/tokens kept (ledger), where present."""
    context = {name: {"source": arm_source(config, name, arm)} for name, arm in config.arms.items()}
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


def missing_pieces(config: ExperimentConfig, runs: list[Run], tasks: list[str]) -> list[str]:
    notes = []
    evaluated = {(r.arm, r.seed) for r in runs}
    for arm, seed in config.runs():
        if (arm, seed) not in evaluated:
            notes.append(f"{arm} seed {seed}: no evaluated checkpoint")
    for run in runs:
        absent = [t for t in tasks if t not in run.result["results"]]
        if absent:
            notes.append(f"{run.label()}: tasks missing {absent}")
    return notes


def made_by(config: ExperimentConfig) -> dict[str, dict]:
    """The provenance of every output folder the numbers come from, by folder."""
    folders = [config.output_root / "datasets"]
    folders += [d for arm, seed in config.runs() for d in (config.run_dir(arm, seed), config.eval_dir(arm, seed))]
    return {config.relative(f): p for f in folders if (p := read_provenance(f))}


# ---------------------------------------------------------------- the report


def named_seed_variances(fams: dict[str, Family], single: list[str], measured_at: dict[str, dict] | None = None,
                         stated: dict[str, float] | None = None) -> dict[str, dict]:
    """Per family, (kind, score) -> arm -> the seed variance named for each arm of `single` (one
    seed): its own, measured at the first rung of `measured_at` (rung -> its report, nearest first)
    where it has two seeds or more, else the SD `stated` (`evaluation.seed_sd`) for the score (or
    its family), taken as known; an arm with neither is left out."""
    stated = stated or {}
    for key in stated:
        family, _, score = key.partition(":")
        if family not in fams or score and score not in fams[family].columns and score not in fams[family].units:
            raise SystemExit(f"evaluation.seed_sd: {key}: no such family or score in this run's report (families: "
                             f"{', '.join(fams)}; a score is a column or benchmark of its family, e.g. accuracy:average)")
    out: dict[str, dict] = {}
    for name, family in fams.items():
        out[name] = {}
        for kind, score in family.scores():
            for arm in single:
                named = None
                for rung, other in (measured_at or {}).items():
                    v = other["families"].get(name, {}).get("seed_variances", {}).get(kind, {}).get(score, {}).get(arm)
                    if v and v["df"] and not v["source"]:
                        named = SeedVariance(v["variance"], v["df"], f"measured at rung {rung}")
                        break
                sd = stated.get(f"{name}:{score}", stated.get(name))
                if named is None and sd is not None:
                    named = SeedVariance((sd / family.scale) ** 2, math.inf, "stated in evaluation.seed_sd")
                if named:
                    out[name].setdefault((kind, score), {})[arm] = named
    return out


def primary_decision(report: dict, config: ExperimentConfig, fams: dict[str, Family]) -> dict | None:
    """The pre-registered primary comparison (`evaluation.primary`), decided alone at 0.05: its
    interval (arm − reference), `result` better or worse for the arm where p < 0.05, the seeds'
    noise is in the interval and every seed agrees, else None, and `why` where it is not compared."""
    primary = config.evaluation.primary if config.evaluation else None
    if primary is None:
        return None
    family, column = primary.score.split(":")
    if family not in fams or column not in fams[family].columns:
        raise SystemExit(f"evaluation.primary.score: {primary.score}: no such score in this run's report (a family's "
                         "column: " + ", ".join(f"{f}:{c}" for f, fam in fams.items() for c in fam.columns) + ")")
    arm, ref = primary.pair
    out = {"arm": arm, "reference": ref, "score": primary.score, "alpha": 1 - LEVEL, "interval": None, "result": None,
           "why": None}
    absent = [a for a in (arm, ref) if a not in report["arms"]]
    if absent:
        return out | {"why": f"{', '.join(absent)}: no evaluated run at the compared step"}
    pairs = report["families"][family]["pairs"]
    pair, flip = (pairs[f"{arm} − {ref}"], False) if f"{arm} − {ref}" in pairs else (pairs[f"{ref} − {arm}"], True)
    cell = pair["columns"].get(column)
    if cell is None:
        return out | {"why": pair.get("not_compared") or pair["dropped"].get(f"columns:{column}", "not compared")}
    if flip:
        cell = cell | {"difference": -cell["difference"], "low": -cell["high"], "high": -cell["low"],
                       "per_seed": [-d for d in cell["per_seed"]]}
    out["interval"] = cell
    if not cell["seeds_measured"]:
        return out | {"why": "one seed and no seed variance named for it: the interval covers the test documents alone"}
    better = (cell["difference"] < 0) == report["families"][family]["lower_is_better"]
    decided = cell["p"] < 1 - LEVEL and cell["seeds_agree"]
    return out | {"result": ("better" if better else "worse") if decided else None}


def build_report(config: ExperimentConfig, suite: Suite | None = None, measured_at: dict[str, dict] | None = None) -> dict:
    """The report of one rung (`config.for_rung`); `measured_at`: the other rungs' reports, nearest
    first, whose seeds name the seed variance of an arm with one seed here."""
    suite = suite or load_suite()
    evaluation = config.evaluation
    clean = clean_text_tasks(evaluation.clean_text) if evaluation else []
    runs = load_runs(config)
    comparison = compare(runs, evaluation.average_last if evaluation else 1)
    arms = [arm for arm in config.arms if arm in comparison.by_arm]
    fams = families(suite, clean)
    named = named_seed_variances(fams, [arm for arm in arms if len(comparison.by_arm[arm]) == 1], measured_at,
                                 evaluation.seed_sd if evaluation else None)
    report = {"experiment": config.name, "rung": config.pretrain.rung.name if config.pretrain else None,
              "headline_form": suite.headline, "arms": arms,
              "reference_arm": arms[0] if arms else None,
              "compared_steps": comparison.steps,
              "compared_tokens": config.pretrain.tokens_at(comparison.steps[-1]) if comparison.steps else None,
              "average_last": evaluation.average_last if evaluation else 1,
              "noise_checkpoints": evaluation.noise_checkpoints if evaluation else 3,
              "table": headline_table(comparison, suite, arms),
              "families": {name: family_report(f, comparison, arms, evaluation.noise_checkpoints if evaluation else 3, clean,
                                               named[name])
                           for name, f in fams.items()} if arms else {}}
    report["primary"] = primary_decision(report, config, fams) if arms else None
    report["decision"] = decision_rows(report) if arms else []
    report["every_pair"] = every_pair_rows(report) if arms else []
    report["format_flags"] = format_flags(report) if arms else []
    report["headline_differences"] = headline_differences(report) if arms else {}
    report["statistics_notes"] = statistics_notes(report) if arms else []
    report["clean_text_tasks"] = [{"task": t.task, "set": t.set, "view": t.view} for t in clean]
    arm_ledgers = ledgers(config)
    report |= {"extraction": extraction_context(config, arm_ledgers), "ledgers": arm_ledgers,
               "minhash_scope": minhash_scope_line(config),
               "comparison_notes": comparison.notes,
               "missing": missing_pieces(config, runs, suite.all_tasks() + [t.task for t in clean]),
               "made_by": made_by(config)}
    return report


def training_compute(config: ExperimentConfig, reports: dict[str, dict]) -> dict[str, float]:
    """Per rung, the training FLOPs its scores stand for: FLOPs per token (causal attention, the
    project's one convention, configs/model.py; at the experiment's tokenizer's vocabulary, which
    every run trains with) times the tokens at the compared step; a rung without evaluated runs at
    the tokens it will train on. Empty before the tokenizer exists."""
    if not config.tokenizer_file().is_file():
        return {}
    from tokenizers import Tokenizer

    vocab = Tokenizer.from_file(str(config.tokenizer_file())).get_vocab_size()
    out = {}
    for rung in config.pretrain.ladder:
        one = config.for_rung(rung.name)
        tokens = reports[rung.name]["compared_tokens"] or one.pretrain.tokens_at(one.training_steps()[0])
        out[rung.name] = rung.model.flops_per_token(vocab) * tokens
    return out


def build_ladder(config: ExperimentConfig, suite: Suite) -> tuple[dict, dict | None]:
    """Every rung's report and, for a ladder of two rungs or more, what the rungs say together
    (evaluation/ladder.py): `(reports by rung, ladder)`."""
    rungs = config.rungs()
    reports = {rung: build_report(config.for_rung(rung), suite) for rung in rungs}
    for rung, report in reports.items():  # an arm with one seed: its seed variance measured at the nearest rung
        if len(rungs) > 1 and any(len(report["table"][arm]["seeds"]) == 1 for arm in report["arms"]):
            i = rungs.index(rung)
            nearest = sorted((r for r in rungs if r != rung), key=lambda r: (abs(rungs.index(r) - i), -rungs.index(r)))
            reports[rung] = build_report(config.for_rung(rung), suite, {r: reports[r] for r in nearest})
    if len(reports) < 2:
        return reports, None
    ladder = ladder_report(reports, training_compute(config, reports), config.rungs(), config.rungs()[-1])
    shapes = {r.name: {"non_embedding_parameters": r.model.non_embedding_parameters, "seeds": r.seeds,
                       "tokens": config.rung_tokens(r)} for r in config.pretrain.ladder}
    return reports, ladder | {"shapes": shapes}


def headline_rung(reports: dict[str, dict], ladder: dict | None) -> str:
    """The rung the ladder reads the others against (the largest where two arms have evaluated
    runs), else the largest with any, else the last configured."""
    evaluated = [rung for rung, report in reports.items() if report["arms"]]
    return (ladder or {}).get("reference") or (evaluated or list(reports))[-1]


def write_tables(report: dict, suite: Suite, out: Path) -> None:
    """summary.csv: one row per arm (every family's columns); tasks.csv: one row per scored unit,
    family and arm, with the difference to the reference arm."""
    fams, ref = report["families"], report["reference_arm"]
    with open(out / "summary.csv", "w", newline="") as f:
        writer = csv.writer(f)
        header = ["arm", "seeds", *(f"{c}_{k}" for c in COLUMNS for k in ("mean", "std")),
                  "average_centered_mean", "average_centered_std"]
        extra = [(name, column) for name, fam in fams.items() if name != "accuracy" for column in fam["columns"]]
        writer.writerow(header + [f"{name}_{column}_{k}" for name, column in extra for k in ("mean", "std")])
        for arm in report["arms"]:
            t = report["table"][arm]
            row = [arm, len(t["seeds"])]
            for c in COLUMNS:
                row += _stats(t["columns"][c])
            row += _stats(t["centered_columns"]["average"])
            for name, column in extra:
                row += _stats(fams[name]["finals"]["columns"].get(column, {}).get(arm, []))
            writer.writerow(row)
    with open(out / "tasks.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["family", "benchmark", "category", "tasks", "metric", "arm", "mean", "std",
                         "difference_to_reference", "low", "high", "p_holm", "resolved", "seeds_agree"])
        for name, fam in fams.items():
            for unit, tasks in fam["units"].items():
                b = next((b for b in suite.benchmarks if b.name == unit), None)
                metric = b.score if name == "accuracy" and b else name
                for arm in report["arms"]:
                    d = fam["pairs"].get(f"{arm} − {ref}", {}).get("units", {}).get(unit, {})
                    values = report["table"][arm]["benchmarks"][unit] if name == "accuracy" else \
                        fam["finals"]["units"].get(unit, {}).get(arm, [])
                    writer.writerow([name, unit, b.category if b else "clean text", "+".join(tasks), metric, arm,
                                     *_stats(values), d.get("difference"), d.get("low"), d.get("high"),
                                     d.get("p_holm"), d.get("resolved"), d.get("seeds_agree")])


def _stats(values: list[float | None]) -> list:
    present = [v for v in values if v is not None]
    if not present:
        return [None, None]
    return [statistics.fmean(present), statistics.stdev(present) if len(present) > 1 else 0.0]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m evaluation.report", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("config", nargs="?", default="configs/local.yaml")
    args = parser.parse_args(argv)
    config = load_experiment_or_exit(args.config)
    suite = load_suite()
    try:
        reports, ladder = build_ladder(config, suite)
    except DamagedResult as e:
        print(f"{args.config}: {e}", file=sys.stderr)
        return 2
    headline = headline_rung(reports, ladder)
    report = reports[headline]
    out = config.report_dir()
    out.mkdir(parents=True, exist_ok=True)
    figures = plot_curves(report, config.for_rung(headline), out)
    if ladder:  # every rung's tables and the ladder's section beside the headline rung's report
        report = report | {"ladder": ladder | {"reports": reports}}
        figures += [f for f in [plot_ladder(ladder, out)] if f]
    write_atomically(out / "report.md", markdown.report_markdown(report, suite))
    print(markdown.console_text(report, suite, config))
    write_atomically(out / "report.json", json.dumps(report, indent=2, default=str) + "\n")
    write_tables(report, suite, out)
    print(f"  report: {out}/report.md (every benchmark and family), report.json, summary.csv, tasks.csv"
          + "".join(f", {p.name}" for p in figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
