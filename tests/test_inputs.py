import gzip
import json
import os
import random
import re
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from itertools import pairwise
from pathlib import Path

import pytest

from configs.experiment import CommonCrawlInput, ExperimentConfig
from conftest import make_config, output_hashes
from corpus.accounting.ledger import arm_ledger, ledgers, summary_line
from corpus.accounting.summary import counters, find_step, merged_stats
from corpus.flow.run import run_corpus
from corpus.read.inputs import resolve_inputs, select_common_crawl
from corpus.read.warc import FAILED, INPUT_FILES, READ_WHOLE, SKIPPED, AccountedWarcReader, InputFileError, read_input_files
from corpus.sample import read_gold
from evaluation.markdown import ledger_text


def fake_crawl(root, snapshot: str, n: int):
    folder = root / "crawl-data" / snapshot
    folder.mkdir(parents=True)
    paths = [f"crawl-data/{snapshot}/segments/{i}/warc/CC-MAIN-{i:05d}.warc.gz" for i in range(n)]
    (folder / "warc.paths.gz").write_bytes(gzip.compress("\n".join(paths).encode()))
    return paths


def test_common_crawl_selection_is_seeded_and_per_snapshot(tmp_path):
    a = fake_crawl(tmp_path, "CC-MAIN-2024-10", 50)
    b = fake_crawl(tmp_path, "CC-MAIN-2024-18", 50)
    cc = CommonCrawlInput(snapshots=["CC-MAIN-2024-10", "CC-MAIN-2024-18"], files_per_snapshot=5,
                          seed=3, base_url=f"file://{tmp_path}/")
    first = select_common_crawl(cc)
    assert first == select_common_crawl(cc)  # same files every time, hence for every arm
    assert len(first) == 10 and set(first[:5]) <= set(a) and set(first[5:]) <= set(b)
    assert first != select_common_crawl(cc.model_copy(update={"seed": 4}))


def test_resolved_paths_file_is_shared_by_every_arm(tmp_path, sample_dir):
    config = make_config(tmp_path / "out", sample_dir / "sample.warc.gz",
                         {"a": {"extractor": "trafilatura"}, "b": {"extractor": "trafilatura"}})
    base, paths_file = resolve_inputs(config)
    assert paths_file.read_text().split() == ["sample.warc.gz"] and base == str(sample_dir)


def test_sample_input_is_generated_once(tmp_path):
    config = ExperimentConfig.model_validate({"name": "t", "output_root": str(tmp_path), "inputs": {"sample": {"pages": 4}},
                                              "arms": {"a": {"extractor": "trafilatura"}}})
    base, _ = resolve_inputs(config)
    warc = tmp_path / "sample" / "sample.warc.gz"
    mtime = warc.stat().st_mtime_ns
    resolve_inputs(config)
    assert warc.stat().st_mtime_ns == mtime


# ---------------------------------------------------------------- input files read whole, or named

FAST = {"safety": {"before_extraction": False}}  # no URL block lists to load: these runs are about reading


def member_starts(data: bytes) -> list[int]:
    """Where each gzip member (one WARC record) of a .warc.gz starts."""
    import zlib

    starts, pos = [], 0
    while pos < len(data):
        member = zlib.decompressobj(wbits=31)
        member.decompress(data[pos:])
        starts.append(pos)
        pos = len(data) - len(member.unused_data)
    return starts


def response_records_before(sample_dir, offset: int) -> int:
    """Response records of the sample WARC whose gzip member ends at or before `offset`."""
    data = (sample_dir / "sample.warc.gz").read_bytes()
    ends = dict(pairwise(member_starts(data) + [len(data)]))
    docs = AccountedWarcReader(str(sample_dir)).read_file("sample.warc.gz")
    return sum(1 for doc in docs if ends[doc.metadata["warc_offset"]] <= offset)


