"""Every reach into a corpus dependency's private API, in one place, with the version that needs it.
Check these first when upgrading datatrove, multiprocess, mineru-html, vLLM, megatron-core or fsspec.
"""

from __future__ import annotations

import os
import struct
import threading
from collections import ChainMap
from functools import cache
from pathlib import Path

# ---------------------------------------------------------------- datatrove 0.10.1


def distributions_by_name() -> None:
    """datatrove checks the pip distributions of a step as the step is built, each name by reading
    the metadata of every installed distribution (about a second a name in this venv, twelve names
    when the paper's flow is built: most of the time `python -m slurm.status` takes). Looked up by
    name instead, with the same answer."""
    import importlib.metadata

    from datatrove.utils import _import_utils

    @cache
    def available(distribution_name: str) -> bool | None:
        try:
            importlib.metadata.distribution(distribution_name)
        except importlib.metadata.PackageNotFoundError:
            return None
        return True

    _import_utils._is_distribution_available = available



def default_jsonl_record(writer, document) -> dict:
    """JsonlWriter's own record of a document. datatrove 0.10.1 has no public way to extend the
    default record from an adapter (`_default_adapter`)."""
    return writer._default_adapter(document)


@cache
def fasttext_model(path: str):
    """A fastText model from a local file, read once a process and shared (its predictions only
    read it). datatrove 0.10.1's FastTextLID only loads its model from the hub, and its `fasttext`
    module (fasttext-numpy2-wheel) exposes the loader as `_FastText`."""
    from fasttext.FastText import _FastText

    return _FastText(path)


URL_FILTER_LISTS = ("block_listed_domains", "block_listed_url", "banned_words", "banned_subwords", "soft_banned_words")


@cache
def bundled_url_lists() -> dict[str, dict[str, None]]:
    """datatrove's bundled URL block lists, parsed once a process and shared read-only. URLFilter
    parses them (4.5 million domains, seconds of CPU) in every filter's first call, so a process
    that runs several tasks or arms, or a test worker that runs many flows, would parse them again
    for each. Each list is kept as the keys of a dict, which answers `in` and iterates as the set
    did: a dict of strings alone is not tracked by the garbage collector, where a set is, and every
    full collection of a process holding the set would walk its 4.5 million entries (~0.3-0.9 s each)."""
    from datatrove.pipeline.filters import URLFilter

    loader = URLFilter()
    loader.download_data()
    return {name: dict.fromkeys(getattr(loader, name)) for name in URL_FILTER_LISTS}


def load_bundled_url_lists(url_filter) -> None:
    """What datatrove 0.10.1's `URLFilter.download_data` does (its lists, the filter's own added,
    its `_downloaded` flag), from `bundled_url_lists`: a filter that adds nothing to a list shares
    the bundled one; one that adds entries looks them up beside it (a ChainMap answers `in` from
    either), not in a copy: copying 4.5 million domains costs a third of a second, and in a worker
    forked from the server that loaded them (corpus.flow.preload) it writes every page they lie on
    (their reference counts), seconds a worker."""
    if url_filter._downloaded or not url_filter.use_integrated_lists:
        return
    for name, bundled in bundled_url_lists().items():
        own = getattr(url_filter, name)
        setattr(url_filter, name, ChainMap(dict.fromkeys(own), bundled) if own else bundled)
    automaton = url_filter.banned_subwords_automaton
    for word in url_filter.banned_subwords:
        automaton.add_word(word, len(automaton))
    automaton.make_automaton()
    url_filter._downloaded = True


