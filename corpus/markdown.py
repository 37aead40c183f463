"""Main-content HTML to Markdown, one function for every caller.

`html2text` with the WebMainBench settings (no wrapping, links and images dropped) is the fast
default; `mineru` is mineru-html's own converter (the one Dripper's reference pipeline uses).
"""

from __future__ import annotations

from typing import Literal

MarkdownConverter = Literal["html2text", "mineru"]


def html2text_markdown(html: str) -> str:
    import html2text

    converter = html2text.HTML2Text()
    converter.body_width = 0
    converter.ignore_links = True
    converter.ignore_images = True
    return converter.handle(html).strip()


def html_to_markdown(html: str, converter: MarkdownConverter = "html2text", url: str | None = None) -> str:
    if not html.strip():
        return ""
    if converter == "html2text":
        return html2text_markdown(html)
    from webpage_converter.convert import convert_html_to_structured_data

    return (convert_html_to_structured_data(main_html=html, url=url, output_format="mm_md") or "").strip()
