"""Whole WARC records of one input file, read forward from a record boundary.

A file is walked record by record (a gzip member each, as the WARC standard and Common Crawl write
them; or, uncompressed, a header and its Content-Length), so the reader knows where the next unread
record starts and whether the file ends at a record boundary. `Source` reads an open file up to the
size its filesystem reports: a reply with fewer bytes than are left (an empty `206`, a `416`) is a
`ShortReply`, a transient error, never the end of the file. After a damaged record `next_record_start`
finds the next gzip member (or header line) that begins a WARC record, so the records after the
damage are read, and `holds_record` tells damaged bytes that held a record from bytes after the last
record that begin none. Zero bytes after the last record (padding some copies add) end the file like
its last record did. `check_digest` checks the digest a response record carries.
"""

from __future__ import annotations

import base64
import hashlib
import re
import zlib
from collections.abc import Iterator

READ_BYTES = 1 << 14
GZIP_MAGIC = b"\x1f\x8b"
GZIP_MEMBER = b"\x1f\x8b\x08"  # the magic and the deflate method: how every gzip member starts
HEADER_MAX = 1 << 16  # bytes: no WARC header is longer
# bytes of one record, uncompressed: a longer one (or a gzip member that inflates past it: a bomb) is
# refused as damaged (reason too_large) before it is held in memory; Common Crawl truncates at 1 MiB
RECORD_MAX = 1 << 26
PROBE_BYTES = 1 << 12  # compressed bytes tried at a candidate member: enough to show a record's first bytes
_CONTENT_LENGTH = re.compile(rb"^content-length:[ \t]*(\d+)[ \t]*\r?$", re.IGNORECASE | re.MULTILINE)
_VERSION_LINE = re.compile(rb"WARC/\d+\.\d+\r?\n")
_FIELD_NAME = re.compile(rb"[A-Za-z0-9-]+")
_TRANSFER_ENCODING = re.compile(rb"^transfer-encoding:", re.IGNORECASE | re.MULTILINE)
# the blank line that ends a record's HTTP header, its first: CRLF or a bare LF, as HTTP parsers
# (and with them WARC writers computing a payload digest) accept both
_HTTP_HEADER_END = re.compile(rb"\r?\n\r?\n")
GZIP_HEADER = 10  # bytes of a gzip member's header without optional fields (as WARC writers write it)

# what a person does about a file that is not whole WARC records, by the fault's reason
WHAT_TO_DO = {
    "truncated": "An interrupted download or copy ends so: fetch the file again",
    "corrupt": "The file is damaged: fetch it again",
    "not_warc": "Check the input list",
    "one_stream": "The whole file is one gzip stream: recompress it with a member per record (warcio recompress FILE NEW)",
    "changed": "The file is not the one the input list was made from: restore it, or start a new output root",
    "checksum": "The file is not the one its manifest describes: fetch it again",
    "missing": "Check the snapshot name or the paths file, or restore the file",
    "digest": "The record's bytes are not those its writer digested: fetch the file again (inputs.verify_digests: false "
              "reads records without checking their digests)",
    "not_a_file": "List the WARC files in it instead (a glob such as FOLDER/*.warc.gz)",
    "link_loop": "Point the link at the file it stands for",
    "denied": "Check the file's permissions (or the credentials in inputs.storage_options)",
    "unreadable": "Check the file and the disk it is on",
    "too_large": f"A record longer than {RECORD_MAX:,} bytes uncompressed (or a header past {HEADER_MAX:,}) is refused "
                 "before it is held in memory: inputs.on_corrupt: skip passes over it, counted in the ledger",
}


class CorruptWarc(Exception):
    """Bytes that are not whole WARC records: `reason` (a key of WHAT_TO_DO), what was found, and `at`:
    where the damaged record starts when records may follow it (None when nothing can: the file ends
    inside a record, or is no WARC at all)."""

    def __init__(self, reason: str, found: str, at: int | None = None):
        super().__init__(found)
        self.reason = reason
        self.at = at


class ShortReply(Exception):
    """The file gave fewer bytes than asked before its end: a transient error (the read resumes at the
    next unread record), not the end of the file."""

    def __init__(self, at: int, size: int):
        super().__init__(f"the reply for byte {at:,} on ended early (no bytes), though the file has {size:,}")


