"""Cutting delimited spans out of page text in time linear in its length.

A regex such as `<\\?[^>]*>` tries every `<?` and scans to the page's end from each when no `>`
follows: a page of `<?` repeated costs time quadratic in its length (minutes at 1 MB), in the
extraction task's own process. `cut_spans` finds each opener and the first closer after it with
`str.find`, so every character is looked at a bounded number of times."""

from __future__ import annotations

import re


def cut_spans(text: str, opener: str, closer: str) -> str:
    """`text` without each span from `opener` to the first `closer` after it (both included), as
    `re.sub(opener + "[^" + closer + "]*" + closer, "", text)` for a one-character `closer`. An
    opener with no closer after it is kept, and so is the rest of the text."""
    out, position = [], 0
    while (start := text.find(opener, position)) >= 0:
        end = text.find(closer, start + len(opener))
        if end < 0:
            break
        out.append(text[position:start])
        position = end + len(closer)
    out.append(text[position:])
    return "".join(out)


_TAG = re.compile(r"<(/?)([A-Za-z][A-Za-z0-9-]*)[^<>]*?(/?)>")
# elements that hold nothing or whose end tag a parser implies: they never nest a page deeper
_NO_DEPTH = frozenset({"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr",
                       "p", "li", "dt", "dd", "option", "optgroup", "tr", "td", "th", "thead", "tbody", "tfoot", "rb",
                       "rt", "rp", "colgroup", "caption", "html", "head", "body"})


# HTML tree building is quadratic in nesting depth (Lexbor 7 s at 40,000 levels, mineru-html's lxml
# simplification 0.24 s at 8,000): a page nested deeper is refused before it is parsed in-process
MAX_NESTING = 4096


def nesting_depth(html: str) -> int:
    """The deepest nesting of the page's elements, counted from its tags in one pass (an estimate: a
    parser may close elements the page leaves open): HTML tree building is quadratic in depth."""
    depth = deepest = 0
    for match in _TAG.finditer(html):
        closing, name, self_closing = match.groups()
        if self_closing or name.lower() in _NO_DEPTH:
            continue
        depth = max(depth - 1, 0) if closing else depth + 1
        deepest = max(deepest, depth)
    return deepest
