"""The read stage of a reference-corpus arm (its config: corpus.read.reference).

    reader ─► ReferenceDraw ─► TokenQuota ─► ShardWriter

`TokenQuota` stops pulling documents once the task holds its share of the tokens, so the reader
never reads further into the corpus than the budget needs. `ShardWriter` splits a task's share
into files of `dataset.reference_shard_tokens` tokens, one task each of the stages after it. The
documents go where post-processing reads (`postprocess: true`; its record-level filters, the URL
blocklist, then run there) or where it writes (the default).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from datatrove.data import DocumentsPipeline
from datatrove.pipeline.base import PipelineStep
from datatrove.pipeline.writers import JsonlWriter
from datatrove.utils.tokenization import PipelineStepWithTokenizer

from configs.experiment import ExperimentConfig
from corpus.read.inputs import local_paths
from corpus.read.reference import HUB, JSONL, PARQUET, ReferenceArm
from corpus.stage import RecordIdWriter, Stage, documents_writer


def reference_reader(arm: ReferenceArm, paths_file: Path | None):
    """datatrove's reader for the arm's corpus; local files are read in the order `paths_file`
    lists them (`write_reference_paths`)."""
    fields = {"text_key": arm.text_field, "id_key": arm.id_field, "limit": arm.max_documents or -1}
    if arm.corpus == HUB:
        from datatrove.pipeline.readers import HuggingFaceDatasetReader

        options = {k: v for k, v in {"name": arm.subset, "split": arm.split or "train"}.items() if v is not None}
        return HuggingFaceDatasetReader(arm.dataset, dataset_options=options, streaming=True, **fields)
    from datatrove.pipeline.readers import JsonlReader, ParquetReader

    reader = {PARQUET: ParquetReader, JSONL: JsonlReader}[arm.corpus]
    return reader(local_paths(arm.files())[0], paths_file=str(paths_file), **fields)


def write_reference_paths(arm: ReferenceArm, paths_file: Path) -> Path | None:
    """The arm's local files in their seeded order, relative to their common folder (the
    reader's data folder); None for a hub corpus."""
    if arm.corpus == HUB:
        return None
    paths_file.parent.mkdir(parents=True, exist_ok=True)
    paths_file.write_text("".join(f"{p}\n" for p in local_paths(arm.files())[1]))
    return paths_file


def first_row(arm: ReferenceArm) -> dict:
    """The corpus's first row as its reader sees it, before any field is picked (preflight)."""
    if arm.corpus == HUB:
        from datasets import load_dataset

        # the config names the data set (data, not code: datasets runs no loading script since 4.0)
        rows = load_dataset(arm.dataset, name=arm.subset, split=arm.split or "train", streaming=True)  # nosec B615  # see above
        return next(iter(rows))
    path = arm.files()[0]
    if arm.corpus == PARQUET:
        import pyarrow.parquet as pq

        return next(pq.ParquetFile(path).iter_batches(batch_size=1)).to_pylist()[0]
    import json

    import fsspec

    with fsspec.open(path, "rt", compression="infer") as f:
        return json.loads(f.readline())


class ReferenceDraw(PipelineStep):
    """Counts every document read; keeps each with probability `rate` by a hash of the seed and
    its id, so the draw depends neither on the order nor on the number of tasks."""

    type = "🎲 - SAMPLE"
    name = "🎲 Reference draw"

    def __init__(self, rate: float, seed: int):
        super().__init__()
        self.rate, self.seed = rate, seed

    def kept(self, doc_id: str) -> bool:
        digest = hashlib.sha256(f"{self.seed}:{doc_id}".encode()).digest()
        return int.from_bytes(digest[:8], "big") < self.rate * 2**64

    def run(self, data: DocumentsPipeline, rank: int = 0, world_size: int = 1) -> DocumentsPipeline:
        for doc in data:
            self.stat_update("read")
            if self.rate < 1 and not self.kept(str(doc.id)):
                self.stat_update("dropped_not_drawn")
                continue
            self.stat_update("forwarded")
            yield doc


