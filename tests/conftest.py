import hashlib
import json
import os
import re
import stat
import sys
import threading
import time
import zlib
from http.server import BaseHTTPRequestHandler, HTTPServer, ThreadingHTTPServer
from pathlib import Path

import pytest

from configs.experiment import ExperimentConfig
from corpus.sample import write_sample

SAMPLE_PAGES = 40  # five of each template, plus the bad records


# The files that take longest, longest first (`pytest -n 2 --dist loadfile --durations=40`, summed
# per file): `make test` runs two workers a file at a time (and keeps this order:
# --no-loadscope-reorder), so that the two finish together only when the long files start first.
LONGEST_FILES = ["test_slurm.py", "test_pretrain.py", "test_reproducible.py", "test_plan.py", "test_reference.py",
                 "test_speculative.py", "test_many_shards.py", "test_extract.py", "test_split_invariance.py",
                 "test_preflight.py", "test_evaluate.py", "test_gpu_check.py", "test_postprocess.py", "test_labels.py",
                 "test_prefilter.py"]


def pytest_collection_modifyitems(items):
    """The longest files first, then the other tests of a real Slurm, then the other slow ones."""
    rank = {name: i for i, name in enumerate(LONGEST_FILES)}
    items.sort(key=lambda item: (rank.get(item.path.name, len(rank)), "slurm_env" not in item.fixturenames,
                                 item.get_closest_marker("slow") is None))


def pytest_sessionfinish(session):
    """Stop the Manager process megatron's checkpoint writer spawns on a first save: its atexit
    finalizer never runs in an xdist worker, which leaves with os._exit, and the process would outlive the suite."""
    import sys

    writer = sys.modules.get("megatron.core.dist_checkpointing.strategies.filesystem_async")
    queue = getattr(writer, "_results_queue", None)
    if queue is not None and getattr(queue, "_manager", None) is not None:
        queue._manager.shutdown()


@pytest.fixture(scope="session")
def sample_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("sample")
    write_sample(out, SAMPLE_PAGES, seed=1)
    return out


@pytest.fixture(scope="session")
def random_model(tmp_path_factory) -> Path:
    from corpus.extractors.dripper.random_model import build_random_model

    return build_random_model(tmp_path_factory.mktemp("random-labeler"), seed=0, max_positions=4096)


@pytest.fixture
def labeler_pages_file(tmp_path) -> Path:
    """bench.labeler_torch's input at a tiny shape: five prompts' token lengths (one over a 256-token
    context) and the per-page counts of a bench.labeler_gpu run."""
    counts = {"source": "python -m bench.labeler_gpu --arch tiny", "commit": "0123456", "vllm": "0.32.0",
              "arch": "tiny", "pages_labelled": 5, "pages_sent": 6, "context": 8192, "answer_tokens_per_page": 30.0,
              "passes_per_answer_plain": 31.0, "passes_per_answer_drafted": 5.0, "draft_agreement": 0.8,
              "draft_tokens": 8, "pages_differing_from_plain": 0}
    path = tmp_path / "labeler_pages-cpu.json"
    path.write_text(json.dumps({"kind": "labeler_pages", "commit": "0123456", "command": "python -m bench.labeler_torch pages",
                                "date": "2026-01-01", "sets": ["cleaneval"], "pages": 5, "tokenizer": "test",
                                "prompt_tokens": [24, 40, 64, 96, 5000], "counts": counts}))
    return path


