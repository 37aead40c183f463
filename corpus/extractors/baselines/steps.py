"""The baseline extractors as datatrove extractor steps (their configs: corpus.extractors.baselines).

Output is Markdown-like text, as the other arms write.
"""

from __future__ import annotations

from abc import abstractmethod

from corpus.extractors.sandbox import SandboxedExtractor
from corpus.markdown import html2text_markdown


class BaselineExtractor(SandboxedExtractor):
    """datatrove's sandbox warms each extractor up on an empty page: some libraries raise on one,
    and a sandbox whose worker dies in warm-up waits a full timeout on every document."""

    def __init__(self, timeout: float = 10):
        super().__init__(timeout)

    def extract(self, text: str) -> str:
        return self.extract_page(text) if text.strip() else ""

    @abstractmethod
    def extract_page(self, html: str) -> str:
        """Main content of a non-empty page."""


class Resiliparse(BaselineExtractor):
    name = "⚡ Resiliparse"

    def extract_page(self, html: str) -> str:
        from resiliparse.extract.html2text import extract_plain_text

        return extract_plain_text(html, main_content=True, preserve_formatting=True)


class Readability(BaselineExtractor):
    """readability-lxml's article HTML, converted with the WebMainBench html2text settings."""

    name = "📖 Readability"

    def extract_page(self, html: str) -> str:
        from readability import Document

        return html2text_markdown(Document(html).summary(html_partial=True))


class Justext(BaselineExtractor):
    name = "🧹 jusText"

    def __init__(self, language: str = "English", timeout: float = 10):
        super().__init__(timeout)
        self.language = language

    def extract_page(self, html: str) -> str:
        import justext

        paragraphs = justext.justext(html.encode("utf-8"), justext.get_stoplist(self.language), encoding="utf-8")
        return "\n\n".join(p.text for p in paragraphs if not p.is_boilerplate)


class WholePage(BaselineExtractor):
    """The whole page through html2text: what 'no extraction' scores."""

    name = "📄 Whole page (html2text)"

    def extract_page(self, html: str) -> str:
        return html2text_markdown(html)
