"""Plan a run before spending it: a measured pilot, rates, a projection of yield and cost, and a
verdict on the token budget.

    python -m corpus.flow.plan CONFIG [--pilot-files N | --pilot-warc PATH ...] [--preflight FILE]

1. **Pilot.** `plan.pilot_files` input files (the first of a seeded shuffle of the very list the
   run reads, or `--pilot-warc`) go through every arm's extraction and the whole post-processing
   chain, one datatrove task per file, under `<output_root>/plan/pilot/`. Per arm and per file it
   reads records, pages sent to the labeler, documents and tokens after every stage (the ledger,
   task by task), bytes written per stage, and the CPU time of every stage. An arm whose labeler
   needs a GPU this machine lacks is not piloted; its yield is taken from the lowest piloted arm,
   and the plan says so.
2. **Rates.** Extraction pages/s per core and post-processing documents/s per core come from the
   pilot; labeler pages/s per GPU, training tokens/s per GPU (MFU) and evaluation hours per
   checkpoint from the pilot where it ran on a GPU, else from a preflight file
   (`python -m bench.preflight`), else from the config's `plan:` defaults. Each figure names its
   source.
3. **Projection.** Tokens per input file after post-processing, mean and a `plan.confidence`
   t-interval over the pilot files; input files each arm needs to reach `dataset.tokens_per_arm`
   (the binding arm decides); CPU-hours, GPU-hours and wall time on the configured resources for
   extraction, post-processing, training and evaluation; per stage of the corpus flow, the Slurm
   array tasks it queues (and the submissions `executor.max_queued_tasks` makes of them) and its
   final and temporary storage, against the output root's free space (corpus.flow.storage); totals.
4. **Verdict.** When the configured inputs are projected to fall short of the budget (the
   interval's lower bound), `plan` exits 1 and says how many files (per snapshot, for Common
   Crawl) are needed. `slurm/extract.sh` checks the latest plan before it starts.

The run's statistical power (the minimum detectable difference of the configured seeds) is
`python -m evaluation.power CONFIG`; `slurm/plan.sh` prints it after the plan.

Writes `<output_root>/plan/plan.json`. Caveat printed with the plan: deduplication removes more
at full scale than within a few pilot files, so the projected yield is an upper estimate where
duplicates span files.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from configs.durable import write_atomically
from configs.experiment import ExperimentConfig, load_experiment_or_exit
from corpus.flow.fit import global_stage_needs
from corpus.flow.pilot import pilot_files, pilot_pages, run_pilot, vocab_size_of
from corpus.flow.plan_print import print_plan
from corpus.flow.pricing import costs, gpu_preflight, labeler_lines, rates
from corpus.flow.stages import corpus_stages
from corpus.flow.storage import stage_footprint
from corpus.flow.verdict import verdict, verdict_message, yield_interval
from corpus.read.inputs import local_paths, resolve_inputs

SHORT_EXIT = 1


def make_plan(config: ExperimentConfig, config_path: str, n_pilot: int | None = None,
              pilot_warcs: list[str] | None = None, preflight_path: Path | None = None) -> dict:
    if config.dataset is None or config.tokenizer is None:
        raise SystemExit(f"{config_path}: a plan needs the tokenizer and dataset sections (the budget to reach)")
    base, paths_file = resolve_inputs(config)
    paths = paths_file.read_text().split()
    if pilot_warcs:
        base, files = local_paths(sorted(pilot_warcs))
    else:
        files = pilot_files(paths, min(n_pilot or config.plan.pilot_files, len(paths)), seed=0)
    if len(files) < 2:
        raise SystemExit(f"{config_path}: a pilot needs at least 2 input files (the interval needs a spread); "
                         f"the config has {len(paths)}")
    preflight_path = preflight_path or config.output_root / "preflight" / "preflight.json"
    preflight = json.loads(preflight_path.read_text()) if preflight_path.is_file() else None
    pilot = run_pilot(config, base, files)
    pilot["pages"] = pilot_pages(base, files)
    if not pilot["arms"]:
        raise SystemExit("no arm of the config can run on this machine: run the plan on a GPU node")
    vocab = vocab_size_of(config, Path(pilot["output_root"]))
    r = rates(config, pilot, preflight, vocab)
    measured = {a: yield_interval([f["tokens"] for f in m["files"]], config.plan.confidence) for a, m in pilot["arms"].items()}
    lowest = min(measured, key=lambda a: measured[a]["mean"])
    yields = {a: measured.get(a, measured[lowest] | {"assumed_as": lowest}) for a in config.extractor_arms}
    cc = config.inputs.common_crawl
    v = verdict(yields, len(paths), config.dataset.tokens_per_arm, len(cc.snapshots) if cc else None)
    used = gpu_preflight(preflight) is not None
    preflight_entry = None if preflight is None else {
        "path": str(preflight_path), "gpu": preflight.get("gpu"), "used": used,
        "why": "GPU rates from it" if used else "it ran on a CPU: code paths only, its speeds are not GPU rates"}
    return {"experiment": config.name, "config": str(config_path), "pilot": pilot, "preflight": preflight_entry,
            "rates": r, "yield_per_file": yields, "confidence": config.plan.confidence, "verdict": v,
            "costs": costs(config, pilot, r, len(paths), vocab), "labelers": labeler_lines(config, pilot, r, len(paths)),
            "global_stages": global_stage_needs(config, pilot, len(paths)),
            "footprint": stage_footprint(config, corpus_stages(config, base, paths_file), pilot, len(paths), vocab),
            "caveat": "deduplication removes more at full scale than within the pilot's files: "
                      "the yield is an upper estimate where duplicates span files"}


class ShortInputs(ValueError):
    """The latest plan projects the configured inputs short of the token budget."""


def check_plan(config: ExperimentConfig, paths_file: Path) -> str | None:
    """The latest plan's per-file yields against the config's current inputs (`paths_file`, as
    resolved for the run) and budget: a message when they are projected to fall short, else None
    (also when there is no plan)."""
    path = config.plan_dir() / "plan.json"
    if config.dataset is None or not path.is_file():
        return None
    plan = json.loads(path.read_text())
    cc = config.inputs.common_crawl
    v = verdict(plan["yield_per_file"], len(paths_file.read_text().split()), config.dataset.tokens_per_arm,
                len(cc.snapshots) if cc else None)
    return f"{verdict_message(v)} (plan: {path})" if v["short"] else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m corpus.flow.plan", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("config")
    parser.add_argument("--pilot-files", type=int, help="input files in the pilot (default: plan.pilot_files)")
    parser.add_argument("--pilot-warc", nargs="+", help="pilot on these WARC files instead of a draw of the inputs")
    parser.add_argument("--preflight", type=Path, help="a preflight JSON (default: <output_root>/preflight/preflight.json)")
    args = parser.parse_args(argv)
    config = load_experiment_or_exit(args.config)
    if args.pilot_files is not None and args.pilot_files < 2:
        parser.error("--pilot-files: at least 2 (the interval needs a spread)")
    plan = make_plan(config, args.config, args.pilot_files, args.pilot_warc, args.preflight)
    path = config.plan_dir() / "plan.json"
    write_atomically(path, json.dumps(plan, indent=2) + "\n")
    print_plan(plan)
    print(f"wrote {path}; the run's power: python -m evaluation.power {args.config}")
    return SHORT_EXIT if plan["verdict"]["short"] else 0


if __name__ == "__main__":
    sys.exit(main())
