"""The server the local executor's workers fork from: it loads the steps' URL lists, spaCy and
language model only for a run whose worker processes run such steps, and a server started
without a module a later run asks for is replaced by one that imports it."""

import sys
import time
from pathlib import Path

import multiprocess
import pytest

from conftest import make_config
from corpus.flow.progress import worker_preload
from corpus.flow.stages import corpus_stages
from corpus.read.inputs import resolve_inputs
from corpus.shims import forkserver_preloading


def test_the_loads_are_preloaded_only_for_the_stages_that_make_them(tmp_path, sample_dir):
    config = make_config(tmp_path / "out", sample_dir / "sample.warc.gz", {"page": {"extractor": "html2text"}},
                         postprocess={"minhash": {"num_buckets": 4}})
    stages = {stage.name: stage.pipeline for stage in corpus_stages(config, *resolve_inputs(config), until="postprocess")}
    assert worker_preload([stages["minhash-buckets"]]) == ["__main__", "corpus.flow.stages"]
    for name in ("extract", "filter", "minhash-signatures"):  # URL lists and language model; all three; spaCy
        assert worker_preload([stages["minhash-buckets"], stages[name]])[-1] == "corpus.flow.preload", name


def in_worker(module: str) -> tuple[int, bool]:
    """The worker's server (its parent) and whether it found `module` imported."""
    import os

    return os.getppid(), module in sys.modules


@pytest.mark.slow  # starts two servers and three pools
def test_a_server_without_a_module_asked_for_is_replaced_by_one_that_imports_it():
    # stdlib modules no test imports otherwise: the servers start in a second, without the flow's loads
    context = multiprocess.get_context("forkserver")
    forkserver_preloading(["colorsys"])
    with context.Pool(1) as pool:
        first, imported = pool.apply(in_worker, ("colorsys",))
    assert imported
    forkserver_preloading(["colorsys"])  # what the running server has: kept
    with context.Pool(1) as pool:
        assert pool.apply(in_worker, ("colorsys",)) == (first, True)
    forkserver_preloading(["colorsys", "tabnanny"])
    with context.Pool(1) as pool:
        second, imported = pool.apply(in_worker, ("tabnanny",))
    assert imported and second != first
    deadline = time.monotonic() + 30  # the first server exits now its workers have: reaped, not left defunct
    while Path(f"/proc/{first}").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not Path(f"/proc/{first}").exists()