class Digest:
    """sha256 of a file read in pieces that may overlap (a read resumed at an earlier record boundary):
    each byte is hashed once, in order; a gap leaves no digest."""

    def __init__(self):
        self.sha, self.upto, self.gap = hashlib.sha256(), 0, False

    def update(self, at: int, data: bytes) -> None:
        if at > self.upto:
            self.gap = True
        elif at + len(data) > self.upto:
            self.sha.update(data[self.upto - at:])
            self.upto = at + len(data)

    def hexdigest(self) -> str | None:
        return None if self.gap else self.sha.hexdigest()


class Source:
    """An open file read forward from byte `pos` up to its `size` (None: unknown, read to the first
    empty reply): `read(n)` gives n bytes, or those left; a reply with fewer bytes than that raises
    ShortReply."""

    def __init__(self, f, pos: int, size: int | None, digest: Digest | None = None):
        self.f, self.pos, self.size, self.digest = f, pos, size, digest
        self.fetched, self.buffer = pos, b""  # bytes fetched up to `fetched`; those not yet read are in `buffer`

    def _left(self, want: int) -> int:
        return want if self.size is None else max(0, min(want, self.size - self.fetched))

    def _fetch(self, want: int) -> bool:
        """Up to `want` more bytes into the buffer; False at the end of the file."""
        want, parts, got = self._left(want), [], 0
        while got < want:
            chunk = self.f.read(want - got)  # a stream may give fewer bytes than asked: ask again
            if not chunk:
                if self.size is None:
                    break
                raise ShortReply(self.fetched + got, self.size)
            parts.append(chunk)
            got += len(chunk)
        data = b"".join(parts)
        if self.digest is not None:
            self.digest.update(self.fetched, data)
        self.fetched += len(data)
        self.buffer += data
        return bool(data)

    def peek(self, n: int) -> bytes:
        while len(self.buffer) < n and self._fetch(max(n - len(self.buffer), READ_BYTES)):
            pass
        return self.buffer[:n]

    def read(self, n: int) -> bytes:
        if len(self.buffer) < n:
            self._fetch(n - len(self.buffer))
        out, self.buffer = self.buffer[:n], self.buffer[n:]
        self.pos += len(out)
        return out

    def readline(self, limit: int = HEADER_MAX) -> bytes:
        while b"\n" not in self.buffer[:limit] and len(self.buffer) < limit and self._fetch(READ_BYTES):
            pass
        end = self.buffer.find(b"\n", 0, limit)
        return self.read(end + 1 if end >= 0 else min(limit, len(self.buffer)))


def warc_format(head: bytes) -> bool:
    """Whether a WARC file that starts with `head` is gzipped; CorruptWarc if it is no WARC."""
    if head.startswith(GZIP_MAGIC):
        return True
    if head.startswith(b"WARC/"):
        return False
    raise CorruptWarc("not_warc", f"not a WARC file: it starts {head[:16]!r}" if head else "not a WARC file: it is empty")


def whole_records(source: Source, gzipped: bool) -> Iterator[tuple[int, int, bytes]]:
    """(start, end, bytes) of every whole record from the source's position on, the bytes uncompressed,
    and (start, end, b"") for zero bytes that pad the file after its last record; CorruptWarc where
    the file stops being whole records."""
    frames = _gzip_members(source) if gzipped else _plain_records(source)
    for start, end, data in frames:
        if data:
            _check_record(data, start)
        yield start, end, data


def _gzip_members(source: Source) -> Iterator[tuple[int, int, bytes]]:
    """Each gzip member whole: zlib checks its trailer (CRC and length) and says where it ends. A member
    that runs on past the record it begins (a whole file in one gzip stream) is refused as soon as it
    does, not held in memory to its end."""
    offset = source.pos
    pending, member, start = b"", None, offset
    while True:
        if not pending:
            pending = source.read(READ_BYTES)
            if not pending:
                if member is not None:
                    raise _truncated(offset, start)
                return
        if member is None:
            if pending[0] == 0:
                yield offset, *_padding(source, pending, offset)
                return
            member, start, out, size, record = zlib.decompressobj(wbits=31), offset, [], 0, None
        try:  # never more than RECORD_MAX bytes inflated: a gzip bomb is refused, not held
            out.append(member.decompress(pending, RECORD_MAX + 1 - size))
        except zlib.error as e:
            raise CorruptWarc("corrupt", f"corrupt gzip member at byte {start:,} ({e})", at=start) from None
        size += len(out[-1])
        if size > RECORD_MAX:
            raise _too_large(start, "its gzip member inflates")
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


