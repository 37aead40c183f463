"""An example extractor kind (`extractor: article_tags`): the page's HTML5 sectioning elements
(`<article>`, `<main>`, `role="main"`) as Markdown, nothing else.

The worked example of `docs/guides/add-an-arm.md`: a config class here (what loading a config
reads), its datatrove step in `step.py` (imported only where the step is built, inside the task).
Copied to `corpus/extractors/article_tags/` and added to `KINDS` (`corpus/extractors/__init__.py`),
it is an arm like any other.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from corpus.extractors.base import ExtractorArm


class ArticleTagsArm(ExtractorArm):
    extractor: Literal["article_tags"]
    selectors: list[str] = Field(
        ["article", "main", "[role=main]"], min_length=1,
        description="CSS selectors tried in order; the first that matches an element gives the page's main content "
                    "(every element it matches, outermost only). A page none matches is dropped as empty.")
    timeout_s: float = Field(10.0, gt=0, description="Per-page limit, in seconds of the sandbox worker's CPU time.")
    # the distributions whose release decides what this arm extracts (named beside its numbers)
    packages: ClassVar = ("selectolax", "html2text")

    def step(self):
        from .step import ArticleTags

        return ArticleTags(self.selectors, timeout=self.timeout_s)
