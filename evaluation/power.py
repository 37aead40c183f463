"""What difference between two arms a run can resolve: before any GPU time is spent (assumed
noise), or from a finished or partial run (measured noise).

    python -m evaluation.power CONFIG [--item-correlation 0.5] [--seed-std 0.5] [--accuracy 0.5]
                                      [--seed-item-share 0] [--seed-correlation 0]
    python -m evaluation.power CONFIG --from-run

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

The minimum detectable difference at a two-sided 95% level with 80% power is
(z_0.975 + z_0.80) x sqrt(Var) = 2.8016 x sqrt(Var) (normal quantiles; with few seeds the report's
t interval is wider).

Assumed mode (what `plan` prints before a run): p = 0.5 (the largest document variance), rho =
0.5, sigma_seed = 0.5 points per benchmark, phi = 0 and rho_seed = 0 (stated with the result),
for the suite's accuracy. Item counts are each task's scored split (evaluation/suite.yaml), or
`evaluation.offline_items` / `evaluation.limit` where the config sets them.

`--from-run` reads the run's evaluated checkpoints (the report's comparison: evaluation/runs.py)
and measures every parameter per metric family and benchmark: sigma^2 (a document's variance
within one run), phi and rho (from the seeds x documents layout of every arm and every pair of
arms), sigma_seed (the seed variance pooled over arms, less the interaction), rho_seed (from the
average's own seed variance). It prints the minimum detectable difference of each family for the
configured seeds, and for every arm against the reference arm how many seeds its observed
difference would need.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import asdict, dataclass
from itertools import combinations

import numpy as np

from configs.experiment import ExperimentConfig, load_experiment_or_exit
from evaluation.clean_text import clean_text_tasks
from evaluation.intervals import interaction_variance
from evaluation.metrics import Family, families
from evaluation.runs import compare, load_runs
from evaluation.suite import CATEGORIES, CATEGORY_TITLES, Suite, load_suite

Z_95_TWO_SIDED = 1.959964
Z_80_POWER = 0.841621
PAPER_EFFECT = 0.0108  # Dripper - Trafilatura on the average, Table 5
MAX_SEEDS = 100


@dataclass(frozen=True)
class PowerAssumptions:
    accuracy: float = 0.5
    item_correlation: float = 0.5
    seed_std: float = 0.005  # per benchmark, as a fraction (0.5 points), net of the seed-by-document part
    seed_item_share: float = 0.0  # phi: the share of a document's paired variance a new seed redraws
    seed_correlation: float = 0.0  # rho_seed: of one seed's shifts across benchmarks


@dataclass(frozen=True)
class UnitNoise:
    """The noise of one benchmark's (or clean-text task's) paired difference."""

    item_variance: float  # sigma^2 of one document's score
    item_correlation: float  # rho between two arms
    seed_item_share: float  # phi
    seed_std: float  # sigma_seed of the score, net of the seed-by-document part


def column_variance(weights: dict[str, float], units: dict[str, dict[str, float]], items: dict[str, int],
                    noise: dict[str, UnitNoise], seed_correlation: float, seeds: int,
                    seed_variance: float | None = None) -> float:
    """Var of the paired difference of sum_b w_b score_b (score_b = sum_t w_bt mean of task t).
    `seed_variance`: the score's own net seed variance where measured, in place of the one built
    from the units' seed SDs and one correlation."""
    documents = 0.0
    for unit, w in weights.items():
        n = noise[unit]
        shrink = (1 - n.seed_item_share) + n.seed_item_share / seeds
        documents += w ** 2 * sum(v ** 2 * 2 * n.item_variance * (1 - n.item_correlation) / items[t] * shrink
                                  for t, v in units[unit].items())
    if seed_variance is None:
        stds = {u: w * noise[u].seed_std for u, w in weights.items()}
        seed_variance = sum(a * b * (1.0 if u == v else seed_correlation) for u, a in stds.items() for v, b in stds.items())
    return documents + 2 * seed_variance / seeds