def output_hashes(root: Path) -> dict[str, str]:
    """sha256 of every file under `root` but the logs (which hold times and host names)."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file() and "logs" not in p.relative_to(root).parts}


def member_starts(data: bytes) -> list[int]:
    """Where each gzip member (one WARC record) of a .warc.gz starts."""
    starts, pos = [], 0
    while pos < len(data):
        member = zlib.decompressobj(wbits=31)
        member.decompress(data[pos:])
        starts.append(pos)
        pos = len(data) - len(member.unused_data)
    return starts


def damaged_in_the_middle(data: bytes) -> tuple[bytes, int, int]:
    """A .warc.gz with one byte flipped inside its middle gzip member, and where that member starts
    and ends."""
    starts = member_starts(data)
    middle, after = starts[len(starts) // 2], starts[len(starts) // 2 + 1]
    damaged = bytearray(data)
    damaged[(middle + after) // 2] ^= 0xFF
    return bytes(damaged), middle, after


def split_warc(warc, out_dir, files: int) -> list[str]:
    """The records of `warc` dealt round-robin into `files` WARC files (each record's gzip member
    copied byte for byte)."""
    data = warc.read_bytes()
    starts = member_starts(data)
    members = list(zip(starts, [*starts[1:], len(data)], strict=True))
    out_dir.mkdir()
    paths = [out_dir / f"part-{i:02d}.warc.gz" for i in range(files)]
    for i, path in enumerate(paths):
        path.write_bytes(b"".join(data[start:end] for start, end in members[i::files]))
    return [str(p) for p in paths]


def make_config(output_root: Path, warc: Path, arms: dict, **extra) -> ExperimentConfig:
    return ExperimentConfig.model_validate(
        {"name": "test", "output_root": str(output_root), "inputs": {"warc": [str(warc)]}, "arms": arms, **extra}
    )


# ---------------------------------------------------------------- a fake squeue and sacct

# rows file: `%F|%j|%T|%V`, optionally `|%K|%r|%M` (array indices, reason, elapsed); it prints the
# fields --format asks for (an unknown one fails), of the jobs --name names (every job without)
FAKE_SQUEUE = """#!/usr/bin/env python3
import os, sys
args = sys.argv[1:]
assert "--me" in args  # only this user's jobs: another's may share a name
fmt = next(a.split("=", 1)[1] for a in args if a.startswith("--format=")).split("|")
names = next((a.split("=", 1)[1].split(",") for a in args if a.startswith("--name=")), None)
for line in open(os.environ["FAKE_SQUEUE_ROWS"]).read().splitlines():
    values = line.split("|")
    fields = dict(zip(["%F", "%j", "%T", "%V", "%K", "%r", "%M"], values + ["N/A", "None", "0:00"][len(values) - 4:]))
    if names is None or fields["%j"] in names:
        print("|".join(fields[f] for f in fmt))
"""

# rows file: `JobID|JobName|State|ElapsedRaw|AllocCPUS|AllocTRES`, printed for the jobs --name names
FAKE_SACCT = """#!/usr/bin/env python3
import os, sys
args = sys.argv[1:]
assert {"--noheader", "--parsable2", "--allocations", "--format=JobID,JobName,State,ElapsedRaw,AllocCPUS,AllocTRES"} <= set(args)
assert any(a.startswith("--starttime=") for a in args)  # sacct's default window is today only
names = next(a.split("=", 1)[1] for a in args if a.startswith("--name=")).split(",")
for line in open(os.environ["FAKE_SACCT_ROWS"]).read().splitlines():
    if line.split("|")[1] in names:
        print(line)
