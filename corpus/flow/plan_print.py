"""How `python -m corpus.flow.plan` prints a plan: the pilot, the rates, the yield and verdict, the costs per
stage, the model ladder's rungs and the storage footprint (rich tables)."""

from __future__ import annotations

from corpus.extractors.base import versions_text
from corpus.flow.fit import what_does_not_fit
from corpus.flow.verdict import verdict_message


def _hours(h: float) -> str:
    return "-" if not h else f"{h:,.1f}" if h >= 0.1 else f"{h * 3600:,.0f} s"


def _bytes(b: int) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB", "PB"):
        if b < 1000 or unit == "PB":
            return f"{b:,.0f} {unit}" if unit == "B" else f"{b:,.1f} {unit}"
        b /= 1000
    return ""


def print_plan(plan: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(width=130)
    y = Table(title=f"Yield: tokens per input file after post-processing ({plan['confidence']:.0%} interval over "
                    f"{len(plan['pilot']['files'])} pilot files)")
    for col in ("arm", "tokens/file", "interval", "projected tokens (low … high)", "files needed (mean / low)", "source"):
        y.add_column(col, justify="left" if col in ("arm", "source") else "right")
    for arm, yf in plan["yield_per_file"].items():
        a = plan["verdict"]["arms"][arm]
        t, f = a["projected_tokens"], a["files_needed"]
        y.add_row(arm, f"{yf['mean']:,.0f}", f"{yf['low']:,.0f} … {yf['high']:,.0f}", f"{t['low']:,.0f} … {t['high']:,.0f}",
                  f"{f['at_mean'] or '∞'} / {f['at_low'] or '∞'}",
                  f"as {yf['assumed_as']} (not piloted)" if "assumed_as" in yf else "pilot")
    console.print(y)
    rt = Table(title="Rates")
    for col in ("rate", "value", "source"):
        rt.add_column(col)
    for arm, entry in plan["rates"]["arms"].items():
        versions = versions_text(plan["rates"]["extractor_versions"][arm])
        for key, (value, source) in entry.items():
            rt.add_row(f"{arm}{f' ({versions})' if versions else ''}: {key}", f"{value:,.2f}", source)
    for rung, (value, source) in plan["rates"].get("training_tokens_per_gpu_s", {}).items():
        rt.add_row(f"training_tokens_per_gpu_s ({rung})", f"{value:,.2f}", source)
    if "evaluation_gpu_hours_per_checkpoint" in plan["rates"]:
        value, source = plan["rates"]["evaluation_gpu_hours_per_checkpoint"]
        rt.add_row("evaluation_gpu_hours_per_checkpoint", f"{value:,.2f}", source)
    console.print(rt)
    c = Table(title=f"Cost of the configured run ({plan['verdict']['input_files']:,} input files)")
    for col in ("stage", "arm", "CPU-hours", "GPU-hours", "wall hours", "storage", "note"):
        c.add_column(col, justify="right" if col not in ("stage", "arm", "note") else "left")
    for s in plan["costs"]["stages"]:
        c.add_row(s["stage"], s["arm"], _hours(s["cpu_hours"]), _hours(s["gpu_hours"]), _hours(s["wall_hours"]),
                  _bytes(s["bytes"]), s["note"])
    t = plan["costs"]["totals"]
    c.add_row("total", "", _hours(t["cpu_hours"]), _hours(t["gpu_hours"]), "", _bytes(t["bytes"]), "")
    console.print(c)
    print_ladder(console, plan["costs"].get("rungs", {}))
    g = Table(title="Stages that see a whole arm: per task, projected (memory: bench.global_stages per document; "
                    "time: the pilot's CPU seconds per document) against the configured resources")
    for col in ("stage", "tasks", "documents per task", "memory", "hours", "configured", "fits"):
        g.add_column(col, justify="left" if col in ("stage", "documents per task") else "right")
    for n in plan["global_stages"]:
        g.add_row(n["stage"], f"{n['tasks']:,}", f"{n['units_per_task']:,.0f} {n['unit']}", f"{n['memory_gb']:,.1f} GB",
                  _hours(n["hours"]), f"{n['configured_gb']} GB, {n['configured_hours']:g} h", "yes" if n["fits"] else "NO")
    console.print(g)
    for warning in what_does_not_fit(plan["global_stages"]):
        console.print(f"WARNING: {warning}")
    print_footprint(console, plan["footprint"])
    for arm, line in plan["labelers"].items():
        tokens, source = line["prompt_tokens_per_page"]
        gpu = (f"; at {line['prompt_tokens_per_gpu_s'][0]:,.0f} prompt tokens/s per GPU ({line['prompt_tokens_per_gpu_s'][1]}): "
               f"{line['gpu_hours']:,.0f} GPU-hours ({line['gpu_hours_without_prefilter']:,.0f} without the pre-filter)"
               if "gpu_hours" in line else "")
        console.print(f"{arm} labeler: {line['pages_per_file']:,.0f} pages a file reach it "
                      f"({line['pages_per_file_without_prefilter']:,.0f} without the language pre-filter), "
                      f"{tokens:,.0f} prompt tokens a page ({source}){gpu}")
    for arm, measured in plan["pilot"]["arms"].items():
        records = sum(f["records"] for f in measured["files"])
        saved = sum(f["not_extracted"] for f in measured["files"])
        console.print(f"{arm}: {saved:,} of {records:,} pilot records ({saved / max(records, 1):.1%}) never reach the "
                      "extractor (record guard, URL blocklist and language pre-filter before extraction)")
    console.print(f"caveat: {plan['caveat']}")
    if plan["pilot"]["pages"] == "generated":
        console.print("caveat: the pilot's pages are generated (corpus.sample): extraction rates and yields on them "
                      "do not represent Common Crawl. Pilot on real pages: python -m corpus.sample --out DIR "
                      "--from-pages ../shared/data/extraction/*/pages.jsonl.gz --files 4, then --pilot-warc DIR/*/sample.warc.gz")
    console.print(("SHORT: " if plan["verdict"]["short"] else "OK: ") + verdict_message(plan["verdict"]))


def print_ladder(console, rungs: dict) -> None:
    """A ladder's GPU-hours per rung, its total, and the target rung alone (a one-rung design)."""
    if len(rungs) < 2:
        return
    from rich.table import Table

    names = list(rungs)
    total = sum(r["training_gpu_hours"] + r["evaluation_gpu_hours"] for r in rungs.values())
    t = Table(title="The ladder: each rung's training and evaluation, against the target alone")
    for col in ("rung", "parameters", "tokens", "seeds", "FLOPs per run", "training GPU-h", "evaluation GPU-h",
                "share of the ladder"):
        t.add_column(col, justify="left" if col == "rung" else "right")
    for name, r in rungs.items():
        hours = r["training_gpu_hours"] + r["evaluation_gpu_hours"]
        t.add_row(name, f"{r['parameters'] / 1e6:,.0f}M", f"{r['tokens'] / 1e9:,.2f}B", str(r["seeds"]),
                  f"{r['training_flops_per_run']:.2e}", _hours(r["training_gpu_hours"]), _hours(r["evaluation_gpu_hours"]),
                  f"{hours / total:.1%}")
    target = rungs[names[-1]]
    alone = target["training_gpu_hours"] + target["evaluation_gpu_hours"]
    t.add_row("ladder total", "", "", "", "", "", "", _hours(total))
    console.print(t)
    console.print(f"the target {names[-1]} alone (a one-rung design at its {target['seeds']} seeds): {_hours(alone)} GPU-hours; "
                  f"the smaller rungs add {_hours(total - alone)} ({(total - alone) / alone:.0%}), the smallest "
                  f"{names[0]} costs {_hours(rungs[names[0]]['training_gpu_hours'] + rungs[names[0]]['evaluation_gpu_hours'])}")


def print_footprint(console, footprint: dict) -> None:
    from rich.table import Table

    f = Table(title="Per stage: Slurm array tasks queued, and storage (final: what stays; temporary: held while it runs)")
    for col in ("stage", "tasks", "final", "temporary", "note"):
        f.add_column(col, justify="left" if col in ("stage", "note") else "right")
    for r in footprint["stages"]:
        f.add_row(r["stage"], f"{r['tasks']:,}", _bytes(int(r["final_bytes"])),
                  _bytes(int(r["temporary_bytes"])) if r["temporary_bytes"] else "-", r["note"])
    f.add_row("total", f"{footprint['tasks']:,}", _bytes(int(footprint["final_bytes"])),
              _bytes(int(footprint["temporary_bytes"])), "")
    console.print(f)
    limit = footprint["max_queued_tasks"]
    if limit is None:
        console.print(f"queue: all {footprint['tasks']:,} array tasks at once (executor.max_queued_tasks unset): past "
                      "most sites' per-user job limit (MaxSubmitJobs); set it to what yours allows")
    else:
        console.print(f"queue: {footprint['tasks']:,} array tasks in {footprint['submissions']:,} submissions of at most "
                      f"{footprint['largest_submission']:,} (executor.max_queued_tasks = {limit:,}), each made by a "
                      "job of the one before once its tasks have finished")
    need = footprint["final_bytes"] + footprint["temporary_bytes"]
    if footprint["free_bytes"] is None:
        console.print(f"storage: {_bytes(int(need))} at most; the output root's free space could not be read here")
    else:
        console.print(("storage: " if footprint["fits"] else "WARNING: storage: ") + f"{_bytes(int(need))} at most, "
                      f"{_bytes(int(footprint['free_bytes']))} free on the file system of {footprint['free_on']}")