# what the error says was found in each bad input
FOUND = {"truncated.warc.gz": "truncated at byte 60,000, inside the record that starts at byte",
         "random.warc.gz": "not a WARC file: it starts b'"}


def bad_inputs(folder, sample_dir) -> int:
    """A truncated copy of the sample WARC (as an interrupted download leaves it) and 2,000 random
    bytes named .warc.gz, in `folder`; returns the whole response records before the cut."""
    folder.mkdir()
    (folder / "truncated.warc.gz").write_bytes((sample_dir / "sample.warc.gz").read_bytes()[:60_000])
    (folder / "random.warc.gz").write_bytes(random.Random(0).randbytes(2000))
    return response_records_before(sample_dir, 60_000)


@pytest.mark.parametrize("name", ["truncated.warc.gz", "random.warc.gz"])
def test_a_truncated_or_non_warc_file_fails_its_task_with_one_line_naming_it(tmp_path, sample_dir, name):
    before_cut = bad_inputs(tmp_path / "in", sample_dir)
    config_file = tmp_path / "config.json"
    config_file.write_text(json.dumps({"name": "t", "output_root": str(tmp_path / "out"),
                                       "inputs": {"warc": [str(tmp_path / "in" / name)]},
                                       "arms": {"a": {"extractor": "trafilatura"}}, "postprocess": FAST}))
    repo = Path(__file__).resolve().parents[1]
    done = subprocess.run([sys.executable, "-m", "corpus.flow", str(config_file), "--until", "extract"], capture_output=True,
                          text=True, cwd=repo, env={**os.environ, "PYTHONPATH": str(repo)}, timeout=120)
    assert done.returncode == 1
    error, log_line = done.stderr.splitlines()  # the error in one line, then where the log is: no traceback
    assert error.startswith(f"✗ extract-a failed: InputFileError: {tmp_path / 'in' / name}: {FOUND[name]}")
    assert error.endswith("or set inputs.on_corrupt: skip to count it as lost and go on")
    assert log_line == f"  log: {tmp_path / 'out' / 'logs' / 'extract-a.log'}"
    logs = tmp_path / "out" / "extract" / "a" / "logs"
    assert not (logs / "completions").exists()  # the task is not done: a re-run reads the file again
    [record] = read_input_files(logs / INPUT_FILES)
    assert record["outcome"] == FAILED and not record["ended_cleanly"]
    assert record["records"] == (before_cut if name == "truncated.warc.gz" else 0)


def test_skipped_files_are_counted_and_named_in_the_ledger(tmp_path, sample_dir):
    before_cut = bad_inputs(tmp_path / "in", sample_dir)
    (tmp_path / "in" / "sample.warc.gz").write_bytes((sample_dir / "sample.warc.gz").read_bytes())
    config = make_config(tmp_path / "out", tmp_path / "in" / "*.warc.gz", {"a": {"extractor": "trafilatura"}},
                         postprocess=FAST)
    config = config.model_copy(update={"inputs": config.inputs.model_copy(update={"on_corrupt": "skip"})})
    [summary] = run_corpus(config, until="extract")
    whole = len(read_gold(sample_dir / "gold.jsonl"))
    assert summary["complete"] and summary["balanced"] and summary["records"] == whole + before_cut
    files = {f["file"]: f for f in read_input_files(config.arm_dir("a") / "logs" / INPUT_FILES)}
    assert {name: (f["outcome"], f["records"]) for name, f in files.items()} == {
        "random.warc.gz": (SKIPPED, 0), "sample.warc.gz": (READ_WHOLE, whole),
        "truncated.warc.gz": (SKIPPED, before_cut)}
    assert files["truncated.warc.gz"]["fault"].startswith(FOUND["truncated.warc.gz"])
    ledger = arm_ledger(config, "a")
    assert not ledger["accounted"] and ledger["input_files"]["outcomes"] == {READ_WHOLE: 1, SKIPPED: 2}
    line = summary_line(ledger, [r["stage"] for r in ledger["rows"]])
    assert ("every record accounted for: NO (2 input files not read whole: random.warc.gz skipped as "
            "corrupt, truncated.warc.gz skipped as corrupt; unfinished: exact-signatures-a") in line
    assert line in ledger_text({"ledgers": [ledger]})  # the report's ledger section


