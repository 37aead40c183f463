import base64
import gzip
import hashlib
import io
import json
import os
import random
import re
import subprocess
import sys
import time
from collections import Counter
from itertools import pairwise
from pathlib import Path

import pytest

from configs.experiment import ExperimentConfig
from configs.inputs import CommonCrawlInput
from conftest import damaged_in_the_middle, make_config, member_starts, output_hashes
from corpus.accounting.ledger import accounted_text, arm_ledger, ledgers, overlap, print_ledger, summary_line
from corpus.accounting.summary import counters, files_cell, find_step, merged_stats
from corpus.flow.run import run_corpus
from corpus.read.framing import CorruptWarc, check_digest
from corpus.read.inputs import InputListError, resolve_inputs, select_common_crawl
from corpus.read.manifest import MANIFEST, read_manifest, write_manifest
from corpus.read.warc import (
    DAMAGED,
    FAILED,
    INPUT_FILES,
    READ_WHOLE,
    SKIPPED,
    AccountedWarcReader,
    InputFileError,
    file_record,
    read_input_files,
)
from corpus.sample import read_gold
from evaluation.markdown import ledger_text
from slurm import console


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
    assert ("every record accounted for: NO (2 input files not read whole: random.warc.gz skipped (not warc; 0 records "
            f"read), truncated.warc.gz skipped (truncated; {before_cut} records read); unfinished: exact-signatures-a") in line
    assert line in ledger_text({"ledgers": [ledger]})  # the report's ledger section


