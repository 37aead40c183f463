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
import hashlib
import json
import math
import os
import random
import shutil
import statistics
import sys
import time
from pathlib import Path

from configs.durable import write_atomically
from configs.experiment import ExperimentConfig, load_experiment_or_exit
from configs.model import ModelConfig
from corpus.accounting.ledger import arm_ledger
from corpus.accounting.summary import counters, find_step, merged_stats, summarize_arm
from corpus.extractors import DripperArm
from corpus.extractors.base import versions_text
from corpus.extractors.prefilters import LANGUAGE_PREFILTER
from corpus.flow.execute import run_local
from corpus.flow.fit import global_stage_needs, what_does_not_fit
from corpus.flow.stages import corpus_stages
from corpus.flow.storage import stage_footprint
from corpus.postprocess.minhash import MinhashClusters
from corpus.read.inputs import local_paths, resolve_inputs
from corpus.read.warc import AccountedWarcReader
from corpus.sample import sample_pages

SHORT_EXIT = 1
# bytes per parameter of a training checkpoint: bf16 weights, fp32 main copy, Adam's two moments
CHECKPOINT_BYTES_PER_PARAMETER = 2 + 4 + 8


# ---------------------------------------------------------------- the pilot


def needs_absent_gpu(arm) -> bool:
    """An in-process vLLM labeler cannot run without a GPU (the real model has no CPU path here)."""
    if not (isinstance(arm, DripperArm) and arm.labeler.kind == "vllm"):
        return False
    import torch

    return not torch.cuda.is_available()


def pilot_files(paths: list[str], n: int, seed: int) -> list[str]:
    """The first `n` of a seeded shuffle of the run's own input list."""
    order = list(paths)
    random.Random(f"pilot:{seed}").shuffle(order)
    return sorted(order[:n])


def pilot_config(config: ExperimentConfig, files: int) -> ExperimentConfig:
    """The experiment, minus what comes after post-processing, with one task per pilot file and
    the arms this machine can run."""
    workers = min(files, os.cpu_count() or 1)
    one_per_file = {"tasks": files, "workers": workers}
    arms = {name: arm.model_copy(update={"resources": arm.resources.model_copy(update=one_per_file)})
            for name, arm in config.extractor_arms.items() if not needs_absent_gpu(arm)}
    post = config.postprocess.model_copy(update={
        "resources": config.postprocess.resources.model_copy(update=one_per_file),
        "exact_dedup": config.postprocess.exact_dedup.model_copy(update={"finder_tasks": 1})})
    return config.model_copy(update={"output_root": config.plan_dir() / "pilot", "arms": arms, "postprocess": post,
                                     "dataset": None, "pretrain": None, "evaluation": None})


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) if folder.is_dir() else 0


def stage_cpu_seconds(logs: Path) -> float:
    """CPU time of a stage: every step's time in every task (datatrove's per-task stats), with each
    step's slowest call in a task counted at the mean of its others. That call is the step's
    one-time loading (the URL block lists ~4 s, the language model ~1 s, Trafilatura's first
    page): a pilot file of a few hundred pages would otherwise price it into every page, where a
    crawl's file of ~30,000 records makes it negligible."""
    total = 0.0
    for path in (logs / "stats").glob("*.json"):
        for step in json.loads(path.read_text()):
            times = step.get("time_stats")  # a bare 0 where a step never timed anything
            if not isinstance(times, dict) or not times.get("n"):
                continue
            rest = times["total"] - times["max"]
            total += rest + rest / (times["n"] - 1) if times["n"] > 1 else times["total"]
    return total


