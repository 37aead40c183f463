"""WARC records in, documents out, with every record and every input file accounted for.

datatrove's WarcReader silently skips records it cannot decode or that are not HTML, and ends a file
wherever its bytes end. The comparison needs every record counted, so `AccountedWarcReader` (a
WarcReader) yields every response record as a document, decoded where possible; the extraction
stage's record guard (corpus.extractors.prefilters) drops the ones no extractor should see, each with
its reason. Every arm runs the same reader over the same files, so the same record has the same id
(its WARC-Record-ID) in every arm.

The reader walks each file record by record (a gzip member each, as the WARC standard and Common
Crawl write them; or, uncompressed, a header and its Content-Length), so it knows where the next
unread record starts and whether the file ends at a record boundary:

- a file that does not (truncated, a corrupt gzip member, not a WARC at all) fails the task with a
  one-line `InputFileError` naming it (`on_corrupt="fail"`), or is counted as skipped with its
  reason (`"skip"`); the records before the fault are whole and go on like any other;
- a transient read error (HTTP 5xx, throttling, a dropped connection, a timeout) re-opens the file
  at the next unread record after a growing pause; after `retries.attempts` failures in a row (no
  record read in between) the task fails naming the file and the last error;
- each task writes a record per input file to `<files_log>/<rank>.jsonl` (records, retries,
  outcome, the fault): rewritten whole when the task starts, and after each file.
"""

from __future__ import annotations

import codecs
import http.client
import io
import json
import re
import sys
import time
import zlib
from collections.abc import Iterator
from typing import TYPE_CHECKING

from datatrove.data import Document
from datatrove.io import get_datafolder
from datatrove.pipeline.readers import WarcReader
from datatrove.utils.logging import logger

if TYPE_CHECKING:
    from configs.experiment import ReadRetries

HTML_TYPES = {"text/html", "application/xhtml+xml"}
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


# ---------------------------------------------------------------- whole records of a file

READ_BYTES = 1 << 14
GZIP_MAGIC = b"\x1f\x8b"
HEADER_MAX = 1 << 16  # bytes: no WARC header is longer
_CONTENT_LENGTH = re.compile(rb"^content-length:[ \t]*(\d+)[ \t]*\r?$", re.IGNORECASE | re.MULTILINE)

# what a person does about a file that is not whole WARC records, by the fault's reason
WHAT_TO_DO = {
    "truncated": "An interrupted download or copy ends so: fetch the file again",
    "corrupt": "The file is damaged: fetch it again",
    "not_warc": "Check the input list",
    "one_stream": "The whole file is one gzip stream: recompress it with a member per record (warcio recompress FILE NEW)",
}
SKIP_HINT = "or set inputs.on_corrupt: skip to count it as lost and go on"


class CorruptWarc(Exception):
    """Bytes that are not whole WARC records: `reason` (a key of WHAT_TO_DO) and what was found."""

    def __init__(self, reason: str, found: str):
        super().__init__(found)
        self.reason = reason


class InputFileError(Exception):
    """An input file a task could not read whole, in one line: the file, what was found, what to do."""


def warc_format(head: bytes) -> bool:
    """Whether a WARC file that starts with `head` is gzipped; CorruptWarc if it is no WARC."""
    if head.startswith(GZIP_MAGIC):
        return True
    if head.startswith(b"WARC/"):
        return False
    raise CorruptWarc("not_warc", f"not a WARC file: it starts {head[:16]!r}" if head else "not a WARC file: it is empty")


def whole_records(f, offset: int, gzipped: bool) -> Iterator[tuple[int, int, bytes]]:
    """(start, end, bytes) of every whole record of an open WARC file from byte `offset` on, the
    bytes uncompressed; CorruptWarc where the file stops being whole records."""
    frames = _gzip_members(f, offset) if gzipped else _plain_records(f, offset)
    for start, end, data in frames:
        _check_record(data, start)
        yield start, end, data


def _gzip_members(f, offset: int) -> Iterator[tuple[int, int, bytes]]:
    """Each gzip member whole: zlib checks its trailer (CRC and length) and says where it ends. A member
    that runs on past the record it begins (a whole file in one gzip stream) is refused as soon as it
    does, not held in memory to its end."""
    pending, member, start = b"", None, offset
    while True:
        if not pending:
            pending = f.read(READ_BYTES)
            if not pending:
                if member is not None:
                    raise _truncated(offset, start)
                return
        if member is None:
            member, start, out, size, record = zlib.decompressobj(wbits=31), offset, [], 0, None
        try:
            out.append(member.decompress(pending))
        except zlib.error as e:
            raise CorruptWarc("corrupt", f"corrupt gzip member at byte {start:,} ({e})") from None
        size += len(out[-1])
        record = record or _record_frame(b"".join(out), start)
        if record and size > sum(record) + HEADER_MAX:
            raise _one_stream(start)
        if member.eof:
            offset += len(pending) - len(member.unused_data)
            pending, member = member.unused_data, None
            yield start, offset, b"".join(out)
        else:
            offset += len(pending)
            pending = b""


