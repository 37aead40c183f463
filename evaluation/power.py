"""What difference between two arms a run can resolve: before any GPU time is spent (assumed
noise), or from a finished or partial run (measured noise).

    python -m evaluation.power CONFIG [--item-correlation 0.5] [--seed-std 0.5] [--accuracy 0.5]
                                      [--seed-item-share 0] [--seed-correlation 0] [--difference POINTS]
    python -m evaluation.power CONFIG --from-run                            [--rung NAME] [--json]

A model ladder (`pretrain.ladder`) gets one table per rung: its own seeds and trained arms, its
noise measured from its own runs with `--from-run` (a small model's seeds spread differently from
a large one's, so one rung's noise says little about another's). Assumed noise is the same at every
rung, so there the rungs differ by their seeds only.

The report compares arms by the paired difference of their scores, mean over S seeds (seed s of
each arm shares initial weights and data order). Per benchmark b (a mean over its tasks) its
variance has three parts:

- test documents: both arms answer the same n documents of a task; a document's score varies
  with variance sigma^2 (p (1 - p) for an accuracy near p) and correlates by rho between arms, so
  the paired difference of one document varies by 2 sigma^2 (1 - rho). The share phi of that which
  is the seed-by-document interaction (which documents one trained model happens to get right)
  is drawn anew by every seed and shrinks with S; the rest is fixed by the documents:
  Var_docs = 2 sigma^2 (1 - rho) / n x ((1 - phi) + phi / S).
- training seeds: a seed shifts each arm's benchmark score by sigma_seed (net of the interaction,
  which the documents' part holds), independently per arm: 2 sigma_seed^2 / S.
- a category or the average is the mean of its k benchmarks: the documents' parts add up
  (/ k^2); the seed shifts correlate across benchmarks by rho_seed (a seed that moves every
  benchmark together): Var_seeds = 2 / S x sum_b sum_b' sigma_b sigma_b' rho_bb' / k^2.

The minimum detectable difference (MDD) is the true difference the report calls a result 80% of
the time, found by simulating the report's own decision on those noise parts: the seeds' part
from the paired seed differences of S seeds, the documents' part from its documents, the generalized
interval of evaluation/statistics/intervals.py, every seed agreeing in sign, and the level of the table the
score is decided in: a cell of the decision table (each arm against the reference on the
decision's scores) is tested at 0.05 / its cells, the first step of Holm's adjustment over that
table, a benchmark at 0.05 / (pairs x benchmarks) (its family's table), any other score (a
category) at 0.05, an interval and no decision. Normal quantiles with the noise known, as an MDD
is usually written, promise 80% where the decision then delivered 41-73% (2-5 arms, 2-3 seeds).
`seeds_needed` runs the same simulation for more seeds; requiring every seed to agree in sign
makes many seeds harder to agree, so past a point more seeds lower the power of a difference the
seeds' noise dominates, and the fewest seeds that reach 80% are given, up to MAX_SEEDS.

Assumed mode (what `plan` prints before a run): p = 0.5 (the largest document variance), rho =
0.5, sigma_seed = 0.5 points per benchmark, phi = 0 and rho_seed = 0 (stated with the result),
for the suite's accuracy. Item counts are each task's scored split (evaluation/tasks/suite.yaml), or
`evaluation.offline_items` / `evaluation.limit` where the config sets them.

`--from-run` reads the run's evaluated checkpoints (the report's comparison: evaluation/runs.py)
and measures every parameter per metric family and benchmark: sigma^2 (a document's variance
within one run), phi and rho (from the seeds x documents layout of every arm and every pair of
arms), each arm's seed variance of every score, rho_seed (shown, from the average's own seed
variance). It prints the minimum detectable difference of each score for the configured seeds,
and for every arm against the reference arm how many seeds its observed difference on the
decision table's scores would need.
It needs two evaluated seeds or more: with one, the seeds' noise is not measured, and it refuses.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass, replace

from configs.experiment import ExperimentConfig, load_experiment_or_exit
from evaluation.metrics import Family, families
from evaluation.power_measured import clip_rho, item_noise, run_power
from evaluation.power_print import print_power, print_run_power
from evaluation.power_simulation import ScoreNoise, UnitNoise, mdd, score_noise, seeds_needed, table_levels
from evaluation.primary_scale import measured_slope
from evaluation.statistics.intervals import LEVEL
from evaluation.tasks.clean_text import clean_text_tasks
from evaluation.tasks.suite import Suite, load_suite

PAPER_EFFECT = 0.0108  # Dripper - Trafilatura on the average, Table 5


@dataclass(frozen=True)
class PowerAssumptions:
    accuracy: float = 0.5
    item_correlation: float = 0.5
    seed_std: float = 0.005  # per benchmark, as a fraction (0.5 points), net of the seed-by-document part
    seed_item_share: float = 0.0  # phi: the share of a document's paired variance a new seed redraws
    seed_correlation: float = 0.0  # rho_seed: of one seed's shifts across benchmarks


# ---------------------------------------------------------------- assumed noise


def task_items(config: ExperimentConfig, suite: Suite) -> dict[str, list[int]]:
    """Items each benchmark's tasks will be scored on under this config."""
    evaluation = config.evaluation
    out = {}
    for b in suite.benchmarks:
        items = [evaluation.offline_items] * len(b.tasks) if evaluation and evaluation.tasks == "offline" else list(b.items)
        if evaluation and evaluation.limit:
            items = [min(n, evaluation.limit) for n in items]
        out[b.name] = items
    return out


