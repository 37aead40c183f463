"""The README's GPU tables, made from the tracked records of `bench/gpu_check.sh` (bench/measured/).

    python -m bench.gpu_tables                       print the tables
    python -m bench.gpu_tables --update README.md    write them between the README's markers

Every figure of a table comes from one record: the rows `bench/gpu_check.sh` measured and the
GPU, driver, versions, commit and command they were measured with. tests/test_gpu_tables.py checks
that the README's tables are these (and that any other GPU table in it is marked as history).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from bench.gpu_check import MEASURED

BEGIN = "<!-- gpu tables: made by python -m bench.gpu_tables --update README.md from bench/measured/; do not edit -->"
END = "<!-- gpu tables: end -->"
# a GPU table with no record behind it, kept as the history of what was measured before
HISTORY = "<!-- gpu table: history, no record in bench/measured/ (not re-measured) -->"
NONE_YET = ("No record yet: nothing in `bench/measured/` was measured with the code as it is now (the step timed "
            "until the device has finished it, MFU with causal-attention FLOPs). `bash bench/gpu_check.sh` on one "
            "GPU writes one.")
HEADER = ("| run | layer spec | attention (kernel) | micro-batch | tokens/s per GPU | step s | MFU, spec | "
          "MFU, measured peak | MFU, spec, full attention | peak GB |")


def records(folder: Path = MEASURED) -> list[dict]:
    return [json.loads(p.read_text()) | {"file": f"bench/measured/{p.name}"} for p in sorted(folder.glob("*.json"))]


def percent(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def row_line(row: dict) -> str:
    if row.get("error"):
        return f"| {row['run']} | — | — | — | {row['error']} | | | | | |"
    kernel = f"{row['attention']} ({row['sdpa_kernel']})" if row.get("sdpa_kernel") else row["attention"]
    memory = "-" if row.get("peak_memory_gb") is None else f"{row['peak_memory_gb']:.1f}"
    return (f"| {row['run']} | {row['layer_spec']} | {kernel} | {row['micro_batch']} | "
            f"{row['tokens_per_s_per_device']:,.0f} | {row['step_s']:.2f} | {percent(row['mfu_spec'])} | "
            f"{percent(row['mfu_measured'])} | {percent(row.get('mfu_spec_full_attention'))} | {memory} |")


def short_commit(commit: str) -> str:
    """A record's commit as the table names it: 7 hex digits, and `-dirty` where the measured tree
    had uncommitted changes (configs.provenance.git_commit), which a short hash alone would hide."""
    head, dirty, _ = commit.partition("-dirty")
    return head[:7] + ("-dirty (uncommitted changes)" if dirty else "")


def table(record: dict) -> str:
    """One record: where, with what and how it was measured, its rows, and what they say."""
    v = record["versions"]
    software = ", ".join(f"{name} {v[name]}" for name in ("torch", "cuda", "cudnn", "transformers", "megatron-core",
                                                          "transformer-engine") if v.get(name))
    ok = {r["run"]: r for r in record["rows"] if not r.get("error")}
    flops = next((r for r in ok.values() if r.get("flops_per_token")), None)
    gpu = record.get("gpu") or record["device"]
    where = (f"one {gpu} ({record['gpu_memory_mib']:,} MiB, driver {record['driver']})" if record.get("driver")
             else f"{gpu}")
    spec = record.get("peak_flops_spec")
    intro = (f"`{record['command']}` on {where}; {software}; commit {short_commit(record['commit'])}, {record['date']} "
             f"(`{record['file']}`): the `{record['model']}` shape")
    if flops:
        intro += (f" ({flops['parameters']:,} parameters, {flops['flops_per_token']:.3g} training FLOPs per token with "
                  f"causal attention, {flops['flops_per_token_full_attention']:.3g} with the full score matrix)")
    intro += (f", global batch {record['global_batch']}, {record['steps']} steps of random tokens, the median step after "
              "the first 3, each timed until the device has finished it. MFU against ")
    if spec:
        intro += f"the spec sheet's dense bf16 peak ({spec / 1e12:,.0f} TFLOP/s) and "
    intro += (f"a {record['matmul']['size']}³ {record['matmul']['dtype']} matrix product measured on the same device "
              f"at the start ({record['peak_flops_measured'] / 1e12:,.3g} TFLOP/s):")
    lines = [intro]
    lines += ["", HEADER, "|---|---|---|---|---:|---:|---:|---:|---:|---:|", *map(row_line, record["rows"])]
    said = []
    if goal := record.get("goal"):
        said.append(f"The goal ({goal['mfu_spec']:.0%} of the spec sheet, {goal['tokens_per_s_per_device']:,.0f} "
                    f"tokens/s per GPU) is {'met' if goal['met'] else 'not met'} at {ok['megatron sdpa']['mfu_spec']:.1%}.")
    said += [f"megatron sdpa / {peer}: {ratio:.2f}× tokens/s." for peer, ratio in record.get("speedup_over_peers", {}).items()]
    profile = ok.get("megatron sdpa", {}).get("profile")
    if profile:
        said.append("One step of megatron sdpa, ms: " + ", ".join(
            f"{k.removesuffix('_ms')} {v:,.1f}" for k, v in profile.items() if v is not None) + ".")
    return "\n".join(lines + ([""] + [" ".join(said)] if said else []))


def block(found: list[dict]) -> str:
    return "\n".join([BEGIN, "", *("\n\n".join(map(table, found)) if found else NONE_YET).splitlines(), "", END])


def unbacked_tables(text: str) -> list[int]:
    """Line numbers of GPU tables (a header row with `tokens/s per GPU`) neither inside the block
    made from the records nor right after a HISTORY marker (the last marker before them, one a table)."""
    unbacked, inside, marker = [], False, None
    lines = text.splitlines()
    for number, (line, below) in enumerate(zip(lines, [*lines[1:], ""], strict=True), 1):
        if line.startswith("<!--"):
            inside = line == BEGIN or (inside and line != END)
            marker = line
        elif line.startswith("|") and "tokens/s per GPU" in line and below.startswith("|---"):
            if not inside and marker != HISTORY:
                unbacked.append(number)
            marker = None
    return unbacked


def update(readme: Path, found: list[dict]) -> bool:
    """Replace the README's block between the markers; whether it changed."""
    text = readme.read_text()
    if BEGIN not in text or END not in text:
        raise SystemExit(f"{readme}: no block between {BEGIN!r} and {END!r} to write the tables into")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    new = head + block(found) + tail
    readme.write_text(new)
    return new != text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.gpu_tables", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--update", type=Path, metavar="README", help="write the tables into this file's block")
    args = parser.parse_args(argv)
    found = records()
    if args.update:
        changed = update(args.update, found)
        if unbacked := unbacked_tables(args.update.read_text()):
            raise SystemExit(f"{args.update}: GPU tables at lines {unbacked} have no record in bench/measured/; "
                             f"make them from one, or mark them as history ({HISTORY})")
        print(f"{args.update}: {len(found)} GPU table(s), {'rewritten' if changed else 'unchanged'}")
    else:
        print(block(found))
    return 0


if __name__ == "__main__":
    sys.exit(main())