def mdd(var: float) -> float:
    return (Z_95_TWO_SIDED + Z_80_POWER) * math.sqrt(var)


def seeds_needed(difference: float, var_at) -> int | None:
    """The fewest paired seeds whose minimum detectable difference is |difference| or less; None if
    even MAX_SEEDS are not enough (the documents' part alone is then too large) or there is no
    difference to resolve. At least 2: one seed cannot measure the seed noise a result must beat."""
    if difference == 0:
        return None
    return next((s for s in range(2, MAX_SEEDS + 1) if mdd(var_at(s)) <= abs(difference)), None)


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


def minimum_detectable_differences(items: dict[str, list[int]], suite: Suite, seeds: int,
                                   a: PowerAssumptions = PowerAssumptions()) -> dict[str, float]:
    """The MDD of the average, each category and each benchmark (fractions, not points), with the
    same assumed noise for every benchmark."""
    units = {b.name: {f"{b.name}/{i}": 1 / len(b.tasks) for i in range(len(b.tasks))} for b in suite.benchmarks}
    counts = {f"{b.name}/{i}": n for b in suite.benchmarks for i, n in enumerate(items[b.name])}
    same = UnitNoise(a.accuracy * (1 - a.accuracy), a.item_correlation, a.seed_item_share, a.seed_std)
    noise = {b.name: same for b in suite.benchmarks}
    groups = {"average": suite.benchmarks, **{c: [b for b in suite.benchmarks if b.category == c] for c in CATEGORIES}}
    out = {name: mdd(column_variance({b.name: 1 / len(bs) for b in bs}, units, counts, noise, a.seed_correlation, seeds))
           for name, bs in groups.items()}
    for b in suite.benchmarks:
        out[b.name] = mdd(column_variance({b.name: 1.0}, units, counts, noise, a.seed_correlation, seeds))
    return out


def power_report(config: ExperimentConfig, a: PowerAssumptions = PowerAssumptions()) -> dict:
    suite = load_suite()
    seeds = len(config.pretrain.seeds) if config.pretrain else 1
    items = task_items(config, suite)
    mdd_ = minimum_detectable_differences(items, suite, seeds, a)
    return {"method": "paired difference, two-sided 95% level, 80% power; see evaluation/power.py",
            "assumptions": asdict(a), "seeds": seeds, "items": items, "mdd": mdd_,
            "paper_effect": PAPER_EFFECT, "resolves_paper_effect": mdd_["average"] <= PAPER_EFFECT}


# ---------------------------------------------------------------- measured noise


