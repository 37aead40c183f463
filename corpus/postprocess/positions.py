"""Dedup by position trusts that the filter reads what the signatures were computed from.

Both dedups drop documents by (task, position) found by an earlier stage: if the documents change
in between (an extraction task re-run after the signature stage completed), the filter would drop
the wrong ones. `DocumentsRead` runs right after the reader of both stages: in the signature stage
it records, per task, how many documents were read and a digest of their ids; in the filter stage
it checks the same and fails the task, naming what changed, if they differ. The task then leaves no
completion marker, so nothing after it runs on its output.
"""

from __future__ import annotations

import hashlib
import json

from datatrove.data import DocumentsPipeline
from datatrove.io import DataFolderLike, get_datafolder
from datatrove.pipeline.base import PipelineStep


class PositionsChanged(RuntimeError):
    """The documents a filter reads are not those its signatures were computed from."""


class DocumentsRead(PipelineStep):
    type = "🫂 - DEDUP"
    name = "🧾 Documents read (positions)"

    def __init__(self, folder: DataFolderLike, check: bool):
        super().__init__()
        self.folder = get_datafolder(folder)
        self.check = check  # False: record (signature stage); True: compare (filter stage)

    def run(self, data: DocumentsPipeline, rank: int = 0, world_size: int = 1) -> DocumentsPipeline:
        digest, count = hashlib.blake2b(digest_size=16), 0
        for doc in data:
            digest.update(f"{doc.id}\n".encode())
            count += 1
            yield doc
        seen = {"documents": count, "ids_blake2b": digest.hexdigest()}
        path = f"{rank:05d}.json"
        if not self.check:
            with self.folder.open(path, "w") as f:
                json.dump(seen, f)
            return
        with self.folder.open(path, "r") as f:
            recorded = json.load(f)
        if recorded != seen:
            what = (f"{count} documents where its dedup signatures were computed from {recorded['documents']}"
                    if count != recorded["documents"] else f"{count} documents, but not those its dedup signatures "
                    "were computed from")
            raise PositionsChanged(
                f"task {rank} read {what} ({self.folder.path}): the documents changed after the signature stage "
                "ran. Run the flow again: it recomputes every stage after one that re-runs.")
