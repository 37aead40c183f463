"""WARC records in, documents out, with every record accounted for.

datatrove's WarcReader silently skips records it cannot decode or that are not HTML. The
comparison needs every record counted, so `AccountedWarcReader` (a WarcReader) yields every
response record as a document, decoded where possible; the extraction stage's record guard
(corpus.extractors.prefilters) drops the ones no extractor should see, each with its reason. Every
arm runs the same reader over the same files, so the same record has the same id (its
WARC-Record-ID) in every arm.
"""

from __future__ import annotations

import codecs
import re

from datatrove.data import Document
from datatrove.pipeline.readers import WarcReader

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


class AccountedWarcReader(WarcReader):
    """WarcReader that yields every response record, with the WARC file and offset in metadata.

    Files are opened without stream decompression so that warcio sees the gzip members and the
    offsets are those of the compressed file (the ones Common Crawl's index uses).
    """

    name = "🕷 Warc (every record)"

    def read_file(self, filepath: str):
        from warcio.archiveiterator import ArchiveIterator

        with self.data_folder.open(filepath, "rb") as f:
            records = ArchiveIterator(f)
            for record in records:
                if record.rec_type != "response":
                    self.stat_update(f"skipped_{record.rec_type}_record")
                    continue
                with self.track_time():
                    payload = record.content_stream().read()
                    # warcio knows a record's offset only once the record is read to its end
                    doc = self._document(record, payload, filepath, records.get_record_offset())
                self.stat_update("response_records")
                yield doc

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
