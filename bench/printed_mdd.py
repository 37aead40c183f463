"""Power at the MDD printed from a run's measured noise, over pilots drawn at random, by how much of Var(D) the
test documents make.

    python -m bench.printed_mdd [--pilots N] [--points N] [--out bench/results/printed_mdd.json]
    python -m bench.printed_mdd --brute [--pilots 250] [--cells TEXT] [--out bench/results/printed_mdd_brute.json]
    python -m bench.printed_mdd --brute --diagnose [--cells TEXT] [--points 15] [--out ...]

The truth is bench.calibration's noise of the gold answers' bits-per-byte average (the seeds' part dominant), and
the same with its documents' part scaled to equal the seeds' part of Var(D), and to 10x it, each for the decision
table of 2 arms x 2 seeds (the pair's paired seed differences, 1 degree of freedom) and of 5 arms x 3 seeds
(pooled over the arms, 8). A pilot's printed MDD depends on its data through its estimate of the seeds' variance
(the documents' part, measured on thousands of documents, is taken at its truth): that estimate is the truth x
chi2(nu) / nu, the MDD `calibrated_mdd` prints is computed exactly at `--points` estimates spanning its 0.01%-99.99%
quantiles and interpolated (log-log) between them, and `--pilots` pilots' estimates are drawn at random. The power
at each pilot's MDD is the report's decision at the true noise (`power_at` on `decision_threshold`, the simulated
decision that tests/test_power.py checks against a brute force of the report's own intervals); the table shows
its mean over the pilots with its Monte Carlo standard error (target 0.78-0.82), and the printed MDD over the
known-noise MDD at the truth (median).

With `--brute` every pilot is a simulated run instead (bench.calibration's `simulate`, null): its noise measured by
`measure_family`, the MDD `python -m evaluation.power --from-run` prints from it (`mdd`, FROM_RUN_DRAWS draws),
then a fresh run whose true difference is that MDD, decided by the report itself: the primary decision
(`compare_arms`, `decide_primary`: arm1 − arm0, two-sided at 0.05) or the decision table (`decision_rows`, Holm
over its cells, every seed agreeing). Nothing is held at its truth: the documents' part is measured on each pilot,
and the decision is the report's, not `power_at`'s model of it (shown beside it: `power_at` at the truth, over the
same pilots). The cells: 2 arms x 2 seeds (primary) and 5 x 3 (decision table), each with the documents making
a tenth of Var(D), half and 10/11 (the generator's documents' variances scaled), and at 2 x 2 with half: 50
documents a task, and one task of 150 (a score of one benchmark). A cell costs seconds of CPU a pilot; its row is
rewritten every 10 pilots, and a cell already in `--out` goes on from its last pilot (pilot n draws from its own
seed, the cell's name and n, so a cell's pilots do not depend on how it was split over runs).
`--brute --diagnose` draws no pilots: it adds to each cell in `--out` what its pilots owe to luck in the seeds'
estimate and to measuring the documents' part (`seed_draws_evened`).
"""

from __future__ import annotations

import argparse
import json
import math
import time
import zlib
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
from scipy import optimize, stats

from bench.calibration import (
    ALPHA,
    FAMILIES,
    FROM_RUN_DRAWS,
    ITEMS,
    PRIMARY_PAIR,
    Setting,
    families,
    primary_better,
    run_report,
    simulate,
    standard_error,
    true_noise,
)
from evaluation.decisions import decision_rows
from evaluation.power_measured import measure_family
from evaluation.power_simulation import ScoreNoise, calibrated_mdd, decision_threshold, known_mdd, mdd, powers_at, table_levels

OUT = Path("bench/results/printed_mdd.json")
BRUTE_OUT = Path("bench/results/printed_mdd_brute.json")
SHAPES = ((2, 2), (5, 3))  # arms x seeds
DOCUMENTS = (("seeds dominant (bench.calibration's noise)", None), ("documents half of Var(D)", 1.0),
             ("documents 10x the seeds' part", 10.0))


def truth(seeds: int, documents: float | None) -> ScoreNoise:
    """bench.calibration's true noise, its documents' part (fixed and interaction) scaled to `documents` x the
    seeds' part of Var(D) at `seeds` seeds (None: as it is)."""
    noise = true_noise()
    if documents is None:
        return noise
    scale = documents * sum(noise.seed) / seeds / (noise.fixed + noise.interaction / seeds)
    terms = tuple((f * scale, i * scale, n) for f, i, n in noise.terms)
    return replace(noise, fixed=noise.fixed * scale, interaction=noise.interaction * scale, terms=terms)