def test_the_arm_that_read_other_records_than_most_is_the_one_named(tmp_path, sample_dir):
    config = make_config(tmp_path, sample_dir / "sample.warc.gz", {a: {"extractor": "trafilatura"} for a in "abc"})
    for arm, (first, second) in {"a": (9, 5), "b": (10, 5), "c": (10, 5)}.items():
        logs = config.arm_dir(arm) / "logs" / INPUT_FILES
        logs.mkdir(parents=True)
        lines = [{"file": f, "records": n, "retries": 0, "outcome": READ_WHOLE}
                 for f, n in (("f1.warc.gz", first), ("f2.warc.gz", second))]
        (logs / "00000.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    assert {ledger["arm"]: ledger.get("records_differ") for ledger in ledgers(config)} == {
        "a": "read 14 records where b, c read 15 (f1.warc.gz 9 against 10)", "b": None, "c": None}


def test_a_corrupt_gzip_member_in_the_middle_of_a_file_is_found(tmp_path, sample_dir):
    data = bytearray((sample_dir / "sample.warc.gz").read_bytes())
    starts = member_starts(bytes(data))
    middle, after = starts[len(starts) // 2], starts[len(starts) // 2 + 1]
    data[(middle + after) // 2] ^= 0xFF
    (tmp_path / "damaged.warc.gz").write_bytes(bytes(data))
    with pytest.raises(InputFileError) as e:
        list(AccountedWarcReader(str(tmp_path)).read_file("damaged.warc.gz"))
    assert f"damaged.warc.gz: corrupt gzip member at byte {middle:,} (" in str(e.value)
    assert f"after {response_records_before(sample_dir, middle):,} records. The file is damaged" in str(e.value)


def test_uncompressed_warc_files_are_read_whole_or_named(tmp_path, sample_dir):
    data = (sample_dir / "sample.warc.gz").read_bytes()
    starts = member_starts(data)
    plain = b"".join(gzip.decompress(data[a:b]) for a, b in pairwise(starts + [len(data)]))
    (tmp_path / "sample.warc").write_bytes(plain)
    (tmp_path / "cut.warc").write_bytes(plain[:len(plain) // 2])
    expected = [(d.id, d.text) for d in AccountedWarcReader(str(sample_dir)).read_file("sample.warc.gz")]
    assert [(d.id, d.text) for d in AccountedWarcReader(str(tmp_path)).read_file("sample.warc")] == expected
    with pytest.raises(InputFileError, match=rf"cut.warc: truncated at byte {len(plain) // 2:,}, inside the record"):
        list(AccountedWarcReader(str(tmp_path)).read_file("cut.warc"))


# ---------------------------------------------------------------- transient read errors, over HTTP


class FaultyFiles(BaseHTTPRequestHandler):
    """Files of the server's folder with Range requests, and faults in the requests for one file:
    `schedule` maps the n-th GET of it (1-based) to "503" (Slow Down), "drop" (the connection
    closed halfway through the body) or "stall" (no more bytes for `stall_s`, then closed); with
    `always`, every request for it answers 503. `starts`: the first byte each GET asked for."""

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
        if m := re.fullmatch(r"bytes=(\d+)-(\d*)", self.headers.get("Range", "")):
            start, end = int(m[1]), min(len(data), int(m[2]) + 1 if m[2] else len(data))
        fault = None
        if path.name == server.faulty:
            server.requests += 1
            if body:
                server.starts.append(start)
                fault = "503" if server.always else server.schedule.get(len(server.starts))
        if fault == "503":
            self.send_response(503, "Slow Down")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.send_response(206 if "Range" in self.headers else 200)
        self.send_header("Content-Length", str(end - start))
        self.send_header("Content-Range", f"bytes {start}-{end - 1}/{len(data)}")
        self.send_header("Accept-Ranges", "bytes")
        self.end_headers()
        if not body:
            return
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
    """A server on 127.0.0.1 (HTTP/1.0: a connection per request) of `tmp_path/served`."""
    folder = tmp_path / "served"
    folder.mkdir()
    server = ThreadingHTTPServer(("127.0.0.1", 0), FaultyFiles)
    server.daemon_threads = True
    server.folder, server.faulty, server.schedule, server.always = folder, "sample.warc.gz", {}, False
    server.requests, server.starts = 0, []
    server.stall_s = 2.0
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


# small reads and a short timeout, so that the sample WARC takes several requests and a stall fails fast
REMOTE = {"storage_options": {"block_size": 4096}, "read_timeout_s": 0.5,
          "retries": {"attempts": 3, "backoff_s": 0.01, "max_backoff_s": 0.05}}


def test_transient_errors_resume_at_the_next_unread_record(tmp_path, sample_dir, faulty_server):
    """Common Crawl's path (common_crawl.base_url, read through fsspec) from a server that throttles
    the first read, drops a connection mid-record and stalls another: the same documents, byte for
    byte, as a clean local read, each fault retried once."""
    served = faulty_server.folder
    (served / "sample.warc.gz").write_bytes((sample_dir / "sample.warc.gz").read_bytes())
    listing = served / "crawl-data" / "CC-MAIN-2024-10" / "warc.paths.gz"
    listing.parent.mkdir(parents=True)
    listing.write_bytes(gzip.compress(b"sample.warc.gz\n"))
    drop, stall = random.Random(21).sample(range(3, 8), 2)  # which GETs fail after the first read some records (seeded)
    faulty_server.schedule = {1: "503", drop: "drop", stall: "stall"}
    arms = {"a": {"extractor": "trafilatura"}}
    local = make_config(tmp_path / "local", sample_dir / "sample.warc.gz", arms, postprocess=FAST)
    remote = ExperimentConfig.model_validate({
        "name": "t", "output_root": str(tmp_path / "remote"), "arms": arms, "postprocess": FAST,
        "inputs": {"common_crawl": {"snapshots": ["CC-MAIN-2024-10"], "files_per_snapshot": 1,
                                    "base_url": f"http://127.0.0.1:{faulty_server.server_port}/"}, **REMOTE}})
    run_corpus(local, until="extract")
    started = time.monotonic()
    [summary] = run_corpus(remote, until="extract")
    assert time.monotonic() - started < 30
    assert output_hashes(remote.arm_dir("a") / "output") == output_hashes(local.arm_dir("a") / "output")
    assert summary["balanced"] and summary["input_files"]["retries"] == 3
    assert counters(find_step(merged_stats(remote.arm_dir("a") / "logs")[0], AccountedWarcReader))["read_retries"] == 3
    [record] = read_input_files(remote.arm_dir("a") / "logs" / INPUT_FILES)
    assert record["outcome"] == READ_WHOLE and record["retries"] == 3
    # the GET after each fault mid-file asks for the file from the start of its next unread record
    records = set(member_starts((sample_dir / "sample.warc.gz").read_bytes()))
    resumed = [faulty_server.starts[n] for n in (drop, stall)]
    assert all(start in records and start > 0 for start in resumed), (resumed, faulty_server.starts)
    assert len(faulty_server.starts) < 20


def test_a_file_that_keeps_failing_fails_its_task_after_the_limit(tmp_path, sample_dir, faulty_server):
    (faulty_server.folder / "sample.warc.gz").write_bytes((sample_dir / "sample.warc.gz").read_bytes())
    faulty_server.always = True
    url = f"http://127.0.0.1:{faulty_server.server_port}/sample.warc.gz"
    config = ExperimentConfig.model_validate({
        "name": "t", "output_root": str(tmp_path / "out"), "arms": {"a": {"extractor": "trafilatura"}},
        "postprocess": FAST, "inputs": {"warc": [url], **REMOTE}})
    started = time.monotonic()
    with pytest.raises(InputFileError) as e:
        run_corpus(config, until="extract")
    assert time.monotonic() - started < 30
    message = str(e.value)
    assert message.startswith(f"{url}: reading failed 4 times in a row at byte 0, after 0 records: ")
    assert "503" in message and "Slow Down" in message and "\n" not in message
    # each try: fsspec's HEAD, then its GET when the HEAD fails
    assert faulty_server.requests == 2 * 4
    [record] = read_input_files(config.arm_dir("a") / "logs" / INPUT_FILES)
    assert record["outcome"] == FAILED and record["retries"] == 3
    assert not (config.arm_dir("a") / "logs" / "completions").exists()


class FakeBotocore:
    """What `botocore.exceptions` holds, for errors as s3fs raises them (botocore is not installed here)."""

    class HTTPClientError(Exception):
        pass

    class ConnectionError(Exception):  # botocore's own, not the builtin
        pass

    class ClientError(Exception):
        def __init__(self, code: str, status: int):
            super().__init__(code)
            self.response = {"Error": {"Code": code}, "ResponseMetadata": {"HTTPStatusCode": status}}


def s3fs_error(code: str, status: int, translated: type[OSError] = OSError) -> OSError:
    """An error as s3fs raises it: its own OSError, botocore's ClientError as the cause."""
    error = translated(f"{code}, HTTP Status code: {status}")
    error.__cause__ = FakeBotocore.ClientError(code, status)
    return error


def test_transient_errors_are_told_from_lasting_ones(monkeypatch):
    import aiohttp

    from corpus.read.warc import retryable

    monkeypatch.setitem(sys.modules, "botocore.exceptions", FakeBotocore)
    not_found = FileNotFoundError("http://host/x.warc.gz")
    not_found.__cause__ = aiohttp.ClientResponseError(None, (), status=503, message="Slow Down")  # fsspec's HEAD, then GET
    transient = [TimeoutError(), ConnectionResetError(), aiohttp.ClientPayloadError("cut"),
                 aiohttp.ServerDisconnectedError(), aiohttp.ClientResponseError(None, (), status=500), not_found,
                 aiohttp.ClientResponseError(None, (), status=429), s3fs_error("SlowDown", 503),
                 s3fs_error("InternalError", 500), FakeBotocore.HTTPClientError("read timeout"),
                 FakeBotocore.ConnectionError("endpoint")]
    lasting = [FileNotFoundError("x.warc.gz"), PermissionError(), aiohttp.ClientResponseError(None, (), status=404),
               s3fs_error("AccessDenied", 403, PermissionError), s3fs_error("NoSuchKey", 404, FileNotFoundError),
               ValueError("not a range request")]
    assert [retryable(e) for e in transient] == [True] * len(transient)
    assert [retryable(e) for e in lasting] == [False] * len(lasting)


def test_a_warc_in_one_gzip_stream_is_refused_with_how_to_fix_it(tmp_path, sample_dir):
    data = (sample_dir / "sample.warc.gz").read_bytes()
    plain = b"".join(gzip.decompress(data[a:b]) for a, b in pairwise(member_starts(data) + [len(data)]))
    (tmp_path / "one.warc.gz").write_bytes(gzip.compress(plain))
    with pytest.raises(InputFileError, match=r"one.warc.gz: the gzip member at byte 0 holds more than one record, after 0 "
                                             r"records. The whole file is one gzip stream: recompress it"):
        list(AccountedWarcReader(str(tmp_path)).read_file("one.warc.gz"))