def _plain_records(source: Source) -> Iterator[tuple[int, int, bytes]]:
    """Each record of an uncompressed WARC: its header lines, then the block its Content-Length says."""
    offset = source.pos
    while True:
        start, head = offset, b""
        while not head.endswith(b"\r\n\r\n"):
            line = source.readline()
            if not line:
                break
            if not head and line[0] == 0:
                yield start, *_padding(source, line, offset)
                return
            offset += len(line)
            if head or line.strip():
                head += line
                if len(head) > HEADER_MAX:
                    raise CorruptWarc("corrupt", f"the record at byte {start:,} has no end to its header", at=start)
            else:  # the blank lines that end the previous record
                start = offset
        if not head:
            return
        if not head.endswith(b"\r\n\r\n"):
            _record_frame(head, start)  # bytes that begin no record are no record cut short
            raise _truncated(offset, start)
        length = _record_frame(head, start)[1]
        if length > RECORD_MAX:
            raise _too_large(start, f"it declares {length:,} bytes")
        block = source.read(length)
        offset += len(block)
        if len(block) < length:
            raise _truncated(offset, start)
        yield start, offset, head + block


def _padding(source: Source, first: bytes, offset: int) -> tuple[int, bytes]:
    """(end, b"") when `first` (read at `offset`) and everything after it to the file's end are zero
    bytes; CorruptWarc where something else follows them."""
    data, end = first, offset
    while data:
        if stripped := data.lstrip(b"\x00"):
            at = end + len(data) - len(stripped)
            raise CorruptWarc("corrupt", f"{at - offset:,} zero bytes at byte {offset:,}, then {stripped[:16]!r}", at=offset)
        end += len(data)
        data = source.read(READ_BYTES)
    return end, b""


def _record_frame(data: bytes, start: int) -> tuple[int, int] | None:
    """(header bytes, declared block bytes) of the record `data` begins, or None while its header is
    incomplete; CorruptWarc for bytes that begin no WARC record."""
    if not data.startswith(b"WARC/"[:len(data)]):
        raise CorruptWarc("not_warc", f"not a WARC file: it starts {data[:16]!r}") if start == 0 else CorruptWarc(
            "corrupt", f"the record at byte {start:,} starts {data[:16]!r}, not WARC/", at=start)
    end = data.find(b"\r\n\r\n", 0, HEADER_MAX)
    if end < 0:
        if len(data) > HEADER_MAX:
            raise CorruptWarc("too_large", f"the record at byte {start:,} has no end to its header in {HEADER_MAX:,} bytes",
                              at=start)
        return None
    if not (m := _CONTENT_LENGTH.search(data[:end])):
        raise CorruptWarc("corrupt", f"the record at byte {start:,} has no Content-Length", at=start)
    return end + 4, int(m.group(1))


def _check_record(data: bytes, start: int) -> None:
    """One record, whole: a WARC header, as many bytes as its Content-Length declares, then nothing
    but the blank lines that end it."""
    if (frame := _record_frame(data, start)) is None:
        raise CorruptWarc("corrupt", f"the record at byte {start:,} ends inside its header", at=start)
    head, length = frame
    if len(data) - head < length:
        raise CorruptWarc("corrupt", f"the record at byte {start:,} declares {length:,} bytes and holds {len(data) - head:,}",
                          at=start)
    if data[head + length:].strip():
        raise _one_stream(start)


def _truncated(offset: int, start: int) -> CorruptWarc:
    return CorruptWarc("truncated", f"truncated at byte {offset:,}, inside the record that starts at byte {start:,}")


def _too_large(start: int, what: str) -> CorruptWarc:
    return CorruptWarc("too_large", f"the record at byte {start:,} is too large: {what} past {RECORD_MAX:,} bytes", at=start)


def header_fields(head: bytes) -> dict[bytes, bytes]:
    """`name: value` lines of a header (names lowercased, values stripped of blanks), in time linear
    in its length (a regex with a lazy group and trailing blanks was quadratic on one long line)."""
    fields = {}
    for line in head.split(b"\n"):
        name, colon, value = line.rstrip(b"\r").partition(b":")
        if colon and _FIELD_NAME.fullmatch(name):
            fields[name.lower()] = value.strip(b" \t")
    return fields


