"""The corpus flow on this machine as a person sees it: per stage a progress bar over its
documents (or its tasks, for a stage that reads no documents), per part of the flow (an arm's
extraction, its post-processing, its tokenisation, the tokenizer, the budget) one closing line,
and every library line in `<output_root>/logs/<part>.log` (slurm.console).

datatrove's local executor runs each task in this process or in a worker process; each task
sends its output to the part's log and counts the documents its reader yields into a small file
that the bar adds up.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from datatrove.executor import LocalPipelineExecutor
from datatrove.pipeline.dedup import MinhashDedupSignature
from datatrove.pipeline.filters import GopherQualityFilter, GopherRepetitionFilter, URLFilter

from corpus.extractors.prefilters import LanguagePrefilter
from corpus.postprocess.filters import LocalLanguageFilter
from corpus.shims import forkserver_preloading
from slurm.console import redirected

REFRESH_S = 0.5
# the steps whose first call loads what corpus.flow.preload loads: the URL lists, spaCy, the language model
PRELOADED_STEPS = (URLFilter, LanguagePrefilter, LocalLanguageFilter, GopherQualityFilter, GopherRepetitionFilter,
                   MinhashDedupSignature)


def preload_workers(pooled: list[list]) -> None:
    """The workers of every stage fork from one server (datatrove's forkserver start method) that
    imported the flow's steps once, and, where a stage run in worker processes (`pooled`: their
    pipelines) has a step in PRELOADED_STEPS, loaded what those load once (corpus.flow.preload):
    each worker would otherwise import datatrove and the corpus steps, parse the URL lists, import
    spaCy and read the language model anew (seconds of CPU a worker, a stage). Where none has, the
    loads are not paid for: a run whose only worker processes are MinHash's bucket tasks."""
    forkserver_preloading(worker_preload(pooled))


def worker_preload(pooled: list[list]) -> list[str]:
    """The modules the workers' server imports for stages run in worker processes (their pipelines)."""
    loads = any(isinstance(step, PRELOADED_STEPS) for pipeline in pooled for step in pipeline)
    return ["__main__", "corpus.flow.stages", *(["corpus.flow.preload"] if loads else [])]


class DocumentTap:
    """A pass-through after the reader that writes how many documents went by to `path` (at most
    every REFRESH_S). A plain callable, not a PipelineStep: it adds no row to the stage's stats."""

    def __init__(self, folder: Path):
        self.folder = folder

    def __call__(self, data, rank: int = 0, world_size: int = 1):
        path, n, written = self.folder / f"{rank:05d}", 0, time.monotonic()
        for document in data:
            n += 1
            if time.monotonic() - written > REFRESH_S:
                path.write_text(str(n))
                written = time.monotonic()
            yield document
        path.write_text(str(n))


class ConsoleExecutor(LocalPipelineExecutor):
    """datatrove's local executor with each task's output in `log` and, when the pipeline starts
    with a reader, its document count under `tap_folder`."""

    def __init__(self, *args, log: Path, tap_folder: Path | None, **kwargs):
        super().__init__(*args, **kwargs)
        self.log, self.tap_folder = log, tap_folder

    def _run_for_rank(self, rank: int, local_rank: int = 0, node_rank: int = -1):
        if self.tap_folder is not None and not isinstance(self.pipeline[1], DocumentTap):
            self.pipeline = [self.pipeline[0], DocumentTap(self.tap_folder), *self.pipeline[1:]]
        with redirected(self.log):
            return super()._run_for_rank(rank, local_rank, node_rank)


class TapReader(threading.Thread):
    """Adds up the tasks' counts into the bar until stopped."""

    def __init__(self, folder: Path, bar, done_tasks: Path | None = None):
        super().__init__(daemon=True)
        self.folder, self.bar, self.done_tasks = folder, bar, done_tasks
        self.stopped = threading.Event()

    def count(self) -> int:
        if self.done_tasks is not None:
            return sum(1 for _ in self.done_tasks.glob("*"))
        total = 0
        for f in self.folder.glob("*"):
            try:
                total += int(f.read_text() or 0)
            except (OSError, ValueError):  # a task is rewriting it
                continue
        return total

    def run(self) -> None:
        while not self.stopped.wait(REFRESH_S):
            self.bar.n = self.count()
            self.bar.refresh()

    def stop(self) -> None:
        self.stopped.set()
        self.join()
        self.bar.n = self.count()
        self.bar.refresh()
