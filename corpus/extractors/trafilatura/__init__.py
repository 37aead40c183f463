"""Trafilatura through datatrove's own extractor step: the paper's baseline arm, and the Dripper
arm's fallback."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from configs.base import StrictModel
from corpus.extractors.base import ExtractorArm


class TrafilaturaOptions(StrictModel):
    """Options of datatrove's Trafilatura step (its `deduplicate` cache is always off: it blanks
    paragraphs already seen in earlier documents of the same process)."""

    output_format: Literal["markdown", "txt"] = "markdown"
    favour_precision: bool = True
    include_tables: bool = True
    timeout_s: float = Field(10.0, gt=0)


def trafilatura_step(options: TrafilaturaOptions):
    from datatrove.pipeline.extractors import Trafilatura

    # deduplicate=False: trafilatura's per-process cache blanks paragraphs it has seen before,
    # which silently empties documents built from repeated templates.
    return Trafilatura(
        favour_precision=options.favour_precision,
        timeout=options.timeout_s,
        deduplicate=False,
        output_format=options.output_format,
        include_tables=options.include_tables,
    )


class TrafilaturaArm(ExtractorArm):
    extractor: Literal["trafilatura"]
    options: TrafilaturaOptions = TrafilaturaOptions()

    def step(self):
        return trafilatura_step(self.options)
