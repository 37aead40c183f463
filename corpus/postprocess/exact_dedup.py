"""Exact deduplication by SHA-256 of the normalised text, in datatrove's three stages.

datatrove's own exact dedup hashes with sha1/xxhash truncated to 32 or 64 bits; this keeps the
same scheme (signatures sorted and split into hash ranges, a k-way merge per range, a filter that
drops documents by position) with the full 256-bit digest.

1. `Sha256DedupSignature` (one task per input shard): digest of every document, with its
   record's hash (corpus.stage.record_hash), sorted, split by the digest's first two bytes into
   `finder_tasks` ranges.
2. `Sha256FindDuplicates` (one task per range): merges every shard's sorted digests; of equal
   digests the copy with the lowest record hash is kept (the same record in every arm, whatever
   the number of tasks or the order of files), the others are written as duplicates of the
   shard they came from.
3. `Sha256DedupFilter` (one task per input shard, same documents in the same order as stage 1):
   drops the listed positions, to the exclusion writer with reason `exact_duplicate`.
"""

from __future__ import annotations

import contextlib
import hashlib
import heapq
import re
import unicodedata

import numpy as np
from datatrove.data import DocumentsPipeline
from datatrove.io import DataFolderLike, get_datafolder
from datatrove.pipeline.base import PipelineStep
from datatrove.pipeline.writers.disk_base import DiskWriter
from datatrove.utils.typeshelper import StatHints

from corpus.stage import record_hash

SIG_DTYPE = np.dtype([("hash", "S32"), ("record", "<u8"), ("doc", "<u4")])
DUP_DTYPE = np.dtype("<u4")
_WHITESPACE = re.compile(r"\s+")


def normalised_text(text: str) -> str:
    """NFKC, lower case, runs of whitespace as one space: copies that differ only in case,
    Unicode form or layout are the same document."""
    return _WHITESPACE.sub(" ", unicodedata.normalize("NFKC", text).lower()).strip()


def text_sha256(text: str) -> bytes:
    return hashlib.sha256(normalised_text(text).encode("utf-8")).digest()


def hash_range(digest: bytes, finder_tasks: int) -> int:
    """Which finder task owns a digest: its first two bytes, split into equal ranges."""
    return int.from_bytes(digest[:2], "big") * finder_tasks >> 16


class Sha256DedupSignature(PipelineStep):
    type = "🫂 - DEDUPS"
    name = "🔐 sha256 exact dedup: signatures"

    def __init__(self, output_folder: DataFolderLike, finder_tasks: int = 1):
        super().__init__()
        self.output_folder = get_datafolder(output_folder)
        self.finder_tasks = finder_tasks

    def run(self, data: DocumentsPipeline, rank: int = 0, world_size: int = 1):
        sigs = []
        for position, doc in enumerate(data):
            with self.track_time():
                self.stat_update(StatHints.total)
                sigs.append((text_sha256(doc.text), record_hash(str(doc.id)), position))
        sigs = np.array(sigs, dtype=SIG_DTYPE)
        sigs.sort(order=["hash", "record", "doc"])
        owners = np.array([hash_range(bytes(h), self.finder_tasks) for h in sigs["hash"]], dtype=np.int64)
        for task in range(self.finder_tasks):
            with self.output_folder.open(f"{task:04d}/{rank:05d}.sigs", "wb") as f:
                f.write(sigs[owners == task].tobytes())


class Sha256FindDuplicates(PipelineStep):
    type = "🫂 - DEDUPS"
    name = "🔐 sha256 exact dedup: find duplicates"

    def __init__(self, signatures_folder: DataFolderLike, output_folder: DataFolderLike):
        super().__init__()
        self.signatures_folder = get_datafolder(signatures_folder)
        self.output_folder = get_datafolder(output_folder)

    def _signatures(self, path: str):
        """(digest, record hash, shard, position) of every document in one signature file, in order."""
        shard = int(path.rsplit("/", 1)[-1].removesuffix(".sigs"))
        with self.signatures_folder.open(path, "rb") as f:
            sigs = np.frombuffer(f.read(), dtype=SIG_DTYPE)
        for s in sigs:
            yield bytes(s["hash"]).ljust(32, b"\0"), int(s["record"]), shard, int(s["doc"])

    def run(self, data: DocumentsPipeline = None, rank: int = 0, world_size: int = 1):
        files = self.signatures_folder.list_files(subdirectory=f"{rank:04d}", glob_pattern="*.sigs")
        # the first of equal digests is the lowest record hash; each stream is a generator of its
        # own (a generator expression in this loop would read the loop's last shard)
        streams = [self._signatures(path) for path in files]
        duplicates: dict[int, list[int]] = {}
        last = None
        with self.track_time():
            for digest, _, shard, doc in heapq.merge(*streams):
                self.stat_update(StatHints.total)
                if digest == last:
                    duplicates.setdefault(shard, []).append(doc)
                    self.stat_update("duplicates")
                last = digest
        for shard, docs in duplicates.items():
            with self.output_folder.open(f"{shard:05d}/{rank:04d}.dups", "wb") as f:
                f.write(np.array(sorted(docs), dtype=DUP_DTYPE).tobytes())


class Sha256DedupFilter(PipelineStep):
    type = "🫂 - DEDUPS"
    name = "🔐 sha256 exact dedup: filter"

    def __init__(self, duplicates_folder: DataFolderLike, exclusion_writer: DiskWriter | None = None):
        super().__init__()
        self.duplicates_folder = get_datafolder(duplicates_folder)
        self.exclusion_writer = exclusion_writer

    def _positions(self, rank: int) -> set[int]:
        positions: set[int] = set()
        for path in self.duplicates_folder.list_files(subdirectory=f"{rank:05d}", glob_pattern="*.dups"):
            with self.duplicates_folder.open(path, "rb") as f:
                positions.update(np.frombuffer(f.read(), dtype=DUP_DTYPE).tolist())
        return positions

    def run(self, data: DocumentsPipeline, rank: int = 0, world_size: int = 1) -> DocumentsPipeline:
        duplicates = self._positions(rank)
        with self.exclusion_writer if self.exclusion_writer else contextlib.nullcontext() as writer:
            for position, doc in enumerate(data):
                self.stat_update(StatHints.total)
                if position in duplicates:
                    self.stat_update(StatHints.dropped, "dropped_exact_duplicate")
                    if writer:
                        doc.metadata["filter_reason"] = "exact_duplicate"
                        writer.write(doc, rank)
                    continue
                self.stat_update(StatHints.forwarded)
                self.update_doc_stats(doc)
                yield doc
