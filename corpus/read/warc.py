"""WARC records in, documents out, with every record and every input file accounted for.

datatrove's WarcReader silently skips records it cannot decode or that are not HTML, and ends a file
wherever its bytes end. The comparison needs every record counted, so `AccountedWarcReader` (a
WarcReader) yields every response record as a document, decoded where possible; the extraction
stage's record guard (corpus.extractors.prefilters) drops the ones no extractor should see, each with
its reason. Every arm runs the same reader over the same files, so the same record has the same id
(its WARC-Record-ID) in every arm.

The reader walks each file record by record (corpus.read.framing) up to the size the input list
records for it (corpus.read.manifest; else the size its filesystem reports), so it knows where the
next unread record starts and whether the whole file was read:

- a file that does not end whole (truncated, wherever the cut falls; a corrupt gzip member; a
  response record whose bytes do not give the WARC-Block-Digest or WARC-Payload-Digest it carries;
  not a WARC; another size or sha256 than the input list's; gone, a folder, a link loop, denied)
  fails the task with a one-line `InputFileError` naming it (`on_corrupt="fail"`), or is counted as
  skipped with its reason (`"skip"`); the records before the fault are whole and go on like any
  other. Under `"skip"` a damaged record is passed over: the reader goes on at the next record that
  starts after it and counts the bytes it could not read and the records in them (at least one);
  bytes after the last record that hold no record (`framing.holds_record`) are counted as the file's
  `trailing_bytes`, no record lost;
- a file whose size nothing gives (a remote file without a length, where the config allows it) is
  read to the first end of its stream and marked `unverified`: whether it ended there is unknown;
- a transient read error (HTTP 5xx, throttling, a dropped connection, a timeout, a reply with fewer
  bytes than the file has left) re-opens the file at the next unread record after a growing pause;
  after `retries.attempts` failures in a row (no record read in between) the task fails naming the
  file and the last error;
- each task writes a record per input file to `<files_log>/<rank>.jsonl` (records, retries, outcome,
  the fault, the damaged bytes, the file's size and version as read): rewritten whole when the task
  starts, and after each file.
"""

from __future__ import annotations

import codecs
import contextlib
import errno
import http.client
import io
import json
import re
import sys
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

from datatrove.data import Document
from datatrove.io import get_datafolder
from datatrove.pipeline.readers import WarcReader
from datatrove.utils.logging import logger
from fsspec.implementations.local import LocalFileSystem

from corpus.read.framing import (
    PROBE_BYTES,
    WHAT_TO_DO,
    CorruptWarc,
    Digest,
    ShortReply,
    Source,
    check_digest,
    holds_record,
    next_record_start,
    warc_format,
    whole_records,
)
from corpus.read.manifest import identity, read_manifest
from corpus.stage import stream_sha256

if TYPE_CHECKING:
    from configs.inputs import ReadRetries