def prepare_arrays(executor, ranks: list[int]) -> str:
    """What datatrove 0.10.1's `SlurmPipelineExecutor.launch_job` writes before it submits, for the
    given ranks only: the pickled executor, `ranks_to_run.json` (array task i of the array
    submitted with RUN_OFFSET=k runs rank `ranks[i + k * max_array_size]`) and the launch script;
    returns the script. `launch_job` itself submits every incomplete rank with one throttle for
    every array, so the submission of part of a stage, and of a throttle per array, is ours."""
    import json
    from copy import deepcopy

    import dill
    from dill import CONTENTS_FMODE

    with executor.logging_dir.open("executor.pik", "wb") as f:
        dill.dump(deepcopy(executor), f, fmode=CONTENTS_FMODE)
    executor.save_executor_as_json()
    with executor.logging_dir.open("ranks_to_run.json", "w") as f:
        json.dump(ranks, f)
    script = executor.get_launch_file_contents(
        executor.get_sbatch_args(min(len(ranks), executor.max_array_size)),
        f"srun -l -n {executor.nodes_per_task} launch_pickled_pipeline {executor.logging_dir.resolve_paths('executor.pik')}")
    with executor.logging_dir.open("launch_script.slurm", "w") as f:
        f.write(script)
    return script


def array_args(index: int, tasks: int, throttle: int) -> list[str]:
    """sbatch arguments of the `index`-th array of a stage prepared by `prepare_arrays`: its
    offset into `ranks_to_run.json` (datatrove's RUN_OFFSET), its size and its `%N` throttle."""
    return [f"--export=ALL,RUN_OFFSET={index}", f"--array=0-{tasks - 1}%{throttle}"]


def cpu_seconds(pid: int) -> float:
    """CPU time (user + system) a process and every process under it have used so far; raises
    psutil.NoSuchProcess when the process itself is gone."""
    import psutil

    root = psutil.Process(pid)
    total = sum(root.cpu_times()[:2])
    for child in root.children(recursive=True):
        try:
            total += sum(child.cpu_times()[:2])
        except psutil.NoSuchProcess:  # ended between the listing and the read
            continue
    return total


@cache
def cpu_time_sandbox():
    """datatrove 0.10.1's ExtractorSandbox (one worker process per extractor, killed and replaced on
    a timeout), its limit counted in the CPU time the worker, and any process it started, spends on
    a page instead of wall-clock time: on a loaded node a page takes longer, not more CPU, so the
    same pages time out on a busy node as on an idle one. A worker that uses no CPU at all for
    `stall_s` of wall-clock time is hung: a timeout too. A worker that dies (killed: the OOM killer
    picks sandbox workers first) is a broken process at once, as in datatrove's sandbox. The class
    overrides the sandbox's two waits (`process_document`, the private `_ensure_process`) and
    reuses its worker loop and cleanup (`_worker`, `_cleanup_process`, private)."""
    import time
    from multiprocessing import Pipe, Process

    import psutil
    from datatrove.pipeline.extractors.base import ExtractorSandbox

    class CpuTimeSandbox(ExtractorSandbox):
        poll_s = 0.05  # how often a page that has not answered is looked at

        def __init__(self, timeout: float, warmup_text="", stall_s: float = 60.0):
            super().__init__(timeout, warmup_text)
            self.stall_s = stall_s

        def _answer(self, what: str):
            """The worker's next message, within `timeout` seconds of its CPU time from now."""
            try:
                if self.parent_conn.poll(self.poll_s):  # most pages: answered before any /proc scan
                    return self.parent_conn.recv()
                # the first poll counted as CPU time, what it can at most be on a core: never a looser limit
                start = last = cpu_seconds(self.process.pid) - self.poll_s
                progressed = time.monotonic()
                while not self.parent_conn.poll(self.poll_s):
                    if not self.process.is_alive() and not self.parent_conn.poll(0):
                        # killed (the OOM killer picks a sandbox worker first): a broken process now,
                        # not a `stall_s` wait read as a timeout
                        raise EOFError("Child process died (probably OOM-killed)")
                    used = cpu_seconds(self.process.pid)
                    if used - start >= self.timeout:
                        raise TimeoutError(f"{what}: over {self.timeout:g} s of CPU time")
                    if used > last:
                        last, progressed = used, time.monotonic()
                    elif time.monotonic() - progressed >= self.stall_s:
                        raise TimeoutError(f"{what}: no CPU time used in {self.stall_s:g} s (hung)")
                return self.parent_conn.recv()
            except psutil.NoSuchProcess as e:
                self._cleanup_process()
                raise EOFError("Child process died (probably OOM-killed)") from e
            except (TimeoutError, EOFError):
                self._cleanup_process()
                raise

        def process_document(self, text, extract_fn):
            self._ensure_process(extract_fn)
            self.parent_conn.send(text)
            result = self._answer("document extraction")
            if isinstance(result, Exception):
                raise result
            return result

        def _ensure_process(self, extract_fn):
            if self.process is not None and self.process.is_alive():
                return
            self._cleanup_process()
            self.parent_conn, self.child_conn = Pipe()
            self.process = Process(target=self._worker, args=(self.child_conn, extract_fn), daemon=True)
            self.process.start()
            self.all_processes.append(self.process)
            self._answer("worker warm-up")  # its "ready"

    return CpuTimeSandbox


