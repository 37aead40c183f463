"""The GPU tables of docs/reference/gpu-figures.md, made from the tracked records in bench/measured/:
the training bench's (`bench/gpu_check.sh`: gpu_check-<gpu>-<model>.json) and the labeler's
torch-only estimate (`python -m bench.labeler_torch measure`: labeler_torch-<gpu>.json), both
written by `bench/device_check.sh`.

    python -m bench.gpu_tables [--records DIR]                     print the tables
    python -m bench.gpu_tables --update docs/reference/gpu-figures.md   write them between its markers

Every figure of a table comes from one record: the rows measured and the GPU, driver, versions,
commit and command they were measured with. tests/test_gpu_tables.py checks that the page's tables
are these (and that any other GPU table in it is marked as history).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from bench.gpu_check import MEASURED

PAGE = Path(__file__).resolve().parents[1] / "docs" / "reference" / "gpu-figures.md"
BEGIN = ("<!-- gpu tables: made by python -m bench.gpu_tables --update docs/reference/gpu-figures.md from "
         "bench/measured/; do not edit -->")
END = "<!-- gpu tables: end -->"
# a GPU table with no record behind it, kept as the history of what was measured before
HISTORY = "<!-- gpu table: history, no record in bench/measured/ (not re-measured) -->"
NONE_YET = ("Still to be measured: no record in `bench/measured/` was measured with the code as it is now (the step "
            "timed until the device has finished it, MFU with causal-attention FLOPs), so the training figures are to "
            "be re-measured on a GPU. `bash bench/device_check.sh` (or `bash bench/gpu_check.sh`) on one GPU writes "
            "the record.")
LABELER_NONE_YET = ("Still to be measured: no `bench/measured/labeler_torch-*.json`, so the labeler's GPU rate is not "
                    "known here (without a GPU preflight, the plan prices it at the paper's A100 rate). "
                    "`bash bench/device_check.sh` on one GPU writes the record.")
PAGES_NONE_YET = ("No `bench/measured/labeler_pages-cpu.json` yet: the estimate's input (the real pages' prompt lengths "
                  "and vLLM's per-page counts, measured on CPU by `python -m bench.labeler_torch pages`) is still to be "
                  "made, before the GPU run.")
LABELER_HEADER = ("| architecture | prefill tokens/s | decode batch B × KV length L | decode step ms | "
                  "verification step ms | KV cache a page GiB | pages/s plain | pages/s drafted | "
                  "bound plain | bound drafted |")
LABELER_RULE = "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
LABELER_ARCHITECTURES = ("hunyuan-0.5b", "qwen3-0.6b")
HEADER = ("| run | layer spec | attention (kernel) | micro-batch | tokens/s per GPU | step s | MFU, spec | "
          "MFU, measured peak | MFU, spec, full attention | peak GB |")


def records(folder: Path = MEASURED, kind: str = "gpu_check") -> list[dict]:
    """The records of one kind (`gpu_check` or `labeler_torch`), each with the file it was read from."""
    return [json.loads(p.read_text()) | {"file": f"bench/measured/{p.name}"} for p in sorted(folder.glob(f"{kind}-*.json"))]


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
    ok = {r["run"]: r for r in record["rows"] if not r.get("error")}
    flops = next((r for r in ok.values() if r.get("flops_per_token")), None)
    spec = record.get("peak_flops_spec")
    intro = (f"`{record['command']}` on {where(record)}; {software(record)}; commit {short_commit(record['commit'])}, "
             f"{record['date']} "
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


def software(record: dict) -> str:
    v = record["versions"]
    return ", ".join(f"{name} {v[name]}" for name in ("torch", "cuda", "cudnn", "transformers", "megatron-core",
                                                      "transformer-engine") if v.get(name))


def where(record: dict) -> str:
    gpu = record.get("gpu") or record["device"]
    return f"one {gpu} ({record['gpu_memory_mib']:,} MiB, driver {record['driver']})" if record.get("driver") else gpu


def counts_line(pages: dict) -> str:
    """What the labeler's estimate combines with its GPU steps: the CPU-measured per-page counts."""
    c, lengths = pages["counts"], sorted(pages["prompt_tokens"])
    return (f"The estimate's per-page counts (`bench/measured/{pages['file']}`, written by `{pages['command']}`): "
            f"the prompts of {pages['pages']} real pages ({', '.join(pages['sets'])}), median "
            f"{lengths[len(lengths) // 2]:,} tokens ({pages['tokenizer']}); and from `{c['source']}` (vLLM {c['vllm']} on "
            f"CPU, the `{c['arch']}` architecture, {c['pages_labelled']} of {c['pages_sent']} pages within its "
            f"{c['context']:,} tokens), {c['answer_tokens_per_page']:,.0f} answer tokens a page and "
            f"{c['passes_per_answer_plain']:,.1f} forward passes per answer plain, {c['passes_per_answer_drafted']:,.1f} "
            f"with the block classifier's draft at {c['draft_agreement']:.1%} block agreement ({c['draft_tokens']} "
            f"tokens a verification step; {c['pages_differing_from_plain']} pages labelled differently from plain "
            "decoding). Forward passes are counts, not speeds: the same on any hardware.")


