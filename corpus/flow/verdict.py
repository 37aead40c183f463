"""The plan's verdict (steps 3 and 4 of corpus/flow/plan.py): tokens per input file after post-processing,
its t-interval over the pilot files, the input files each arm needs to reach the token budget, and whether
the configured inputs are projected to fall short (and by how many files)."""

from __future__ import annotations

import math
import statistics


def yield_interval(tokens: list[int], confidence: float) -> dict:
    """Mean tokens per input file and its t-interval over the pilot files."""
    from scipy import stats

    n, mean = len(tokens), statistics.fmean(tokens)
    half = stats.t.ppf(0.5 + confidence / 2, n - 1) * statistics.stdev(tokens) / math.sqrt(n) if n > 1 else mean
    return {"mean": mean, "low": max(0.0, mean - half), "high": mean + half, "files": n}


def files_needed(budget: int, per_file: float) -> int | None:
    return math.ceil(budget / per_file) if per_file > 0 else None


def verdict(yields: dict[str, dict], input_files: int, budget: int, snapshots: int | None = None) -> dict:
    """Whether every arm's configured inputs reach the budget at the interval's lower bound."""
    arms = {}
    for arm, y in yields.items():
        arms[arm] = {"projected_tokens": {k: input_files * y[k] for k in ("low", "mean", "high")},
                     "files_needed": {"at_mean": files_needed(budget, y["mean"]), "at_low": files_needed(budget, y["low"])}}
    need = {arm: a["files_needed"]["at_low"] for arm, a in arms.items()}
    binding = max(need, key=lambda arm: math.inf if need[arm] is None else need[arm])
    files = None if None in need.values() else max(need.values())
    out = {"input_files": input_files, "budget": budget, "arms": arms, "binding_arm": binding,
           "files_needed": files, "short": files is None or files > input_files}
    if snapshots:
        out["files_needed_per_snapshot"] = None if files is None else math.ceil(files / snapshots)
    return out


def verdict_message(v: dict) -> str:
    if not v["short"]:
        return (f"the {v['input_files']:,} input files are projected to reach {v['budget']:,} tokens per arm "
                f"(binding arm: {v['binding_arm']}, {v['files_needed']:,} files at the interval's lower bound)")
    low = v["arms"][v["binding_arm"]]["projected_tokens"]["low"]
    need = "no number of files (its pilot kept no tokens)" if v["files_needed"] is None else f"{v['files_needed']:,} files"
    per_snapshot = (f" ({v['files_needed_per_snapshot']:,} per snapshot)"
                    if v.get("files_needed_per_snapshot") else "")
    return (f"{v['binding_arm']}: {v['input_files']:,} input files are projected to give as little as {low:,.0f} tokens, "
            f"short of dataset.tokens_per_arm = {v['budget']:,}; it needs {need}{per_snapshot}. "
            f"Raise inputs (common_crawl.files_per_snapshot or snapshots) or lower the budget")