def run_pilot(config: ExperimentConfig, base: str, files: list[str]) -> dict:
    """Extraction and post-processing of `files` for every arm that runs here; the measurements."""
    pilot = pilot_config(config, len(files))
    # a pilot of the same arms, steps and files is reused (datatrove skips its finished tasks);
    # any other is started afresh, so a plan never mixes measurements of two configs
    key = hashlib.sha256((pilot.model_dump_json() + "\n".join(files)).encode()).hexdigest()
    key_file = pilot.output_root / "pilot.sha256"
    if pilot.output_root.exists() and (not key_file.is_file() or key_file.read_text() != key):
        shutil.rmtree(pilot.output_root)
    pilot.output_root.mkdir(parents=True, exist_ok=True)
    key_file.write_text(key)
    paths_file = pilot.output_root / "warc_paths.txt"
    paths_file.write_text("\n".join(files) + "\n")
    stages = corpus_stages(pilot, base, paths_file, until="postprocess")
    wall: dict[str, float] = {}
    for stage in stages:
        started = time.perf_counter()
        run_local(pilot, [stage])
        wall[stage.label] = wall.get(stage.label, 0.0) + time.perf_counter() - started
    arms = {}
    for name, arm in pilot.arms.items():
        per_file = []
        for task, path in enumerate(files):
            ledger = arm_ledger(pilot, name, task)
            rows = ledger["rows"]
            extractor = counters(find_step(merged_stats(pilot.arm_dir(name) / "logs", task)[0], type(arm.step())))
            per_file.append({
                "file": path, "records": rows[0]["documents_in"], "sent_to_labeler": extractor.get("sent_to_labeler", 0),
                "labeler_seconds": extractor.get("labeler_ms", 0) / 1000,
                "prompt_tokens": extractor.get("prompt_tokens", 0), "answer_tokens": extractor.get("answer_tokens", 0),
                "prefiltered": summarize_arm(pilot, name, task)["dropped"].get(LANGUAGE_PREFILTER, 0),
                "stages": [{k: r[k] for k in ("stage", "documents_in", "documents_out", "tokens_out")} for r in rows],
                "not_extracted": ledger["not_extracted"],  # record guard + record-level filters
                "documents": rows[-1]["documents_out"], "tokens": rows[-1]["tokens_out"] or 0,
                "balanced": ledger["balanced"]})
        post_dir = pilot.post_dir(name)
        post_stages = [s for s in stages if s.arm == name and s.name != "extract"]
        clusters = merged_stats(post_dir / "logs" / "minhash-cluster")[0]
        arms[name] = {
            "files": per_file,
            "cpu_seconds": {"extraction": stage_cpu_seconds(pilot.arm_dir(name) / "logs"),
                            "postprocess": sum(stage_cpu_seconds(s.logs) for s in post_stages)},
            # of the extraction's: checking the WARC records' digests (inputs.verify_digests), timed by the reader
            "digest_seconds": counters(find_step(merged_stats(pilot.arm_dir(name) / "logs")[0], AccountedWarcReader)
                                       ).get("digest_check_us", 0) / 1e6,
            "stage_cpu_seconds": {s.name: stage_cpu_seconds(s.logs) for s in post_stages},
            # documents in a near-duplicate pair: what MinHash's clustering holds
            "clustered": counters(find_step(clusters, MinhashClusters)).get("duplicates", 0) if clusters else 0,
            "stage_bytes": {s.name: sum(folder_bytes(folder) for folder in s.outputs) for s in post_stages},
            "signature_bytes": folder_bytes(post_dir / "minhash" / "signatures"),
            "bytes": {"extracted": folder_bytes(pilot.arm_dir(name) / "output"),
                      "intermediate": sum(folder_bytes(post_dir / d) for d in ("filtered", "exact", "minhash")),
                      "removed": folder_bytes(post_dir / "removed"),
                      "post_processed": folder_bytes(post_dir / "output")},
        }
    return {"files": files, "output_root": str(pilot.output_root), "wall_seconds": wall, "arms": arms,
            "not_piloted": sorted(set(config.extractor_arms) - set(pilot.arms))}


# ---------------------------------------------------------------- rates


def gpu_preflight(preflight: dict | None) -> dict | None:
    """A preflight whose speeds are GPU rates: one that ran on a GPU."""
    return preflight if preflight and preflight.get("gpu") else None