class TokenQuota(PipelineStepWithTokenizer):
    """Counts each document's tokens as datatrove's TokensCounter does (end-of-document
    included) and lets documents through until the task holds `quota` tokens, then stops
    reading. One document at a time: a batching counter would read ahead of the quota."""

    type = "🎲 - SAMPLE"
    name = "🪣 Token quota"

    def __init__(self, tokenizer_file: str, quota: int):
        super().__init__(tokenizer_file)
        self.quota = quota

    def run(self, data: DocumentsPipeline, rank: int = 0, world_size: int = 1) -> DocumentsPipeline:
        held = 0
        for doc in data:
            with self.track_time():
                count = len(self.tokenizer.encode(doc.text).ids) + 1
            doc.metadata["token_count"] = count
            held += count
            self.stat_update("tokens", value=count)
            self.stat_update("forwarded")
            yield doc
            if held >= self.quota:
                self.stat_update("quota_reached")
                return


class ShardWriter(JsonlWriter):
    """The documents of a read task in files `<rank>_<part>.jsonl.gz` of `shard_tokens` tokens
    each (the last document of a file may take it past), counted by TokenQuota: the arm's
    post-processing and tokenisation take a file per task, so their tasks and the token shards are
    bounded whatever a read task's share."""

    def __init__(self, output_folder: Path, shard_tokens: int):
        super().__init__(str(output_folder), output_filename="${rank}_${part}.jsonl.gz")
        self.shard_tokens = shard_tokens

    def run(self, data: DocumentsPipeline, rank: int = 0, world_size: int = 1) -> DocumentsPipeline:
        part = held = 0
        with self:
            for doc in data:
                if held >= self.shard_tokens:  # the file is full: closed, so only one is open at a time
                    self.close_file(self._get_output_filename(doc, rank, part=f"{part:05d}"))
                    part, held = part + 1, 0
                held += doc.metadata["token_count"]
                with self.track_time():
                    self.write(doc, rank, part=f"{part:05d}")
                yield doc


def reference_pipeline(config: ExperimentConfig, arm_name: str) -> list:
    """A reference arm's read stage: its corpus, drawn and (with a dataset section) read only up to
    its share of the token quota, written where post-processing reads (`postprocess: true`) or
    where it writes (the default)."""
    arm = config.reference_arms[arm_name]
    paths_file = write_reference_paths(arm, config.arm_dir(arm_name) / "paths.txt")
    counted = []
    if config.dataset is not None:
        counted = [TokenQuota(str(config.tokenizer_file()), arm.token_quota(config.dataset.tokens_per_arm, arm.resources.tasks))]
    folder = config.arm_dir(arm_name) / "output" if arm.postprocess else config.post_dir(arm_name) / "output"
    out = [ShardWriter(folder, config.dataset.reference_shard_tokens) if config.dataset else documents_writer(folder)]
    if not arm.postprocess:
        out.append(RecordIdWriter(str(config.post_dir(arm_name) / "ids")))
    return [reference_reader(arm, paths_file), ReferenceDraw(arm.sample_rate, arm.seed), *counted, *out]


def reference_stages(config: ExperimentConfig) -> list[Stage]:
    """Every reference arm's read stage; it counts tokens with the shared tokenizer, so it waits for it."""
    def outputs(name: str, arm: ReferenceArm) -> list[Path]:
        post = config.post_dir(name)
        return [config.arm_dir(name) / "output"] if arm.postprocess else [post / "output", post / "ids"]

    return [Stage("read", name, reference_pipeline(config, name), arm.resources, config.arm_dir(name) / "logs",
                  ["tokenizer"] if config.tokenizer else [], outputs=outputs(name, arm))
            for name, arm in config.reference_arms.items()]
