"""Baseline extractors users compare against (`extractor: resiliparse|readability|justext|html2text`).

`html2text` converts the whole page: the no-extraction floor. The steps themselves are in
`corpus.extractors.baselines.steps`.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from corpus.extractors.base import ExtractorArm


class BaselineArm(ExtractorArm):
    timeout_s: float = Field(10.0, gt=0)  # per page, seconds of the sandbox worker's CPU time


class ResiliparseArm(BaselineArm):
    extractor: Literal["resiliparse"]
    packages: ClassVar = ("resiliparse",)

    def step(self):
        from corpus.extractors.baselines.steps import Resiliparse

        return Resiliparse(timeout=self.timeout_s)


class ReadabilityArm(BaselineArm):
    extractor: Literal["readability"]
    packages: ClassVar = ("readability-lxml", "html2text")

    def step(self):
        from corpus.extractors.baselines.steps import Readability

        return Readability(timeout=self.timeout_s)


class JustextArm(BaselineArm):
    extractor: Literal["justext"]
    packages: ClassVar = ("jusText",)
    language: str = "English"  # jusText's stop-word list

    def step(self):
        from corpus.extractors.baselines.steps import Justext

        return Justext(self.language, timeout=self.timeout_s)


class WholePageArm(BaselineArm):
    extractor: Literal["html2text"]
    packages: ClassVar = ("html2text",)

    def step(self):
        from corpus.extractors.baselines.steps import WholePage

        return WholePage(timeout=self.timeout_s)
