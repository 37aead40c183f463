"""One metric family of the report: its score at every checkpoint, its final scores per arm and seed,
the paired difference of every pair of arms (evaluation/statistics/intervals.py), the view-by-arm
interaction of the clean-text views, and its signal and noise (evaluation/statistics/noise.py)."""

from __future__ import annotations

import math
from itertools import combinations

import numpy as np
from scipy import stats

from evaluation.metrics import Family
from evaluation.runs import Comparison, run_score, short_log
from evaluation.statistics.intervals import (
    LEVEL,
    Matrices,
    SeedVariance,
    holm,
    intervals,
    seed_variance,
    task_pair,
)
from evaluation.statistics.noise import signal_and_noise
from evaluation.tasks.clean_text import CleanTextTask


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
    named in its `dropped`, with why (an arm of the pair lacks a task, or no arm has it). `views`:
    clean-text set -> arm -> seeds x documents of plain − Markdown, on the documents both views
    share: the view-by-arm interaction of every pair. `named`: (kind,
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
    for a, b in combinations(arms, 2):
        name = f"{b} − {a}"
        paired = sorted(set(seeds_of[a]) & set(seeds_of[b]))
        pairs[name] = {"units": {}, "columns": {}, "seeds": paired, "dropped": {}}
        if not paired:
            pairs[name]["not_compared"] = f"no seed in common ({a}: seeds {seeds_of[a]}, {b}: seeds {seeds_of[b]})"
            continue
        present = set(matrices[a]) & set(matrices[b])
        rows = {arm: [seeds_of[arm].index(s) for s in paired] for arm in (a, b)}
        tasks = {t: task_pair(matrices[a][t][rows[a]], matrices[b][t][rows[b]]) for t in present}
        for (kind, score), weights in family.scores().items():
            if (kind, score) not in variances:  # no arm of the run has its tasks: empty for every pair, and said
                pairs[name]["dropped"][f"{kind}:{score}"] = f"no arm has documents of {', '.join(sorted(weights))}"
                continue
            by_arm = variances[kind, score]
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
                key = f"{name}:{score}" if f"{name}:{score}" in stated else name
                if named is None and key in stated:
                    named = SeedVariance((stated[key] / family.scale) ** 2, math.inf,
                                         f"stated in evaluation.seed_sd ({key}: {stated[key]:g} {family.unit})")
                if named:
                    out[name].setdefault((kind, score), {})[arm] = named
    return out


def stated_seed_checks(report_families: dict[str, dict]) -> list[dict]:
    """Every seed SD stated in evaluation.seed_sd that a one-seed arm's pairs rest on, beside the SD
    the same rung measured on its arms with two seeds or more (same model and tokens; their own seed
    variances pooled) and its 95% interval (chi-square on the pooled degrees of freedom). A stated
    value below that interval is refused: it would make the one-seed arm's decisions too sure."""
    checks = []
    for name, family in report_families.items():
        for kind, by_score in family["seed_variances"].items():
            for score, by_arm in by_score.items():
                stated = {v["source"] for v in by_arm.values() if v["source"].startswith("stated")}
                own = [v for v in by_arm.values() if not v["source"] and v["df"]]
                if not stated or not own:
                    continue
                df = sum(v["df"] for v in own)
                variance = sum(v["variance"] * v["df"] for v in own) / df
                low, high = (math.sqrt(variance * df / stats.chi2.ppf(q, df)) for q in ((1 + LEVEL) / 2, (1 - LEVEL) / 2))
                sd = math.sqrt(next(v["variance"] for v in by_arm.values() if v["source"] in stated))
                checks.append({"family": name, "score": f"{kind}:{score}", "stated": stated.pop(), "stated_sd": sd,
                               "measured_sd": math.sqrt(variance), "low": low, "high": high, "df": df,
                               "arms": [a for a, v in by_arm.items() if not v["source"] and v["df"]]})
    for c in checks:
        if c["stated_sd"] < c["low"]:
            scale = report_families[c["family"]]["scale"]
            raise SystemExit(f"evaluation.seed_sd: {c['stated']} on {c['family']} {c['score']} is below what this rung "
                             f"measured on {', '.join(c['arms'])} ({scale * c['measured_sd']:.3g}, 95% interval "
                             f"[{scale * c['low']:.3g}, {scale * c['high']:.3g}] over {c['df']:g} degrees of freedom): "
                             "state at least the interval's lower end, or leave the key out and train a second seed")
    return checks