def _one_stream(start: int) -> CorruptWarc:
    return CorruptWarc("one_stream", f"the gzip member at byte {start:,} holds more than one record")


def check_digest(data: bytes, start: int) -> bool:
    """Check the digest a whole response record (`data`, as `whole_records` gives it, at byte `start`)
    carries: its WARC-Block-Digest over its block (the bytes its Content-Length covers), else its
    WARC-Payload-Digest over the HTTP body, where no Transfer-Encoding makes that digest differ by
    writer (warcio#74). True if one was checked; False where none can be (not a response record, no
    digest, a hash hashlib lacks); CorruptWarc("digest") when the bytes do not give it."""
    head, length = _record_frame(data, start)
    fields = header_fields(data[:head])
    if fields.get(b"warc-type") != b"response":
        return False
    block = memoryview(data)[head:head + length]  # hashed in place: a block may be megabytes
    if value := fields.get(b"warc-block-digest"):
        name, covered = "WARC-Block-Digest", block
    elif (value := fields.get(b"warc-payload-digest")) and (end := _HTTP_HEADER_END.search(block)) \
            and not _TRANSFER_ENCODING.search(block[:end.start()]):
        name, covered = "WARC-Payload-Digest", block[end.end():]
    else:
        return False
    algorithm, _, text = value.decode("ascii", "replace").partition(":")
    try:
        digest = hashlib.new(algorithm.lower().replace("-", ""), covered).digest()
    except ValueError:
        return False
    if _digest_bytes(text, len(digest)) != digest:
        given = base64.b32encode(digest).decode()
        raise CorruptWarc("digest", f"the record at byte {start:,} does not give its {name} ({value.decode('ascii', 'replace')}"
                                    f"; its bytes give {algorithm}:{given})", at=start)
    return True


def _digest_bytes(text: str, size: int) -> bytes | None:
    """A digest's `size` bytes from its text: base32 (as WARC writers give it), base16 or base64."""
    decoders = (lambda t: base64.b32decode(t + "=" * (-len(t) % 8), casefold=True), bytes.fromhex,
                lambda t: base64.b64decode(t + "=" * (-len(t) % 4)), lambda t: base64.urlsafe_b64decode(t + "=" * (-len(t) % 4)))
    for decode in decoders:
        try:
            if len(raw := decode(text)) == size:
                return raw
        except ValueError:  # binascii.Error is one
            continue
    return None


# ---------------------------------------------------------------- past a damaged record


def holds_record(probe: bytes, gzipped: bool) -> bool:
    """Whether damaged bytes that begin with `probe` held a record: (after any zero bytes) a gzip member,
    or one whose first bytes were damaged (its deflate stream after the header gives `WARC/`); a WARC
    header line (uncompressed). Bytes after the last record that hold none (a copy's stray tail) are
    no lost record."""
    probe = probe.lstrip(b"\x00")
    if not gzipped:
        return b"WARC/" in probe or b"WARC-" in probe
    if probe.startswith(GZIP_MAGIC):
        return True
    try:
        return zlib.decompressobj(wbits=-15).decompress(probe[GZIP_HEADER:], 5) == b"WARC/"
    except zlib.error:
        return False




def next_record_start(source: Source, gzipped: bool) -> int | None:
    """Where the first record at or after the source's position starts: a gzip member whose first
    bytes decompress to `WARC/`, or (uncompressed) a `WARC/<version>` line; None if none does before
    the file's end."""
    window, at = b"", source.pos
    previous = b"\n"  # the byte before the window: a plain record starts at a line's start
    while True:
        chunk = source.read(READ_BYTES)
        window += chunk
        settled = len(window) - (PROBE_BYTES if chunk else 0)  # candidates before it have their probe bytes
        i = 0
        while 0 <= (i := window.find(GZIP_MEMBER if gzipped else b"WARC/", i)) < settled:
            before = window[i - 1:i] if i else previous
            if _begins_record(window[i:i + PROBE_BYTES], gzipped, before):
                return at + i
            i += 1
        if not chunk:
            return None
        if settled > 0:
            previous, window, at = window[settled - 1:settled], window[settled:], at + settled


def _begins_record(probe: bytes, gzipped: bool, before: bytes) -> bool:
    if not gzipped:
        return before == b"\n" and _VERSION_LINE.match(probe) is not None
    try:
        return zlib.decompressobj(wbits=31).decompress(probe, 5) == b"WARC/"
    except zlib.error:
        return False
