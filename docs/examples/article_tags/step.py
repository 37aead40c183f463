"""The `article_tags` arm's datatrove step (its config: the package's `__init__`)."""

from __future__ import annotations

from corpus.extractors.baselines.steps import BaselineExtractor
from corpus.markdown import html2text_markdown


class ArticleTags(BaselineExtractor):
    """The elements the first matching selector finds, as Markdown. A sandboxed datatrove extractor:
    its counters (`extracted`, `dropped` for an empty result, `timeout`, `broken_process`,
    `clean_error`) are the ones `ExtractorArm.accounting` reads."""

    name = "🏷 Article tags"

    def __init__(self, selectors: list[str], timeout: float = 10):
        super().__init__(timeout)
        self.selectors = selectors

    def extract_page(self, html: str) -> str:
        from selectolax.lexbor import LexborHTMLParser

        tree = LexborHTMLParser(html)
        for selector in self.selectors:
            nodes = tree.css(selector)
            if nodes:
                # an element inside another match (an <article> per comment inside the <main>) is already in it
                outermost = [n for n in nodes if not any(_inside(n, other) for other in nodes if other is not n)]
                return "\n\n".join(html2text_markdown(n.html) for n in outermost).strip()
        return ""


def _inside(node, ancestor) -> bool:
    parent = node.parent
    while parent is not None:
        if parent.mem_id == ancestor.mem_id:
            return True
        parent = parent.parent
    return False
