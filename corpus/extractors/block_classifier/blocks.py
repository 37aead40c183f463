"""A page as a list of blocks, on selectolax's Lexbor parser: what the block classifier labels and
what its output is built from.

A block is a paragraph-like element (p, headings, dt/dd, captions), an element kept whole
(data tables, lists of plain items, pre, math), or a run of text and inline elements directly
inside a container (div, td, li, article, ...); tables and lists that hold blocks are layout and
are walked into. Blocks come in document order, each with its tag, its ancestors' tags,
class/id tokens and identities, the characters inside links, its plain text (features, alignment to gold) and its
Markdown (headings, list items, table rows, code fences and TeX formulas kept), which is what the
corpus gets.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from corpus.extractors.spans import MAX_NESTING, cut_spans, nesting_depth

SKIP = frozenset({"script", "style", "noscript", "template", "svg", "iframe", "head", "button", "select", "option",
                  "input", "textarea", "canvas", "object", "embed", "video", "audio", "map", "link", "meta", "title"})
HEADINGS = {f"h{i}": i for i in range(1, 7)}
LEAF = frozenset({"p", *HEADINGS, "dt", "dd", "caption", "address", "figcaption", "summary", "legend"})
WHOLE = frozenset({"table", "ul", "ol", "dl", "pre", "math"})
INLINE = frozenset({"a", "abbr", "b", "bdi", "bdo", "big", "br", "cite", "code", "data", "del", "dfn", "em", "font",
                    "i", "img", "ins", "kbd", "label", "mark", "nobr", "q", "s", "samp", "small", "span", "strike",
                    "strong", "sub", "sup", "time", "tt", "u", "var", "wbr"})
# elements deeper than this are one block with all their text: the walk recurses and copies its
# ancestors at each level, quadratic in depth (real pages nest a few dozen levels; a hostile one 100,000)
MAX_DEPTH = 256
class PageTooDeep(ValueError):
    """A page nested too deep to parse in bounded time."""
# the words of class and id attributes ("post-body main_col" -> post, body, main, col)
_TOKEN = re.compile(r"[a-z]+")


def _squash(text: str) -> str:
    return " ".join(text.split())


@dataclass
class Block:
    text: str
    markdown: str
    tag: str  # the element's tag, or "#inline" for text directly in a container
    ancestors: tuple[str, ...]  # tags from <html> down to the parent
    words: tuple[str, ...]  # class/id words of the block and its ancestors
    link_chars: int
    containers: tuple[int, ...]  # ids of the enclosing elements from <body> down to the parent

    @property
    def parent(self) -> int:  # blocks of one container share it
        return self.containers[-1]


class _Walker:
    def __init__(self):
        self.blocks: list[Block] = []
        self.run: list[str] = []
        self.run_links = 0

    def flush(self, ancestors, words, containers):
        text = _squash("".join(self.run))
        if text:
            self.blocks.append(Block(text, text, "#inline", ancestors, words, self.run_links, containers))
        self.run, self.run_links = [], 0

    def walk(self, node, ancestors: tuple[str, ...], words: tuple[str, ...], containers: tuple[int, ...]):
        for child in node.iter(include_text=True):
            tag = child.tag
            if tag == "-text":
                self.run.append(child.text_content or "")
                continue
            if tag in SKIP or not isinstance(tag, str) or tag.startswith("-") or tag.startswith("!"):
                continue
            if tag in INLINE:
                text = child.text(deep=True) or ""
                self.run.append(text if tag != "br" else " ")
                if tag == "a":
                    self.run_links += len(text.strip())
                elif child.child is not None:
                    self.run_links += _links(child)
                continue
            attrs = child.attributes
            own = tuple(_TOKEN.findall(f"{attrs.get('class') or ''} {attrs.get('id') or ''}".lower()))
            if len(ancestors) >= MAX_DEPTH:  # no deeper: a hostile page nests 100,000 deep
                self.flush(ancestors, words, containers)
                block = _block(child, "p", ancestors, words + own, containers)
                if block is not None:
                    self.blocks.append(block)
                continue
            if tag in LEAF or (tag in WHOLE and not _layout(child, tag)):
                self.flush(ancestors, words, containers)
                block = _block(child, tag, ancestors, words + own, containers)
                if block is not None:
                    self.blocks.append(block)
                continue
            self.flush(ancestors, words, containers)
            self.walk(child, ancestors + (tag,), words + own, containers + (child.mem_id,))
        self.flush(ancestors, words, containers)  # the text after the last block of this element is its own


# Tables and lists that hold blocks of their own are page layout (old sites lay out whole pages in
# tables), not data: the walk goes into their cells and items instead of keeping them whole.
_LAYOUT_INSIDE = {"table": "table, div, p, ul, ol, h1, h2, h3, h4, h5, h6, pre, blockquote, form",
                  "ul": "div, p, table, h1, h2, h3, h4, h5, h6, pre, blockquote, form",
                  "ol": "div, p, table, h1, h2, h3, h4, h5, h6, pre, blockquote, form",
                  "dl": "div, p, table, ul, ol, h1, h2, h3, h4, h5, h6, pre, blockquote, form"}


def _layout(node, tag: str) -> bool:
    # (a node's css() matches the node itself, so the search starts at its children)
    return tag in _LAYOUT_INSIDE and any(child.css_first(_LAYOUT_INSIDE[tag]) is not None for child in node.iter())


def _links(node) -> int:
    return sum(len((a.text(deep=True) or "").strip()) for a in node.css("a"))


def _block(node, tag: str, ancestors, words, containers) -> Block | None:
    if tag in LEAF:
        text = _squash(node.text(deep=True) or "")
        if not text:
            return None
        markdown = f"{'#' * HEADINGS[tag]} {text}" if tag in HEADINGS else text
        return Block(text, markdown, tag, ancestors, words, _links(node), containers)
    if tag in ("ul", "ol"):
        items = [_squash(li.text(deep=True) or "") for li in node.css("li")] or [_squash(node.text(deep=True) or "")]
        items = [i for i in items if i]
        marker = (lambda n: f"{n + 1}.") if tag == "ol" else (lambda n: "-")
        markdown = "\n".join(f"{marker(n)} {item}" for n, item in enumerate(items))
        text = " ".join(items)
    elif tag == "dl":
        items = [_squash(d.text(deep=True) or "") for d in node.css("dt, dd")]
        items = [i for i in items if i]
        markdown, text = "\n".join(items), " ".join(items)
    elif tag == "table":
        rows = [[_squash(c.text(deep=True) or "").replace("|", "\\|") for c in tr.css("th, td")] for tr in node.css("tr")]
        rows = [r for r in rows if any(r)]
        if not rows:
            return None
        width = max(map(len, rows))
        lines = ["| " + " | ".join(r + [""] * (width - len(r))) + " |" for r in rows]
        markdown = "\n".join(lines[:1] + ["|" + " --- |" * width] + lines[1:])
        text = " ".join(c for r in rows for c in r if c)
    elif tag == "pre":
        code = (node.text(deep=True) or "").strip("\n")
        markdown, text = f"```\n{code}\n```", _squash(code)
    else:  # math: its TeX annotation where it has one
        tex = node.css_first('annotation[encoding="application/x-tex"]')
        formula = _squash(tex.text() if tex is not None else node.text(deep=True) or "")
        markdown, text = f"$${formula}$$", formula
    if not text:
        return None
    return Block(text, markdown, tag, ancestors, words, _links(node), containers)


# `<?…>` (PHP left in a page, XML declarations): HTML parsers skip it as a bogus comment ending at
# the first `>`; selectolax 0.4.13's Lexbor node iteration segfaults past some of them (a CleanEval
# page), so they are cut out first (linearly: corpus.extractors.spans), which is what the parser does
# with them anyway


def page_blocks(html: str) -> list[Block]:
    """The page's blocks in document order (none for a page without a body or text)."""
    from selectolax.lexbor import LexborHTMLParser

    if (depth := nesting_depth(html)) > MAX_NESTING:  # the step counts the refusal as clean_error
        raise PageTooDeep(f"elements nested {depth:,} deep, past {MAX_NESTING:,}")
    tree = LexborHTMLParser(cut_spans(html, "<?", ">"))
    body = tree.body
    if body is None:
        return []
    walker = _Walker()
    walker.walk(body, ("html", "body"), (), (body.mem_id,))
    return walker.blocks


def blocks_markdown(blocks: list[Block]) -> str:
    return "\n\n".join(b.markdown for b in blocks)