def labeler_row(arch: dict) -> str:
    if "error" in arch:
        return f"| {arch['arch']} | {arch['error']} | | | | | | | | |"
    d, v, e, r = arch["decode"], arch["verify"], arch["estimate"], arch["roofline"]
    return (f"| {arch['arch']} | {arch['prefill']['tokens_per_s']:,.0f} | {d['batch']} × {d['kv_length']:,} | "
            f"{d['seconds'] * 1e3:,.2f} | {v['seconds'] * 1e3:,.2f} ({v['positions']} positions) | "
            f"{arch['kv_gib_per_page']:.2f} | **{e['plain_pages_per_s']:,.2f}** | **{e['drafted_pages_per_s']:,.2f}** | "
            f"{r['plain']['pages_per_s']:,.1f} ({r['plain']['bound']}) | {r['drafted']['pages_per_s']:,.1f} "
            f"({r['drafted']['bound']}) |")


def labeler_rows(measured: list[dict]) -> list[str]:
    """The measured architectures, then the released ones not in the record."""
    done = {a["arch"] for a in measured}
    missing = [{"arch": a, "error": "not yet measured"} for a in LABELER_ARCHITECTURES if a not in done]
    return [LABELER_HEADER, LABELER_RULE, *map(labeler_row, [*measured, *missing])]


def steps_compiled(architectures: list[dict]) -> str:
    """How the decode and verification steps ran: compiled, eager, or compiled but for the steps that
    fell back to eager (each architecture's steps compile on their own)."""
    steps = [(a["arch"], name, a[name]) for a in architectures if "decode" in a for name in ("decode", "verify")]
    eager = [f"{arch}'s {name} step ran eager ({step['compile_error'] or 'not compiled'})"
             for arch, name, step in steps if not step["compiled"]]
    if not steps:
        return "-"
    if len(eager) == len(steps):
        return "eager"
    return "under torch.compile with CUDA graphs" + (f" (but {'; '.join(eager)})" if eager else "")


def labeler_table(record: dict) -> str:
    """One labeler record: a torch-only estimate, where and how it was measured, and its rows."""
    peaks = record["peaks"]
    how = steps_compiled(record["architectures"])
    intro = (f"`{record['command']}` on {where(record)}; {software(record)}; commit {short_commit(record['commit'])}, "
             f"{record['date']} (`{record['file']}`): **a torch-only estimate (no vLLM)**. Random weights of each "
             f"architecture, SDPA attention, a static KV cache, the steps {how}. Roofline peaks: "
             f"{peaks['flops'] / 1e12:,.4g} TFLOP/s ({peaks['flops_source']}), {peaks['bandwidth'] / 1e9:,.4g} GB/s "
             f"({peaks['bandwidth_source']}):")
    return "\n".join([intro, "", *labeler_rows(record["architectures"])])


def labeler_pending() -> str:
    return "\n".join([LABELER_NONE_YET, "", *labeler_rows([])])


def block(training: list[dict], labeler: list[dict], pages: dict | None) -> str:
    """The page's generated part: the training tables, then the labeler's estimate."""
    parts = ["### Training speed", "\n\n".join(map(table, training)) if training else NONE_YET,
             "### The labeler: a torch-only estimate (no vLLM)"]
    parts += [counts_line(pages) if pages else PAGES_NONE_YET]
    parts += ["\n\n".join(map(labeler_table, labeler)) if labeler else labeler_pending()]
    return "\n".join([BEGIN, "", *"\n\n".join(parts).splitlines(), "", END])


def labeler_pages(folder: Path = MEASURED) -> dict | None:
    """The labeler estimate's tracked input (bench.labeler_torch pages), where there is one."""
    path = folder / "labeler_pages-cpu.json"
    return json.loads(path.read_text()) | {"file": path.name} if path.is_file() else None


def generated(folder: Path = MEASURED) -> str:
    return block(records(folder), records(folder, "labeler_torch"), labeler_pages(folder))


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


def update(page: Path, text_of_block: str) -> bool:
    """Replace the page's block between the markers; whether it changed."""
    text = page.read_text()
    if BEGIN not in text or END not in text:
        raise SystemExit(f"{page}: no block between {BEGIN!r} and {END!r} to write the tables into")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    new = head + text_of_block + tail
    page.write_text(new)
    return new != text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.gpu_tables", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--update", type=Path, nargs="?", const=PAGE, metavar="PAGE",
                        help=f"write the tables into this file's block (default: {PAGE.relative_to(PAGE.parents[2])})")
    parser.add_argument("--records", type=Path, default=MEASURED, help="the folder of records (default: bench/measured)")
    args = parser.parse_args(argv)
    text = generated(args.records)
    if args.update:
        changed = update(args.update, text)
        if unbacked := unbacked_tables(args.update.read_text()):
            raise SystemExit(f"{args.update}: GPU tables at lines {unbacked} have no record in bench/measured/; "
                             f"make them from one, or mark them as history ({HISTORY})")
        print(f"{args.update}: {'rewritten' if changed else 'unchanged'}")
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
