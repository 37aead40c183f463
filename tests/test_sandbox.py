"""The extractor sandbox's per-page limit is CPU time (corpus.shims.cpu_time_sandbox): under load a
page takes longer but no more CPU, so the same pages are extracted, and the same time out, on a
busy node as on an idle one. The load: three busy loops on the one CPU the sandbox's worker runs
on, so that it gets a quarter of it."""

import os
import time
from multiprocessing import Process

import pytest
from datatrove.data import Document

from corpus.extractors.sandbox import SandboxedExtractor
from corpus.shims import cpu_time_sandbox


def spin(text: str) -> str:
    """A page that costs what it says: `spin <CPU seconds>`."""
    end = time.process_time() + (float(text.split()[1]) if text else 0)
    while time.process_time() < end:
        pass
    return text


def hang(text: str) -> str:
    """A page on which the extractor waits for ever, using no CPU."""
    if text:
        time.sleep(600)
    return text


class Spinner(SandboxedExtractor):
    name = "spinner"

    def __init__(self, timeout: float):
        super().__init__(timeout)

    def extract(self, text: str) -> str:
        return spin(text)


def busy() -> None:
    while True:
        pass


@pytest.fixture
def one_loaded_cpu():
    """This process, the sandbox workers it starts and three busy loops, on one CPU."""
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(before)})
    loops = [Process(target=busy, daemon=True) for _ in range(3)]
    for loop in loops:
        loop.start()
    yield
    for loop in loops:
        loop.kill()
        loop.join()
    os.sched_setaffinity(0, before)


def test_under_load_a_page_is_timed_by_its_cpu_time_not_by_the_wait(one_loaded_cpu):
    # datatrove's own sandbox, on the wall clock: 0.3 s of CPU at a quarter of a CPU is past 0.5 s
    with cpu_time_sandbox().__bases__[0](timeout=0.5) as wall_clock, pytest.raises(TimeoutError):
        wall_clock.process_document("spin 0.3", spin)

    step = Spinner(timeout=0.5)
    pages = [Document(text=text, id=text) for text in ("spin 0.3", "spin 3", "spin 0.01")]
    assert [doc.id for doc in step.run(pages)] == ["spin 0.3", "spin 0.01"]  # the over-limit page alone dropped
    counts = {key: int(value.total) for key, value in step.stats.stats.items() if hasattr(value, "total")}
    assert (counts["extracted"], counts["timeout"], counts["forwarded"]) == (2, 1, 2)


def test_a_worker_that_uses_no_cpu_for_stall_s_is_a_timeout():
    with cpu_time_sandbox()(timeout=5, stall_s=0.5) as sandbox:
        started = time.monotonic()
        with pytest.raises(TimeoutError, match="no CPU time used in 0.5 s"):
            sandbox.process_document("wait", hang)
        assert time.monotonic() - started < 5
        assert sandbox.process_document("", hang) == ""  # a fresh worker takes the next page


def die(text: str) -> str:
    """A page on which the worker is killed (as the OOM killer kills it: the sandbox makes it the first pick)."""
    if text == "die":
        os.kill(os.getpid(), 9)
    return text


def test_a_worker_killed_on_a_page_is_a_broken_process_at_once_not_a_hang():
    """A dead worker uses no CPU: it is datatrove's EOFError (counted `broken_process`) as soon as it is
    seen, not a TimeoutError after `stall_s`; the next page gets a fresh worker."""
    with cpu_time_sandbox()(timeout=5, stall_s=3) as sandbox:
        started = time.monotonic()
        with pytest.raises(EOFError):
            sandbox.process_document("die", die)
        assert time.monotonic() - started < 2
        assert sandbox.process_document("next", die) == "next"
