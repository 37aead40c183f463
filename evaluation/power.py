"""What difference between two arms a run can resolve: before any GPU time is spent (assumed
noise), or from a finished or partial run (measured noise).

    python -m evaluation.power CONFIG [--noise-from RUN_CONFIG] [--item-correlation 0.5] [--seed-std 0.5]
                                      [--accuracy 0.5] [--seed-item-share 0.7] [--seed-correlation 0]
                                      [--difference POINTS]
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
`seeds_needed` gives the fewest seeds, up to MAX_SEEDS, whose MDD (priced as the printed one) is at
most a difference; requiring every seed to agree in sign makes many seeds harder to agree, so past
a point more seeds raise the MDD of a difference the seeds' noise dominates.

Assumed mode (what `plan` prints before a run): p = 0.5 (the largest document variance), rho =
0.5, sigma_seed = 0.5 points per benchmark, phi = 0.7 and rho_seed = 0, for the suite's accuracy;
each printed on its own line with its source (ASSUMED says why each default is what it is). Item
counts are each task's scored split (evaluation/tasks/suite.yaml), or `evaluation.offline_items` /
`evaluation.limit` where the config sets them.

`--noise-from RUN_CONFIG` takes rho, phi and sigma_seed per benchmark and rho_seed per family (a
negative one as 0) from another config's evaluated runs instead (its largest rung with two arms or more on two seeds or
more; what `--from-run` measures there), matched by family and benchmark name; a benchmark it did
not measure (or whose documents did not vary) keeps the assumed values, and a flag given on the
command line overrides the measured value of its parameter. A measured sigma_seed is an estimate on
K (S − 1) degrees of freedom (every arm's seeds pooled), and the scores priced on it get the MDD
calibrated over what that estimate leaves possible, as `--from-run`'s (calibrated_mdd); one stated
with `--seed-std` is taken as known. A document's variance stays p (1 − p)
at `--accuracy` for accuracy (a small model near chance says little of a large one's) and is
measured for the other families, which only a run can price.

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
import functools
import json
import sys
from dataclasses import asdict, dataclass, replace

from configs.experiment import ExperimentConfig, load_experiment_or_exit
from evaluation.metrics import Family, families
from evaluation.power_measured import RunNoise, clip_rho, run_noise, run_power
from evaluation.power_print import print_deciding_primary, print_power, print_run_power
from evaluation.power_simulation import (
    ScoreNoise,
    UnitNoise,
    mdd,
    primary_level,
    score_noise,
    seeds_needed,
    table_levels,
)
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
    seed_item_share: float = 0.7  # phi: the share of a document's paired variance a new seed redraws
    seed_correlation: float = 0.0  # rho_seed: of one seed's shifts across benchmarks


# Why each default is what it is, printed beside it. phi is the low end of what the demo measured on the
# accuracy benchmarks whose documents varied (0.72-1.00, `python -m evaluation.power configs/local.yaml
# --from-run`): the low end keeps the most of the documents' part fixed, so it promises the least from more
# seeds. The demo's toy models near chance, on 40 items a task, measure seed SDs of 0-7.5 points and rho of
# 0-0.92: nothing a 1B model's are, so those two stay at their usual values.
ASSUMED = {"accuracy": "the largest document variance",
           "item_correlation": "assumed; measure it with --noise-from",
           "seed_std": "assumed; measure it with --noise-from",
           "seed_item_share": "assumed, the low end of the demo's 0.72-1.00 on accuracy; measure it with --noise-from",
           "seed_correlation": "assumed; measure it with --noise-from"}
FLAGS = {"accuracy": "--accuracy", "item_correlation": "--item-correlation", "seed_std": "--seed-std",
         "seed_item_share": "--seed-item-share", "seed_correlation": "--seed-correlation"}
MEASURED = ("item_correlation", "seed_item_share", "seed_std", "seed_correlation")  # what --noise-from replaces


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
    """Whether a run measured a unit's document noise: its documents' values varied (two arms that
    answered every document alike measured rho at its top, clipped by `clip_rho`)."""
    n = (measured or {}).get(unit)
    return n is not None and n.item_variance > 0


def assumed_noise(items: dict[str, list[int]], suite: Suite, a: PowerAssumptions = PowerAssumptions(),
                  family: Family | None = None, measured: dict[str, UnitNoise] | None = None,
                  keep: frozenset[str] = frozenset(), seed_correlation: float | None = None,
                  seed_df: float | None = None) -> dict[str, ScoreNoise]:
    """The noise of every column (average, categories) and benchmark of a family (default: the
    suite's accuracy), with the same assumed noise for every benchmark; with `measured` (a run's,
    run_noise), each benchmark's rho, phi and sigma_seed as measured but those named in `keep` (stated
    on the command line), and its document variance too where nothing is assumed for it (a
    continuous family; accuracy keeps p (1 − p) at `a.accuracy`, as a small model near chance says
    little of a large one's); `seed_correlation`: a measured rho_seed (default: `a`'s); `seed_df`: the
    degrees of freedom of the measured sigma_seed, which every score with a benchmark whose sigma_seed was
    measured is priced on (ScoreNoise.seed_df: the MDD calibrated as a from-run one is)."""
    family = family or families(suite, [])["accuracy"]
    tasks = {b.name: b.form(suite.headline) for b in suite.benchmarks}
    units = {u: {f"{u}/{i}": w for i, w in enumerate(ws.values())} for u, ws in family.units.items()}
    counts = {f"{u}/{i}": items[u][min(i, len(items[u]) - 1)] for u in family.units for i in range(len(tasks[u]))}
    same = UnitNoise(a.accuracy * (1 - a.accuracy), a.item_correlation, a.seed_item_share, a.seed_std)

    def taken(n: UnitNoise) -> UnitNoise:
        run = {"item_correlation": clip_rho(n.item_correlation), "seed_item_share": n.seed_item_share,
               "seed_std": n.seed_std}
        return replace(same, item_variance=same.item_variance if family.name == "accuracy" else n.item_variance,
                       **{k: v for k, v in run.items() if k not in keep})

    noise = {u: taken(measured[u]) if informative(measured, u) else same for u in family.units}
    correlation = a.seed_correlation if seed_correlation is None else seed_correlation
    estimated = {u for u in family.units if informative(measured, u)} if seed_df and "seed_std" not in keep else set()

    def priced(weights: dict[str, float]) -> ScoreNoise:
        return replace(score_noise(weights, units, counts, noise, correlation),
                       seed_df=seed_df if estimated & set(weights) else None)

    return {c: priced(w) for c, w in family.columns.items() if c != "average_centered"} \
        | {u: priced({u: 1.0}) for u in family.units}


def noise_sources(a: PowerAssumptions, measured: RunNoise | None, given: frozenset[str]) -> dict[str, str]:
    """Each parameter's source, printed on its line: stated on the command line, measured on a named
    run, or assumed (ASSUMED: why that value)."""
    def source(key: str) -> str:
        if key in given:
            return f"stated ({FLAGS[key]})"
        if measured and key in MEASURED:
            return f"measured on {measured.source}"
        return f"{ASSUMED[key]} ({FLAGS[key]})"
    return {key: source(key) for key in FLAGS}


def power_report(config: ExperimentConfig, a: PowerAssumptions = PowerAssumptions(), difference: float | None = None,
                 measured: RunNoise | None = None, given: frozenset[str] = frozenset(), price=mdd) -> dict:
    """The MDD of every accuracy score of one rung (`config.for_rung`) for its seeds and trained
    arms, under assumed noise, and the primary decision's (`evaluation.primary`, alone at 0.05,
    marked where this rung is its deciding rung); with `difference` (a fraction), the seeds the
    average needs for it. `measured`: a named run's noise (run_noise): every family it measured
    takes its rho, phi, sigma_seed and rho_seed but those in `given` (stated on the command line),
    and the families in points other than accuracy (p_gold) get their MDDs too. `price(noise, seeds,
    alpha)`: each MDD (`mdd`, or a memo of it that rungs of equal noise share: a calibrated one costs
    seconds)."""
    suite = load_suite()
    rung = config.pretrain.rung if config.pretrain else None
    seeds = len(rung.seeds) if rung else 1
    arms = len(config.trained_arms()) or len(config.arms)
    items = task_items(config, suite)
    clean = clean_text_tasks(config.evaluation.clean_text) if config.evaluation else []
    fams = families(suite, clean)
    levels = table_levels(fams, arms)
    by_unit = measured.units if measured else {}
    shown = [name for name, f in fams.items() if name == "accuracy" or (name in by_unit and f.scale == 100)]
    # a measured rho_seed below 0 (two seeds' noise about 0) counts as 0: a plan does not bank on seeds that cancel
    correlation = {name: max(0.0, measured.seed_correlation[name])
                   if measured and "seed_correlation" not in given and name in measured.seed_correlation else None
                   for name in shown}
    noise = {name: assumed_noise(items, suite, a, fams[name], by_unit.get(name), given, correlation[name],
                                 measured.seed_df.get(name) if measured else None) for name in shown}
    level = {name: {score: levels[name, "columns" if score in fams[name].columns else "units", score] for score in n}
             for name, n in noise.items()}
    mdds = {name: {score: price(x, seeds, level[name][score][0]) for score, x in n.items()} for name, n in noise.items()}
    taken = {name: {u: {"item_correlation": clip_rho(n.item_correlation), "seed_item_share": n.seed_item_share,
                        "seed_std": n.seed_std} for u, n in by_unit[name].items() if informative(by_unit[name], u)}
             for name in shown if name in by_unit}
    out = {"method": "the report's decision simulated: generalized interval, every seed agreeing, at the level of "
                     "the table each score is decided in; 80% power; see evaluation/power.py",
           "rung": rung.name if rung else None, "assumptions": asdict(a), "noise_from": measured.source if measured else None,
           "sources": noise_sources(a, measured, given), "measured": taken,
           "seed_correlation": {name: v for name, v in correlation.items() if v is not None},
           "seeds": seeds, "arms": arms, "items": items, "mdd": mdds["accuracy"],
           "levels": {score: {"alpha": v[0], "table": v[1]} for score, v in level["accuracy"].items()},
           "families": {name: {"title": fams[name].title, "scale": fams[name].scale, "unit": fams[name].unit,
                               "mdd": mdds[name], "levels": {k: {"alpha": v[0], "table": v[1]} for k, v in level[name].items()}}
                        for name in shown},
           "paper_effect": PAPER_EFFECT,
           "resolves_paper_effect": mdds["accuracy"]["average"] is not None and mdds["accuracy"]["average"] <= PAPER_EFFECT}
    primary = config.evaluation.primary if config.evaluation else None
    if primary:
        family, column = primary.score.split(":")
        level = primary_level(primary.sides)
        value = price(noise[family][column], seeds, level) if column in noise.get(family, {}) else None
        deciding = config.deciding_rung()
        out["primary"] = {"pair": list(primary.pair), "score": primary.score, "alpha": 1 - LEVEL,
                          "sides": primary.sides, "mdd": value,
                          "deciding_rung": deciding, "deciding": deciding is None or deciding == out["rung"],
                          # the same pair on every shown family's average: what the choice of score costs
                          "average_by_family": {name: price(n["average"], seeds, level) for name, n in noise.items()}}
    if difference is not None:
        out["difference"] = difference
        out["seeds_needed"] = seeds_needed(difference, lambda s: (noise["accuracy"]["average"],
                                                                  level["accuracy"]["average"][0]))
    return out


def deciding_primary_mdd(reports: dict[str | None, dict]) -> dict | None:
    """The primary decision's MDD at its deciding rung, from `power_report`s by rung: the pair, the
    score (`family:column`), the rung and the MDD in the score's own units (a fraction for a family in
    points, bits/byte for one in bits/byte; None where nothing prices it). What a conversion to other
    units (accuracy points through a slope) starts from."""
    for report in reports.values():
        primary = report.get("primary")
        if primary and primary["deciding"]:
            return {"pair": primary["pair"], "score": primary["score"], "rung": report["rung"], "mdd": primary["mdd"]}
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m evaluation.power", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("config")
    parser.add_argument("--from-run", action="store_true", help="measure the noise from the run's evaluated checkpoints")
    parser.add_argument("--accuracy", type=float, help=f"a document's accuracy p, its variance p (1 − p) "
                        f"(default {PowerAssumptions.accuracy})")
    parser.add_argument("--item-correlation", type=float, help="item correlation rho between two arms (default "
                        f"{PowerAssumptions.item_correlation}; with --noise-from, measured)")
    parser.add_argument("--seed-std", type=float, help="standard deviation of a benchmark's score across seeds, in "
                        f"points (default {100 * PowerAssumptions.seed_std}; with --noise-from, measured)")
    parser.add_argument("--seed-item-share", type=float, help="share of a document's paired variance that a new seed "
                        f"redraws, 0-1 (default {PowerAssumptions.seed_item_share}; with --noise-from, measured)")
    parser.add_argument("--seed-correlation", type=float, help="correlation of one seed's shifts across benchmarks, "
                        f"0-1 (default {PowerAssumptions.seed_correlation}; with --noise-from, measured)")
    parser.add_argument("--difference", type=float,
                        help="a true difference on the accuracy average, in points: the seeds each rung needs for it")
    parser.add_argument("--noise-from", metavar="RUN_CONFIG",
                        help="take rho, phi and the seed SD per benchmark, and the seed correlation per family, from "
                             "another config's evaluated runs (its largest rung with two arms on two seeds or more), "
                             "matched by family and benchmark name; a flag given here overrides its measured value")
    parser.add_argument("--rung", help="one rung of pretrain.ladder (default: every rung)")
    parser.add_argument("--json", action="store_true", help="print the JSON (by rung) instead of the tables")
    args = parser.parse_args(argv)
    config = load_experiment_or_exit(args.config)
    try:
        rungs = [config.for_rung(args.rung).rungs()[0]] if args.rung else config.rungs()
    except ValueError as e:
        raise SystemExit(f"evaluation.power: {e}") from None
    stated = {"accuracy": args.accuracy, "item_correlation": args.item_correlation,
              "seed_std": None if args.seed_std is None else args.seed_std / 100,
              "seed_item_share": args.seed_item_share, "seed_correlation": args.seed_correlation}
    given = frozenset(k for k, v in stated.items() if v is not None)
    assumptions = replace(PowerAssumptions(), **{k: stated[k] for k in given})
    noise_config = load_experiment_or_exit(args.noise_from) if args.noise_from else None
    measured = run_noise(noise_config) if noise_config else None
    reports, refused, price = {}, 0, functools.cache(mdd)  # rungs of equal seeds and arms price equal noise
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
            report = power_report(one, assumptions, args.difference / 100 if args.difference is not None else None,
                                  measured, given, price)
        slope_from = one if args.from_run else noise_config  # the runs whose slope puts the primary MDD in accuracy points
        if report.get("primary") and slope_from:
            report["primary"]["accuracy_slope"] = measured_slope(slope_from, report["primary"]["score"])
        reports[rung] = report
        if not args.json:
            (print_run_power if args.from_run else print_power)(report)
            print()
    if args.json:
        print(json.dumps(reports, indent=2))
    elif not args.from_run and len(reports) > 1 and (deciding := deciding_primary_mdd(reports)):
        print_deciding_primary(deciding)
    return 2 if refused and not reports else 0


if __name__ == "__main__":
    sys.exit(main())
