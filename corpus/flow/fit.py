"""Will the stages that see a whole arm at once fit the nodes the config gives them?

Per-document stages grow with tasks; these do not: exact dedup's finder tasks (a hash range of the
arm's documents each), MinHash's bucket tasks (every document once per bucket) and its one
clustering task, the tokenizer (its sample) and the budget (every arm, a block of a token shard
and a bucket of its output at a time: `corpus.tokens.budget`; the largest shard is an extractor
arm's post-processed file or a reference arm's file of `dataset.reference_shard_tokens`).
From a pilot's documents per input file at each stage, its CPU seconds per document of the stages
it runs, and the memory per document `python -m bench.global_stages` measured (rounded up), this
projects every such stage's memory and time per task at the configured number of input files and
compares them with its resources. The pilot's few files see few of the near duplicates a crawl
holds, so MinHash's clustered share is the larger of the pilot's and `plan.near_duplicate_share`.
"""

from __future__ import annotations

import math

from configs.experiment import ExperimentConfig
from corpus.postprocess.steps import output_step
from corpus.tokens import budget

MINHASH = output_step().title  # the ledger row of the documents MinHash sees

GB = 2**30
BASE_GB = 1.0  # what a task holds before its documents: interpreter, libraries, buffers
# Peak memory per unit (`python -m bench.global_stages`: 48, 154, 129, 5.5 and 0.4 bytes, rounded up
# ~1.5x; docs/explanation/corpus.md): a document of the stage's input (exact-find: of its hash range;
# minhash-buckets: of one batch of signature files; minhash-cluster: in a near-duplicate pair), a
# token the budget holds at once (`budget_tokens_held`), a character of the sample (tokenizer).
BYTES_PER_UNIT = {"exact-find": 75, "minhash-buckets": 230, "minhash-cluster": 200, "budget": 8, "tokenizer": 1}
# CPU seconds per unit of the stages a pilot does not run (the same bench, rounded up: 0.020 µs a
# token the budget writes and puts in order, 0.03 µs a character of the tokenizer's sample, 13 µs
# an extracted document the tokenizer draws its sample from).
SECONDS_PER_UNIT = {"budget": 3e-8, "tokenizer": 5e-8, "tokenizer-scan": 2e-5}
OPEN_FILES = 1024  # a common soft limit (ulimit -n)


def per_file(pilot_arm: dict, stage: str) -> float:
    """Mean documents per input file entering a ledger row (`stage`: its title)."""
    rows = [next(r for r in f["stages"] if r["stage"] == stage) for f in pilot_arm["files"]]
    return sum(r["documents_in"] for r in rows) / len(rows)


def projected_arm(config: ExperimentConfig, pilot_arm: dict, input_files: int) -> dict:
    """Documents of one arm at full scale entering each stage, and the pilot's seconds per document."""
    files = pilot_arm["files"]
    extracted = input_files * sum(f["stages"][0]["documents_out"] for f in files) / len(files)
    near = input_files * per_file(pilot_arm, MINHASH)
    final_tokens = input_files * sum(f["tokens"] for f in files) / len(files)
    pilot_near = sum(next(r for r in f["stages"] if r["stage"] == MINHASH)["documents_in"] for f in files)
    cpu = pilot_arm["stage_cpu_seconds"]
    pilot_extracted = sum(f["stages"][0]["documents_out"] for f in files)
    share = max(pilot_arm["clustered"] / max(pilot_near, 1), config.plan.near_duplicate_share)
    return {"extracted": extracted, "near": near, "final_tokens": final_tokens, "clustered": share * near,
            "clustered_share": share,
            "seconds_per_document": {"exact-find": cpu.get("exact-find", 0.0) / max(pilot_extracted, 1),
                                     "minhash-buckets": cpu.get("minhash-buckets", 0.0) / max(pilot_near, 1),
                                     "minhash-cluster": cpu.get("minhash-cluster", 0.0)
                                     / max(pilot_arm["clustered"], 1)}}