def labeler_rates(config: ExperimentConfig, arm: str, pilot: dict, preflight: dict | None) -> dict:
    """A Dripper arm's labeler: prompt tokens a page (the pilot's own, another piloted Dripper arm's
    on the same pages, or the paper's) and, for an LLM, prompt tokens per GPU-second (a GPU
    preflight's, or the paper's)."""
    out = {}
    piloted = [a for a in [arm, *pilot["arms"]] if a in pilot["arms"] and isinstance(config.arms[a], DripperArm)
               and sum(f["sent_to_labeler"] for f in pilot["arms"][a]["files"])]
    if piloted:
        files = pilot["arms"][piloted[0]]["files"]
        sent = sum(f["sent_to_labeler"] for f in files)
        source = f"pilot ({config.arms[piloted[0]].labeler.token_source})" + ("" if piloted[0] == arm else f", as {piloted[0]}")
        out["labeler_prompt_tokens_per_page"] = (sum(f["prompt_tokens"] for f in files) / sent, source)
        out["labeler_answer_tokens_per_page"] = (sum(f["answer_tokens"] for f in files) / sent, source)
    else:
        out["labeler_prompt_tokens_per_page"] = (config.plan.labeler_prompt_tokens_per_page,
                                                 "config (plan.labeler_prompt_tokens_per_page)")
    labeler = config.arms[arm].labeler
    if labeler.kind != "encoder":
        lab = (preflight or {}).get("labeler", {})
        drafted = getattr(labeler, "drafted", False)
        run, how = (lab["drafted"], "with its draft") if drafted and lab.get("drafted") else (
            lab, "plain decoding; the draft's rate not measured, so not in it" if drafted else "plain decoding")
        if run.get("pages_per_s_per_gpu") and lab.get("prompt_tokens_per_page"):
            out["labeler_prompt_tokens_per_gpu_s"] = (run["pages_per_s_per_gpu"] * lab["prompt_tokens_per_page"],
                                                      f"measured: preflight on {preflight['gpu']}, {lab.get('model')}, {how}")
        else:
            rate = config.plan.labeler_prompt_tokens_per_gpu_s
            paper = rate == type(config.plan).model_fields["labeler_prompt_tokens_per_gpu_s"].default
            out["labeler_prompt_tokens_per_gpu_s"] = (rate, "assumed: plan.labeler_prompt_tokens_per_gpu_s"
                                                      + (", the paper's A100 rate" if paper else "")
                                                      + ("; the draft's speed-up not in it" if drafted else ""))
    return out


def labeler_pages(measured: dict, piloted: bool) -> tuple[float, float]:
    """Pages a file sends the labeler, with the language pre-filter and without it. An arm not
    piloted here (no GPU) labels every page past the guard and the record-level filters."""
    files = measured["files"]
    sent = mean_per_file(files, "sent_to_labeler") if piloted else \
        mean_per_file(files, "records") - mean_per_file(files, "not_extracted")
    return sent, sent + mean_per_file(files, "prefiltered")


def training_tokens_per_gpu_s(config: ExperimentConfig, vocab_size: int, preflight: dict | None) -> dict:
    """Per rung, training tokens/s per GPU and where it comes from: a GPU preflight's measured rate
    (on the most GPUs its scaling ran on, else one; for its model; another rung's at the same MFU,
    scaled by FLOPs per token), else the config's MFU."""
    out, p = {}, config.plan
    for rung in config.pretrain.ladder:
        flops = rung.model.flops_per_token(vocab_size)
        if preflight and preflight.get("training", {}).get("tokens_per_s_per_gpu"):
            t = preflight["training"]
            ran = ", ".join(f"{key} {t[key]}" for key in ("layer_spec", "attention", "sdpa_kernel", "micro_batch_size")
                            if t.get(key))
            measured = ModelConfig.model_validate(t["model"]).flops_per_token(vocab_size)
            source = f"preflight on {preflight['gpu']}" + (f" ({ran})" if ran else "")
            rate = t["tokens_per_s_per_gpu"]
            # the most GPUs the preflight's scaling ran on: communication included, as in the jobs
            if widest := [r for r in preflight.get("scaling", {}).get("runs", []) if "error" not in r][-1:]:
                rate = widest[0]["tokens_per_s_per_device"]
                source += f", {widest[0]['gpus']} GPUs on {widest[0]['nodes']} node(s)"
            if measured == flops:
                out[rung.name] = (rate, source)
            else:
                out[rung.name] = (rate * measured / flops, source + ", scaled from its model by FLOPs per token at the same MFU")
        else:
            out[rung.name] = (p.training_mfu * p.gpu_peak_flops / flops,
                              f"config: MFU {p.training_mfu:.0%} of {p.gpu_peak_flops:.3g} FLOP/s at {flops:.3g} "
                              "FLOPs/token (causal attention)")
    return out


