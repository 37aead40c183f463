"""The Trafilatura arm's datatrove step (its config: corpus.extractors.trafilatura).

The arm's options go to `trafilatura.extract` in the API of the release that runs
(`extract_kwargs`). The installed release runs in the step's sandbox process, as datatrove's own
Trafilatura step does; a pinned other release runs in a worker (`worker.py`) started from that
sandbox with the release environment's interpreter, so a timeout kills both.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

from datatrove.data import DocumentsPipeline

from corpus.extractors.sandbox import SandboxedExtractor
from corpus.extractors.trafilatura.releases import installed_release, release_environment, release_tuple, unsupported

if TYPE_CHECKING:
    from corpus.extractors.trafilatura import TrafilaturaOptions

WORKER = Path(__file__).with_name("worker.py")


class ReleaseError(RuntimeError):
    """A pinned release that cannot run: its environment is missing, broken or holds another release."""


def extract_kwargs(options: TrafilaturaOptions, release: str) -> dict:
    """`trafilatura.extract`'s keyword arguments for the arm's options, in `release`'s API.

    Both lines: markdown output switches formatting on; comments, metadata and the `deduplicate`
    cache stay off (the cache blanks paragraphs seen in earlier documents of the process). 2.0
    renamed `no_fallback` (the readability/jusText comparison) to `fast`; both stay off."""
    if why := unsupported(release):
        raise ReleaseError(why)
    kwargs = {"output_format": options.output_format, "favor_precision": options.favour_precision,
              "include_tables": options.include_tables, "include_comments": False, "with_metadata": False,
              "deduplicate": False}
    kwargs["fast" if release_tuple(release)[0] >= 2 else "no_fallback"] = False
    return kwargs


class Trafilatura(SandboxedExtractor):
    """`extracted`, `dropped` (empty result), `timeout`, `broken_process`, `clean_error`: datatrove's
    extractor counters (corpus.extractors.base.ExtractorArm.accounting reads them)."""

    name = "⛏ Trafilatura"

    def __init__(self, options: TrafilaturaOptions, python: Path | None = None):
        """`python`: the interpreter of the environment the release runs in, through the worker.
        Default: none for the installed release (imported in the sandbox), the release
        environment's for another."""
        super().__init__(options.timeout_s)
        self.release = options.release
        self.kwargs = extract_kwargs(options, self.release)
        if python is None and self.release != installed_release():
            python = release_environment(self.release) / "bin" / "python"
        self.python = python
        self._worker: subprocess.Popen | None = None

    def run(self, data: DocumentsPipeline, rank: int = 0, world_size: int = 1) -> DocumentsPipeline:
        self.check_release()
        yield from super().run(data, rank, world_size)

    def check_release(self) -> None:
        """Fail the task here, with the reason, when a pinned release cannot run: inside the sandbox the
        failure would only read as a timeout on every page."""
        if self.python is not None:
            worker = self._start_worker()
            worker.kill()
            worker.wait()

    def extract(self, text: str) -> str | None:
        if self.python is None:
            from trafilatura import extract

            return extract(text, **self.kwargs)
        if self._worker is None or self._worker.poll() is not None:
            self._worker = self._start_worker()
        self._worker.stdin.write(json.dumps(text) + "\n")
        self._worker.stdin.flush()
        answer = self._worker.stdout.readline()
        if not answer:
            raise ReleaseError(f"the trafilatura {self.release} worker ended (exit status {self._worker.wait()})")
        answer = json.loads(answer)
        if "error" in answer:
            raise ReleaseError(f"trafilatura {self.release}: {answer['error']}")
        return answer["text"]

    def close(self) -> None:
        """End the worker this process started, if any (a sandbox's ends with the sandbox)."""
        if self._worker is not None:
            self._worker.stdin.close()
            self._worker.wait()
            self._worker = None

    def _start_worker(self) -> subprocess.Popen:
        """The release's worker, once it has said which release it imported."""
        where = self.python.parent.parent
        if not self.python.exists():
            raise ReleaseError(f"trafilatura {self.release}: no environment at {where}: "
                               f"make trafilatura-release TRAFILATURA={self.release}")
        worker = subprocess.Popen([str(self.python), "-I", str(WORKER), json.dumps(self.kwargs)], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True, encoding="ascii")
        hello = worker.stdout.readline()
        found = json.loads(hello)["trafilatura"] if hello else None
        if found == self.release:
            return worker
        if found:
            worker.kill()
        worker.wait()
        raise ReleaseError(f"trafilatura {self.release}: {where} " + (f"holds trafilatura {found}" if found else
                           f"could not import it (exit status {worker.returncode}, its error in the log)")
                           + f"; make it again: rm -r {where} && make trafilatura-release TRAFILATURA={self.release}")