def per_file_logs(config, arm: str, files: dict[str, tuple[int, str]]) -> None:
    """An arm's per-file records as its reader writes them: file -> (records, outcome)."""
    logs = config.arm_dir(arm) / "logs" / INPUT_FILES
    logs.mkdir(parents=True)
    lines = [file_record(f) | {"records": n, "outcome": outcome, "reason": None if outcome == READ_WHOLE else "truncated"}
             for f, (n, outcome) in files.items()]
    (logs / "00000.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))


def test_each_file_is_checked_against_the_records_it_holds_without_blaming_an_arm_by_majority(tmp_path, sample_dir):
    """Whole reads that disagree count against every arm that made one; a count the input manifest
    gives names only the arm that differs from it; a file not read whole shows its count read of
    the count it holds; an arm that never ran is `not run`, not `read 0 records`."""
    config = make_config(tmp_path, sample_dir / "sample.warc.gz", {a: {"extractor": "trafilatura"} for a in "abcd"})
    per_file_logs(config, "a", {"f1.warc.gz": (9, READ_WHOLE), "f2.warc.gz": (3, SKIPPED)})
    per_file_logs(config, "b", {"f1.warc.gz": (10, READ_WHOLE), "f2.warc.gz": (5, READ_WHOLE)})
    per_file_logs(config, "c", {"f1.warc.gz": (10, READ_WHOLE), "f2.warc.gz": (5, READ_WHOLE)})
    arms = {ledger["arm"]: ledger for ledger in ledgers(config)}
    assert {arm: ledger.get("records_differ") for arm, ledger in arms.items()} == {
        "a": "f1.warc.gz read whole with 9 records, 10 by b, 10 by c: the arms read different bytes of it",
        "b": "f1.warc.gz read whole with 10 records, 9 by a, 10 by c: the arms read different bytes of it",
        "c": "f1.warc.gz read whole with 10 records, 9 by a, 10 by b: the arms read different bytes of it", "d": None}
    assert "f2.warc.gz skipped (truncated; 3 of 5 records)" in accounted_text(arms["a"])
    assert accounted_text(arms["d"]) == "NO (not run)"
    assert summary_line(arms["d"], []) == "  d: nothing yet; every record accounted for: NO (not run)"
    (tmp_path / "inputs").mkdir()
    write_manifest(tmp_path / "inputs" / MANIFEST, "/in", [{"path": "f1.warc.gz", "size": 1, "records": 10},
                                                           {"path": "f2.warc.gz", "size": 1}])
    assert {ledger["arm"]: ledger.get("records_differ") for ledger in ledgers(config)} == {
        "a": "f1.warc.gz read whole with 9 records, 10 by the input manifest", "b": None, "c": None, "d": None}


def test_a_corrupt_gzip_member_fails_its_task_or_is_passed_over_with_the_records_after_it(tmp_path, sample_dir):
    damaged, middle, after = damaged_in_the_middle((sample_dir / "sample.warc.gz").read_bytes())
    (tmp_path / "damaged.warc.gz").write_bytes(damaged)
    with pytest.raises(InputFileError) as e:
        list(AccountedWarcReader(str(tmp_path)).read_file("damaged.warc.gz"))
    assert f"damaged.warc.gz: corrupt gzip member at byte {middle:,} (" in str(e.value)
    assert f"after {response_records_before(sample_dir, middle):,} records. The file is damaged" in str(e.value)
    reader = AccountedWarcReader(str(tmp_path), on_corrupt="skip")
    read = {d.id: d.text for d in reader.read_file("damaged.warc.gz")}
    clean = {d.id: (d.text, d.metadata["warc_offset"]) for d in AccountedWarcReader(str(sample_dir)).read_file("sample.warc.gz")}
    assert read == {i: text for i, (text, offset) in clean.items() if offset != middle}  # every record but the damaged one
    entry = reader.files["damaged.warc.gz"]
    assert entry["outcome"] == DAMAGED and entry["ended_cleanly"] and entry["records"] == len(clean) - 1
    assert [(d["at"], d["bytes"], d["records"]) for d in entry["damage"]] == [(middle, after - middle, 1)]


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


def test_zero_padding_after_the_last_record_is_read_whole_with_a_warning(tmp_path, sample_dir):
    data = (sample_dir / "sample.warc.gz").read_bytes()
    plain = b"".join(gzip.decompress(data[a:b]) for a, b in pairwise(member_starts(data) + [len(data)]))
    (tmp_path / "padded.warc.gz").write_bytes(data + bytes(4096))
    (tmp_path / "padded.warc").write_bytes(plain + bytes(5000))
    (tmp_path / "junk.warc.gz").write_bytes(data + bytes(10) + b"junk")
    expected = [(d.id, d.text) for d in AccountedWarcReader(str(sample_dir)).read_file("sample.warc.gz")]
    reader = AccountedWarcReader(str(tmp_path))
    for name, zeros in (("padded.warc.gz", 4096), ("padded.warc", 5000)):
        assert [(d.id, d.text) for d in reader.read_file(name)] == expected
        assert reader.files[name]["outcome"] == READ_WHOLE and reader.files[name]["padding_bytes"] == zeros
    with pytest.raises(InputFileError, match=rf"junk.warc.gz: 10 zero bytes at byte {len(data):,}, then b'junk'"):
        list(reader.read_file("junk.warc.gz"))


def test_a_file_is_read_to_the_size_and_sha256_its_manifest_lists(tmp_path, sample_dir):
    """A copy cut exactly at a record boundary looks whole: only a size known from elsewhere finds it;
    a copy of the right size with other bytes (here uncompressed, no CRC to catch it, and its records'
    digests not checked) fails its sha256."""
    data = (sample_dir / "sample.warc.gz").read_bytes()
    starts = member_starts(data)
    plain = b"".join(gzip.decompress(data[a:b]) for a, b in pairwise(starts + [len(data)]))
    (tmp_path / "cut.warc.gz").write_bytes(data[:starts[30]])
    (tmp_path / "other.warc").write_bytes(plain.replace(b"<title>", b"<TITLE>", 1))
    write_manifest(tmp_path / MANIFEST, str(tmp_path), [
        {"path": "cut.warc.gz", "size": len(data)},
        {"path": "other.warc", "size": len(plain), "sha256": hashlib.sha256(plain).hexdigest()}])
    reader = AccountedWarcReader(str(tmp_path), manifest=str(tmp_path / MANIFEST), verify_digests=False)
    reader.expected = read_manifest(tmp_path / MANIFEST)["files"]
    before = response_records_before(sample_dir, starts[30])
    with pytest.raises(InputFileError, match=rf"cut.warc.gz: it ends at byte {starts[30]:,}, at a record boundary, "
                                             rf"{len(data) - starts[30]:,} bytes before the {len(data):,} the input list "
                                             rf"records, after {before} records. An interrupted download"):
        list(reader.read_file("cut.warc.gz"))
    with pytest.raises(InputFileError, match=r"other.warc: its sha256 is [0-9a-f]{64}, the input list's [0-9a-f]{64}, "
                                             r"after \d+ records. The file is not the one its manifest describes"):
        list(reader.read_file("other.warc"))


# ---------------------------------------------------------------- transient read errors, over HTTP


# small reads and a short timeout, so that the sample WARC takes several requests and a stall fails fast
REMOTE = {"storage_options": {"block_size": 4096}, "read_timeout_s": 0.5,
          "retries": {"attempts": 3, "backoff_s": 0.01, "max_backoff_s": 0.05}}
ARM = {"a": {"extractor": "trafilatura"}}


@pytest.fixture(scope="module")
def clean_extraction(tmp_path_factory, sample_dir) -> dict[str, str]:
    """The bytes (sha256 by file) of arm `a`'s extracted documents from a clean local read of the sample."""
    config = make_config(tmp_path_factory.mktemp("clean"), sample_dir / "sample.warc.gz", ARM, postprocess=FAST)
    run_corpus(config, until="extract")
    return output_hashes(config.arm_dir("a") / "output")


def remote_config(root, urls: list[str], **inputs) -> ExperimentConfig:
    return ExperimentConfig.model_validate({"name": "t", "output_root": str(root), "arms": ARM, "postprocess": FAST,
                                            "inputs": {"warc": urls, **REMOTE, **inputs}})


def test_transient_errors_resume_at_the_next_unread_record(tmp_path, sample_dir, faulty_server, clean_extraction):
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
    remote = ExperimentConfig.model_validate({
        "name": "t", "output_root": str(tmp_path / "remote"), "arms": ARM, "postprocess": FAST,
        "inputs": {"common_crawl": {"snapshots": ["CC-MAIN-2024-10"], "files_per_snapshot": 1,
                                    "base_url": faulty_server.url()}, **REMOTE}})
    started = time.monotonic()
    [summary] = run_corpus(remote, until="extract")
    assert time.monotonic() - started < 30
    assert output_hashes(remote.arm_dir("a") / "output") == clean_extraction
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
    faulty_server.always = "503"
    url = faulty_server.url("sample.warc.gz")
    config = remote_config(tmp_path / "out", [url])
    started = time.monotonic()
    with pytest.raises(InputFileError) as e:
        run_corpus(config, until="extract")
    assert time.monotonic() - started < 30
    message = str(e.value)
    assert message.startswith(f"{url}: reading failed 4 times in a row at byte 0, after 0 records: ")
    assert "503" in message and "Slow Down" in message and "\n" not in message
    assert len(faulty_server.starts) == 4  # a read a try
    [record] = read_input_files(config.arm_dir("a") / "logs" / INPUT_FILES)
    assert record["outcome"] == FAILED and record["retries"] == 3
    assert not (config.arm_dir("a") / "logs" / "completions").exists()


def test_a_short_or_empty_reply_is_retried_never_read_as_the_end_of_the_file(tmp_path, sample_dir, faulty_server,
                                                                            clean_extraction):
    """The replies a dropped connection's resume can get: an empty 206 without length (right after
    the drop), a 416, a 206 with half the range asked: each is retried from the next unread record
    (the half range is simply asked on from where it ends), and the documents are a clean read's."""
    (faulty_server.folder / "sample.warc.gz").write_bytes((sample_dir / "sample.warc.gz").read_bytes())
    faulty_server.schedule = {2: "drop", 3: "empty206", 5: "416", 7: "short"}
    config = remote_config(tmp_path / "out", [faulty_server.url("sample.warc.gz")])
    [summary] = run_corpus(config, until="extract")
    assert output_hashes(config.arm_dir("a") / "output") == clean_extraction
    [record] = read_input_files(config.arm_dir("a") / "logs" / INPUT_FILES)
    assert record["outcome"] == READ_WHOLE and record["retries"] == 3 and summary["balanced"]
    faulty_server.always = "empty206"  # a server that never sends the rest: the task fails, naming the file
    with pytest.raises(InputFileError, match=r"sample.warc.gz: reading failed 4 times in a row at byte 0, after 0 records: "
                                             r"ShortReply: the reply for byte 0 on ended early"):
        list(AccountedWarcReader((faulty_server.url(), {"block_size": 4096}), retries=config.inputs.retries)
             .read_file("sample.warc.gz"))


def test_a_server_that_ignores_range_requests_is_named_or_streamed(tmp_path, sample_dir, faulty_server, clean_extraction):
    (faulty_server.folder / "sample.warc.gz").write_bytes((sample_dir / "sample.warc.gz").read_bytes())
    faulty_server.ranges = False
    url = faulty_server.url("sample.warc.gz")
    with pytest.raises(InputFileError, match=rf"^{url}: the server does not answer Range requests \(asked for part of the file, "
                                             r"it sent all of it\), so no read can resume mid-file. Set "
                                             r"inputs.storage_options.block_size: 0"):
        list(AccountedWarcReader((faulty_server.url(), {"block_size": 4096})).read_file("sample.warc.gz"))
    faulty_server.starts, faulty_server.schedule = [], {1: "drop"}  # streamed, a retry reads from the start to where it was
    config = remote_config(tmp_path / "out", [url], storage_options={"block_size": 0})
    run_corpus(config, until="extract")
    assert output_hashes(config.arm_dir("a") / "output") == clean_extraction
    assert read_input_files(config.arm_dir("a") / "logs" / INPUT_FILES)[0]["retries"] == 1


def test_a_missing_file_is_named_with_what_to_check(tmp_path, sample_dir, faulty_server):
    """Not there when the list is made: the run is refused, naming the URL; gone since (a file the list
    has): failed, or skipped and named in the ledger."""
    config = remote_config(tmp_path / "out", [faulty_server.url("CC-MAIN-missing.warc.gz")])
    with pytest.raises(InputListError, match=r"1 of 1 input files could not be listed: http://127.0.0.1:\d+/"
                                             r"CC-MAIN-missing.warc.gz \(HTTP 404\). Check the paths \(inputs.warc\)"):
        run_corpus(config, until="extract")
    reader = AccountedWarcReader((faulty_server.url(), {}), on_corrupt="skip")
    assert list(reader.read_file("gone.warc.gz")) == []
    assert (reader.files["gone.warc.gz"]["outcome"], reader.files["gone.warc.gz"]["fault"]) == (SKIPPED, "not found (HTTP 404)")


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
                 aiohttp.ClientResponseError(None, (), status=429), aiohttp.ClientResponseError(None, (), status=416),
                 s3fs_error("SlowDown", 503),
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


# ---------------------------------------------------------------- record digests


def plain_records(sample_dir) -> list[bytes]:
    """The sample WARC's records, uncompressed, each with the blank lines that end it."""
    data = (sample_dir / "sample.warc.gz").read_bytes()
    return [gzip.decompress(data[a:b]) for a, b in pairwise(member_starts(data) + [len(data)])]


def is_response(record: bytes) -> bool:
    return b"\r\nWARC-Type: response\r\n" in record[:2000]


def test_a_record_whose_content_length_covers_the_next_fails_its_digest_and_is_counted_as_damage(tmp_path, sample_dir):
    """An uncompressed WARC whose record declares a Content-Length that covers the next record: read
    without digests, it reads as whole and the record it covers is lost without a word. Its
    WARC-Block-Digest names it: `fail` stops the task on it; `skip` passes over it, goes on at the
    record it covered, and the ledger says NO, naming the file and the digest."""
    records = plain_records(sample_dir)
    k = next(i for i in range(5, len(records) - 1) if is_response(records[i]) and is_response(records[i + 1]))
    head, _, rest = records[k].partition(b"\r\n\r\n")
    length = int(re.search(rb"Content-Length: (\d+)", head)[1])
    covering = re.sub(rb"Content-Length: \d+", b"Content-Length: %d" % (length + len(records[k + 1])), head) + b"\r\n\r\n" + rest
    data = b"".join(records[:k]) + covering + b"".join(records[k + 1:])
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "covering.warc").write_bytes(data)
    responses = sum(map(is_response, records))
    unchecked = AccountedWarcReader(str(tmp_path / "in"), verify_digests=False)
    assert len(list(unchecked.read_file("covering.warc"))) == responses - 1  # one record lost, silently
    assert unchecked.files["covering.warc"]["outcome"] == READ_WHOLE
    start = len(b"".join(records[:k]))
    after = start + len(covering)  # where the record it covers starts
    with pytest.raises(InputFileError, match=rf"covering.warc: the record at byte {start:,} does not give its "
                                             r"WARC-Block-Digest \(sha1:\w+; its bytes give sha1:\w+\), after \d+ records. "
                                             r"The record's bytes are not those its writer digested"):
        list(AccountedWarcReader(str(tmp_path / "in")).read_file("covering.warc"))
    config = make_config(tmp_path / "out", tmp_path / "in" / "covering.warc", ARM, postprocess=FAST)
    [summary] = run_corpus(config.model_copy(update={"inputs": config.inputs.model_copy(update={"on_corrupt": "skip"})}),
                           until="extract")
    [entry] = read_input_files(config.arm_dir("a") / "logs" / INPUT_FILES)
    assert (entry["outcome"], entry["records"], entry["digests_checked"]) == (DAMAGED, responses - 1, responses - 1)
    assert [(d["at"], d["reason"], d["bytes"], d["records"]) for d in entry["damage"]] == [(start, "digest", after - start, 1)]
    assert summary["balanced"] and summary["records"] == responses - 1
    assert accounted_text(arm_ledger(config, "a")).startswith(
        f"NO (1 input file not read whole: covering.warc read around damage (digest; {after - start:,} bytes unreadable in 1 "
        f"place, at least 1 record lost; {responses - 1} records read)")