def rates(config: ExperimentConfig, pilot: dict, preflight: dict | None, vocab_size: int) -> dict:
    # the rates are those of these releases: named beside them
    out: dict = {"arms": {}, "extractor_versions": {name: arm.versions() for name, arm in config.extractor_arms.items()}}
    preflight = gpu_preflight(preflight)
    for name, arm in config.extractor_arms.items():
        measured = pilot["arms"].get(name)
        entry = {}
        if measured:
            records = sum(f["records"] for f in measured["files"])
            docs_in = sum(f["stages"][0]["documents_out"] for f in measured["files"])
            source = f"pilot ({pilot['pages']} pages)"
            entry["extraction_pages_per_core_s"] = (records / measured["cpu_seconds"]["extraction"], source)
            entry["postprocess_docs_per_core_s"] = (docs_in / max(measured["cpu_seconds"]["postprocess"], 1e-9), source)
        if isinstance(arm, DripperArm):
            entry |= labeler_rates(config, name, pilot, preflight)
        out["arms"][name] = entry
    if config.pretrain:
        out["training_tokens_per_gpu_s"] = training_tokens_per_gpu_s(config, vocab_size, preflight)
    if config.evaluation:
        hours = preflight.get("evaluation", {}).get("gpu_hours_per_checkpoint") if preflight else None
        out["evaluation_gpu_hours_per_checkpoint"] = (
            (hours, f"preflight on {preflight['gpu']}") if hours else
            (config.plan.evaluation_gpu_hours_per_checkpoint, "config (plan.evaluation_gpu_hours_per_checkpoint)"))
    return out


# ---------------------------------------------------------------- projection


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


def checkpoints_per_run(config: ExperimentConfig) -> int:
    """Checkpoints one run of the config's one rung (ExperimentConfig.for_rung) saves and exports."""
    steps = config.training_steps()[0]
    every = config.pretrain.training.checkpoint_every
    return steps // every + (1 if steps % every else 0)


def mean_per_file(files: list[dict], key: str) -> float:
    return sum(f[key] for f in files) / len(files)


def labeler_gpu_seconds(pages: float, rates_of_arm: dict) -> float:
    """GPU-seconds for `pages`: pages x prompt tokens a page / prompt tokens per GPU-second."""
    return pages * rates_of_arm["labeler_prompt_tokens_per_page"][0] / rates_of_arm["labeler_prompt_tokens_per_gpu_s"][0]


def labeler_lines(config: ExperimentConfig, pilot: dict, r: dict, input_files: int) -> dict:
    """Per Dripper arm: the pages a file sends its labeler with the language pre-filter and
    without it, the tokens of a page, and (an LLM) the GPU-hours of each."""
    smallest = min(pilot["arms"], key=lambda a: sum(f["tokens"] for f in pilot["arms"][a]["files"]))
    out = {}
    for name, arm in config.extractor_arms.items():
        if not isinstance(arm, DripperArm):
            continue
        rates_of_arm = r["arms"][name]
        pages, without = labeler_pages(pilot["arms"].get(name) or pilot["arms"][smallest], name in pilot["arms"])
        line = {"pages_per_file": pages, "pages_per_file_without_prefilter": without,
                "prompt_tokens_per_page": rates_of_arm["labeler_prompt_tokens_per_page"],
                "answer_tokens_per_page": rates_of_arm.get("labeler_answer_tokens_per_page")}
        if "labeler_prompt_tokens_per_gpu_s" in rates_of_arm:
            line["prompt_tokens_per_gpu_s"] = rates_of_arm["labeler_prompt_tokens_per_gpu_s"]
            line["gpu_hours"] = input_files * labeler_gpu_seconds(pages, rates_of_arm) / 3600
            line["gpu_hours_without_prefilter"] = input_files * labeler_gpu_seconds(without, rates_of_arm) / 3600
        out[name] = line
    return out