def use_cpu_time_sandboxes() -> None:
    """In this process, every datatrove extractor step's sandbox is `cpu_time_sandbox()`: datatrove
    0.10.1's BaseExtractor.run builds its sandbox by the name `ExtractorSandbox` in its module."""
    import datatrove.pipeline.extractors.base as extractors

    extractors.ExtractorSandbox = cpu_time_sandbox()


# ---------------------------------------------------------------- mineru-html 1.1.2


def backend_engine(backend):
    """The engine mineru-html 1.1.2's vLLM backend holds (`_llm`; None before `setup_llm()`)."""
    return getattr(backend, "_llm", None)


def set_backend_engine(backend, engine) -> None:
    """Give mineru-html's vLLM backend an engine it did not build: 1.1.2's `setup_llm()` keeps
    `_llm` when set, and the backend has no public setter."""
    backend._llm = engine


def set_backend_tokenizer(backend, tokenizer) -> None:
    """Give mineru-html's vLLM backend the tokenizer it builds prompts and checks lengths with:
    1.1.2's `get_tokenizer()` loads `model_path`'s at the hub's main (no revision) unless
    `_tokenizer` is set, and the backend has no public setter."""
    backend._tokenizer = tokenizer


def shut_down_engine(labeler) -> None:
    """Stop the vLLM engine behind a mineru-html backend labeler (its engine-core process, and
    with it the GPU memory): mineru-html 1.1.2 keeps the engine in `backend._llm`, and vLLM 0.32's
    `LLM` has no public close; its engine client's `shutdown()` is what `LLM.__del__` would reach."""
    engine = backend_engine(labeler.backend)
    if engine is not None and hasattr(engine, "llm_engine"):
        engine.llm_engine.engine_core.shutdown()


# ---------------------------------------------------------------- vLLM 0.32.0


VLLM_MAX_SPEC_TOKENS = 128  # vLLM 0.32's rejection sampler asserts max_spec_len <= MAX_SPEC_LEN (128)


def model_runner_building_proposer():
    """The model runner constructing the speculative labeler's custom proposer. vLLM 0.32 builds a
    `custom_class` proposer with the engine config alone (`create_custom_proposer(vllm_config)`,
    called from `GPUModelRunner.__init__`, which the CPU runner inherits) and passes `propose` only
    token ids, while the draft travels with each request's SamplingParams: the proposer reads the
    request through the runner that built it."""
    import inspect

    from vllm.v1.worker.gpu_model_runner import GPUModelRunner

    for frame in inspect.stack():
        runner = frame.frame.f_locals.get("self")
        if isinstance(runner, GPUModelRunner):
            return runner
    raise RuntimeError("the speculative labeler's proposer was not built by a vLLM model runner (vLLM 0.32's V1 runner)")


