"""The corpus flow of an experiment as a list of datatrove stages, run locally or on Slurm.

    extract (per arm) ─► tokenizer (all arms) ─► post-processing (per arm, 7 stages) ─►
    tokenize (per arm) ─► budget (all arms)

A reference-corpus arm (corpus.reference) has a read stage instead of extraction, after the
tokenizer (it counts tokens as it reads); its documents join after post-processing, or before it
with `postprocess: true`.

Post-processing is the same list of named steps for every arm (corpus.postprocess), built from
the one `postprocess` block of the config; only the folders differ. Every removed document goes
to `<output_root>/post/<arm>/removed/<step>/` with its reason.

Locally the stages run one after the other (datatrove's local executor; completed tasks are
skipped on a re-run). On Slurm every stage is a job array that starts when the stages it needs
have finished (`afterok`), so the whole flow is submitted at once.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from datatrove.pipeline.dedup import MinhashDedupBuckets, MinhashDedupCluster, MinhashDedupSignature
from datatrove.pipeline.dedup.minhash import MinhashConfig
from datatrove.pipeline.readers import JsonlReader
from datatrove.pipeline.readers.base import BaseDiskReader, BaseReader
from datatrove.pipeline.tokens import MegatronDocumentTokenizer, TokensCounter
from datatrove.pipeline.writers import JsonlWriter

from configs.base import Resources
from configs.experiment import ExperimentConfig
from corpus.budget import TokenBudget, budget_is_stale
from corpus.exact_dedup import Sha256DedupSignature, Sha256FindDuplicates
from corpus.postprocess import FILTER_STAGE, MINHASH_FILTER_STAGE, enabled_steps, filter_steps, record_filters
from corpus.records import AccountedWarcReader, RecordGuard
from corpus.reference_steps import ReferenceDraw, TokenQuota, reference_reader, write_reference_paths
from corpus.progress import ConsoleExecutor, TapReader
from corpus.summary import counters, find_step, merged_stats, summarize_arm
from corpus.tokenizer import SharedTokenizer
from slurm import console

UNTIL = ("extract", "postprocess", "dataset")
ONE_TASK = Resources(tasks=1, workers=1)


@dataclass
class Stage:
    name: str
    arm: str | None  # None: a stage over all arms
    pipeline: list
    resources: Resources
    logs: Path
    needs: list[Stage] = field(default_factory=list)
    tasks: int | None = None  # default: resources.tasks
    one_local_process: bool = False  # an in-process vLLM engine takes the whole machine (or its GPU)
    part: str = ""  # the part of the flow a person sees (default: the stage's name): one log, one closing line

    @property
    def label(self) -> str:
        return f"{self.name}-{self.arm}" if self.arm else self.name

    @property
    def part_label(self) -> str:
        part = self.part or self.name
        return f"{part}-{self.arm}" if self.arm else part


def local_workers(stage: Stage) -> int:
    return 1 if stage.one_local_process else min(stage.resources.workers, os.cpu_count() or 1)


def record_id(writer, document) -> dict:
    """JsonlWriter adapter: only the record id."""
    return {"id": document.id}


class RecordIdWriter(JsonlWriter):
    """Only the record ids of the post-processed documents (the ledger's overlap between arms)."""

    name = "🆔 Record ids"

    def __init__(self, output_folder: str):
        super().__init__(output_folder, output_filename="${rank}.jsonl.gz", adapter=record_id)


def extraction_pipeline(config: ExperimentConfig, arm_name: str, base: str, paths_file: Path) -> list:
    """Every arm: the same reader over the same WARC files, the same record guard and record-level
    filters (URL blocklist), then the arm's extractor, then a JSONL writer. What differs between
    arms is the extractor step alone."""
    return [
        AccountedWarcReader(base, paths_file=str(paths_file)),
        RecordGuard(config.extraction.max_html_bytes, config.extraction.max_control_char_ratio),
        *record_filters(config, arm_name),
        config.arms[arm_name].step(),
        JsonlWriter(str(config.arm_dir(arm_name) / "output"), output_filename="${rank}.jsonl.gz"),
    ]


def reference_pipeline(config: ExperimentConfig, arm_name: str) -> list:
    """A reference arm's read stage: its corpus, drawn and (with a dataset section) read only up to
    its share of the token quota, written where post-processing reads (`postprocess: true`, after
    the same record filters as every arm) or where it writes (the default)."""
    arm = config.reference_arms[arm_name]
    paths_file = write_reference_paths(arm, config.arm_dir(arm_name) / "paths.txt")
    counted = []
    if config.dataset is not None:
        counted = [TokenQuota(str(config.tokenizer_file()), arm.token_quota(config.dataset.tokens_per_arm, arm.resources.tasks))]
    if arm.postprocess:
        out = [*record_filters(config, arm_name), *counted,
               JsonlWriter(str(config.arm_dir(arm_name) / "output"), output_filename="${rank}.jsonl.gz")]
    else:
        post_dir = config.post_dir(arm_name)
        out = [*counted, JsonlWriter(str(post_dir / "output"), output_filename="${rank}.jsonl.gz"),
               RecordIdWriter(str(post_dir / "ids"))]
    return [reference_reader(arm, paths_file), ReferenceDraw(arm.sample_rate, arm.seed), *out]


def _reader(folder: Path) -> JsonlReader:
    # no `file_path` metadata: it would write this run's absolute folder into every later output
    return JsonlReader(str(folder), glob_pattern="*.jsonl.gz", doc_progress=False, add_file_path=False)


def postprocess_stages(config: ExperimentConfig, arm: str, extract: Stage, tokenizer: Stage | None) -> list[Stage]:
    post, post_dir = config.postprocess, config.post_dir(arm)
    logs, res = post_dir / "logs", post.resources
    minhash = MinhashConfig(n_grams=post.minhash.n_grams, num_buckets=post.minhash.num_buckets,
                            hashes_per_bucket=post.minhash.hashes_per_bucket, seed=post.minhash.seed)
    extracted = config.arm_dir(arm) / "output"
    sigs = Stage("exact-signatures", arm, [
        _reader(extracted), Sha256DedupSignature(str(post_dir / "exact" / "signatures"), post.exact_dedup.finder_tasks),
    ], res, logs / "exact-signatures", [extract])
    find = Stage("exact-find", arm, [
        Sha256FindDuplicates(str(post_dir / "exact" / "signatures"), str(post_dir / "exact" / "duplicates")),
    ], res, logs / "exact-find", [sigs], tasks=post.exact_dedup.finder_tasks)
    # the extracted documents' tokens are counted first, so the ledger follows tokens through every step
    counter = [TokensCounter(str(config.tokenizer_file()), count_eos_token=True)] if config.tokenizer else []
    filtered = Stage(FILTER_STAGE, arm, [
        _reader(extracted), *counter, *filter_steps(config, arm),
        JsonlWriter(str(post_dir / "filtered"), output_filename="${rank}.jsonl.gz"),
    ], res, logs / FILTER_STAGE, [find] + ([tokenizer] if tokenizer else []))
    mh_sigs = Stage("minhash-signatures", arm, [
        _reader(post_dir / "filtered"),
        MinhashDedupSignature(str(post_dir / "minhash" / "signatures"), config=minhash, language=post.word_tokenizer_language),
    ], res, logs / "minhash-signatures", [filtered])
    mh_buckets = Stage("minhash-buckets", arm, [
        MinhashDedupBuckets(str(post_dir / "minhash" / "signatures"), str(post_dir / "minhash" / "buckets"), config=minhash),
    ], res, logs / "minhash-buckets", [mh_sigs], tasks=minhash.num_buckets)
    mh_cluster = Stage("minhash-cluster", arm, [
        MinhashDedupCluster(str(post_dir / "minhash" / "buckets"), str(post_dir / "minhash" / "remove_ids"), config=minhash),
    ], res, logs / "minhash-cluster", [mh_buckets], tasks=1)
    mh_filter = Stage(MINHASH_FILTER_STAGE, arm, [
        _reader(post_dir / "filtered"),
        *(s.step(config, arm) for s in enabled_steps(config, MINHASH_FILTER_STAGE)),
        JsonlWriter(str(post_dir / "output"), output_filename="${rank}.jsonl.gz"),
        RecordIdWriter(str(post_dir / "ids")),
    ], res, logs / MINHASH_FILTER_STAGE, [mh_cluster])
    stages = [sigs, find, filtered, mh_sigs, mh_buckets, mh_cluster, mh_filter]
    for stage in stages:
        stage.part = "postprocess"
    return stages


def corpus_stages(config: ExperimentConfig, base: str, paths_file: Path, until: str = "dataset",
                  arms: list[str] | None = None) -> list[Stage]:
    """Every stage up to `until` in an order that respects dependencies. `arms` limits the
    extraction stage (extractor arms only); the later stages need every arm and are built only
    for all of them."""
    extract = {arm: Stage("extract", arm, extraction_pipeline(config, arm, base, paths_file),
                          config.arms[arm].resources, config.arm_dir(arm) / "logs",
                          one_local_process=config.arms[arm].one_local_process)
               for arm in arms or config.extractor_arms}
    stages = list(extract.values())
    if until == "extract" or arms:
        return stages
    logs = config.output_root / "logs"
    tokenizer = None
    if config.tokenizer:
        tokenizer = Stage("tokenizer", None, [SharedTokenizer(config)], ONE_TASK, logs / "tokenizer", list(extract.values()))
        stages.append(tokenizer)
    final = {}
    for arm, reference in config.reference_arms.items():
        extract[arm] = Stage("read", arm, reference_pipeline(config, arm), reference.resources,
                             config.arm_dir(arm) / "logs", [tokenizer] if tokenizer else [])
        stages.append(extract[arm])
        if not reference.postprocess:
            final[arm] = extract[arm]
    for arm in config.arms:
        if arm in final:
            continue
        post = postprocess_stages(config, arm, extract[arm], tokenizer)
        stages += post
        final[arm] = post[-1]
    if until == "postprocess" or config.dataset is None:
        return stages
    tokenized = []
    for arm in config.arms:
        tokenized.append(Stage("tokenize", arm, [
            _reader(config.post_dir(arm) / "output"),
            MegatronDocumentTokenizer(str(config.dataset_dir(arm) / "tokens"), save_filename=arm,
                                      tokenizer_name_or_path=str(config.tokenizer_file()), eos_token=config.tokenizer.eos_token),
        ], config.postprocess.resources, config.dataset_dir(arm) / "logs" / "tokenize", [final[arm], tokenizer]))
    stages += tokenized
    budget = Stage("budget", None, [TokenBudget(config)], ONE_TASK, logs / "budget", tokenized)
    if budget_is_stale(config):  # the cut is deterministic: forget it and cut again
        (budget.logs / "completions" / "00000").unlink(missing_ok=True)
    stages.append(budget)
    return stages


def run_local(config: ExperimentConfig, stages: list[Stage]) -> None:
    """Every stage here, in order: a bar per stage, a closing line per part, library output in
    `<output_root>/logs/<part>.log` (corpus.progress)."""
    written: dict[str, int] = {}  # documents each stage run here wrote, by output folder: the next bars' totals
    for i, stage in enumerate(stages):
        log = config.output_root / "logs" / f"{stage.part_label}.log"
        tasks = stage.tasks or stage.resources.tasks
        reader = stage.pipeline[0]
        taps = stage.logs / "progress" if isinstance(reader, BaseReader) else None
        if taps is not None:
            shutil.rmtree(taps, ignore_errors=True)
            taps.mkdir(parents=True)
        total = tasks if taps is None else None  # documents from an earlier stage's count; else a rate without an end
        if isinstance(reader, BaseDiskReader):
            total = written.get(reader.data_folder.path)
        with console.stage(stage.label, log, "docs" if taps else "tasks", total) as bar:
            counter = TapReader(taps, bar, None if taps else stage.logs / "completions")
            counter.start()
            try:
                ConsoleExecutor(stage.pipeline, tasks=tasks, workers=local_workers(stage), logging_dir=str(stage.logs),
                                skip_completed=True, log=log, tap_folder=taps).run()
            finally:
                counter.stop()
        for step in stage.pipeline:
            if type(step) is JsonlWriter:
                written[step.output_folder.path] = counters(find_step(merged_stats(stage.logs)[0], JsonlWriter)).get("total", 0)
        if i + 1 < len(stages) and stages[i + 1].part_label == stage.part_label:
            continue
        if stage.part == "postprocess" and stage.name != MINHASH_FILTER_STAGE:  # run stage by stage (the plan's pilot)
            console.closing_line(stage.label, f"{tasks} tasks", stage.logs, log)
        else:
            console.closing_line(stage.part_label, part_counts(config, stage), part_output(config, stage), log)


def stage_folder(config: ExperimentConfig, stage: Stage) -> Path:
    """The folder a stage writes under (where its provenance is recorded)."""
    part = stage.part or stage.name
    if part == "read" and not config.arms[stage.arm].postprocess:
        part = "postprocess"  # a reference corpus that joins where post-processing writes
    folders = {"tokenize": lambda: config.dataset_dir(stage.arm), "budget": lambda: config.output_root / "datasets",
               "tokenizer": config.tokenizer_dir, "extract": lambda: config.arm_dir(stage.arm),
               "read": lambda: config.arm_dir(stage.arm), "postprocess": lambda: config.post_dir(stage.arm)}
    return folders[part]()


def part_output(config: ExperimentConfig, stage: Stage) -> Path:
    """Where the closing line points: the documents (or tokens) the part wrote."""
    return stage_folder(config, stage) / {"tokenize": "tokens", "budget": "", "tokenizer": ""}.get(stage.name, "output")


def part_counts(config: ExperimentConfig, last: Stage) -> str:
    """The closing line's counts, from datatrove's stats of the part's stages."""
    if last.name == "extract":
        s = summarize_arm(config, last.arm)
        return (f"{s['records']} records → {s['documents_out']} documents ({sum(s['dropped'].values())} dropped, "
                f"{sum(s['fallback'].values())} by fallback){'' if s['balanced'] else ' — NOT BALANCED, see the ledger'}")
    if last.name == "budget":
        return f"{config.dataset.tokens_per_arm:,} tokens for each of {len(config.arms)} arms"
    steps, _ = merged_stats(last.logs)
    if last.name == "tokenizer":
        return f"{config.tokenizer.kind}, {config.tokenizer.vocab_size:,} tokens, from {len(config.tokenizer_arms())} arms' text"
    first, _ = merged_stats(config.post_dir(last.arm) / "logs" / "exact-signatures") if last.part == "postprocess" else (steps, 0)
    n_in = counters(first[0]).get("documents", 0) if first else 0
    if last.name == "read":
        n_in = counters(find_step(steps, ReferenceDraw)).get("read", 0)
    if last.name == "tokenize":
        return f"{n_in} documents → {counters(steps[-1]).get('tokens', 0):,} tokens"
    written = counters(find_step(steps, JsonlWriter))
    tokens = f", {written['doc_len_tokens']:,} tokens" if "doc_len_tokens" in written else ""
    return f"{n_in} → {written.get('total', 0)} documents{tokens}"


def submit_slurm(config: ExperimentConfig, stages: list[Stage]) -> dict[str, str]:
    """Submit every stage as a job array depending on the stages it needs; returns job ids
    ('-1': every task already done)."""
    from datatrove.executor import SlurmPipelineExecutor

    job_ids: dict[str, str] = {}
    for stage in stages:
        res = stage.resources
        needs = [job_ids[n.label] for n in stage.needs if job_ids.get(n.label, "-1") != "-1"]
        executor = SlurmPipelineExecutor(
            stage.pipeline, tasks=stage.tasks or res.tasks, workers=res.workers, time=res.time,
            partition=res.partition, cpus_per_task=res.cpus_per_task, mem_per_cpu_gb=res.mem_per_cpu_gb,
            gpus_per_task=res.gpus_per_task, qos=res.qos, job_name=f"{config.executor.job_name_prefix}-{stage.label}",
            env_command=config.executor.env_command, logging_dir=str(stage.logs),
            slurm_logs_folder=str(stage.logs / "slurm_logs"), skip_completed=True,
            depends_job_id=":".join(needs) or None,
        )
        executor.run()
        job_ids[stage.label] = str(executor.job_id)
    return job_ids