def measured_noise(family: Family, matrices: dict[str, dict[str, np.ndarray]]) \
        -> tuple[dict[str, UnitNoise], float, dict[str, float]]:
    """Per unit of the family its noise, rho_seed, and each column's own net seed variance (the
    units' SDs are clipped at zero one by one, which can understate a column's), from every arm's
    seeds x documents matrices (arm -> task -> matrix, the report's comparison)."""
    arms = list(matrices)

    def pooled(values: list[tuple[float, int]]) -> float:  # (value, weight) pairs
        total = sum(w for _, w in values)
        return sum(v * w for v, w in values) / total if total else 0.0

    interaction = {t: pooled([(interaction_variance(m[t]), len(m[t]) - 1) for m in matrices.values()])
                   for t in family.task_keys()}

    def seed_net(weights: dict[str, float]) -> float:
        """sigma_seed^2 of a weighted score, pooled over arms, less the interaction over its documents."""
        values = []
        for m in matrices.values():
            if len(next(iter(m.values()))) > 1:
                score = sum(w * m[t].mean(axis=1) for t, w in weights.items())
                values.append((float(np.var(score, ddof=1)), len(score) - 1))
        part = sum(w ** 2 * interaction[t] / next(iter(matrices.values()))[t].shape[1] for t, w in weights.items())
        return max(0.0, pooled(values) - part)

    noise = {}
    for unit, tasks in family.units.items():
        sigma2 = sum(w * pooled([(float(np.var(row, ddof=1)), 1) for m in matrices.values() for row in m[t]])
                     for t, w in tasks.items())
        fixed = sum(w * pooled([(float(np.var((matrices[b][t] - matrices[a][t]).mean(axis=0), ddof=1))
                                 - 2 * interaction[t] / len(matrices[a][t]), 1) for a, b in combinations(arms, 2)])
                    for t, w in tasks.items())
        inter = sum(w * 2 * interaction[t] for t, w in tasks.items())
        paired = max(0.0, fixed) + inter  # one seed's paired document variance, 2 sigma^2 (1 - rho)
        noise[unit] = UnitNoise(item_variance=sigma2, item_correlation=1 - paired / (2 * sigma2) if sigma2 else 0.0,
                                seed_item_share=inter / paired if paired else 0.0,
                                seed_std=math.sqrt(seed_net(tasks)))
    correlation = 0.0
    if "average" in family.columns and len(family.columns["average"]) > 1:
        weights = family.columns["average"]
        stds = {u: w * noise[u].seed_std for u, w in weights.items()}
        own = sum(s ** 2 for s in stds.values())
        cross = sum(stds.values()) ** 2 - own
        if cross > 0:
            correlation = min(1.0, max(-1.0, (seed_net(family.task_weights("average")) - own) / cross))
    return noise, correlation, {column: seed_net(family.task_weights(column)) for column in family.columns}


def run_power(config: ExperimentConfig) -> dict:
    """Measured noise per family, the MDD of every column and unit for the configured seeds, and
    the seeds every arm's observed difference to the reference arm would need."""
    suite = load_suite()
    clean = clean_text_tasks(config.evaluation.clean_text) if config.evaluation else []
    comparison = compare(load_runs(config), config.evaluation.average_last if config.evaluation else 1)
    arms = [arm for arm in config.arms if arm in comparison.by_arm]
    paired = sorted(set.intersection(*(set(comparison.by_arm[a]) for a in arms))) if arms else []
    seeds = len(config.pretrain.seeds)
    out = {"method": "paired difference, two-sided 95% level, 80% power, noise measured from the run; "
                     "see evaluation/power.py", "seeds": seeds, "compared_steps": comparison.steps, "arms": arms,
           "measured_on_seeds": paired, "families": {}}
    for name, family in families(suite, clean).items():
        keys = family.task_keys()
        if len(arms) < 2 or not paired or any(not comparison.documents(t, keys[t]) for t in keys):
            continue
        matrices = {arm: {t: comparison.matrix(arm, paired, t, keys[t]) for t in keys} for arm in arms}
        noise, correlation, column_seed = measured_noise(family, matrices)
        items = {t: matrices[arms[0]][t].shape[1] for t in keys}

        def var_at(score: str, weights: dict[str, float], s: int, noise=noise, correlation=correlation, items=items,
                   family=family, column_seed=column_seed) -> float:
            return column_variance(weights, family.units, items, noise, correlation, s, column_seed.get(score))

        scores = {**{c: family.columns[c] for c in family.columns if c != "average_centered"},
                  **{u: {u: 1.0} for u in family.units}}
        differences = {}
        for arm in arms[1:]:
            differences[arm] = {}
            for score, weights in scores.items():
                d = sum(w * v * float((matrices[arm][t] - matrices[arms[0]][t]).mean())
                        for u, w in weights.items() for t, v in family.units[u].items())
                differences[arm][score] = {"difference": d,
                                           "seeds_needed": seeds_needed(d, lambda s, c=score, w=weights: var_at(c, w, s))}
        out["families"][name] = {
            "title": family.title, "scale": family.scale, "unit": family.unit, "items": items,
            "noise": {u: asdict(n) for u, n in noise.items()}, "seed_correlation": correlation,
            "mdd": {score: mdd(var_at(score, weights, seeds)) for score, weights in scores.items()},
            "titles": {score: family.column_titles.get(score, score) for score in scores},
            "differences": differences}
    return out