def printed_at(noise: ScoreNoise, seeds: int, df: float, alpha: float, points: int, also: tuple[float, ...] = ()):
    """The MDD `calibrated_mdd` prints from a pilot whose seeds' estimate is w x the truth's (on `df` degrees of
    freedom) and whose documents' part is the truth's, as a function of w: exact at `points` estimates spanning the
    estimate's 0.01%-99.99% quantiles (and at `also`), interpolated (log-log) between them."""
    estimates = np.union1d(stats.chi2.ppf(np.linspace(1e-4, 1 - 1e-4, points), df) / df, also)
    printed = [calibrated_mdd(replace(noise, seed=(noise.seed[0] * w, noise.seed[1] * w), seed_df=df), seeds, alpha,
                              FROM_RUN_DRAWS) for w in estimates]
    return lambda w: np.exp(np.interp(np.log(w), np.log(estimates), np.log(printed)))


def power_over_pilots(noise: ScoreNoise, seeds: int, df: float, alpha: float, pilots: int, points: int,
                      printed=None) -> dict:
    """The mean power at the printed MDD over `pilots` random pilots of the truth `noise`, its standard error,
    and the printed MDD over the truth's known-noise MDD (median); `printed`: `printed_at`'s function, if made."""
    at_truth = decision_threshold(noise, seeds, alpha)
    printed = printed or printed_at(noise, seeds, df, alpha, points)
    mdds = printed(np.random.default_rng(7).chisquare(df, pilots) / df)
    power = powers_at(mdds, at_truth)
    return {"power_at_printed_mdd": float(power.mean()), "power_se": float(power.std(ddof=1) / math.sqrt(pilots)),
            "printed_over_true_median": float(np.median(mdds) / known_mdd(at_truth))}


def documents_share(setting: Setting) -> float:
    """The documents' part of Var(D) (fixed, and the interaction over the seeds) in the setting's true noise."""
    noise = true_noise(setting)
    return (noise.fixed + noise.interaction / setting.seeds) / noise.variance(setting.seeds)


def with_documents_share(setting: Setting, share: float) -> Setting:
    """The setting with its documents' variances scaled (`bpb_documents`) until they make `share` of Var(D)."""
    log_scale = optimize.brentq(lambda x: documents_share(replace(setting, bpb_documents=math.exp(x))) - share, -20, 20)
    return replace(setting, bpb_documents=math.exp(log_scale))


@dataclass(frozen=True)
class Cell:
    setting: Setting  # its name is the cell's
    decision: str  # "primary" (arm1 − arm0 alone at 0.05) or "decision table" (every arm against arm0, Holm)
    share: float  # of Var(D) the documents make


def brute_cells() -> tuple[Cell, ...]:
    """The cells `--brute` runs, cheapest first (the 5 x 3 decision table's report is the costliest)."""
    half, cells = 0.5, []
    for arms, seeds, decision in ((2, 2, "primary"), (5, 3, "decision table")):
        for label, share in (("documents a tenth", 0.1), ("documents half", half), ("documents 10/11", 10 / 11)):
            cells.append(Cell(Setting(f"{arms} x {seeds} {decision}, {label} of Var(D)", arms, seeds), decision, share))
        if arms == 2:
            for label, items in (("50 documents a task", (50,) * len(ITEMS)), ("one task of 150 documents", (150,))):
                name = f"2 x 2 primary, {label}, documents half of Var(D)"
                cells.append(Cell(Setting(name, arms, seeds, bpb_items=items), decision, half))
    return tuple(replace(c, setting=with_documents_share(c.setting, c.share)) for c in cells)


def cell_alpha(cell: Cell) -> float:
    """The level the cell's decision is taken at: 0.05 for the primary, the decision table's Bonferroni level (Holm's
    first step) for the table."""
    if cell.decision == "primary":
        return ALPHA
    return table_levels(families(cell.setting), cell.setting.arms)["bpb", "columns", "average"][0]


def brute_pilot(cell: Cell, number: int) -> tuple[float, bool]:
    """One null pilot run, the MDD printed from its measured noise, and whether the report calls arm1 better on a
    fresh run whose true difference is that MDD."""
    setting, primary = cell.setting, cell.decision == "primary"
    rng = np.random.default_rng([zlib.crc32(setting.name.encode()), number])
    pilot, _, _ = simulate(setting, rng)
    measured = measure_family(families(setting)["bpb"], pilot["bpb"])
    printed = mdd(measured.noise(("columns", "average"), PRIMARY_PAIR if primary else None), setting.seeds,
                  cell_alpha(cell), FROM_RUN_DRAWS)
    run, views, _ = simulate(setting, rng, -printed)  # the same stream, on: fresh draws
    if primary:
        return printed, primary_better(setting, run["bpb"])
    row = decision_rows(run_report(setting, run, views))[0]  # arm1 against the reference
    return printed, row["bpb:average"]["result"] == "better"