def proposer_request(runner, row: int):
    """Row `row` of the runner's persistent batch: its request id, the extra_args of its
    SamplingParams and its prompt's length (`input_batch.req_ids`, `requests[...]`: vLLM 0.32's
    V1 runner state)."""
    from types import SimpleNamespace

    req_id = runner.input_batch.req_ids[row]
    state = runner.requests[req_id]
    return SimpleNamespace(req_id=req_id, extra_args=state.sampling_params.extra_args,
                           num_prompt_tokens=state.num_prompt_tokens)


def live_request_ids(runner) -> set[str]:
    return set(runner.requests)


# ---------------------------------------------------------------- megatron-core 0.16.1


def write_megatron_index(idx_path: str, dtype, lengths_file: Path, documents: int, chunk: int = 1 << 22) -> None:
    """An IndexedDataset `.idx` of `documents` one-sequence documents whose token counts (int32) are in
    `lengths_file`, written in chunks: megatron's own writer (`_IndexWriter`, private) takes whole
    lists, ~20 bytes a document in memory. Same bytes as IndexedDatasetBuilder's (tested)."""
    import numpy as np
    from megatron.core.datasets.indexed_dataset import _INDEX_HEADER, DType

    itemsize = np.dtype(dtype).itemsize
    with open(idx_path, "wb") as out:
        out.write(_INDEX_HEADER)
        out.write(struct.pack("<Q", 1))
        out.write(struct.pack("<B", DType.code_from_dtype(dtype)))
        out.write(struct.pack("<Q", documents))  # sequences: one per document
        out.write(struct.pack("<Q", documents + 1))  # document indices: 0 and the end of each
        with open(lengths_file, "rb") as lengths:
            while block := lengths.read(4 * chunk):
                out.write(block)
        offset = 0
        with open(lengths_file, "rb") as lengths:
            while block := lengths.read(4 * chunk):
                sizes = np.frombuffer(block, dtype=np.int32).astype(np.int64) * itemsize
                out.write((offset + np.concatenate([[0], np.cumsum(sizes)[:-1]])).astype(np.int64).tobytes())
                offset += int(sizes.sum())
        for start in range(0, documents + 1, chunk):
            out.write(np.arange(start, min(start + chunk, documents + 1), dtype=np.int64).tobytes())


# ---------------------------------------------------------------- fsspec (datatrove's file layer)


def gzip_without_timestamps() -> None:
    """Byte-identical `.gz` outputs: Python's GzipFile stamps the write time into every header,
    and fsspec (through which datatrove's writers open files) offers no way to pass `mtime`.
    Registered again for "gzip" with `mtime=0`; reading is unchanged."""
    from gzip import GzipFile

    from fsspec.compression import register_compression

    def gzip_file(f, mode="rb", **kwargs):
        return GzipFile(fileobj=f, mode=mode, mtime=0, **kwargs)

    register_compression("gzip", gzip_file, "gz", force=True)


# ---------------------------------------------------------------- multiprocess 0.70.19 (datatrove's local executor)


def forkserver_preloading(modules: list[str]) -> None:
    """Worker processes forked from now on by multiprocess's forkserver (the start method of
    datatrove's local executor) come from a server that imported `modules`. The list is read when
    the server starts, at a process's first pool: a server already running without one of them is
    let go (it exits once no worker holds its pipe, and a thread reaps it then rather than leave it
    defunct while this process lives; not waited for here, since a process forked from this one
    since may hold the pipe) and the next pool starts one that imports them. multiprocess 0.70's
    `ForkServer` has no public way to restart."""
    from multiprocess import forkserver, util

    server = forkserver._forkserver
    with server._lock:
        if server._forkserver_pid is not None:
            if set(modules) <= set(server._preload_modules):
                return
            os.close(server._forkserver_alive_fd)
            if not util.is_abstract_socket_namespace(server._forkserver_address):
                os.unlink(server._forkserver_address)
            threading.Thread(target=os.waitpid, args=(server._forkserver_pid, 0), daemon=True,
                             name="reap-forkserver").start()
            server._forkserver_alive_fd = server._forkserver_pid = server._forkserver_address = None
        server._preload_modules = list(modules)