"""


def install_fakes(bin_dir: Path, monkeypatch, **scripts: str) -> None:
    """Executable scripts (name: text) in `bin_dir`, first on PATH."""
    bin_dir.mkdir(exist_ok=True)
    for name, text in scripts.items():
        # a fake runs on this interpreter, without site-packages: it needs only the standard library, and
        # a `python3` on PATH may be a shim (pyenv's) that takes a quarter of a second to start, every call
        (bin_dir / name).write_text(text.replace("#!/usr/bin/env python3\n", f"#!{sys.executable} -S\n", 1))
        (bin_dir / name).chmod(stat.S_IRWXU)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")


@pytest.fixture
def fake_queue(tmp_path, monkeypatch) -> tuple[Path, Path]:
    """The fake squeue and sacct on PATH; returns their rows files (squeue's, sacct's), empty."""
    install_fakes(tmp_path / "bin", monkeypatch, squeue=FAKE_SQUEUE, sacct=FAKE_SACCT)
    rows, accounting = tmp_path / "squeue.txt", tmp_path / "sacct.txt"
    rows.write_text("")
    accounting.write_text("")
    monkeypatch.setenv("FAKE_SQUEUE_ROWS", str(rows))
    monkeypatch.setenv("FAKE_SACCT_ROWS", str(accounting))
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    return rows, accounting


# ---------------------------------------------------------------- an OpenAI-compatible stub server


class StubCompletionsServer(BaseHTTPRequestHandler):
    """An OpenAI-compatible /v1/completions that answers the regex it was sent: all blocks main."""

    requests: list[dict] = []
    authorizations: set[str] = set()

    def do_POST(self):  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        StubCompletionsServer.requests.append(body)
        StubCompletionsServer.authorizations.add(self.headers.get("Authorization", ""))
        regex = body["structured_outputs"]["regex"]
        ids = [int(x) for x in re.findall(r"(\d+)\(main\|other\)", regex)]
        text = "<answer>" + "".join(f"{i}main" for i in ids) + "</answer>"
        payload = json.dumps({"choices": [{"text": text}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args):
        pass


@pytest.fixture
def stub_server():
    server = HTTPServer(("127.0.0.1", 0), StubCompletionsServer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    StubCompletionsServer.requests = []
    StubCompletionsServer.authorizations = set()
    yield f"http://127.0.0.1:{server.server_port}/v1"
    server.shutdown()


# ---------------------------------------------------------------- an HTTP server of input files, with faults


class FaultyFiles(BaseHTTPRequestHandler):
    """Files of the server's folder, with Range requests (unless `ranges` is False: then every GET gets
    the whole file, 200), and faults in the reads of one file (`faulty`): `schedule` maps the n-th
    read of it (1-based; a ranged GET, or any GET where ranges are off: not fsspec's GET for a size
    where a HEAD failed, which a loaded machine may add) to a fault, `always` is the fault of every
    GET. Faults: "503" (Slow Down), "drop"
    (the connection closed halfway through the body), "stall" (no more bytes for `stall_s`, then
    closed), "empty206" (a 206 without Content-Length and no body), "416" (Range Not Satisfiable),
    "short" (a 206 with the first half of the range asked, its headers saying so), "404" (Not Found,
    though its HEAD found it). A file that is not there answers 404. With `sizeless`, no reply says
    a length (no Content-Length, no Content-Range, no Range requests: each GET streams the file whole
    and the connection's close ends it). `starts`: the first byte each read of the faulty file asked
    for; `requests`: its requests, HEADs included."""

    def do_HEAD(self):  # noqa: N802
        self.answer(body=False)

    def do_GET(self):  # noqa: N802
        self.answer(body=True)

    def answer(self, body: bool) -> None:
        server = self.server
        path = server.folder / self.path.lstrip("/")
        if not path.is_file():
            self.send_error(404)
            return
        data = path.read_bytes()
        start, end = 0, len(data)
        ranged = server.ranges and not server.sizeless and (m := re.fullmatch(r"bytes=(\d+)-(\d*)",
                                                                               self.headers.get("Range", "")))
        if ranged:
            start, end = int(m[1]), min(len(data), int(m[2]) + 1 if m[2] else len(data))
        fault = None
        if path.name == server.faulty:
            server.requests += 1
            if body and ("Range" in self.headers or not server.ranges or server.sizeless):
                server.starts.append(start)
                fault = server.always or server.schedule.get(len(server.starts))
            elif body:
                fault = server.always
        if fault == "404":
            self.send_error(404)
            return
        if fault in ("503", "416"):
            self.send_response(*((503, "Slow Down") if fault == "503" else (416, "Range Not Satisfiable")))
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if fault == "short":
            end = start + (end - start) // 2
        self.send_response(206 if ranged else 200)
        if fault != "empty206" and not server.sizeless:
            self.send_header("Content-Length", str(end - start))
        if ranged:
            self.send_header("Content-Range", f"bytes {start}-{end - 1}/{len(data)}")
        self.send_header("Accept-Ranges", "none" if server.sizeless else "bytes")
        self.end_headers()
        if not body or fault == "empty206":
            return  # HTTP/1.0: the connection closes, and with it the (empty) body
        part = data[start:end]
        if fault in ("drop", "stall"):
            self.wfile.write(part[:len(part) // 2])
            self.wfile.flush()
            time.sleep(server.stall_s if fault == "stall" else 0)
            return  # the connection closes with half the body sent
        self.wfile.write(part)

    def log_message(self, *args):
        pass


@pytest.fixture
def faulty_server(tmp_path):
    """A FaultyFiles server on 127.0.0.1 (HTTP/1.0: a connection per request) of `tmp_path/served`,
    its faulty file `sample.warc.gz`; `server.url(name)` is a file's URL, `server.url()` the server's."""
    folder = tmp_path / "served"
    folder.mkdir()
    server = ThreadingHTTPServer(("127.0.0.1", 0), FaultyFiles)
    server.daemon_threads = True
    server.folder, server.faulty, server.schedule, server.always, server.ranges = folder, "sample.warc.gz", {}, None, True
    server.sizeless = False
    server.requests, server.starts = 0, []
    server.stall_s = 2.0
    server.url = lambda name="": f"http://127.0.0.1:{server.server_port}" + (f"/{name}" if name else "")
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


# ---------------------------------------------------------------- a tokenised corpus to pretrain on

PRETRAIN_MODEL = {"num_layers": 2, "hidden_size": 32, "ffn_hidden_size": 64, "num_attention_heads": 4,
                  "num_query_groups": 2, "seq_length": 32}
PRETRAIN_TOKENS = 4000


def pretrain_experiment(root: Path, training: dict | None = None, **sections) -> dict:
    """An experiment (as a dict) with arms `a` and `b`, a tokenizer, a budget and a tiny decoder."""
    return {
        "name": "pretrain-test", "output_root": str(root), "inputs": {"sample": {}},
        "arms": {"a": {"extractor": "trafilatura"}, "b": {"extractor": "trafilatura"}},
        "tokenizer": {"kind": "sentencepiece", "vocab_size": 600},
        "dataset": {"tokens_per_arm": PRETRAIN_TOKENS},
        "pretrain": {"model": PRETRAIN_MODEL, "seeds": [1], "training": {
            "global_batch_size": 4, "micro_batch_size": 2, "lr": 3e-3, "checkpoint_every": 10, **(training or {})}},
        **sections,
    }


@pytest.fixture(scope="session")
def tiny_lm(tmp_path_factory) -> Path:
    """A random tiny Llama (PRETRAIN_MODEL's shape, 512 positions) with a SentencePiece tokenizer
    (byte fallback: any text), a Hugging Face folder lm-eval's `hf` model loads."""
    import random

    import torch
    from transformers import AutoTokenizer, LlamaForCausalLM

    from configs.model import ModelConfig
    from configs.tokens import TokenizerConfig
    from corpus.sample.text import Prose
    from corpus.tokens.tokenizer import train_sentencepiece
    from pretrain.model import hf_config

    folder = tmp_path_factory.mktemp("tiny-lm")
    rng = random.Random(0)
    train_sentencepiece([Prose(rng).paragraph() for _ in range(300)], TokenizerConfig(kind="sentencepiece", vocab_size=600),
                        folder)
    tokenizer = AutoTokenizer.from_pretrained(str(folder))
    torch.manual_seed(0)
    shape = ModelConfig.model_validate(PRETRAIN_MODEL | {"seq_length": 512})
    LlamaForCausalLM(hf_config(shape, len(tokenizer), tokenizer.bos_token_id, tokenizer.eos_token_id)).save_pretrained(folder)
    return folder


def build_pretrain_corpus(root: Path) -> None:
    """What the corpus stage leaves for pretraining: the tokenizer folder and, for arms a and b,
    the same budget-cut dataset, written with megatron-core's IndexedDatasetBuilder."""
    import random

    import numpy as np
    from megatron.core.datasets.indexed_dataset import IndexedDatasetBuilder
    from tokenizers import Tokenizer

    from corpus.sample.text import Prose
    from corpus.tokens.tokenizer import train_sentencepiece
    from pretrain.verify import record_datasets

    config = ExperimentConfig.model_validate(pretrain_experiment(root))
    rng = random.Random(0)
    texts = ["\n\n".join(Prose(rng).paragraph() for _ in range(3)) for _ in range(60)]
    train_sentencepiece(texts, config.tokenizer, config.tokenizer_dir())
    tokenizer = Tokenizer.from_file(str(config.tokenizer_dir() / "tokenizer.json"))
    eos = tokenizer.token_to_id("</s>")
    stream = [ids + [eos] for ids in (tokenizer.encode(t, add_special_tokens=False).ids for t in texts)]
    for arm in config.arms:
        prefix = config.dataset_prefix(arm)
        prefix.parent.mkdir(parents=True)
        builder = IndexedDatasetBuilder(f"{prefix}.bin", dtype=np.uint16)
        left = PRETRAIN_TOKENS
        for doc in stream:
            doc = doc[:left]
            builder.add_document(np.array(doc), [len(doc)])
            left -= len(doc)
            if not left:
                break
        builder.finalize(f"{prefix}.idx")
    record_datasets(config, list(config.arms))


# ---------------------------------------------------------------- hand-made evaluation results


def write_eval_run(config: ExperimentConfig, arm: str, seed: int, step: int, samples: dict[str, list[dict]],
                   configs: dict[str, dict] | None = None, scored: dict[str, int] | None = None) -> Path:
    """What evaluation.evaluate leaves for one checkpoint: `samples_<task>.jsonl` (`samples`: task ->
    its logged documents, doc_id by position unless given) and a results.json whose per-task score
    is the mean of each logged metric, with lm-eval's sample counts (`scored`, default: the
    logged ones) and task configs (`configs`; default none: only the logged metrics are read)."""
    out = config.eval_dir(arm, seed) / f"step_{step:07d}"
    out.mkdir(parents=True)
    results, counts, task_configs = {}, {}, {}
    for task, docs in samples.items():
        docs = [{"doc_id": i, **d} for i, d in enumerate(docs)]
        metrics = [k for k in docs[0] if isinstance(docs[0][k], float)]
        results[task] = {f"{m},none": sum(d[m] for d in docs) / len(docs) for m in metrics}
        n = (scored or {}).get(task, len(docs))
        counts[task] = {"original": n, "effective": n}
        task_configs[task] = (configs or {}).get(task, {})
        (out / f"samples_{task}.jsonl").write_text("".join(json.dumps(d | {"metrics": metrics}) + "\n" for d in docs))
    (out / "results.json").write_text(json.dumps({"results": results, "group_subtasks": {}, "configs": task_configs,
                                                  "n-samples": counts, "arm": arm, "seed": seed, "step": step}))
    return out


def metric_samples(metric: str, values) -> list[dict]:
    """Logged documents carrying only `metric`'s value each."""
    return [{metric: float(v)} for v in values]


# ---------------------------------------------------------------- real vLLM engines


# vLLM on CPU starts each engine as two spawned processes (engine core, worker), each importing
# torch and vLLM anew: over 20 s of CPU an engine on these cores, for a tiny model that loads in
# 0.3 s. In one process of its own, with these variables, every engine runs inside it instead; one
# OMP thread, or its ops' spinning threads contend with the other pytest worker's (8x slower)
VLLM_HOST_ENVIRONMENT = {"VLLM_ENABLE_V1_MULTIPROCESSING": "0", "OMP_NUM_THREADS": "1"}
# the engines' KV cache, set rather than a share of the machine's memory (which vLLM measures by
# profiling a forward pass, and which another engine in the same process would already hold):
# 256K tokens of the random labeler (1 KiB a token in float32), every test page at once
TEST_KV_CACHE_BYTES = 256 << 20


def fork_by_default() -> None:
    """A spawned process starts its own processes by spawning; datatrove's extractor sandbox
    (its worker a local class) needs them forked, as in the pytest worker."""
    import multiprocessing

    multiprocessing.set_start_method("fork", force=True)


@pytest.fixture(scope="session")
def vllm_host():
    """A process for the tests that start real vLLM engines: `vllm_host.submit(function, *args)`
    runs a module-level function there. Engines never start in the pytest worker itself: an
    in-process vLLM worker pins torch's thread count for good (it replaces `torch.set_num_threads`)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    host = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"), initializer=fork_by_default)
    with pytest.MonkeyPatch.context() as patch:
        for name, value in VLLM_HOST_ENVIRONMENT.items():
            patch.setenv(name, value)
        host.submit(os.getpid).result()  # the process starts now, with this environment
    with host:
        yield host
