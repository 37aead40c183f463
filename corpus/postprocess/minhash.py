"""MinHash near-dedup stages 2 and 3 in a shape that fits a crawl (stages 1, the signatures, and 4,
the filter by position, are datatrove's):

- `MinhashBuckets` finds, in one bucket, the documents whose band hashes are equal, as datatrove's
  MinhashDedupBuckets does, but holds at most `batch_files` signature files in memory and opens
  at most one file per batch while merging: datatrove's opens every input shard's file at once (at
  46,400 shards, far past the open-file limit). With scope `snapshot`, only documents of the same
  Common Crawl snapshot are compared (FineWeb's choice); `global` compares every pair.
- `MinhashClusters` joins the pairs into clusters by connected components over arrays, one bucket
  file at a time (~25 bytes per clustered document, where datatrove's dict union-find holds ~190),
  keeps in each cluster the document whose record hash is lowest (the same record in every arm,
  whatever the number of tasks; the hashes are those the signature stage recorded by position,
  corpus.postprocess.positions), and writes the removals one shard at a time (datatrove's keeps a
  file open per shard).
- `SnapshotTags` (scope `snapshot`) records each document's snapshot, by position, beside the
  signatures.
"""

from __future__ import annotations

import heapq
import re
import struct
import zlib

import numpy as np
from datatrove.data import DocumentsPipeline
from datatrove.io import DataFolderLike, get_datafolder
from datatrove.pipeline.base import PipelineStep
from datatrove.pipeline.dedup.minhash import MinhashConfig

from corpus.postprocess.positions import record_hashes

SNAPSHOT = re.compile(r"CC-MAIN-\d{4}-\d{2}")
PAIR = struct.Struct("<4I")  # (shard, position, shard, position): datatrove's .dups format
CHUNK_RECORDS = 8192


def snapshot_tag(warc_file: str | None) -> int:
    """A number for the Common Crawl snapshot a WARC path names (0 where it names none)."""
    match = SNAPSHOT.search(warc_file or "")
    return zlib.crc32(match.group().encode()) if match else 0


class SnapshotTags(PipelineStep):
    """Writes the snapshot number of every document, by position, to `<rank>.tags` (uint32)."""

    type = "🫂 - DEDUP"
    name = "🏷 MinHash snapshot tags"

    def __init__(self, output_folder: DataFolderLike):
        super().__init__()
        self.output_folder = get_datafolder(output_folder)

    def run(self, data: DocumentsPipeline, rank: int = 0, world_size: int = 1) -> DocumentsPipeline:
        tags = []
        for doc in data:
            tags.append(snapshot_tag(doc.metadata.get("warc_file")))
            yield doc
        with self.output_folder.open(f"{rank:05d}.tags", "wb") as f:
            f.write(np.array(tags, dtype="<u4").tobytes())


def _signature_dtype(config: MinhashConfig) -> np.dtype:
    """One record of datatrove's `.minhash.sig` files: the bucket's hashes, then the position."""
    hash_type = "<u8" if config.hash_config.precision == 64 else "<u4"
    return np.dtype([(f"h{i}", hash_type) for i in range(config.hashes_per_bucket)] + [("doc", "<u4")])


def _merged_dtype(config: MinhashConfig) -> np.dtype:
    """A record of our merged batches, in sort order: snapshot, hashes, shard, position."""
    signature = _signature_dtype(config)
    return np.dtype([("tag", "<u4"), *[(n, signature[n]) for n in signature.names[:-1]], ("shard", "<u4"), ("doc", "<u4")])


def merged_bytes_per_signature_byte(config: MinhashConfig) -> float:
    """Bytes a bucket task's merged batches take per byte of the signature files it merges (each
    record gains its snapshot tag and shard): its temporary files, removed when it ends."""
    return _merged_dtype(config).itemsize / _signature_dtype(config).itemsize


