"""`arms:`, the rows of the comparison, and `extraction:`, what every extractor arm shares. The section
of each extractor kind is defined with its kind (`corpus.extractors`), that of a reference corpus in
`corpus.read.reference`."""

from __future__ import annotations

from typing import Annotated, Literal, Union

from pydantic import Discriminator, Field, Tag

from configs.base import StrictModel
from corpus.extractors import KINDS, kind_name
from corpus.read.reference import ReferenceArm


class ExtractionConfig(StrictModel):
    """Record-level limits applied identically before every arm, and the format every extractor
    arm's documents are written in."""

    max_html_bytes: int = Field(5_000_000, ge=1, description="A record whose payload is larger than this many "
                                "bytes is dropped (counted) before any extractor sees it.")
    max_control_char_ratio: float = Field(0.05, ge=0, le=1, description="A record whose decoded text has a larger "
                                          "share of control characters is binary, not HTML, and is dropped "
                                          "(counted) before any extractor.")
    text_format: Literal["native", "plain"] = Field("native", description="`native`: each extractor's own output, "
                                                    "its Markdown dialect (the paper's setup). `plain`: every "
                                                    "extractor arm's text with its Markdown marks removed by one "
                                                    "function (`corpus/extractors/plain.py`) before the tokenizer's "
                                                    "sample and post-processing see it, so that arms differ in "
                                                    "content alone.")


def extractor_or_corpus(value) -> str | None:
    """The tag of an arm: its extractor kind, or `reference` for a corpus."""
    if isinstance(value, dict):
        return "reference" if "corpus" in value else value.get("extractor")
    return "reference" if isinstance(value, ReferenceArm) else value.extractor


# An arm extracts the WARC records (`extractor: <kind>`, corpus.extractors) or reads an existing
# corpus (`corpus: <format>`, corpus.read.reference); errors are located as arms.<name>.<kind>.<key>.
Arm = Annotated[Union[tuple(Annotated[kind, Tag(kind_name(kind))] for kind in KINDS)
                      + (Annotated[ReferenceArm, Tag("reference")],)], Discriminator(extractor_or_corpus)]
