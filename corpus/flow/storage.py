"""What each stage of a run queues on Slurm and stores, projected from a pilot to the configured
inputs: its array tasks, the bytes it leaves (final: resume reads them; the intermediates can go
once the datasets are cut) and the bytes it holds only while it runs (temporary: MinHash's merged
batches, which a bucket task writes from its signature files and removes when it ends, every bucket
of an arm at once; the budget's spill files), against the free space of the output root's file
system where it can be read.

Extractor arms scale the pilot's bytes per input file; reference arms, which a pilot does not read,
the pilot's bytes per token of the lowest-yield arm's post-processed documents at their share of
the budget. Token files: 2 bytes a token (4 from a 65,536-piece vocabulary), and per document 16
bytes of keys, ~48 of record id and 20 of Megatron index.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from datatrove.pipeline.dedup.minhash import MinhashConfig

from configs.experiment import ExperimentConfig
from corpus.flow.submit import rounds
from corpus.postprocess.minhash import merged_bytes_per_signature_byte
from corpus.stage import Stage
from corpus.tokens.budget import KEYS, SPILLED

ID_BYTES = 48  # a record id and its newline (a WARC-Record-ID is 47 characters)
INDEX_BYTES = 20  # a document's entry in a Megatron `.idx`: length (int32), pointer and document index (int64)


def token_bytes(vocab_size: int) -> int:
    return 2 if vocab_size < 65_536 else 4


def free_space(root: Path) -> tuple[str, int] | None:
    """The free bytes of the file system the output root is on (or, not made yet, the folder it
    will be made in), and that folder; None where it cannot be read."""
    for folder in [root, *root.resolve().parents]:
        if folder.exists():
            try:
                return str(folder), shutil.disk_usage(folder).free
            except OSError:
                return None
    return None


def stage_footprint(config: ExperimentConfig, stages: list[Stage], pilot: dict, input_files: int, vocab_size: int) -> dict:
    """Per stage: tasks, final and temporary bytes; the submissions `executor.max_queued_tasks`
    makes of the run; the totals against the free space."""
    per_token = token_bytes(vocab_size)
    smallest = min(pilot["arms"], key=lambda a: sum(f["tokens"] for f in pilot["arms"][a]["files"]))
    post = config.postprocess.minhash
    merge = merged_bytes_per_signature_byte(MinhashConfig(n_grams=post.n_grams, num_buckets=post.num_buckets,
                                                          hashes_per_bucket=post.hashes_per_bucket, seed=post.seed))

    def measured(arm: str) -> dict:
        return pilot["arms"].get(arm) or pilot["arms"][smallest]

    def tokens_documents(arm: str) -> tuple[float, float]:
        """An arm's tokens and documents after post-processing."""
        files = measured(arm)["files"]
        tokens, documents = sum(f["tokens"] for f in files), sum(f["documents"] for f in files)
        if arm in config.reference_arms:
            read = config.dataset.tokens_per_arm * config.reference_arms[arm].margin
            return read, read * documents / max(tokens, 1)
        return input_files * tokens / len(files), input_files * documents / len(files)

    def scaled(arm: str, pilot_bytes: float) -> float:
        """The pilot's bytes at full scale: per input file, or (a reference arm) per token."""
        files = measured(arm)["files"]
        if arm in config.reference_arms:
            return pilot_bytes * tokens_documents(arm)[0] / max(sum(f["tokens"] for f in files), 1)
        return pilot_bytes * input_files / len(files)

    rows = []
    for stage in stages:
        arm, final, temporary, note = stage.arm, 0.0, 0.0, ""
        if stage.name in ("extract", "read"):
            final = scaled(arm, measured(arm)["bytes"]["extracted" if stage.name == "extract" else "post_processed"])
        elif stage.name == "tokenize":
            tokens, documents = tokens_documents(arm)
            final = tokens * per_token + documents * (KEYS.itemsize + ID_BYTES)
        elif stage.name == "budget":
            documents = {a: config.dataset.tokens_per_arm * d / max(t, 1) for a, (t, d) in
                         ((a, tokens_documents(a)) for a in config.arms)}
            final = sum(config.dataset.tokens_per_arm * per_token + d * (INDEX_BYTES + ID_BYTES) for d in documents.values())
            temporary = max(documents.values()) * (SPILLED.itemsize + ID_BYTES)  # one arm at a time
            note = "temporary: the spill files of one arm's selected documents"
        elif arm is not None:  # post-processing
            final = scaled(arm, measured(arm)["stage_bytes"][stage.name])
            if stage.name == "minhash-buckets":
                temporary = merge * scaled(arm, measured(arm)["signature_bytes"])
                note = "temporary: merged signature batches of every bucket at once"
        if arm is not None and arm not in pilot["arms"] and stage.name not in ("tokenize", "budget"):
            note = (f"as {smallest}'s per token" if arm in config.reference_arms else f"as {smallest}'s (not piloted)")
        rows.append({"stage": stage.label, "tasks": stage.tasks, "final_bytes": final, "temporary_bytes": temporary,
                     "note": note})
    submissions = rounds(stages, config.executor.max_queued_tasks)
    final, temporary = sum(r["final_bytes"] for r in rows), sum(r["temporary_bytes"] for r in rows)
    where, free = free_space(config.output_root) or (None, None)
    return {"stages": rows, "tasks": sum(r["tasks"] for r in rows), "max_queued_tasks": config.executor.max_queued_tasks,
            "submissions": len(submissions), "largest_submission": max(sum(s.values()) for s in submissions),
            "final_bytes": final, "temporary_bytes": temporary, "free_bytes": free, "free_on": where,
            "fits": None if free is None else final + temporary <= free}