def informative(measured: dict[str, UnitNoise] | None, unit: str) -> bool:
    """Whether a run measured a unit's item correlation: its documents' values varied (two arms that
    answered every document alike measured rho at its top, clipped by `clip_rho`)."""
    n = (measured or {}).get(unit)
    return n is not None and n.item_variance > 0


def assumed_noise(items: dict[str, list[int]], suite: Suite, a: PowerAssumptions = PowerAssumptions(),
                  family: Family | None = None, measured: dict[str, UnitNoise] | None = None) -> dict[str, ScoreNoise]:
    """The noise of every column (average, categories) and benchmark of a family (default: the
    suite's accuracy), with the same assumed noise for every benchmark; with `measured` (a run's,
    item_noise), each benchmark's item correlation rho as measured, and its document variance too
    where nothing is assumed for it (a continuous family; accuracy keeps p (1 − p) at `a.accuracy`,
    as a small model near chance says little of a large one's); the seed-by-document share and the
    seeds' noise stay assumed (`a`)."""
    family = family or families(suite, [])["accuracy"]
    tasks = {b.name: b.form(suite.headline) for b in suite.benchmarks}
    units = {u: {f"{u}/{i}": w for i, w in enumerate(ws.values())} for u, ws in family.units.items()}
    counts = {f"{u}/{i}": items[u][min(i, len(items[u]) - 1)] for u in family.units for i in range(len(tasks[u]))}
    same = UnitNoise(a.accuracy * (1 - a.accuracy), a.item_correlation, a.seed_item_share, a.seed_std)
    noise = {u: replace(same, item_correlation=clip_rho(measured[u].item_correlation),
                        item_variance=same.item_variance if family.name == "accuracy" else measured[u].item_variance)
             if informative(measured, u) else same for u in family.units}
    out = {c: score_noise(w, units, counts, noise, a.seed_correlation) for c, w in family.columns.items()
           if c != "average_centered"}
    return out | {u: score_noise({u: 1.0}, units, counts, noise, a.seed_correlation) for u in family.units}


