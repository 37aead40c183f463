"""Coverage of the primary pair's item-correlation interval against the correlation the generator plants.

    python -m bench.rho_coverage [--pilots 300] [--draws 2000] [--planted RHO ...] [--out bench/results/rho_coverage.json]

The pilots are the first `--pilots` replicates of bench.calibration's "MDD printed from the run" settings (the
same seeds, so the same runs as its `rho_coverage` rows), without the rest of the report's procedure: for each,
`pair_correlation` of arm 1 and the reference on the bits-per-byte average with `--draws` bootstrap draws (the
report's by default). `--planted` reruns them with the documents' shared part resized so that the generator plants
each rho given (the generator's own: 0.947, next to clip_rho's 0.95). Prints per setting and planted rho how often
the 95% BCa interval holds the planted rho, with its Monte Carlo standard error, how often it misses on each side,
and the estimate before the clip: its mean, its bias in Monte Carlo standard errors, and its SD; writes JSON.
"""

from __future__ import annotations

import argparse
import json
import math
import zlib
from dataclasses import replace
from pathlib import Path

import numpy as np

from bench.calibration import FAMILIES, SETTINGS, Setting, document_sd_for, planted_rho, simulate, standard_error
from evaluation.power_measured import RHO_DRAWS, pair_correlation

OUT = Path("bench/results/rho_coverage.json")


def coverage(setting: Setting, pilots: int, draws: int) -> dict:
    """The interval's coverage of the planted rho over the setting's first `pilots` replicates."""
    planted, weights = planted_rho(setting.document_sd), FAMILIES["bpb"].task_weights("average")
    estimates, below, above = [], [], []
    for number in range(pilots):
        matrices, _, _ = simulate(setting, np.random.default_rng([zlib.crc32(setting.name.encode()), number]))
        arms = list(matrices["accuracy"])
        rho = pair_correlation(weights, matrices["bpb"][arms[1]], matrices["bpb"][arms[0]], draws=draws, seed=number)
        estimates.append(rho["unclipped"])
        below.append(rho["high"] < planted)
        above.append(rho["low"] > planted)
    covered = [not (b or a) for b, a in zip(below, above, strict=True)]
    sd = float(np.std(estimates, ddof=1))
    return {"setting": setting.name, "pilots": pilots, "draws": draws, "planted": planted,
            "coverage": float(np.mean(covered)), "coverage_se": standard_error(covered),
            "interval_below_planted": float(np.mean(below)), "interval_above_planted": float(np.mean(above)),
            "estimate_mean": float(np.mean(estimates)), "estimate_sd": sd,
            "bias_in_se": float((np.mean(estimates) - planted) / (sd / math.sqrt(pilots)))}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.rho_coverage", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pilots", type=int, default=300, help="replicates a setting (default 300)")
    parser.add_argument("--draws", type=int, default=RHO_DRAWS,
                        help=f"bootstrap draws an interval (default {RHO_DRAWS}, the report's)")
    parser.add_argument("--planted", type=float, nargs="+",
                        help=f"the rho(s) the generator plants, each in (0, 0.95) (default: its own, {planted_rho():.3f})")
    parser.add_argument("--settings", help="only the settings whose name contains this text")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    if args.planted and not all(0 < rho < 0.95 for rho in args.planted):
        parser.error(f"--planted {args.planted}: each planted rho must lie in (0, 0.95), inside clip_rho's range")
    rows = []
    for setting in SETTINGS:
        if not setting.from_run or (args.settings and args.settings not in setting.name):
            continue
        resized = [replace(setting, document_sd=document_sd_for(rho)) for rho in args.planted or []]
        for generator in resized or [setting]:
            row = coverage(generator, args.pilots, args.draws)
            rows.append(row)
            print(f"{row['setting']:<45} {row['pilots']:>5} pilots, {row['draws']} draws, planted {row['planted']:.3f}: "
                  f"coverage {row['coverage']:.3f} ± {row['coverage_se']:.3f} (interval below it "
                  f"{row['interval_below_planted']:.3f}, above it {row['interval_above_planted']:.3f}; estimate "
                  f"{row['estimate_mean']:.4f}, bias {row['bias_in_se']:+.1f} SE, SD {row['estimate_sd']:.4f})", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(rows, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