def _plain_records(f, offset: int) -> Iterator[tuple[int, int, bytes]]:
    """Each record of an uncompressed WARC: its header lines, then the block its Content-Length says."""
    while True:
        start, head = offset, b""
        while not head.endswith(b"\r\n\r\n"):
            line = f.readline()
            if not line:
                break
            offset += len(line)
            if head or line.strip():
                head += line
            else:  # the blank lines that end the previous record
                start = offset
        if not head:
            return
        if not head.endswith(b"\r\n\r\n"):
            raise _truncated(offset, start)
        length = _record_frame(head, start)[1]
        block = f.read(length)
        offset += len(block)
        if len(block) < length:
            raise _truncated(offset, start)
        yield start, offset, head + block


def _record_frame(data: bytes, start: int) -> tuple[int, int] | None:
    """(header bytes, declared block bytes) of the record `data` begins, or None while its header is
    incomplete; CorruptWarc for bytes that begin no WARC record."""
    if not data.startswith(b"WARC/"[:len(data)]):
        raise CorruptWarc("not_warc", f"not a WARC file: it starts {data[:16]!r}") if start == 0 else CorruptWarc(
            "corrupt", f"the record at byte {start:,} starts {data[:16]!r}, not WARC/")
    end = data.find(b"\r\n\r\n")
    if end < 0:
        if len(data) > HEADER_MAX:
            raise CorruptWarc("corrupt", f"the record at byte {start:,} has no end to its header")
        return None
    if not (m := _CONTENT_LENGTH.search(data[:end])):
        raise CorruptWarc("corrupt", f"the record at byte {start:,} has no Content-Length")
    return end + 4, int(m.group(1))


def _check_record(data: bytes, start: int) -> None:
    """One record, whole: a WARC header, as many bytes as its Content-Length declares, then nothing
    but the blank lines that end it."""
    if (frame := _record_frame(data, start)) is None:
        raise CorruptWarc("corrupt", f"the record at byte {start:,} ends inside its header")
    head, length = frame
    if len(data) - head < length:
        raise CorruptWarc("corrupt", f"the record at byte {start:,} declares {length:,} bytes and holds {len(data) - head:,}")
    if data[head + length:].strip():
        raise _one_stream(start)


def _truncated(offset: int, start: int) -> CorruptWarc:
    return CorruptWarc("truncated", f"truncated at byte {offset:,}, inside the record that starts at byte {start:,}")


def _one_stream(start: int) -> CorruptWarc:
    return CorruptWarc("one_stream", f"the gzip member at byte {start:,} holds more than one record")


def parse_record(data: bytes, start: int):
    """warcio's record of one whole record's bytes."""
    from warcio.archiveiterator import ArchiveIterator
    from warcio.exceptions import ArchiveLoadFailed

    try:
        return next(iter(ArchiveIterator(io.BytesIO(data))))
    except ArchiveLoadFailed as e:
        raise CorruptWarc("corrupt", f"the record at byte {start:,} does not parse ({' '.join(str(e).split())})") from None


# ---------------------------------------------------------------- transient read errors


def retryable(error: BaseException | None) -> bool:
    """A transient read error: HTTP 5xx, 408 or 429 (throttling; S3 answers 503 Slow Down), a dropped
    or reset connection, a timeout. Looked for along the causes: fsspec and s3fs raise their own
    errors from what the server said. A library's errors are checked only once it is loaded."""
    aiohttp, botocore = sys.modules.get("aiohttp"), sys.modules.get("botocore.exceptions")
    while error is not None:
        if isinstance(error, (TimeoutError, ConnectionError, http.client.IncompleteRead)):
            return True
        if aiohttp and isinstance(error, (aiohttp.ClientPayloadError, aiohttp.ClientConnectionError)):
            return True
        if botocore and isinstance(error, (botocore.HTTPClientError, botocore.ConnectionError)):
            return True
        if (status := http_status(error)) is not None and (status >= 500 or status in (408, 429)):
            return True
        error = error.__cause__
    return False


def http_status(error: BaseException) -> int | None:
    """The HTTP status an error carries: aiohttp's `status`, or botocore's `response` (which s3fs
    keeps as the cause of the OSError it raises)."""
    if isinstance(status := getattr(error, "status", None), int):
        return status
    response = getattr(error, "response", None)
    return response.get("ResponseMetadata", {}).get("HTTPStatusCode") if isinstance(response, dict) else None


def one_line(error: BaseException) -> str:
    """The error and what caused it, on one line."""
    text = f"{type(error).__name__}: {' '.join(str(error).split())}"
    return f"{text} (from {one_line(error.__cause__)})" if error.__cause__ is not None else text


# ---------------------------------------------------------------- the reader

# a file's outcome in its task's record: read to a record boundary at its end; not whole WARC records
# and skipped (on_corrupt: skip); the task failed on it; the task stopped before it (or while reading it)
READ_WHOLE, SKIPPED, FAILED, NOT_READ = "read whole", "skipped as corrupt", "failed", "not read"
INPUT_FILES = "input_files"  # the folder of the per-file records, in an extraction stage's logs