def global_stage_needs(config: ExperimentConfig, pilot: dict, input_files: int) -> list[dict]:
    """Each whole-arm stage's tasks, memory and hours per task (the most demanding arm's), the
    resources configured for it, and whether they hold it."""
    post = config.postprocess
    arms = [projected_arm(config, pilot_arm, input_files) for pilot_arm in pilot["arms"].values()]
    biggest = {k: max(a[k] for a in arms) for k in ("extracted", "near", "final_tokens", "clustered")}
    seconds = {stage: max(a["seconds_per_document"][stage] for a in arms) for stage in arms[0]["seconds_per_document"]}
    per_signature_file = biggest["near"] / post.resources.tasks
    rows = [
        _row("exact-find", post.exact_dedup.finder_tasks, biggest["extracted"] / post.exact_dedup.finder_tasks,
             seconds["exact-find"] * biggest["extracted"] / post.exact_dedup.finder_tasks, post.exact_dedup.find_resources,
             "postprocess.exact_dedup.find_resources", "documents of its hash range"),
        _row("minhash-buckets", post.minhash.num_buckets, post.minhash.batch_files * per_signature_file,
             seconds["minhash-buckets"] * biggest["near"], post.minhash.buckets_resources,
             "postprocess.minhash.buckets_resources", "signatures of one batch of files",
             open_files=math.ceil(post.resources.tasks / post.minhash.batch_files)),
        _row("minhash-cluster", 1, biggest["clustered"], seconds["minhash-cluster"] * biggest["clustered"],
             post.minhash.cluster_resources, "postprocess.minhash.cluster_resources", "documents in near-duplicate pairs"),
    ]
    if config.tokenizer is not None and config.tokenizer.kind == "sentencepiece":
        chars = config.tokenizer.sample_chars_per_arm * len(config.tokenizer_arms())
        scanned = biggest["extracted"] * len(config.tokenizer_arms())  # every extracted document is drawn from
        rows.append(_row("tokenizer", 1, chars, SECONDS_PER_UNIT["tokenizer"] * chars
                         + SECONDS_PER_UNIT["tokenizer-scan"] * scanned, config.tokenizer.resources,
                         "tokenizer.resources", "characters of its sample"))
    if config.dataset is not None:
        shard = largest_token_shard(config, biggest["final_tokens"])
        tokens = config.dataset.tokens_per_arm * len(config.arms)  # every arm's selected tokens, written and put in order
        rows.append(_row("budget", 1, budget_tokens_held(shard, config.dataset.tokens_per_arm),
                         SECONDS_PER_UNIT["budget"] * tokens, config.dataset.resources, "dataset.resources",
                         f"tokens held: a block of a shard (the largest {shard:,.0f} tokens) and a bucket"))
    return rows


def largest_token_shard(config: ExperimentConfig, extractor_arm_tokens: float) -> float:
    """Tokens of the largest token shard: an extractor arm's post-processed file, or a reference
    arm's file of `dataset.reference_shard_tokens` (its read task's share, where that is less)."""
    shards = [extractor_arm_tokens / config.postprocess.resources.tasks]
    for arm in config.reference_arms.values():
        share = arm.token_quota(config.dataset.tokens_per_arm, arm.resources.tasks)
        shards.append(min(share, config.dataset.reference_shard_tokens))
    return max(shards)


def budget_tokens_held(shard_tokens: float, tokens_per_arm: int) -> float:
    """What the budget holds at once: a block of a shard, and a bucket of an arm's output."""
    return min(shard_tokens, budget.BLOCK_TOKENS) + min(tokens_per_arm, budget.BUCKET_TOKENS)


def _row(stage: str, tasks: int, units: float, cpu_seconds: float, resources, key: str, unit: str,
         open_files: int = 1) -> dict:
    memory_gb = BASE_GB + BYTES_PER_UNIT[stage] * units / GB
    hours = cpu_seconds / 3600
    fits = memory_gb <= resources.mem_gb and hours <= resources.hours and open_files <= OPEN_FILES
    return {"stage": stage, "tasks": tasks, "units_per_task": units, "unit": unit, "memory_gb": memory_gb,
            "hours": hours, "open_files": open_files, "configured_gb": resources.mem_gb,
            "configured_hours": resources.hours, "config_key": key, "fits": fits}


def what_does_not_fit(rows: list[dict]) -> list[str]:
    """What to change, for every stage that does not fit."""
    out = []
    for r in rows:
        needs = []
        if r["memory_gb"] > r["configured_gb"]:
            needs.append(f"{r['memory_gb']:,.1f} GB (configured {r['configured_gb']})")
        if r["hours"] > r["configured_hours"]:
            needs.append(f"{r['hours']:,.1f} h (configured {r['configured_hours']:g})")
        if needs:
            out.append(f"{r['stage']} needs {', '.join(needs)} per task: raise {r['config_key']}")
        if r["open_files"] > OPEN_FILES:
            out.append(f"{r['stage']} would hold {r['open_files']:,} files open: raise postprocess.minhash.batch_files")
    return out
