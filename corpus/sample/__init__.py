"""The embedded sample: a WARC of generated pages with known main content, plus bad records; or a
WARC of real annotated pages (pilots and benchmarks on real HTML).

`python -m corpus.sample --out DIR --pages N --seed S` writes `DIR/sample.warc.gz`,
`DIR/gold.jsonl` (one line per response record: its WARC-Record-ID, URL, template, language,
gold main content as HTML and text, and `expect`: `extract` or the drop reason the record
guard must give it) and `DIR/manifest.jsonl` (each WARC's size, sha256 and records: an
`inputs.manifest`). Same seed, same bytes. `python -m corpus.sample --out DIR --from-pages
PATH...` writes the pages of annotated page files (`pages.jsonl.gz`, corpus.sample.annotated) the
same way: their HTML as responses, their gold main content (Markdown, `gold_text`) in the gold
file. The WARC's warcinfo record says which (`pages: generated | annotated`), so a plan can tell
a pilot on generated pages from one on real ones.

Besides the generated pages and the bad records, the WARC holds what post-processing exists
for: exact mirrors of some pages on another host, syndicated copies (the same article with one
more paragraph: near-duplicates), keyword-stuffed spam and articles printed three times (Gopher
repetition), and pages on
`blocked.example.com` (the demo config blocklists that host).
"""

from __future__ import annotations

import hashlib
import io
import json
import random
import uuid
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta, timezone
from pathlib import Path

from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from corpus.sample.pages import TEMPLATES, Block, Page, chinese_article, news_article, para

SITES = ["dailyherald.example", "techbits.example", "homecook.example", "wanderlog.example",
         "forum.example", "docs.example", "shop.example", "science-notes.example", "xinwen.example"]


@dataclass
class SampleRecord:
    """One response record to write: payload bytes, HTTP content type, and what to expect."""

    url: str
    payload: bytes
    content_type: str | None
    expect: str  # "extract" or the guard's drop reason
    page: Page | None = None
    note: str = ""

    def gold(self) -> dict:
        """Its line of the gold file, beside the record id, URL, expect and note."""
        p = self.page
        return {"template": p.template if p else None, "lang": p.lang if p else None, "title": p.title if p else None,
                "gold_html": p.gold_html if p else None, "gold_text": p.gold_text if p else None,
                "page_html": p.html if p else None, "page_html_marked": p.marked_html if p else None}


@dataclass
class AnnotatedRecord(SampleRecord):
    """A real page of an annotated set: its gold main content is Markdown (no gold HTML)."""

    annotation: dict = field(default_factory=dict)

    def gold(self) -> dict:
        return self.annotation


def generate_pages(n: int, seed: int) -> list[Page]:
    """n pages cycling through every template, each drawn from its own seeded generator."""
    names = list(TEMPLATES)
    pages = []
    for i in range(n):
        rng = random.Random(f"{seed}:{i}")
        template = names[i % len(names)]
        site = "xinwen.example" if template == "zh_article" else rng.choice(SITES[:-1])
        url = f"https://{site}/{template}/{seed}-{i}-{rng.randrange(10**6)}.html"
        pages.append(TEMPLATES[template](rng, url, site))
    return pages


BLOCKED_SITE = "blocked.example.com"


def _copies(pages: list[Page], seed: int) -> list[SampleRecord]:
    """Mirrors, syndicated copies, spam and a blocklisted host: one of each every 25 pages."""
    rng = random.Random(f"{seed}:copies")
    out = []
    for i, page in enumerate(pages):
        if page.lang != "en":
            continue
        if i % 25 == 3:
            out.append(SampleRecord(page.url.replace("://", "://mirror."), page.html.encode("utf-8"),
                                    "text/html; charset=utf-8", "extract", page, f"exact mirror of {page.url}"))
        if i % 25 == 11:
            credit = para(f"This article first appeared on {page.url.split('/')[2]} and is republished with permission.")
            last = page.main[-1].html
            copy = replace(page, url=f"https://syndicate.example/{seed}/{i}.html", main=page.main + [credit],
                           html=page.html.replace(last, last + credit.html, 1))
            out.append(SampleRecord(copy.url, copy.html.encode("utf-8"), "text/html; charset=utf-8", "extract", copy,
                                    f"near-duplicate of {page.url}"))
        if i % 25 == 17:
            blocked = news_article(rng, f"https://{BLOCKED_SITE}/{seed}/{i}.html", BLOCKED_SITE)
            out.append(SampleRecord(blocked.url, blocked.html.encode("utf-8"), "text/html; charset=utf-8", "extract",
                                    blocked, "on a blocklisted domain"))
        if i % 25 == 7:  # a broken CMS that prints the article body three times
            body = [b for b in page.main if b.html.startswith("<p>")]
            last = page.main[-1].html
            extra = "".join(b.html for b in body) * 2
            repeated = replace(page, url=page.url.replace(".html", "-print.html"), main=page.main + body * 2,
                               html=page.html.replace(last, last + extra, 1))
            out.append(SampleRecord(repeated.url, repeated.html.encode("utf-8"), "text/html; charset=utf-8", "extract",
                                    repeated, "article body repeated three times"))
        if i % 25 == 21:
            line = f"Best cheap {rng.choice(['watches', 'phones', 'loans'])} online, buy now and save big today."
            spam = replace(page, url=f"https://deals.example/{seed}/{i}.html", template="spam",
                           main=[para(line) for _ in range(30)])
            body = "".join(b.html for b in spam.main)
            spam.html = ("<!DOCTYPE html><html lang=\"en\"><head><title>Deals</title></head>"
                         f"<body><article>{body}</article></body></html>")
            out.append(SampleRecord(spam.url, spam.html.encode("utf-8"), "text/html; charset=utf-8", "extract", spam,
                                    "keyword-stuffed spam"))
    return out


