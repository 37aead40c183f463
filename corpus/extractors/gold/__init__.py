"""The extraction upper bound (`extractor: gold`): every record's gold main content, where the
inputs carry it (the generated sample's gold.jsonl, or any JSONL of WARC-Record-ID and gold).

It runs where an extractor runs, over the same records after the same guard and record filters,
so its documents have the same ids and go through the same post-processing: the corpus a perfect
extractor would give for those records. A record with no gold is dropped as `no_gold`. The step
is `corpus.extractors.gold.step`.
"""

from __future__ import annotations

import glob
from typing import ClassVar, Literal

from pydantic import field_validator

from corpus.extractors.base import ExtractorArm


class GoldArm(ExtractorArm):
    extractor: Literal["gold"]
    # JSONL files or globs; null: the gold.jsonl the sample generator writes beside its WARCs
    # (filled in from `inputs.sample` when the experiment loads)
    gold: list[str] | None = None
    id_field: str = "id"  # holds the record's WARC-Record-ID
    field: str = "gold_html"
    # the field holds HTML: converted to Markdown as the Dripper arm's output is (html2text)
    html: bool = True

    bound: ClassVar[bool] = True

    @field_validator("gold")
    @classmethod
    def _files_exist(cls, patterns: list[str] | None) -> list[str] | None:
        for pattern in patterns or []:
            if not glob.glob(pattern):
                raise ValueError(f"no gold file matches {pattern!r}")
        return patterns

    def step(self):
        from corpus.extractors.gold.step import GoldText

        if self.gold is None:
            raise ValueError("extractor: gold needs `gold` files, or inputs.sample to take the sample's gold.jsonl")
        return GoldText(self)

    def accounting(self, counters: dict[str, int]) -> tuple[int, dict[str, int], dict[str, int]]:
        drops = {k.removeprefix("dropped_"): v for k, v in counters.items() if k.startswith("dropped_")}
        return counters.get("extracted", 0), {}, drops