def brute_row(cell: Cell, pilots: list[tuple[float, bool]], cpu_s: float) -> dict:
    """A cell's power at the printed MDD (the report's decisions) with its Monte Carlo SE, `power_at`'s model of it
    at the truth over the same MDDs, the true MDD and the printed / true ratio (median)."""
    threshold = decision_threshold(true_noise(cell.setting), cell.setting.seeds, cell_alpha(cell))
    truth = known_mdd(threshold)
    printed = np.array([d for d, _ in pilots])
    better = [float(b) for _, b in pilots]
    model = powers_at(printed, threshold).tolist()
    return {"cell": cell.setting.name, "decision": cell.decision, "arms": cell.setting.arms, "seeds": cell.setting.seeds,
            "alpha": cell_alpha(cell), "documents_share": documents_share(cell.setting), "items": list(cell.setting.bpb_items),
            "bpb_documents": cell.setting.bpb_documents, "draws": FROM_RUN_DRAWS, "pilots": len(pilots),
            "power_at_printed_mdd": float(np.mean(better)), "power_se": standard_error(better),
            "model_power": float(np.mean(model)), "model_power_se": standard_error(model),
            "true_mdd": truth, "printed_over_true_median": float(np.median(printed) / truth),
            "cpu_s_per_pilot": cpu_s / len(pilots), "per_pilot": [[d, b] for d, b in pilots]}


def seed_draws_evened(cell: Cell, row: dict, points: int) -> dict:
    """What the cell's pilots owe to luck and to measuring the documents: each pilot's seeds' estimate over the
    truth's (w, chi2(df) / df), its MDD priced again with the documents' part at its truth (`printed_at`), and
    `power_at` there against its mean over the estimate's own spread (4,000 draws, as the default mode). The power
    with the pilots' luck in w taken out: the report's decisions minus that model power, plus its mean (a control
    variate: unbiased whatever the model, since w's distribution is known); what measuring the documents costs: the
    model power at the printed MDD minus that at the documents' truth, pilot by pilot."""
    setting, primary = cell.setting, cell.decision == "primary"
    truth, alpha = true_noise(setting), cell_alpha(cell)
    df = float(setting.seeds - 1 if primary else (setting.arms - 1) * (setting.seeds - 1))
    w = []
    for number in range(row["pilots"]):  # each pilot drawn again from its own seed: its seeds' estimate
        pilot, _, _ = simulate(setting, np.random.default_rng([zlib.crc32(setting.name.encode()), number]))
        measured = measure_family(families(setting)["bpb"], pilot["bpb"])
        w.append(sum(measured.noise(("columns", "average"), PRIMARY_PAIR if primary else None).seed) / sum(truth.seed))
    w = np.array(w)
    printed = printed_at(truth, setting.seeds, df, alpha, points, (w.min(), w.max()))
    threshold = decision_threshold(truth, setting.seeds, alpha)
    expected = power_over_pilots(truth, setting.seeds, df, alpha, 4000, points, printed)
    at_truth = powers_at(printed(w), threshold)
    at_printed = powers_at(np.array([d for d, _ in row["per_pilot"]]), threshold)
    luck = np.array([float(b) for _, b in row["per_pilot"]]) - at_truth
    return {"seed_estimate_mean": float(w.mean()), "model_power_expected": expected["power_at_printed_mdd"],
            "power_seed_draws_evened": float(luck.mean()) + expected["power_at_printed_mdd"],
            "power_seed_draws_evened_se": math.hypot(standard_error(luck), expected["power_se"]),
            "documents_estimate_cost": float((at_printed - at_truth).mean()),
            "documents_estimate_cost_se": standard_error(at_printed - at_truth)}