def _bad_records(seed: int) -> list[SampleRecord]:
    """The records a real crawl throws at an extractor, one of each kind."""
    rng = random.Random(f"{seed}:bad")
    out = []

    page = news_article(rng, "https://dailyherald.example/legacy/cp1252.html", "dailyherald.example")
    extra = "Caf\u00e9 owners na\u00efvely priced the cr\u00e8me br\u00fbl\u00e9e at \u20ac4."
    last = page.main[-1].html
    page.html = page.html.replace('<meta charset="utf-8">', "").replace(last, f"{last}<p>{extra}</p>", 1)
    page.main.append(Block(f"<p>{extra}</p>", extra))
    out.append(SampleRecord(page.url, page.html.encode("cp1252"), "text/html; charset=windows-1252",
                            "extract", page, "cp1252 bytes, charset declared in HTTP header"))

    page = chinese_article(rng, "https://xinwen.example/legacy/gbk.html", "xinwen.example")
    page.html = page.html.replace('<meta charset="utf-8">', "")
    out.append(SampleRecord(page.url, page.html.encode("gb18030"), "text/html", "extract", page,
                            "GB18030 bytes, no charset anywhere"))

    page = news_article(rng, "https://dailyherald.example/broken/truncated.html", "dailyherald.example")
    raw = page.html.encode("utf-8")
    cut = raw[: int(len(raw) * 0.6)]
    out.append(SampleRecord(page.url, cut + b"<div class=\"unclosed", "text/html; charset=utf-8", "extract", None,
                            "HTML cut off mid-tag"))

    out.append(SampleRecord("https://dailyherald.example/empty.html", b"", "text/html", "empty", None, "empty body"))
    png = b"\x89PNG\r\n\x1a\n" + bytes(rng.randrange(256) for _ in range(2048))
    out.append(SampleRecord("https://cdn.example/logo.png", png, "image/png", "not_html", None, "image record"))
    out.append(SampleRecord("https://docs.example/robots.txt", b"User-agent: *\nDisallow: /private/\n",
                            "text/plain", "not_html", None, "plain-text record"))
    binary = bytes(rng.randrange(256) for _ in range(4096))
    out.append(SampleRecord("https://shop.example/download.html", binary, "text/html", "undecodable", None,
                            "binary bytes served as text/html"))

    page = news_article(rng, "https://dailyherald.example/huge/page.html", "dailyherald.example")
    filler = "<tr><td>" + "data " * 40 + "</td></tr>"
    huge = page.html.replace("</body>", "<table>" + filler * (5_300_000 // len(filler)) + "</table></body>")
    out.append(SampleRecord(page.url, huge.encode("utf-8"), "text/html; charset=utf-8", "too_large", None,
                            "page over 5 MB"))
    return out


def _http_headers(content_type: str | None, length: int) -> StatusAndHeaders:
    headers = [("Server", "nginx"), ("Content-Length", str(length))]
    if content_type:
        headers.insert(0, ("Content-Type", content_type))
    return StatusAndHeaders("200 OK", headers, protocol="HTTP/1.1")


def write_sample(out_dir: Path, pages: int, seed: int) -> tuple[Path, Path]:
    """Write the WARC and its gold JSONL; returns their paths."""
    rng = random.Random(f"{seed}:warc")
    generated = generate_pages(pages, seed)
    records = [SampleRecord(p.url, p.html.encode("utf-8"),
                            "text/html; charset=utf-8" if rng.random() < 0.8 else "text/html", "extract", p)
               for p in generated]
    for rec in _copies(generated, seed) + _bad_records(seed):  # spread through the file, deterministically
        records.insert(rng.randrange(len(records) + 1), rec)

    start = datetime(2024, 3, 1, tzinfo=timezone.utc) + timedelta(days=seed % 365)
    return write_records(out_dir, records, rng, start, {"software": "corpus.sample", "seed": str(seed), "pages": "generated"})


def write_annotated_sample(out_dir: Path, page_files: list[Path], max_pages: int | None = None,
                           files: int = 1) -> list[Path]:
    """WARCs of the pages of annotated page files (at most `max_pages` of each), dealt in turn into
    `files` WARCs (`out_dir/sample.warc.gz`, or `out_dir/<i>/sample.warc.gz` as
    `inputs.sample.files` lays them out), each with its gold file carrying every page's gold main
    content (Markdown) as `gold_text`; returns the WARCs."""
    from corpus.sample.annotated import load_pages

    records = []
    for path in page_files:
        for page in load_pages(path, max_pages):
            url = page.url or f"https://{page.dataset}.example/{page.id}"
            records.append(AnnotatedRecord(url, page.html.encode("utf-8"), "text/html; charset=utf-8", "extract",
                                           annotation={"dataset": page.dataset, "page_id": page.id, "lang": page.lang,
                                                       "gold_html": None, "gold_text": page.gold}))
    sources = ",".join(str(p) for p in page_files)
    folders = [out_dir] if files == 1 else [out_dir / f"{i:05d}" for i in range(files)]
    return [write_records(folder, records[i::files], random.Random(f"annotated:{sources}:{i}"),
                          datetime(2024, 3, 1, tzinfo=timezone.utc),
                          {"software": "corpus.sample", "pages": "annotated", "sources": sources})[0]
            for i, folder in enumerate(folders)]


def write_records(out_dir: Path, records: list[SampleRecord], rng: random.Random, start: datetime,
                  info_fields: dict) -> tuple[Path, Path]:
    """`out_dir/sample.warc.gz` (a warcinfo record, then every record as a response, with request
    records between them as crawls have) and `out_dir/gold.jsonl`; returns their paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    warc_path, gold_path = out_dir / "sample.warc.gz", out_dir / "gold.jsonl"
    with open(warc_path, "wb") as fh, open(gold_path, "w", encoding="utf-8") as gold:
        writer = WARCWriter(fh, gzip=True)
        new_id = lambda: f"<urn:uuid:{uuid.UUID(int=rng.getrandbits(128), version=4)}>"  # noqa: E731
        info = writer.create_warcinfo_record("sample.warc.gz", info_fields)
        info.rec_headers.replace_header("WARC-Record-ID", new_id())
        info.rec_headers.replace_header("WARC-Date", start.strftime("%Y-%m-%dT%H:%M:%SZ"))
        writer.write_record(info)
        for i, rec in enumerate(records):
            record_id = new_id()
            date = (start + timedelta(seconds=i)).strftime("%Y-%m-%dT%H:%M:%SZ")
            if i % 10 == 0:  # crawls interleave request records; they are not documents
                req = writer.create_warc_record(rec.url, "request", payload=io.BytesIO(b"GET / HTTP/1.1\r\n\r\n"),
                                                warc_headers_dict={"WARC-Record-ID": new_id(), "WARC-Date": date})
                writer.write_record(req)
            warc_headers = {"WARC-Record-ID": record_id, "WARC-Date": date}
            response = writer.create_warc_record(
                rec.url, "response", payload=io.BytesIO(rec.payload),
                http_headers=_http_headers(rec.content_type, len(rec.payload)), warc_headers_dict=warc_headers,
            )
            writer.write_record(response)
            gold.write(json.dumps({"id": record_id, "url": rec.url, "expect": rec.expect, "note": rec.note, **rec.gold()},
                                  ensure_ascii=False) + "\n")
    return warc_path, gold_path


MANIFEST = "manifest.jsonl"


def write_manifest(out_dir: Path, warcs: list[Path]) -> Path:
    """`out_dir/manifest.jsonl`: each WARC's path (relative to `out_dir`), size, sha256 and response
    records (its gold lines), the manifest `inputs.manifest` takes (corpus.read.manifest): a copy of
    these files elsewhere is then checked against what was written here."""
    lines = []
    for warc in warcs:
        data = warc.read_bytes()
        lines.append({"path": warc.relative_to(out_dir).as_posix(), "size": len(data),
                      "sha256": hashlib.sha256(data).hexdigest(), "records": len(read_gold(warc.with_name("gold.jsonl")))})
    path = out_dir / MANIFEST
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def sample_pages(fileobj) -> str | None:
    """What a WARC written here holds, from its warcinfo record: 'generated' or 'annotated'
    pages; None for any other WARC (a crawl's)."""
    from warcio.archiveiterator import ArchiveIterator

    for record in ArchiveIterator(fileobj):
        if record.rec_type != "warcinfo":
            return None
        fields = dict(line.split(": ", 1) for line in record.content_stream().read().decode().splitlines() if ": " in line)
        return fields.get("pages") if fields.get("software") == "corpus.sample" else None
    return None


def read_gold(path: Path) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f]
