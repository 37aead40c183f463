"""Baseline extractors users compare against (`extractor: resiliparse|readability|justext|html2text`).

`html2text` converts the whole page: the no-extraction floor. The steps themselves are in
`corpus.extractors.baselines.steps`.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from corpus.extractors.base import ExtractorArm


class BaselineArm(ExtractorArm):
    timeout_s: float = Field(10.0, gt=0, description="Seconds of CPU time a page may take in the sandbox worker; "
                             "a page past it is dropped, counted as a timeout.")


class ResiliparseArm(BaselineArm):
    extractor: Literal["resiliparse"] = Field(description="Resiliparse's main-content extraction.")
    packages: ClassVar = ("resiliparse",)

    def step(self):
        from corpus.extractors.baselines.steps import Resiliparse

        return Resiliparse(timeout=self.timeout_s)


class ReadabilityArm(BaselineArm):
    extractor: Literal["readability"] = Field(description="readability-lxml's article, converted to Markdown by "
                                              "html2text.")
    packages: ClassVar = ("readability-lxml", "html2text")

    def step(self):
        from corpus.extractors.baselines.steps import Readability

        return Readability(timeout=self.timeout_s)


class JustextArm(BaselineArm):
    extractor: Literal["justext"] = Field(description="jusText's paragraph classifier.")
    packages: ClassVar = ("jusText",)
    language: str = Field("English", description="jusText's stop-word list, by its name (`English`, `German`, ...).")

    def step(self):
        from corpus.extractors.baselines.steps import Justext

        return Justext(self.language, timeout=self.timeout_s)


class WholePageArm(BaselineArm):
    extractor: Literal["html2text"] = Field(description="The whole page through html2text: the no-extraction "
                                            "floor.")
    packages: ClassVar = ("html2text",)

    def step(self):
        from corpus.extractors.baselines.steps import WholePage

        return WholePage(timeout=self.timeout_s)