def costs(config: ExperimentConfig, pilot: dict, r: dict, input_files: int, vocab_size: int) -> dict:
    """CPU-hours, GPU-hours, wall hours and bytes of every stage for `input_files` inputs."""
    out: dict = {"stages": [], "totals": {}}

    def add(stage, arm, cpu_h=0.0, gpu_h=0.0, wall_h=0.0, storage=0, note=""):
        out["stages"].append({"stage": stage, "arm": arm, "cpu_hours": cpu_h, "gpu_hours": gpu_h,
                              "wall_hours": wall_h, "bytes": storage, "note": note})

    smallest = min(pilot["arms"], key=lambda a: sum(f["tokens"] for f in pilot["arms"][a]["files"]))
    for name, arm in config.extractor_arms.items():
        measured = pilot["arms"].get(name) or pilot["arms"][smallest]
        n = len(measured["files"])

        res = arm.resources
        cpu_h = gpu_h = 0.0
        notes = []
        if name in pilot["arms"]:
            cpu_h = input_files * measured["cpu_seconds"]["extraction"] / n / 3600
            if digest_s := measured.get("digest_seconds"):
                share = digest_s / measured["cpu_seconds"]["extraction"]
                notes.append(f"{input_files * digest_s / n / 3600:.3g} CPU-h of it ({share:.1%}) checking WARC digests "
                             "(inputs.verify_digests)")
        if "labeler_prompt_tokens_per_gpu_s" in r["arms"][name]:
            pages, _ = labeler_pages(measured, name in pilot["arms"])
            gpu_h = input_files * labeler_gpu_seconds(pages, r["arms"][name]) / 3600
        wall = max(cpu_h / max(res.workers * res.cpus_per_task, 1),
                   gpu_h / max(res.workers * max(res.gpus_per_task, 1), 1))
        if name not in pilot["arms"]:
            notes.append(f"not piloted: sizes as {smallest}, every page past the guard labelled")
        add("extraction", name, cpu_h, gpu_h, wall, input_files * measured["bytes"]["extracted"] // n, "; ".join(notes))
        post_cpu = input_files * measured["cpu_seconds"]["postprocess"] / n / 3600
        post_res = config.postprocess.resources
        post_bytes = sum(measured["bytes"][k] for k in ("intermediate", "removed", "post_processed"))
        add("post-processing", name, post_cpu, 0.0, post_cpu / max(post_res.workers * post_res.cpus_per_task, 1),
            input_files * post_bytes // n)
    for name, arm in config.reference_arms.items():
        add("reference read", name, note=f"reads up to {arm.margin:g} x the budget in tokens from its corpus "
                                         "(not piloted; bound by the network or disk, not projected)")
    if config.dataset:
        token_bytes = 2 if vocab_size < 65_536 else 4
        for name in config.arms:
            add("datasets", name, storage=config.dataset.tokens_per_arm * token_bytes)
    if config.pretrain:
        out["rungs"] = {}
        for rung in config.pretrain.ladder:
            one = config.for_rung(rung.name)
            runs = len(one.runs())
            tokens_s, _ = r["training_tokens_per_gpu_s"][rung.name]
            gpu_h = one.rung_tokens(rung) / tokens_s / 3600
            s = rung.slurm
            ckpt = rung.model.parameters(vocab_size)["total"] * CHECKPOINT_BYTES_PER_PARAMETER
            checkpoints = runs * checkpoints_per_run(one)
            add("training", f"{rung.name}: {runs} runs", 0.0, runs * gpu_h, gpu_h / (s.nodes * s.gpus_per_node),
                checkpoints * ckpt, "wall time is one run's; the runs are independent jobs")
            evaluation = 0.0
            if config.evaluation:
                hours, _ = r["evaluation_gpu_hours_per_checkpoint"]
                evaluation = checkpoints * hours * config.evaluation.slurm.gpus
                add("evaluation", f"{rung.name}: {checkpoints} checkpoints", 0.0, evaluation,
                    evaluation / min(config.evaluation.slurm.parallel, checkpoints) / config.evaluation.slurm.gpus)
            out["rungs"][rung.name] = {
                "model": rung.model.model_dump(), "parameters": rung.model.parameters(vocab_size)["total"],
                "tokens": one.rung_tokens(rung), "seeds": len(rung.seeds), "runs": runs,
                "training_flops_per_run": rung.model.flops_per_token(vocab_size) * one.rung_tokens(rung),
                "training_gpu_hours": runs * gpu_h, "evaluation_gpu_hours": evaluation,
                "gpu_hours_per_run": gpu_h}
    out["totals"] = {k: sum(s[k] for s in out["stages"]) for k in ("cpu_hours", "gpu_hours", "bytes")}
    return out


# ---------------------------------------------------------------- the command


def vocab_size_of(config: ExperimentConfig, pilot_root: Path) -> int:
    """The tokenizer's vocabulary: the configured size, or the pilot's saved tokenizer."""
    if config.tokenizer and config.tokenizer.kind == "sentencepiece":
        return config.tokenizer.vocab_size
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(pilot_root / "tokenizer" / "tokenizer.json")).get_vocab_size()


def pilot_pages(base: str, files: list[str]) -> str:
    """What the pilot read: 'generated' or 'annotated' pages (WARCs corpus.sample wrote), else 'crawl'."""
    import fsspec

    kinds = set()
    for path in files:
        with fsspec.open(f"{base.rstrip('/')}/{path}", "rb") as f:
            kinds.add(sample_pages(f) or "crawl")
    return "generated" if "generated" in kinds else "annotated" if "annotated" in kinds else "crawl"


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
