"""What difference between two arms a run can resolve, before any GPU time is spent.

    python -m evaluation.power CONFIG [--item-correlation 0.5] [--seed-std 0.5] [--accuracy 0.5]

The report compares arms by the paired difference of their scores, mean over seeds (seed s of
each arm shares initial weights and data order). Its variance has two parts:

- test items: both arms answer the same n items of a task; for accuracies near p whose per-item
  correctness correlates by rho across arms, Var(acc_B - acc_A) = 2 p (1 - p) (1 - rho) / n.
  The items are the same for every seed, so this part does not shrink with more seeds.
- training seeds: each arm's score moves by sigma_seed (standard deviation across seeds) per
  benchmark, independently per arm: 2 sigma_seed^2 / S for S paired seeds.

A benchmark of several tasks (ARC) is their mean; a category or the average is the mean of its
k benchmarks: Var = sum(Var_items,b) / k^2 + 2 sigma_seed^2 / (k S) (seed noise treated as
independent across benchmarks). The minimum detectable difference at a two-sided 95% level with
80% power is (z_0.975 + z_0.80) x sqrt(Var) = 2.8016 x sqrt(Var).

Defaults are stated assumptions, printed with the result: p = 0.5 (the largest item variance),
rho = 0.5 (two models of one size trained on similar text agree on many items), sigma_seed =
0.5 points per benchmark. Item counts are each task's scored split (evaluation/suite.yaml), or
`evaluation.offline_items` / `evaluation.limit` where the config sets them.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import asdict, dataclass

from configs.experiment import ExperimentConfig, load_experiment_or_exit
from evaluation.suite import CATEGORIES, CATEGORY_TITLES, Suite, load_suite

Z_95_TWO_SIDED = 1.959964
Z_80_POWER = 0.841621
PAPER_EFFECT = 0.0108  # Dripper - Trafilatura on the average, Table 5


@dataclass(frozen=True)
class PowerAssumptions:
    accuracy: float = 0.5
    item_correlation: float = 0.5
    seed_std: float = 0.005  # per benchmark, as a fraction (0.5 points)


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


def item_variance(items: list[int], a: PowerAssumptions) -> float:
    """Variance of one benchmark's paired difference from its test items (a mean over its tasks)."""
    per_task = [2 * a.accuracy * (1 - a.accuracy) * (1 - a.item_correlation) / n for n in items]
    return sum(per_task) / len(per_task) ** 2


def minimum_detectable_differences(items: dict[str, list[int]], suite: Suite, seeds: int,
                                   a: PowerAssumptions = PowerAssumptions()) -> dict[str, float]:
    """The MDD of the average, each category and each benchmark (fractions, not points)."""
    z = Z_95_TWO_SIDED + Z_80_POWER
    seed_var = 2 * a.seed_std ** 2 / seeds
    groups = {"average": suite.benchmarks,
              **{c: [b for b in suite.benchmarks if b.category == c] for c in CATEGORIES}}
    out = {}
    for name, benchmarks in groups.items():
        k = len(benchmarks)
        var = sum(item_variance(items[b.name], a) for b in benchmarks) / k ** 2 + seed_var / k
        out[name] = z * math.sqrt(var)
    for b in suite.benchmarks:
        out[b.name] = z * math.sqrt(item_variance(items[b.name], a) + seed_var)
    return out


def power_report(config: ExperimentConfig, a: PowerAssumptions = PowerAssumptions()) -> dict:
    suite = load_suite()
    seeds = len(config.pretrain.seeds) if config.pretrain else 1
    items = task_items(config, suite)
    mdd = minimum_detectable_differences(items, suite, seeds, a)
    return {"method": "paired difference, two-sided 95% level, 80% power; see evaluation/power.py",
            "assumptions": asdict(a), "seeds": seeds, "items": items, "mdd": mdd,
            "paper_effect": PAPER_EFFECT, "resolves_paper_effect": mdd["average"] <= PAPER_EFFECT}


def print_power(report: dict) -> None:
    a = report["assumptions"]
    print(f"Minimum detectable difference (95% level, 80% power, {report['seeds']} paired seeds; "
          f"assumed accuracy {a['accuracy']:.2f}, item correlation {a['item_correlation']:.2f}, "
          f"seed std {100 * a['seed_std']:.2f} points per benchmark):")
    titles = {"average": "Avg", **CATEGORY_TITLES}
    for key, title in titles.items():
        print(f"  {title:<18} {100 * report['mdd'][key]:5.2f} points")
    verdict = "can" if report["resolves_paper_effect"] else "cannot"
    print(f"  this run {verdict} resolve an effect the size of the paper's "
          f"+{100 * report['paper_effect']:.2f} points on the average")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m evaluation.power", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("config")
    parser.add_argument("--accuracy", type=float, default=PowerAssumptions.accuracy)
    parser.add_argument("--item-correlation", type=float, default=PowerAssumptions.item_correlation)
    parser.add_argument("--seed-std", type=float, default=100 * PowerAssumptions.seed_std,
                        help="standard deviation of a benchmark's score across seeds, in points")
    parser.add_argument("--json", action="store_true", help="print the JSON instead of the table")
    args = parser.parse_args(argv)
    config = load_experiment_or_exit(args.config)
    report = power_report(config, PowerAssumptions(args.accuracy, args.item_correlation, args.seed_std / 100))
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print_power(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
