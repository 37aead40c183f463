"""Dedup by position trusts that the filter reads what the signatures were computed from.

Both dedups drop documents by (task, position) found by an earlier stage: if the documents change
in between (an extraction task re-run after the signature stage completed), the filter would drop
the wrong ones. `DocumentsRead` runs right after the reader of both stages. In the signature stage
it records, per task, the hash of every document's record (corpus.stage.record_hash) by position,
which MinHash's clusters use to keep the same copy in every arm; in the filter stage it checks
that it reads the same records in the same order and fails the task, naming what changed, if not.
The task then leaves no completion marker, so nothing after it runs on its output.
"""

from __future__ import annotations

import numpy as np
from datatrove.data import DocumentsPipeline
from datatrove.io import DataFolderLike, get_datafolder
from datatrove.pipeline.base import PipelineStep

from corpus.stage import record_hash


class PositionsChanged(RuntimeError):
    """The documents a filter reads are not those its signatures were computed from."""


def record_hashes(folder, rank: int) -> np.ndarray:
    """The record hashes a signature task recorded, by position."""
    with folder.open(f"{rank:05d}.records", "rb") as f:
        return np.frombuffer(f.read(), dtype="<u8")


class DocumentsRead(PipelineStep):
    type = "🫂 - DEDUP"
    name = "🧾 Documents read (positions)"

    def __init__(self, folder: DataFolderLike, check: bool):
        super().__init__()
        self.folder = get_datafolder(folder)
        self.check = check  # False: record (signature stage); True: compare (filter stage)

    def run(self, data: DocumentsPipeline, rank: int = 0, world_size: int = 1) -> DocumentsPipeline:
        hashes = []
        for doc in data:
            hashes.append(record_hash(str(doc.id)))
            yield doc
        seen = np.array(hashes, dtype="<u8")
        if not self.check:
            with self.folder.open(f"{rank:05d}.records", "wb") as f:
                f.write(seen.tobytes())
            return
        recorded = record_hashes(self.folder, rank)
        if not np.array_equal(recorded, seen):
            what = (f"{len(seen)} documents where its dedup signatures were computed from {len(recorded)}"
                    if len(seen) != len(recorded) else f"{len(seen)} documents, but not those its dedup signatures "
                    "were computed from")
            raise PositionsChanged(
                f"task {rank} read {what} ({self.folder.path}): the documents changed after the signature stage "
                "ran. Run the flow again: it recomputes every stage after one that re-runs.")