def print_power(report: dict) -> None:
    a = report["assumptions"]
    print(f"Minimum detectable difference (95% level, 80% power, {report['seeds']} paired seeds; "
          f"assumed accuracy {a['accuracy']:.2f}, item correlation {a['item_correlation']:.2f}, "
          f"seed std {100 * a['seed_std']:.2f} points per benchmark, seed-by-document share "
          f"{a['seed_item_share']:.2f}, seed correlation across benchmarks {a['seed_correlation']:.2f}):")
    titles = {"average": "Avg", **CATEGORY_TITLES}
    for key, title in titles.items():
        print(f"  {title:<18} {100 * report['mdd'][key]:5.2f} points")
    verdict = "can" if report["resolves_paper_effect"] else "cannot"
    print(f"  this run {verdict} resolve an effect the size of the paper's "
          f"+{100 * report['paper_effect']:.2f} points on the average")


def print_run_power(report: dict) -> None:
    steps = report["compared_steps"]
    if not report["families"]:
        print("no two arms with evaluated checkpoints at a common step: nothing measured yet")
        return
    print(f"Noise measured at step {steps[-1] if steps else '-'} of {', '.join(report['arms'])}; minimum detectable "
          f"difference with {report['seeds']} paired seeds (95% level, 80% power):")
    for f in report["families"].values():
        decimals = 2 if f["scale"] == 100 else 3
        print(f"\n{f['title']} ({f['unit']}); seed correlation across benchmarks {f['seed_correlation']:.2f}")
        print(f"  {'score':<28}{'MDD':>9}  sigma2  rho   phi   seed sd"
              + "".join(f"  {arm + ': diff, seeds':>26}" for arm in f["differences"]))
        for score, value in f["mdd"].items():
            n = f["noise"].get(score)
            params = (f"  {n['item_variance']:.3f} {n['item_correlation']:5.2f} {n['seed_item_share']:5.2f} "
                      f"{f['scale'] * n['seed_std']:7.{decimals}f}") if n else " " * 31
            cells = ""
            for d in f["differences"].values():
                needed = d[score]["seeds_needed"] or (">100" if d[score]["difference"] else "-")
                cells += f"  {f['scale'] * d[score]['difference']:+14.{decimals}f}, {needed:>9}"
            print(f"  {f['titles'][score]:<28}{f['scale'] * value:9.{decimals}f}{params}{cells}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m evaluation.power", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("config")
    parser.add_argument("--from-run", action="store_true", help="measure the noise from the run's evaluated checkpoints")
    parser.add_argument("--accuracy", type=float, default=PowerAssumptions.accuracy)
    parser.add_argument("--item-correlation", type=float, default=PowerAssumptions.item_correlation)
    parser.add_argument("--seed-std", type=float, default=100 * PowerAssumptions.seed_std,
                        help="standard deviation of a benchmark's score across seeds, in points")
    parser.add_argument("--seed-item-share", type=float, default=PowerAssumptions.seed_item_share,
                        help="share of a document's paired variance that a new seed redraws (0-1)")
    parser.add_argument("--seed-correlation", type=float, default=PowerAssumptions.seed_correlation,
                        help="correlation of one seed's shifts across benchmarks (0-1)")
    parser.add_argument("--json", action="store_true", help="print the JSON instead of the table")
    args = parser.parse_args(argv)
    config = load_experiment_or_exit(args.config)
    if args.from_run:
        report = run_power(config)
        printer = print_run_power
    else:
        report = power_report(config, PowerAssumptions(args.accuracy, args.item_correlation, args.seed_std / 100,
                                                       args.seed_item_share, args.seed_correlation))
        printer = print_power
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        printer(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