def power_report(config: ExperimentConfig, a: PowerAssumptions = PowerAssumptions(), difference: float | None = None,
                 measured: tuple[dict[str, dict[str, UnitNoise]], str] | None = None) -> dict:
    """The MDD of every accuracy score of one rung (`config.for_rung`) for its seeds and trained
    arms, under assumed noise, and the primary decision's (`evaluation.primary`, alone at 0.05);
    with `difference` (a fraction), the seeds the average needs for it. `measured`: (family ->
    benchmark -> a document's noise, where it was measured) from item_noise: the accuracy family's
    documents take it, and the other families in points (p_gold) get their MDDs too; the seeds'
    noise stays assumed."""
    suite = load_suite()
    rung = config.pretrain.rung if config.pretrain else None
    seeds = len(rung.seeds) if rung else 1
    arms = len(config.trained_arms()) or len(config.arms)
    items = task_items(config, suite)
    clean = clean_text_tasks(config.evaluation.clean_text) if config.evaluation else []
    fams = families(suite, clean)
    levels = table_levels(fams, arms)
    by_unit, source = measured or ({}, None)
    shown = [name for name, f in fams.items() if name == "accuracy" or (name in by_unit and f.scale == 100)]
    noise = {name: assumed_noise(items, suite, a, fams[name], by_unit.get(name)) for name in shown}
    level = {name: {score: levels[name, "columns" if score in fams[name].columns else "units", score] for score in n}
             for name, n in noise.items()}
    mdds = {name: {score: mdd(x, seeds, level[name][score][0]) for score, x in n.items()} for name, n in noise.items()}
    out = {"method": "the report's decision simulated: generalized interval, every seed agreeing, at the level of "
                     "the table each score is decided in; 80% power; see evaluation/power.py",
           "rung": rung.name if rung else None, "assumptions": asdict(a), "item_noise": source,
           "item_correlation": {name: {u: clip_rho(n.item_correlation) if informative(by_unit[name], u) else None
                                       for u, n in by_unit[name].items()} for name in shown if name in by_unit},
           "seeds": seeds, "arms": arms, "items": items, "mdd": mdds["accuracy"],
           "levels": {score: {"alpha": v[0], "table": v[1]} for score, v in level["accuracy"].items()},
           "families": {name: {"title": fams[name].title, "mdd": mdds[name],
                                "levels": {k: {"alpha": v[0], "table": v[1]} for k, v in level[name].items()}}
                        for name in shown},
           "paper_effect": PAPER_EFFECT,
           "resolves_paper_effect": mdds["accuracy"]["average"] is not None and mdds["accuracy"]["average"] <= PAPER_EFFECT}
    primary = config.evaluation.primary if config.evaluation else None
    if primary:
        family, column = primary.score.split(":")
        value = mdd(noise[family][column], seeds, 1 - LEVEL) if column in noise.get(family, {}) else None
        out["primary"] = {"pair": list(primary.pair), "score": primary.score, "alpha": 1 - LEVEL, "mdd": value,
                          # the same pair on every shown family's average: what the choice of score costs
                          "average_by_family": {name: mdd(n["average"], seeds, 1 - LEVEL) for name, n in noise.items()}}
    if difference is not None:
        out["difference"] = difference
        out["seeds_needed"] = seeds_needed(difference, lambda s: (noise["accuracy"]["average"],
                                                                  level["accuracy"]["average"][0]))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m evaluation.power", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("config")
    parser.add_argument("--from-run", action="store_true", help="measure the noise from the run's evaluated checkpoints")
    parser.add_argument("--accuracy", type=float, default=PowerAssumptions.accuracy)
    parser.add_argument("--item-correlation", type=float)
    parser.add_argument("--seed-std", type=float, default=100 * PowerAssumptions.seed_std,
                        help="standard deviation of a benchmark's score across seeds, in points")
    parser.add_argument("--seed-item-share", type=float, default=PowerAssumptions.seed_item_share,
                        help="share of a document's paired variance that a new seed redraws (0-1)")
    parser.add_argument("--seed-correlation", type=float, default=PowerAssumptions.seed_correlation,
                        help="correlation of one seed's shifts across benchmarks (0-1)")
    parser.add_argument("--difference", type=float,
                        help="a true difference on the accuracy average, in points: the seeds each rung needs for it")
    parser.add_argument("--item-noise-from", metavar="CONFIG",
                        help="measure a document's noise per benchmark (item variance, item correlation rho, seed-by-"
                             "document share) on another config's evaluated runs (its largest rung with two arms on two "
                             "seeds) instead of assuming it; the seeds' noise stays assumed; with --item-correlation "
                             "given, that rho replaces the measured one")
    parser.add_argument("--rung", help="one rung of pretrain.ladder (default: every rung)")
    parser.add_argument("--json", action="store_true", help="print the JSON (by rung) instead of the tables")
    args = parser.parse_args(argv)
    config = load_experiment_or_exit(args.config)
    try:
        rungs = [config.for_rung(args.rung).rungs()[0]] if args.rung else config.rungs()
    except ValueError as e:
        raise SystemExit(f"evaluation.power: {e}") from None
    rho = PowerAssumptions.item_correlation if args.item_correlation is None else args.item_correlation
    assumptions = PowerAssumptions(args.accuracy, rho, args.seed_std / 100, args.seed_item_share, args.seed_correlation)
    measured = noise_config = None
    if args.item_noise_from:
        noise_config = load_experiment_or_exit(args.item_noise_from)
        by_unit, source = item_noise(noise_config)
        if args.item_correlation is not None:
            by_unit = {f: {u: replace(n, item_correlation=rho) for u, n in units.items()} for f, units in by_unit.items()}
            source += f", item correlation {rho} (assumed)"
        measured = by_unit, source
    reports, refused = {}, 0
    for rung in rungs or [None]:
        one = config.for_rung(rung) if rung else config
        if args.from_run:
            report = run_power(one)
            if "error" in report:  # refused for this rung; the others are still measured
                print(f"evaluation.power --from-run{f' (rung {rung})' if rung else ''}: {report['error']}",
                      file=sys.stderr)
                refused += 1
                continue
        else:
            report = power_report(one, assumptions, args.difference / 100 if args.difference is not None else None, measured)
        slope_from = one if args.from_run else noise_config  # the runs whose slope puts the primary MDD in accuracy points
        if report.get("primary") and slope_from:
            report["primary"]["accuracy_slope"] = measured_slope(slope_from, report["primary"]["score"])
        reports[rung] = report
        if not args.json:
            (print_run_power if args.from_run else print_power)(report)
            print()
    if args.json:
        print(json.dumps(reports, indent=2))
    return 2 if refused and not reports else 0


if __name__ == "__main__":
    sys.exit(main())