def file_record(path: str) -> dict:
    return {"file": path, "records": 0, "retries": 0, "outcome": NOT_READ, "ended_cleanly": False, "fault": None}


def read_input_files(folder, task: int | None = None) -> list[dict]:
    """The per-file records the reader's tasks wrote to `folder` (a Path), or only `task`'s."""
    files = sorted(folder.glob("*.jsonl" if task is None else f"{task:05d}.jsonl"))
    return [json.loads(line) for f in files for line in f.read_text().splitlines()]


class AccountedWarcReader(WarcReader):
    """WarcReader that yields every response record, with the WARC file and offset in metadata, and
    reads every file whole or names it (module docstring).

    Files are opened without stream decompression so that the reader sees the gzip members and the
    offsets are those of the compressed file (the ones Common Crawl's index uses). `retries`: the
    experiment's `inputs.retries`, or None (no retries: the labelers' local files). `files_log`: the
    folder of the per-file records, or None (none written).
    """

    name = "🕷 Warc (every record)"

    def __init__(self, data_folder, paths_file: str | None = None, on_corrupt: str = "fail",
                 retries: ReadRetries | None = None, files_log: str | None = None):
        super().__init__(data_folder, paths_file=paths_file)
        self.on_corrupt = on_corrupt
        self.retries = retries
        self.files_log = get_datafolder(files_log) if files_log else None
        self.files: dict[str, dict] = {}  # this task's per-file records, by path
        self.rank = 0

    def run(self, data=None, rank: int = 0, world_size: int = 1):
        self.rank = rank
        return super().run(data, rank, world_size)

    def read_files_shard(self, shard: list[str]):
        self.files = {path: file_record(path) for path in shard}
        self._save_files()  # a re-run of the task replaces the last run's records at once
        try:
            yield from super().read_files_shard(shard)
        finally:
            self._save_files()

    def read_file(self, filepath: str):
        entry = self.files.setdefault(filepath, file_record(filepath))
        try:
            for start, data in self._whole_records(filepath, entry):
                record = parse_record(data, start)
                if record.rec_type != "response":
                    self.stat_update(f"skipped_{record.rec_type}_record")
                    continue
                with self.track_time():
                    doc = self._document(record, record.content_stream().read(), filepath, start)
                self.stat_update("response_records")
                entry["records"] += 1
                yield doc
            entry.update(outcome=READ_WHOLE, ended_cleanly=True)
            self.stat_update("files_read_whole")
        except CorruptWarc as fault:
            after = f", after {entry['records']:,} records" if fault.reason != "not_warc" else ""
            entry["fault"] = f"{fault}{after}"
            where = self.data_folder.resolve_paths(filepath)
            if self.on_corrupt == "fail":
                entry["outcome"] = FAILED
                raise InputFileError(f"{where}: {entry['fault']}. {WHAT_TO_DO[fault.reason]}, {SKIP_HINT}") from None
            entry["outcome"] = SKIPPED
            self.stat_update(f"files_skipped_{fault.reason}")
            logger.warning(f"{where}: {entry['fault']}: skipped (inputs.on_corrupt: skip); the ledger names it")
            return
        finally:
            self._save_files()

    def _whole_records(self, filepath: str, entry: dict) -> Iterator[tuple[int, bytes]]:
        """(offset, bytes) of every whole record of the file; after a transient error the file is
        opened again at the next unread record, so no record is read twice or skipped."""
        offset, gzipped, failures = 0, None, 0
        while True:
            try:
                with self.data_folder.open(filepath, "rb") as f:
                    if gzipped is None:
                        gzipped = warc_format(f.read(16))
                    f.seek(offset)
                    for start, end, data in whole_records(f, offset, gzipped):
                        offset, failures = end, 0
                        yield start, data
                return
            except Exception as error:
                if not retryable(error):
                    raise
                where, attempts = self.data_folder.resolve_paths(filepath), self.retries.attempts if self.retries else 0
                if failures == attempts:
                    entry.update(outcome=FAILED, fault=f"reading failed {failures + 1} times in a row at byte {offset:,}, after "
                                                         f"{entry['records']:,} records: {one_line(error)}")
                    raise InputFileError(f"{where}: {entry['fault']}. Run again when the source answers (finished tasks "
                                         "are skipped), or raise inputs.retries.attempts") from error
                failures += 1
                entry["retries"] += 1
                self.stat_update("read_retries")
                pause = min(self.retries.max_backoff_s, self.retries.backoff_s * 2 ** (failures - 1))
                logger.warning(f"{where}: {one_line(error)}; retry {failures} of {attempts} from byte {offset:,} in {pause:g} s")
                time.sleep(pause)

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
        text, charset = decode_html(payload, content_type) if mime in HTML_TYPES else (None, None)
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
                "decoded": text is not None,
            },
        )