class MinhashBuckets(PipelineStep):
    """One task per bucket: the duplicate pairs of the bucket, in datatrove's `.dups` format."""

    type = "🫂 - DEDUP"
    name = "🎯 MinHash buckets (bounded files)"

    def __init__(self, input_folder: DataFolderLike, output_folder: DataFolderLike, config: MinhashConfig,
                 tags_folder: DataFolderLike | None = None, batch_files: int = 512):
        super().__init__()
        self.input_folder = get_datafolder(input_folder)
        self.output_folder = get_datafolder(output_folder)
        self.tags_folder = get_datafolder(tags_folder) if tags_folder is not None else None
        self.config = config
        self.batch_files = batch_files

    def _batch(self, files: list[str]) -> np.ndarray:
        """The records of `files` (signature files of one bucket), tagged and sorted."""
        signature, merged = _signature_dtype(self.config), _merged_dtype(self.config)
        parts = []
        for path in files:
            shard = int(path.rsplit("/", 1)[-1].split(".")[0])
            with self.input_folder.open(path, "rb") as f:
                records = np.frombuffer(f.read(), dtype=signature)
            part = np.empty(len(records), dtype=merged)
            for name in signature.names:
                part[name] = records[name]
            part["shard"] = shard
            part["tag"] = self._tags(shard)[records["doc"]] if self.tags_folder is not None and len(records) else 0
            parts.append(part)
        batch = np.concatenate(parts) if parts else np.empty(0, dtype=merged)
        batch.sort(order=list(merged.names))
        return batch

    def _tags(self, shard: int) -> np.ndarray:
        with self.tags_folder.open(f"{shard:05d}.tags", "rb") as f:
            return np.frombuffer(f.read(), dtype="<u4")

    def _records(self, path: str):
        """A merged batch file, record by record (tuples in sort order), read in chunks."""
        merged = _merged_dtype(self.config)
        with self.output_folder.open(path, "rb") as f:
            while chunk := f.read(CHUNK_RECORDS * merged.itemsize):
                yield from np.frombuffer(chunk, dtype=merged).tolist()

    def run(self, data: DocumentsPipeline = None, rank: int = 0, world_size: int = 1) -> None:
        bucket = rank
        files = sorted(self.input_folder.list_files(subdirectory=f"bucket_{bucket:03d}", glob_pattern="*.minhash.sig"))
        same = self.config.hashes_per_bucket + 1  # tag and hashes: equal means a duplicate pair
        with self.track_time():
            batches = []
            for start in range(0, len(files), self.batch_files):
                path = f"merge/bucket_{bucket:03d}/{len(batches):05d}.bin"
                with self.output_folder.open(path, "wb") as f:
                    f.write(self._batch(files[start:start + self.batch_files]).tobytes())
                batches.append(path)
            self.stat_update("merged_batches", value=len(batches))
            with self.output_folder.open(f"{bucket:05d}_00.dups", "wb") as out:
                last = None
                for record in heapq.merge(*(self._records(path) for path in batches)):
                    self.stat_update("signatures")
                    if last is not None and last[:same] == record[:same]:
                        out.write(PAIR.pack(last[-2], last[-1], record[-2], record[-1]))
                        self.stat_update("total_matches")
                    last = record
            for path in batches:
                self.output_folder.rm(path)


class MinhashClusters(PipelineStep):
    """One task: clusters of the duplicate pairs of every bucket, and the positions to remove."""

    type = "🫂 - DEDUP"
    name = "🎯 MinHash clusters (lowest record hash kept)"

    def __init__(self, input_folder: DataFolderLike, output_folder: DataFolderLike, records_folder: DataFolderLike):
        super().__init__()
        self.input_folder = get_datafolder(input_folder)
        self.output_folder = get_datafolder(output_folder)
        self.records_folder = get_datafolder(records_folder)

    def _record_hashes(self, nodes: np.ndarray) -> np.ndarray:
        """The record hash of every node, one shard's recorded hashes at a time."""
        shards = (nodes >> np.uint64(32)).astype(np.int64)
        out = np.empty(len(nodes), dtype=np.uint64)
        for start, end in zip(*_runs(shards), strict=True):
            positions = (nodes[start:end] & np.uint64(0xFFFFFFFF)).astype(np.int64)
            out[start:end] = record_hashes(self.records_folder, int(shards[start]))[positions]
        return out

    def _pairs(self, path: str) -> tuple[np.ndarray, np.ndarray]:
        """The (shard << 32 | position) of both documents of every pair in a `.dups` file."""
        with self.input_folder.open(path, "rb") as f:
            pairs = np.frombuffer(f.read(), dtype="<u4").reshape(-1, 4).astype(np.uint64)
        return pairs[:, 0] << np.uint64(32) | pairs[:, 1], pairs[:, 2] << np.uint64(32) | pairs[:, 3]

    def run(self, data: DocumentsPipeline = None, rank: int = 0, world_size: int = 1) -> None:
        from scipy.sparse import coo_matrix
        from scipy.sparse.csgraph import connected_components

        files = sorted(self.input_folder.list_files(glob_pattern="*.dups"))
        with self.track_time():
            nodes = np.zeros(0, dtype=np.uint64)  # every document in a pair, sorted
            for path in files:
                a, b = self._pairs(path)
                nodes = np.union1d(nodes, np.concatenate([a, b]))
            n = len(nodes)
            labels = np.arange(n, dtype=np.int64)  # a component per node, merged file by file
            for path in files:
                a, b = self._pairs(path)
                if not len(a):
                    continue
                left, right = labels[np.searchsorted(nodes, a)], labels[np.searchsorted(nodes, b)]
                graph = coo_matrix((np.ones(len(left), dtype=np.int8), (left, right)), shape=(n, n))
                _, components = connected_components(graph, directed=False)
                labels = components[labels]
            # each component keeps its node of the lowest record hash (then the lowest position)
            order = np.lexsort((np.arange(n), self._record_hashes(nodes), labels))
            first = order[np.concatenate([[True], labels[order][1:] != labels[order][:-1]])] if n else order
            removed = np.ones(n, dtype=bool)
            removed[first] = False
            removals = nodes[removed]
            self.stat_update("duplicates", value=n)
            self.stat_update("clusters", value=len(first))
            self.stat_update("to_remove", value=len(removals))
            shards = (removals >> np.uint64(32)).astype(np.int64)
            for start, end in zip(*_runs(shards), strict=True):
                with self.output_folder.open(f"{shards[start]:06d}.remove", "wb") as f:
                    f.write((removals[start:end] & np.uint64(0xFFFFFFFF)).astype("<u4").tobytes())


def _runs(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(starts, ends) of the runs of equal values in a sorted array."""
    if not len(values):
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    starts = np.concatenate([[0], np.flatnonzero(np.diff(values)) + 1])
    return starts, np.concatenate([starts[1:], [len(values)]])
