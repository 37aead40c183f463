"""Power at the MDD printed from a run's measured noise, over pilots drawn at random, by how much of Var(D) the
test documents make.

    python -m bench.printed_mdd [--pilots N] [--points N] [--out bench/results/printed_mdd.json]

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
"""

from __future__ import annotations

import argparse
import json
import math
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
from scipy import stats

from bench.calibration import FAMILIES, FROM_RUN_DRAWS, true_noise
from evaluation.power_simulation import ScoreNoise, calibrated_mdd, decision_threshold, known_mdd, powers_at, table_levels

OUT = Path("bench/results/printed_mdd.json")
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


def power_over_pilots(noise: ScoreNoise, seeds: int, df: float, alpha: float, pilots: int, points: int) -> dict:
    """The mean power at the printed MDD over `pilots` random pilots of the truth `noise`, its standard error,
    and the printed MDD over the truth's known-noise MDD (median)."""
    at_truth = decision_threshold(noise, seeds, alpha)
    estimates = stats.chi2.ppf(np.linspace(1e-4, 1 - 1e-4, points), df) / df
    printed = [calibrated_mdd(replace(noise, seed=(noise.seed[0] * w, noise.seed[1] * w), seed_df=df), seeds, alpha,
                              FROM_RUN_DRAWS) for w in estimates]
    drawn = np.random.default_rng(7).chisquare(df, pilots) / df
    mdds = np.exp(np.interp(np.log(drawn), np.log(estimates), np.log(printed)))
    power = powers_at(mdds, at_truth)
    return {"power_at_printed_mdd": float(power.mean()), "power_se": float(power.std(ddof=1) / math.sqrt(pilots)),
            "printed_over_true_median": float(np.median(mdds) / known_mdd(at_truth))}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.printed_mdd", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pilots", type=int, default=4000, help="pilots drawn a setting (default 4,000)")
    parser.add_argument("--points", type=int, default=15, help="estimates the printed MDD is computed at exactly (default 15)")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
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