def diagnose(cells: tuple[Cell, ...], out: Path, points: int) -> None:
    """`seed_draws_evened` for each cell `out` holds, written into its row."""
    rows = {r["cell"]: r for r in json.loads(out.read_text())}
    print(f"{'cell':<72} {'pilots':>6} {'power ± SE':>14} {'w mean':>6} {'evened ± SE':>14} {'documents cost ± SE':>20}")
    for cell in cells:
        r = rows.get(cell.setting.name)
        if r is None:
            continue
        r |= seed_draws_evened(cell, r, points)
        out.write_text(json.dumps(list(rows.values()), indent=1) + "\n")
        print(f"{r['cell']:<72} {r['pilots']:>6} {r['power_at_printed_mdd']:>6.3f} ± {r['power_se']:.3f} "
              f"{r['seed_estimate_mean']:>6.3f} {r['power_seed_draws_evened']:>6.3f} ± {r['power_seed_draws_evened_se']:.3f} "
              f"{r['documents_estimate_cost']:>+10.4f} ± {r['documents_estimate_cost_se']:.4f}", flush=True)


def run_brute(cells: tuple[Cell, ...], pilots: int, out: Path) -> list[dict]:
    """Each cell's first `pilots` pilots, going on from those `out` holds; `out` rewritten every 10 pilots."""
    rows = {r["cell"]: r for r in (json.loads(out.read_text()) if out.exists() else [])}
    print(f"{'cell':<72} {'pilots':>6} {'power ± SE':>14} {'power_at ± SE':>14} {'true MDD':>9} {'printed/true':>12}")
    for cell in cells:
        old = rows.get(cell.setting.name)
        done = [(d, b) for d, b in old["per_pilot"]] if old and old["draws"] == FROM_RUN_DRAWS else []
        cpu = old["cpu_s_per_pilot"] * len(done) if done else 0.0
        for number in range(len(done), pilots):
            start = time.process_time()
            done.append(brute_pilot(cell, number))
            cpu += time.process_time() - start
            if len(done) % 10 == 0 or len(done) == pilots:
                rows[cell.setting.name] = brute_row(cell, done, cpu)
                out.parent.mkdir(parents=True, exist_ok=True)
                out.write_text(json.dumps(list(rows.values()), indent=1) + "\n")
        r = rows.get(cell.setting.name) or brute_row(cell, done, cpu)
        print(f"{r['cell']:<72} {r['pilots']:>6} {r['power_at_printed_mdd']:>6.3f} ± {r['power_se'] or math.nan:.3f} "
              f"{r['model_power']:>6.3f} ± {r['model_power_se'] or math.nan:.3f} {r['true_mdd']:>9.4f} "
              f"{r['printed_over_true_median']:>12.2f}", flush=True)
    return list(rows.values())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.printed_mdd", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pilots", type=int, help="pilots drawn a setting (default 4,000; --brute: pilots a cell, 250)")
    parser.add_argument("--points", type=int, default=15, help="estimates the printed MDD is computed at exactly (default 15)")
    parser.add_argument("--brute", action="store_true", help="simulated pilot runs decided by the report itself (see above)")
    parser.add_argument("--cells", help="--brute: only the cells whose name contains this text")
    parser.add_argument("--diagnose", action="store_true",
                        help="--brute: no pilots; each cell in --out with its pilots' luck in the seeds' estimate taken "
                             "out, and what measuring the documents costs (see seed_draws_evened)")
    parser.add_argument("--out", type=Path, help=f"default {OUT}; --brute: {BRUTE_OUT} (its cells go on from their last pilot)")
    args = parser.parse_args(argv)
    if args.brute:
        cells = tuple(c for c in brute_cells() if not args.cells or args.cells in c.setting.name)
        out = args.out or BRUTE_OUT
        if args.diagnose:
            diagnose(cells, out, args.points)
        else:
            run_brute(cells, args.pilots or 250, out)
        print(f"wrote {out}")
        return 0
    args.pilots, args.out = args.pilots or 4000, args.out or OUT
    rows = []
    print(f"{'arms x seeds':<13} {'df':>3}  {'documents':<45} {'power ± SE':>15}  printed / true MDD (median)")
    for arms, seeds in SHAPES:
        df = float((arms - 1) * (seeds - 1))
        alpha = table_levels(FAMILIES, arms)["bpb", "columns", "average"][0]
        for name, documents in DOCUMENTS:
            start = time.time()
            row = {"arms": arms, "seeds": seeds, "seed_df": df, "alpha": alpha, "documents": name, "pilots": args.pilots,
                   **power_over_pilots(truth(seeds, documents), seeds, df, alpha, args.pilots, args.points),
                   "seconds": round(time.time() - start)}
            rows.append(row)
            print(f"{arms} x {seeds:<9} {df:>3.0f}  {name:<45} {row['power_at_printed_mdd']:.3f} ± {row['power_se']:.3f}"
                  f"  {row['printed_over_true_median']:.2f}", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(rows, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