def test_a_gzip_member_rewritten_with_other_bytes_fails_its_digest(tmp_path, sample_dir):
    """A record changed before it was compressed (its gzip CRC is right): its digest finds it, and
    under `skip` the reader goes on at the next member."""
    data = (sample_dir / "sample.warc.gz").read_bytes()
    starts = member_starts(data)
    k = next(i for i in range(len(starts) // 2, len(starts) - 1)
             if is_response(gzip.decompress(data[starts[i]:starts[i + 1]])))
    changed = gzip.compress(gzip.decompress(data[starts[k]:starts[k + 1]]).replace(b"<title>", b"<TITLE>", 1), mtime=0)
    (tmp_path / "changed.warc.gz").write_bytes(data[:starts[k]] + changed + data[starts[k + 1]:])
    clean = {d.id for d in AccountedWarcReader(str(sample_dir)).read_file("sample.warc.gz")}
    reader = AccountedWarcReader(str(tmp_path), on_corrupt="skip")
    read = {d.id for d in reader.read_file("changed.warc.gz")}
    entry = reader.files["changed.warc.gz"]
    assert len(clean - read) == 1 and read < clean and entry["outcome"] == DAMAGED
    assert [(d["at"], d["reason"], d["bytes"]) for d in entry["damage"]] == [(starts[k], "digest", len(changed))]


def warc_record(block: bytes, kind: str = "response", **headers: str) -> bytes:
    fields = "".join(f"{name.replace('_', '-')}: {value}\r\n" for name, value in headers.items())
    return (f"WARC/1.0\r\nWARC-Type: {kind}\r\n{fields}Content-Length: {len(block)}\r\n\r\n").encode() + block + b"\r\n\r\n"


HTTP_HEAD, BODY = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n", b"<html><p>digested</p></html>"


@pytest.mark.parametrize(("headers", "checked"), [
    ({"WARC_Block_Digest": "sha1:" + base64.b32encode(hashlib.sha1(HTTP_HEAD + BODY).digest()).decode()}, True),
    ({"WARC_Block_Digest": "sha256:" + hashlib.sha256(HTTP_HEAD + BODY).hexdigest()}, True),  # base16
    ({"WARC_Block_Digest": "sha1:" + base64.b64encode(hashlib.sha1(HTTP_HEAD + BODY).digest()).decode()}, True),
    ({"WARC_Block_Digest": "sha1:" + base64.b32encode(hashlib.sha1(BODY).digest()).decode()}, None),  # the payload's
    ({"WARC_Payload_Digest": "sha1:" + base64.b32encode(hashlib.sha1(BODY).digest()).decode()}, True),
    ({"WARC_Payload_Digest": "sha1:" + base64.b32encode(hashlib.sha1(HTTP_HEAD).digest()).decode()}, None),
    ({"WARC_Payload_Digest": "sha1:AAAA"}, None),  # not a digest of that length at all
    ({"WARC_Block_Digest": "blake9:AAAA"}, False),  # a hash hashlib lacks: not checked
    ({}, False),
])
def test_a_record_is_checked_against_the_digest_it_carries(headers, checked):
    """Block digest, else payload digest; base32, base16 or base64; None: the check fails."""
    record = warc_record(HTTP_HEAD + BODY, **headers)
    if checked is None:
        with pytest.raises(CorruptWarc, match=r"the record at byte 7 does not give its WARC-(Block|Payload)-Digest"):
            check_digest(record, 7)
    else:
        assert check_digest(record, 7) is checked


def test_a_payload_digest_after_an_http_header_of_bare_lf_lines_is_checked_from_its_end():
    """A server's header lines may end in a bare LF (HTTP parsers take them, and Heritrix, which
    writes a payload digest and no block digest, digests the body after them): the body starts after
    the header's first blank line, not at a CRLF CRLF inside the body."""
    head, body = b"HTTP/1.1 200 OK\nContent-Type: text/html\n\n", b"<html>\r\n\r\n<p>lf header</p></html>"
    digest = "sha1:" + base64.b32encode(hashlib.sha1(body).digest()).decode()
    assert check_digest(warc_record(head + body, WARC_Payload_Digest=digest), 0) is True
    wrong = "sha1:" + base64.b32encode(hashlib.sha1(body[:-1]).digest()).decode()
    with pytest.raises(CorruptWarc, match="does not give its WARC-Payload-Digest"):
        check_digest(warc_record(head + body, WARC_Payload_Digest=wrong), 0)


def test_digests_that_cannot_be_checked_are_left_alone():
    """A payload digest over a Transfer-Encoding (writers digest it raw or decoded: warcio#74), and
    records no arm reads (requests, revisits), are not checked."""
    wrong = "sha1:" + base64.b32encode(hashlib.sha1(b"x").digest()).decode()
    chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"
    assert check_digest(warc_record(chunked, WARC_Payload_Digest=wrong), 0) is False
    assert check_digest(warc_record(b"GET / HTTP/1.1\r\n\r\n", "request", WARC_Block_Digest=wrong), 0) is False
    assert check_digest(warc_record(HTTP_HEAD, "revisit", WARC_Block_Digest=wrong), 0) is False


# ---------------------------------------------------------------- loud, and right


def test_bytes_after_the_last_record_that_hold_no_record_lose_none(tmp_path, sample_dir):
    """Under `skip`, a stray tail after the last record (not gzip; uncompressed: a line that is no
    WARC header) is counted as the file's trailing bytes, the file read whole; a last record whose
    gzip header was damaged is a record lost."""
    data = (sample_dir / "sample.warc.gz").read_bytes()
    records = plain_records(sample_dir)
    last = member_starts(data)[-1]
    (tmp_path / "tail.warc.gz").write_bytes(data + b"not a gzip member\n")
    (tmp_path / "tail.warc").write_bytes(b"".join(records) + b"# copied by a script\n")
    (tmp_path / "last.warc.gz").write_bytes(data[:last] + b"\x1e" + data[last + 1:])  # the gzip magic's first byte
    responses = sum(map(is_response, records))
    reader = AccountedWarcReader(str(tmp_path), on_corrupt="skip")
    for name, tail in (("tail.warc.gz", 18), ("tail.warc", 21)):
        assert len(list(reader.read_file(name))) == responses
        entry = reader.files[name]
        assert (entry["outcome"], entry["trailing_bytes"], entry["damage"]) == (READ_WHOLE, tail, [])
    assert len(list(reader.read_file("last.warc.gz"))) == responses - is_response(records[-1])
    entry = reader.files["last.warc.gz"]
    assert entry["outcome"] == DAMAGED and [(d["at"], d["bytes"], d["records"]) for d in entry["damage"]] == [
        (last, len(data) - last, 1)]
    files = {"files": 2, "outcomes": {READ_WHOLE: 2}, "retries": 0, "trailing_bytes": 39, "unreadable_bytes": 0}
    assert files_cell(files) == "2 read whole; 39 bytes after last records (no record in them)"


def test_a_file_gone_after_a_good_listing_is_counted_not_a_traceback(tmp_path, sample_dir, faulty_server):
    """A listing (HEAD) that finds the file, then every GET answers 404: `fail` stops its task with
    one line naming it; `skip` counts it as skipped, and the ledger names it."""
    (faulty_server.folder / "sample.warc.gz").write_bytes((sample_dir / "sample.warc.gz").read_bytes())
    faulty_server.always = "404"
    url = faulty_server.url("sample.warc.gz")
    with pytest.raises(InputFileError, match=rf"^{url}: not found \(HTTP 404\). Check the snapshot name or the paths file, "
                                             r"or restore the file, or set inputs.on_corrupt: skip"):
        run_corpus(remote_config(tmp_path / "fail", [url]), until="extract")
    config = remote_config(tmp_path / "skip", [url], on_corrupt="skip")
    [summary] = run_corpus(config, until="extract")
    [entry] = read_input_files(config.arm_dir("a") / "logs" / INPUT_FILES)
    assert (entry["outcome"], entry["reason"], entry["fault"]) == (SKIPPED, "missing", "not found (HTTP 404)")
    assert summary["balanced"] and accounted_text(arm_ledger(config, "a")).startswith(
        "NO (1 input file not read whole: sample.warc.gz skipped (missing; 0 records read)")


def test_a_folder_given_as_an_input_is_counted_not_a_traceback(tmp_path, sample_dir):
    (tmp_path / "in" / "more").mkdir(parents=True)
    (tmp_path / "in" / "sample.warc.gz").write_bytes((sample_dir / "sample.warc.gz").read_bytes())
    config = make_config(tmp_path / "fail", tmp_path / "in" / "*", ARM, postprocess=FAST)
    with pytest.raises(InputFileError, match=rf"^{tmp_path / 'in' / 'more'}: it is a folder, not a file. List the WARC "
                                             r"files in it instead \(a glob such as FOLDER/\*.warc.gz\), or set"):
        run_corpus(config, until="extract")
    config = make_config(tmp_path / "skip", tmp_path / "in" / "*", ARM, postprocess=FAST)
    [summary] = run_corpus(config.model_copy(update={"inputs": config.inputs.model_copy(update={"on_corrupt": "skip"})}),
                           until="extract")
    assert summary["input_files"]["outcomes"] == {READ_WHOLE: 1, SKIPPED: 1}
    assert "more skipped (not a file; 0 records read)" in accounted_text(arm_ledger(config, "a"))


def test_a_symbolic_link_loop_is_named_as_one(tmp_path, sample_dir):
    """In the listing: refused, saying what it is and what to do (not "run again when the source
    answers"); made after the listing: counted like any file that cannot be read."""
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.warc.gz").write_bytes((sample_dir / "sample.warc.gz").read_bytes())
    (tmp_path / "in" / "b.warc.gz").symlink_to(tmp_path / "in" / "c.warc.gz")
    (tmp_path / "in" / "c.warc.gz").symlink_to(tmp_path / "in" / "b.warc.gz")
    config = make_config(tmp_path / "out", tmp_path / "in" / "*.warc.gz", ARM)
    with pytest.raises(InputListError, match=rf"^2 of 3 input files could not be listed: {tmp_path / 'in' / 'b.warc.gz'} "
                                             r"\(a symbolic link that leads back to itself\), .*c.warc.gz \(a symbolic link "
                                             r"that leads back to itself\). Point the link at the file it stands for$"):
        resolve_inputs(config)
    reader = AccountedWarcReader(str(tmp_path / "in"), on_corrupt="skip")
    assert list(reader.read_file("b.warc.gz")) == []
    assert (reader.files["b.warc.gz"]["reason"], reader.files["b.warc.gz"]["fault"]) == (
        "link_loop", "a symbolic link that leads back to itself")


def test_a_remote_file_of_unknown_size_is_refused_or_read_as_not_verified(tmp_path, sample_dir, faulty_server, monkeypatch):
    """A server that gives no length (HEAD nor GET) and closes the connection at a record boundary:
    the run is refused, naming the file and both ways out; with `inputs.unknown_size: read` the
    records up to the close are read, and the ledger and the report's ledger section say the file's
    completeness is not verified, not "yes"."""
    data = (sample_dir / "sample.warc.gz").read_bytes()
    cut = member_starts(data)[len(member_starts(data)) // 2]
    (faulty_server.folder / "sample.warc.gz").write_bytes(data[:cut])  # what the client gets before the close
    faulty_server.sizeless = True
    url = faulty_server.url("sample.warc.gz")
    with pytest.raises(InputListError, match=rf"^1 of 1 input files have no known size \(the source gave no length\): {url}. "
                                             r".*Give each file's size in inputs.manifest .*or set inputs.unknown_size: read"):
        run_corpus(remote_config(tmp_path / "refused", [url]), until="extract")
    config = remote_config(tmp_path / "out", [url], unknown_size="read")
    monkeypatch.setattr(console, "TERMINAL", terminal := io.StringIO())
    [summary] = run_corpus(config, until="extract")
    assert "completeness not verified: sample.warc.gz, see the ledger" in terminal.getvalue()  # the closing line
    assert summary["balanced"] and summary["records"] == response_records_before(sample_dir, cut)
    [entry] = read_input_files(config.arm_dir("a") / "logs" / INPUT_FILES)
    assert (entry["outcome"], entry["unverified"]) == (READ_WHOLE, True)
    ledger = arm_ledger(config, "a")
    note = "1 input file of unknown size read to the end of its stream, completeness not verified: sample.warc.gz"
    text = accounted_text(ledger)
    assert not ledger["accounted"] and text.startswith("NO (unfinished: exact-signatures-a") and text.endswith(f"; {note})")
    ledger |= {"unfinished": []}  # as when every stage ran
    assert accounted_text(ledger) == f"not verified ({note})"
    assert f"every record accounted for: not verified ({note})" in ledger_text({"ledgers": [ledger]})


def test_repeated_record_ids_are_warned_of_and_the_overlap_counts_documents(tmp_path, sample_dir, capsys):
    """Two arms whose documents repeat record ids (the same WARC-Record-ID in several input files):
    the overlap counts add up to each arm's documents, as a brute-force count of pairs matched by id,
    each copy at most once; and the ledger warns of the repeats."""
    config = make_config(tmp_path, sample_dir / "sample.warc.gz", {a: {"extractor": "trafilatura"} for a in ("a", "b")})
    rng = random.Random(5)
    docs = {arm: [f"<urn:uuid:{rng.randrange(30)}>" for _ in range(60)] for arm in ("a", "b")}
    for arm, ids in docs.items():
        folder = config.post_dir(arm) / "ids"
        folder.mkdir(parents=True)
        for shard in range(2):  # a task's shard each, the repeats across them
            with gzip.open(folder / f"{shard:05d}.jsonl.gz", "wt") as f:
                f.writelines(json.dumps({"id": i}) + "\n" for i in ids[shard::2])
    [pair] = overlap(config)["post-processed"]
    both = sum((Counter(docs["a"]) & Counter(docs["b"])).values())
    assert pair == {"arms": ["a", "b"], "both": both, "only_a": 60 - both, "only_b": 60 - both,
                    "repeated": {arm: 60 - len(set(ids)) for arm, ids in docs.items()}}
    print_ledger([], {"post-processed": [pair]})
    out = " ".join(capsys.readouterr().out.split())
    assert f"warning: {60 - len(set(docs['a']))} documents of a post-processed repeat the record id of another" in out
