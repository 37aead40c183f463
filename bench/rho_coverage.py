"""Coverage of the primary pair's item-correlation interval against the correlation the generator plants.

    python -m bench.rho_coverage [--pilots 300] [--draws 200] [--out bench/results/rho_coverage.json]

The pilots are the first `--pilots` replicates of bench.calibration's "MDD printed from the run" settings (the
same seeds, so the same runs as its `rho_coverage` rows), without the rest of the report's procedure: for each,
`pair_correlation` of arm 1 and the reference on the bits-per-byte average with `--draws` bootstrap draws (the
bench's RHO_DRAWS by default). Prints per setting how often the 95% BCa interval holds the planted rho, with its
Monte Carlo standard error, how often it misses on each side, and the estimate's mean and SD; writes JSON.
"""

from __future__ import annotations

import argparse
import json
import zlib
from pathlib import Path

import numpy as np

from bench.calibration import FAMILIES, RHO_DRAWS, SETTINGS, planted_rho, simulate, standard_error
from evaluation.power_measured import pair_correlation

OUT = Path("bench/results/rho_coverage.json")


def coverage(setting, pilots: int, draws: int) -> dict:
    """The interval's coverage of the planted rho over the setting's first `pilots` replicates."""
    planted, weights = planted_rho(), FAMILIES["bpb"].task_weights("average")
    estimates, below, above = [], [], []
    for number in range(pilots):
        matrices, _, _ = simulate(setting, np.random.default_rng([zlib.crc32(setting.name.encode()), number]))
        arms = list(matrices["accuracy"])
        rho = pair_correlation(weights, matrices["bpb"][arms[1]], matrices["bpb"][arms[0]], draws=draws, seed=number)
        estimates.append(rho["rho"])
        below.append(rho["high"] < planted)
        above.append(rho["low"] > planted)
    covered = [not (b or a) for b, a in zip(below, above, strict=True)]
    return {"setting": setting.name, "pilots": pilots, "draws": draws, "planted": planted,
            "coverage": float(np.mean(covered)), "coverage_se": standard_error(covered),
            "interval_below_planted": float(np.mean(below)), "interval_above_planted": float(np.mean(above)),
            "estimate_mean": float(np.mean(estimates)), "estimate_sd": float(np.std(estimates, ddof=1))}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.rho_coverage", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pilots", type=int, default=300, help="replicates a setting (default 300)")
    parser.add_argument("--draws", type=int, default=RHO_DRAWS, help=f"bootstrap draws an interval (default {RHO_DRAWS})")
    parser.add_argument("--settings", help="only the settings whose name contains this text")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    rows = []
    for setting in SETTINGS:
        if setting.from_run and (not args.settings or args.settings in setting.name):
            row = coverage(setting, args.pilots, args.draws)
            rows.append(row)
            print(f"{row['setting']:<45} {row['pilots']:>5} pilots, {row['draws']} draws: coverage {row['coverage']:.3f} "
                  f"± {row['coverage_se']:.3f} (planted {row['planted']:.3f}; interval below it "
                  f"{row['interval_below_planted']:.3f}, above it {row['interval_above_planted']:.3f}; estimate "
                  f"{row['estimate_mean']:.4f}, SD {row['estimate_sd']:.4f})", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(rows, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