HTML_TYPES = {"text/html", "application/xhtml+xml"}
# bytes of one payload after its Content-Encoding (gzip, br) is undone: read no further (a 20 KB record
# can inflate to gigabytes), the record marked `payload_truncated` and dropped as too_large by the guard
PAYLOAD_MAX = 1 << 25
_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_\-:.]+)""", re.IGNORECASE)
_HEADER_CHARSET = re.compile(r"charset\s*=\s*[\"']?([A-Za-z0-9_\-:.]+)", re.IGNORECASE)


def _codec(name: str | None) -> str | None:
    if not name:
        return None
    try:
        return codecs.lookup(name).name
    except LookupError:
        return None


def decode_html(payload: bytes, content_type: str | None) -> tuple[str | None, str | None]:
    """Decode with the first charset that works: HTTP header, <meta>, UTF-8, then detection.

    Returns (text, charset) or (None, None) when nothing decodes strictly.
    """
    import cchardet

    candidates = []
    if content_type and (m := _HEADER_CHARSET.search(content_type)):
        candidates.append(m.group(1))
    if m := _META_CHARSET.search(payload[:4096]):
        candidates.append(m.group(1).decode("ascii", "ignore"))
    candidates.append("utf-8")
    candidates.append(cchardet.detect(payload).get("encoding"))
    for name in candidates:
        codec = _codec(name)
        if codec is None:
            continue
        try:
            return payload.decode(codec), codec
        except UnicodeDecodeError:
            continue
    return None, None


def payload_mime(record, payload: bytes) -> str | None:
    """The payload type Common Crawl identified, else the HTTP Content-Type, else a sniff."""
    mime = record.rec_headers.get_header("WARC-Identified-Payload-Type")
    if not mime and record.http_headers is not None:
        mime = record.http_headers.get_header("Content-Type")
    if not mime and payload:
        import magic

        mime = magic.from_buffer(payload[:8192], mime=True)
    return mime.split(";")[0].strip().lower() if mime else None


def parse_record(data: bytes, start: int):
    """warcio's record of one whole record's bytes."""
    from warcio.archiveiterator import ArchiveIterator
    from warcio.exceptions import ArchiveLoadFailed

    try:
        return next(iter(ArchiveIterator(io.BytesIO(data))))
    except ArchiveLoadFailed as e:
        raise CorruptWarc("corrupt", f"the record at byte {start:,} does not parse ({' '.join(str(e).split())})",
                          at=start) from None


SKIP_HINT = "or set inputs.on_corrupt: skip to count it as lost and go on"


class InputFileError(Exception):
    """An input file a task could not read whole, in one line: the file, what was found, what to do."""


# ---------------------------------------------------------------- transient read errors


def retryable(error: BaseException | None) -> bool:
    """A transient read error: HTTP 5xx, 408 or 429 (throttling; S3 answers 503 Slow Down), a dropped
    or reset connection, a timeout, a reply with fewer bytes than the file has left or a 416 (Range
    Not Satisfiable) for bytes the file has (the file's size is known). Looked for along
    the causes: fsspec and s3fs raise their own errors from what the server said. A library's errors
    are checked only once it is loaded."""
    aiohttp, botocore = sys.modules.get("aiohttp"), sys.modules.get("botocore.exceptions")
    for cause in causes(error):
        if isinstance(cause, (TimeoutError, ConnectionError, http.client.IncompleteRead, ShortReply)):
            return True
        if aiohttp and isinstance(cause, (aiohttp.ClientPayloadError, aiohttp.ClientConnectionError)):
            return True
        if botocore and isinstance(cause, (botocore.HTTPClientError, botocore.ConnectionError)):
            return True
        if (status := http_status(cause)) is not None and (status >= 500 or status in (408, 416, 429)):
            return True
    return False


def http_status(error: BaseException) -> int | None:
    """The HTTP status an error carries: aiohttp's `status`, or botocore's `response` (which s3fs
    keeps as the cause of the OSError it raises)."""
    if isinstance(status := getattr(error, "status", None), int):
        return status
    response = getattr(error, "response", None)
    return response.get("ResponseMetadata", {}).get("HTTPStatusCode") if isinstance(response, dict) else None


def lasting_fault(error: BaseException) -> CorruptWarc | None:
    """A read error no retry mends (not `retryable`), as the fault it is: gone (a 404 after a good
    listing), a folder, a symbolic link loop, access denied, another OSError; None for an error that
    is no fault of the file (a bug: its traceback is wanted)."""
    for cause in causes(error):
        status = http_status(cause)
        if isinstance(cause, FileNotFoundError) or status in (404, 410):
            return CorruptWarc("missing", f"not found ({why(error)})")
        if isinstance(cause, IsADirectoryError):
            return CorruptWarc("not_a_file", "it is a folder, not a file")
        if isinstance(cause, OSError) and cause.errno == errno.ELOOP:
            return CorruptWarc("link_loop", "a symbolic link that leads back to itself")
        if isinstance(cause, PermissionError) or status in (401, 403):
            return CorruptWarc("denied", f"access denied ({why(error)})")
    return CorruptWarc("unreadable", f"it cannot be read ({why(error)})") if isinstance(error, OSError) else None


def why(error: BaseException) -> str:
    """What the server said (`HTTP 404`), or the error on one line."""
    return next((f"HTTP {status}" for e in causes(error) if (status := http_status(e))), None) or one_line(error)


def causes(error: BaseException | None) -> Iterator[BaseException]:
    """The error, then what caused it, and so on."""
    while error is not None:
        yield error
        error = error.__cause__


def one_line(error: BaseException) -> str:
    """The error and what caused it, on one line."""
    text = f"{type(error).__name__}: {' '.join(str(error).split())}"
    return f"{text} (from {one_line(error.__cause__)})" if error.__cause__ is not None else text


def pause_s(retries: ReadRetries, failures: int) -> float:
    """The pause before the next try after `failures` failures in a row."""
    return min(retries.max_backoff_s, retries.backoff_s * 2 ** (failures - 1))


def ignores_ranges(error: BaseException) -> bool:
    """fsspec's error for a server that answered a request for part of a file with all of it."""
    return isinstance(error, ValueError) and "support range requests" in str(error)


# ---------------------------------------------------------------- the reader

# a file's outcome in its task's record: read to its end at a record boundary; read to its end past
# damaged records (on_corrupt: skip); not read to its end and skipped (on_corrupt: skip); the task
# failed on it; the task stopped before it (or while reading it)
READ_WHOLE, DAMAGED, SKIPPED, FAILED, NOT_READ = "read whole", "read around damage", "skipped", "failed", "not read"
# faults of a file as a whole, found before any record is read: its message counts no records
WHOLE_FILE_FAULTS = ("not_warc", "missing", "changed", "not_a_file", "link_loop", "denied", "unreadable")
INPUT_FILES = "input_files"  # the folder of the per-file records, in an extraction stage's logs


def file_record(path: str) -> dict:
    return {"file": path, "records": 0, "retries": 0, "outcome": NOT_READ, "reason": None, "fault": None,
            "ended_cleanly": False, "damage": [], "padding_bytes": 0, "trailing_bytes": 0, "digests_checked": 0,
            "unverified": False, "seen": None}


def read_input_files(folder, task: int | None = None) -> list[dict]:
    """The per-file records the reader's tasks wrote to `folder` (a Path), or only `task`'s; each
    with the `task` that wrote it."""
    files = sorted(folder.glob("*.jsonl" if task is None else f"{task:05d}.jsonl"))
    return [json.loads(line) | {"task": int(f.stem)} for f in files for line in f.read_text().splitlines()]


class AccountedWarcReader(WarcReader):
    """WarcReader that yields every response record, with the WARC file and offset in metadata, and
    reads every file whole or names it (module docstring).

    Files are opened without stream decompression so that the reader sees the gzip members and the
    offsets are those of the compressed file (the ones Common Crawl's index uses). `manifest`: the
    input list with each file's expected size (corpus.read.manifest), or None (the size the
    filesystem reports). `retries`: the experiment's `inputs.retries`, or None (no retries: the
    labelers' local files). `files_log`: the folder of the per-file records, or None (none written).
    `verify_digests`: check each response record's digest (`framing.check_digest`), timed as the
    reader's work and counted (`digests_checked`, `digest_check_us`: the plan prices it).
    """

    name = "🕷 Warc (every record)"

    def __init__(self, data_folder, paths_file: str | None = None, manifest: str | None = None, on_corrupt: str = "fail",
                 retries: ReadRetries | None = None, files_log: str | None = None, verify_digests: bool = True):
        super().__init__(data_folder, paths_file=paths_file)
        self.manifest = manifest
        self.verify_digests = verify_digests
        self.on_corrupt = on_corrupt
        self.retries = retries
        self.files_log = get_datafolder(files_log) if files_log else None
        self.local = isinstance(self.data_folder.fs, LocalFileSystem)
        self.expected: dict[str, dict] = {}  # the manifest's entries, by path: loaded by the task
        self.files: dict[str, dict] = {}  # this task's per-file records, by path
        self.rank = 0

    def run(self, data=None, rank: int = 0, world_size: int = 1):
        self.rank = rank
        return super().run(data, rank, world_size)

    def read_files_shard(self, shard: list[str]):
        self.expected = read_manifest(self.manifest)["files"] if self.manifest else {}
        self.files = {path: file_record(path) for path in shard}
        self._save_files()  # a re-run of the task replaces the last run's records at once
        try:
            yield from super().read_files_shard(shard)
        finally:
            self._save_files()

    def read_file(self, filepath: str):
        entry = self.files.setdefault(filepath, file_record(filepath))
        where = self.data_folder.resolve_paths(filepath)
        try:
            for start, data in self._whole_records(filepath, entry):
                record = parse_record(data, start)
                if record.rec_type != "response":
                    self.stat_update(f"skipped_{record.rec_type}_record")
                    continue
                with self.track_time():
                    doc = self._document(record, record.content_stream().read(PAYLOAD_MAX + 1), filepath, start)
                self.stat_update("response_records")
                entry["records"] += 1
                yield doc
            entry.update(outcome=DAMAGED if entry["damage"] else READ_WHOLE, ended_cleanly=True)
            self.stat_update("files_damaged" if entry["damage"] else "files_read_whole")
        except CorruptWarc as fault:
            after = f", after {entry['records']:,} records" if entry["records"] or fault.reason not in WHOLE_FILE_FAULTS else ""
            entry.update(reason=fault.reason, fault=f"{fault}{after}")
            if self.on_corrupt == "fail":
                entry["outcome"] = FAILED
                raise InputFileError(f"{where}: {entry['fault']}. {WHAT_TO_DO[fault.reason]}, {SKIP_HINT}") from None
            entry["outcome"] = SKIPPED
            self.stat_update(f"files_skipped_{fault.reason}")
            logger.warning(f"{where}: {entry['fault']}: skipped (inputs.on_corrupt: skip); the ledger names it")
            return
        finally:
            if entry["outcome"] in (SKIPPED, DAMAGED):
                self._seen_content(filepath, entry)
            self._save_files()

    def _seen_content(self, filepath: str, entry: dict) -> None:
        """The sha256 of a local file not read whole, beside its size and modification time: a good
        copy put back with the same size and time (`cp -p`, `rsync -t`) is then told from it. (A
        remote file's ETag already changes with its bytes; hashing it would fetch it again.)"""
        if entry["seen"] is None or not self.local:
            return
        with contextlib.suppress(OSError), self.data_folder.open(filepath, "rb") as f:
            entry["seen"]["sha256"] = stream_sha256(f)

    def _whole_records(self, filepath: str, entry: dict) -> Iterator[tuple[int, bytes]]:
        """(offset, bytes) of every whole record of the file. After a transient error the file is
        opened again at the next unread record, so no record is read twice or skipped; under
        `on_corrupt: skip`, after a damaged record at the next record that starts after it."""
        expected = self.expected.get(filepath, {})
        digest = Digest() if expected.get("sha256") else None
        offset, gzipped, failures, damaged = 0, None, 0, None  # damaged: where a damaged record starts
        where = self.data_folder.resolve_paths(filepath)
        while True:
            try:
                size = self._size(filepath, entry, expected)
                at = offset if damaged is None else damaged
                with self._open_at(filepath, at, size) as f:
                    source = Source(f, at, size, digest)
                    if gzipped is None:
                        gzipped = warc_format(source.peek(16))
                    if damaged is not None:
                        found = self._pass_over(source, gzipped, entry, where)
                        offset, damaged, failures = source.pos if found is None else found, None, 0
                        if found is None:
                            break
                        continue
                    for start, end, data in whole_records(source, gzipped):
                        if data and self.verify_digests:
                            started = time.thread_time()  # this thread's CPU: fsspec's reads run in another
                            with self.track_time():
                                entry["digests_checked"] += check_digest(data, start)
                            self.stat_update("digest_check_us", value=round(1e6 * (time.thread_time() - started)))
                        offset, failures = end, 0
                        if data:
                            yield start, data
                        else:
                            entry["padding_bytes"] = end - start
                            logger.warning(f"{where}: {end - start:,} zero bytes after its last record, read as padding")
                break
            except CorruptWarc as fault:
                if fault.at is None or self.on_corrupt == "fail":
                    raise
                damaged = fault.at
                entry["damage"].append({"at": fault.at, "reason": fault.reason, "fault": str(fault), "bytes": None,
                                        "records": None})
            except Exception as error:
                if ignores_ranges(error):
                    entry.update(outcome=FAILED, fault="the server does not answer Range requests (asked for part of the "
                                                       "file, it sent all of it)")
                    raise InputFileError(f"{where}: {entry['fault']}, so no read can resume mid-file. Set "
                                         "inputs.storage_options.block_size: 0 (each file streamed from its start, again "
                                         "after an error), or mirror the files locally") from None
                if not retryable(error):
                    if fault := lasting_fault(error):
                        raise fault from None
                    raise
                attempts = self.retries.attempts if self.retries else 0
                if failures == attempts:
                    entry.update(outcome=FAILED, fault=f"reading failed {failures + 1} times in a row at byte {offset:,}, after "
                                                         f"{entry['records']:,} records: {one_line(error)}")
                    raise InputFileError(f"{where}: {entry['fault']}. Run again when the source answers (finished tasks "
                                         "are skipped), or raise inputs.retries.attempts") from error
                failures += 1
                entry["retries"] += 1
                self.stat_update("read_retries")
                pause = pause_s(self.retries, failures)
                logger.warning(f"{where}: {one_line(error)}; retry {failures} of {attempts} from byte {offset:,} in {pause:g} s")
                time.sleep(pause)
        self._check_end(size, expected, digest, entry)

    def _pass_over(self, source: Source, gzipped: bool, entry: dict, where: str) -> int | None:
        """Past the damaged record the source is at: where the next record starts (None: none does
        before the file's end), the bytes passed over counted in the damage's entry; bytes after the
        last record that hold none are the file's `trailing_bytes` instead."""
        damaged = source.pos
        probe = source.peek(PROBE_BYTES)
        source.read(1)  # the next record starts after the damaged one's first byte
        found = next_record_start(source, gzipped)
        end = source.pos if found is None else found
        if found is None and not holds_record(probe, gzipped):
            fault = entry["damage"].pop()["fault"]
            entry["trailing_bytes"] = end - damaged
            logger.warning(f"{where}: {fault}: {end - damaged:,} bytes after the last record hold no record: read as "
                           "the file's end (inputs.on_corrupt: skip); the ledger counts them")
            return None
        entry["damage"][-1].update(bytes=end - damaged, records=1)
        logger.warning(f"{where}: {entry['damage'][-1]['fault']}: {end - damaged:,} bytes passed over, at "
                       f"least 1 record lost (inputs.on_corrupt: skip); the ledger names it")
        return found

    def _size(self, filepath: str, entry: dict, expected: dict) -> int | None:
        """The file's size now, which the reader reads to (None: nothing gives it, the file is read to
        the first end of its stream and marked `unverified`); CorruptWarc when it is larger than the
        input list records (another file), empty where the list records bytes, or a folder."""
        info = self.data_folder.info(filepath)
        if info.get("type") == "directory":
            raise CorruptWarc("not_a_file", "it is a folder, not a file")
        entry["seen"] = identity(info)
        size, want = info.get("size"), expected.get("size")
        if size is not None and want is not None and (size > want or size == 0 < want):
            raise CorruptWarc("changed" if size else "truncated",
                              f"it is {size:,} bytes where the input list records {want:,}")
        entry["unverified"] = size is None and want is None
        return size if size is not None else want

    def _open_at(self, filepath: str, offset: int, size: int | None):
        """The file open at `offset`: sought to, or read up to where the file cannot seek (a stream)."""
        f = self.data_folder.open(filepath, "rb", **({"size": size} if size is not None else {}))
        try:
            with contextlib.suppress(ValueError, OSError, io.UnsupportedOperation):
                f.seek(offset)
            left = offset - f.tell()
            while left > 0:
                if not (chunk := f.read(min(left, 1 << 20))):
                    raise ShortReply(offset - left, size or 0)
                left -= len(chunk)
        except BaseException:
            f.close()
            raise
        return f

    def _check_end(self, size: int | None, expected: dict, digest: Digest | None, entry: dict) -> None:
        """The file read to its end: as long as the input list records, and with its sha256."""
        want = expected.get("size")
        if size is not None and want is not None and size < want:
            boundary = "" if entry["damage"] and entry["damage"][-1]["at"] + entry["damage"][-1]["bytes"] == size else \
                ", at a record boundary"
            raise CorruptWarc("truncated", f"it ends at byte {size:,}{boundary}, {want - size:,} bytes before the {want:,} "
                                           "the input list records")
        if digest is not None and not entry["damage"] and (got := digest.hexdigest()) != expected["sha256"]:
            raise CorruptWarc("checksum", f"its sha256 is {got}, the input list's {expected['sha256']}")

    def _save_files(self) -> None:
        """This task's per-file records, replaced whole (written aside, then renamed)."""
        if self.files_log is None:
            return
        name = f"{self.rank:05d}.jsonl"
        with self.files_log.open(f"{name}.tmp", "w") as f:
            f.writelines(json.dumps(entry) + "\n" for entry in self.files.values())
        self.files_log.mv(f"{name}.tmp", name)

    def _document(self, record, payload: bytes, filepath: str, offset: int) -> Document:
        mime = payload_mime(record, payload)
        content_type = record.http_headers.get_header("Content-Type") if record.http_headers else None
        truncated = len(payload) > PAYLOAD_MAX
        text, charset = decode_html(payload, content_type) if mime in HTML_TYPES and not truncated else (None, None)
        headers = record.rec_headers
        return Document(
            text=text or "",
            id=headers.get_header("WARC-Record-ID"),
            metadata={
                "url": headers.get_header("WARC-Target-URI"),
                "date": headers.get_header("WARC-Date"),
                "warc_file": filepath,
                "warc_offset": offset,
                "mime": mime,
                "charset": charset,
                "payload_bytes": len(payload),
                "payload_truncated": truncated,
                "decoded": text is not None,
            },
        )
