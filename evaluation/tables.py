"""The report's CSV files: `summary.csv` (one row per arm, every family's columns) and `tasks.csv` (one
row per scored unit, family and arm, with the difference to the reference arm)."""

from __future__ import annotations

import csv
import statistics
from pathlib import Path

from evaluation.tasks.suite import COLUMNS, Suite


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
