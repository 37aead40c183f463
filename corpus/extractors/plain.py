"""One text format for every arm (`extraction.text_format: plain`): Markdown marks removed.

Extractors write different Markdown dialects (Trafilatura's own, html2text's, the block
classifier's), and a model learns its training text's marks. `plain_text` parses a document as
CommonMark (with GitHub tables and strikethrough, markdown-it-py) and keeps only its text: the
words of headings, paragraphs, list items, table cells and code, without `#`, `*`, `_`, `-`,
backslash escapes, link targets or images. Blocks are separated by a blank line; the items of one
list and the rows of one table by a line break; the cells of a row by a tab (as a browser's
innerText). The same function serves every arm (`PlainText`, the step after the extractor) and
the plain view of the clean-text reference (evaluation/tasks/clean_text.py), so both are one format.
"""

from __future__ import annotations

from functools import lru_cache

from datatrove.data import DocumentsPipeline
from datatrove.pipeline.base import PipelineStep

from corpus.extractors.spans import cut_spans

# block tokens whose inline children are one block of text, and containers whose blocks are lines
GROUPS = {"bullet_list_open": "bullet_list_close", "ordered_list_open": "ordered_list_close", "table_open": "table_close"}


@lru_cache(maxsize=1)
def _parser():
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark").enable(["table", "strikethrough"])


def _inline(children) -> str:
    out = []  # an image's alt text is not the page's text: images are left out
    for child in children or []:
        if child.type in ("text", "code_inline"):
            out.append(child.content)
        elif child.type in ("softbreak", "hardbreak"):
            out.append("\n")
        elif child.type == "html_inline":
            out.append(cut_spans(child.content, "<", ">"))
    return "".join(out).strip()


def plain_text(markdown: str) -> str:
    """The text of a Markdown document, without its marks (see the module's docstring)."""
    blocks: list[tuple[int | None, str]] = []  # (group, text): a group's blocks are lines of one block
    group, depth, row = None, 0, None
    for i, token in enumerate(_parser().parse(markdown)):
        if token.type in GROUPS:
            if depth == 0:
                group = i
            depth += 1
        elif token.type in GROUPS.values():
            depth -= 1
            if depth == 0:
                group = None
        elif token.type == "tr_open":
            row = []
        elif token.type == "tr_close":
            blocks.append((group, "\t".join(row)))
            row = None
        elif token.type == "inline":
            text = _inline(token.children)
            if row is not None:
                row.append(text)
            elif text:
                blocks.append((group, text))
        elif token.type in ("fence", "code_block"):
            blocks.append((group, token.content.rstrip("\n")))
        elif token.type == "html_block" and (text := cut_spans(token.content, "<", ">").strip()):
            blocks.append((group, text))
    out = []
    for k, (g, text) in enumerate(blocks):
        if k:
            out.append("\n" if g is not None and g == blocks[k - 1][0] else "\n\n")
        out.append(text)
    return "".join(out)


class PlainText(PipelineStep):
    """Every document's text as `plain_text` of it: the step after the extractor, the same for
    every arm. It drops nothing (a document of marks alone leaves empty, and post-processing's
    Gopher rules remove it, counted there); it counts the characters the marks took."""

    type = "✂️ - FORMAT"
    name = "📝 Plain text"

    def run(self, data: DocumentsPipeline, rank: int = 0, world_size: int = 1) -> DocumentsPipeline:
        for doc in data:
            with self.track_time():
                plain = plain_text(doc.text)
                self.stat_update("chars_removed", value=len(doc.text) - len(plain))
                doc.text = plain
            self.update_doc_stats(doc)
            yield doc
