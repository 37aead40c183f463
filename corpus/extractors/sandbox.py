"""The base of every extractor step that runs its pages in datatrove's sandbox (a worker process,
killed and replaced on a page over the limit): the limit is CPU time (corpus.shims.cpu_time_sandbox),
so a page is dropped for what it costs, not for how loaded the node was when it ran."""

from __future__ import annotations

from datatrove.data import DocumentsPipeline
from datatrove.pipeline.extractors.base import BaseExtractor

from corpus.shims import use_cpu_time_sandboxes


class SandboxedExtractor(BaseExtractor):
    """datatrove's BaseExtractor (its counters: `extracted`, `dropped`, `timeout`, `broken_process`,
    `clean_error`), its `timeout` counted in seconds of the worker's CPU time."""

    def run(self, data: DocumentsPipeline, rank: int = 0, world_size: int = 1) -> DocumentsPipeline:
        use_cpu_time_sandboxes()
        yield from super().run(data, rank, world_size)
