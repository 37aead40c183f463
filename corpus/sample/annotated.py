"""Human-annotated (or generated) pages with their gold main content, from three formats.

- The suite's shared sets (`../shared/data/extraction/*/pages.jsonl.gz`): `id, url, html, text`,
  and for partial gold `with`/`without` snippet lists.
- WebMainBench's own JSONL: annotated HTML (`cc-select="true"` on the main subtrees); gold is its
  `groundtruth_content` (Markdown), or html2text of the marked subtrees when that is absent.
- The project's generated sample (`corpus.sample`'s gold.jsonl): gold is html2text of the
  generator's main-content HTML.

Every page's HTML has the annotation marks (`cc-select`, class `mark-selected`) removed before any
extractor sees it, so the answer never leaks.
"""

from __future__ import annotations

import gzip
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from corpus.markdown import html2text_markdown

# the annotated page sets beside a checkout (never copied into it); benchmarks skip when absent
SHARED_PAGE_SETS = Path(__file__).resolve().parents[3] / "shared" / "data" / "extraction"  # beside the checkout
_SELECT_ATTR = re.compile(r"""\s+cc-select\s*=\s*("[^"]*"|'[^']*'|[^\s>]+)""", re.IGNORECASE)
_SELECT_CLASS = re.compile(r"(?<=[\s\"'])mark-selected(?=[\s\"'])")
# what the generator's templates contain, for per-content-type means
TEMPLATE_CONTENT = {"docs": ("code", "tables"), "product": ("tables",), "formula": ("formulas",),
                    "forum": ("conversation",)}
WEBMAINBENCH_CONTENT = {"table": "tables", "code": "code", "equation": "formulas", "formula": "formulas"}


@dataclass(frozen=True)
class LabelledPage:
    dataset: str
    id: str
    html: str
    gold: str | None  # Markdown; None for partial-gold pages
    url: str | None = None
    lang: str | None = None
    difficulty: str | None = None
    content_types: tuple[str, ...] = ()
    with_snippets: tuple[str, ...] | None = None
    without_snippets: tuple[str, ...] = field(default=())
    marked_html: str | None = None  # the page with its annotation marks, where it has them (labels)

    @property
    def key(self) -> str:
        return f"{self.dataset}/{self.id}"


def primary_language(code: str | None) -> str | None:
    """'en-US', 'en_gb', 'EN' -> 'en'."""
    return re.split(r"[-_]", code.strip().lower())[0] or None if code else None


def strip_annotation_marks(html: str) -> str:
    return _SELECT_CLASS.sub("", _SELECT_ATTR.sub("", html))


def gold_from_marks(html: str) -> str:
    """html2text of the outermost `cc-select="true"` subtrees, in document order."""
    from lxml import html as lxml_html

    root = lxml_html.fromstring(html)
    marked = root.xpath('//*[@cc-select="true"][not(ancestor::*[@cc-select="true"])]')
    fragments = [lxml_html.tostring(el, encoding="unicode") for el in marked]
    return html2text_markdown(strip_annotation_marks("\n".join(fragments)))


def _webmainbench_page(row: dict, dataset: str) -> LabelledPage:
    meta = row.get("meta") or {}
    gold = row.get("groundtruth_content") or row.get("convert_main_content") or gold_from_marks(row["html"])
    content = {name for key, name in WEBMAINBENCH_CONTENT.items() if meta.get(key)}
    if (row.get("content_type") or meta.get("style")) in ("forum", "conversation"):
        content.add("conversation")
    return LabelledPage(
        dataset=dataset, id=str(row.get("track_id") or row["id"]), html=strip_annotation_marks(row["html"]),
        gold=gold, url=row.get("url"), lang=primary_language(row.get("language") or meta.get("language")),
        difficulty=row.get("difficulty") or meta.get("level"), content_types=tuple(sorted(content)),
        marked_html=row["html"],
    )


def _sample_page(row: dict) -> LabelledPage:
    return LabelledPage(
        dataset="generated-sample", id=row["id"], html=row["page_html"], gold=html2text_markdown(row["gold_html"]),
        url=row["url"], lang=row["lang"], content_types=TEMPLATE_CONTENT.get(row["template"], ()),
        marked_html=row.get("page_html_marked"),
    )


def _shared_page(row: dict, dataset: str) -> LabelledPage:
    partial = bool(row.get("partial"))
    return LabelledPage(
        dataset=dataset, id=str(row["id"]), html=strip_annotation_marks(row["html"]),
        gold=None if partial else row["text"], url=row.get("url"),
        lang=primary_language(row.get("lang") or row.get("lang_guess")),
        difficulty=row.get("level"),
        with_snippets=tuple(row.get("with") or ()) if partial else None,
        without_snippets=tuple(row.get("without") or ()) if partial else (),
        marked_html=row["html"] if "cc-select" in row["html"] else None,
    )


def _dataset_name(path: Path) -> str:
    name = path.name.removesuffix(".gz").removesuffix(".jsonl")
    return path.parent.name if name in ("pages", "gold") else name


def load_pages(path: str | Path, limit: int | None = None) -> list[LabelledPage]:
    """Pages of one JSONL(.gz) file, in any of the three formats (detected per record)."""
    path = Path(path)
    dataset = _dataset_name(path)
    opener = gzip.open if path.suffix == ".gz" else open
    pages = []
    with opener(path, "rt", encoding="utf-8") as f:
        for line in f:
            if limit is not None and len(pages) >= limit:
                break
            row = json.loads(line)
            if "page_html" in row:  # corpus.sample gold
                if row["page_html"] is not None and row["expect"] == "extract":
                    pages.append(_sample_page(row))
            elif "text" in row and "html" in row:
                pages.append(_shared_page(row, dataset))
            elif "html" in row:
                pages.append(_webmainbench_page(row, dataset))
            else:
                raise ValueError(f"{path}: a record has no 'html' field (keys: {sorted(row)})")
    return pages
