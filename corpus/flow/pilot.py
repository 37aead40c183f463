"""The plan's pilot (step 1 of corpus/flow/plan.py): a few of the run's own input files through every arm's
extraction and the whole post-processing chain under `<output_root>/plan/pilot/`, and what it measured per
arm and file: records, labeler pages, documents and tokens after every stage, bytes and CPU time per stage."""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import time
from pathlib import Path

from configs.experiment import ExperimentConfig
from corpus.accounting.ledger import arm_ledger
from corpus.accounting.summary import counters, find_step, merged_stats, summarize_arm
from corpus.extractors import DripperArm
from corpus.extractors.prefilters import LANGUAGE_PREFILTER
from corpus.flow.execute import run_local
from corpus.flow.stages import corpus_stages
from corpus.postprocess.minhash import MinhashClusters
from corpus.read.warc import AccountedWarcReader
from corpus.sample import sample_pages


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
