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

from pydantic import Field, field_validator

from corpus.extractors.base import ExtractorArm


class GoldArm(ExtractorArm):
    extractor: Literal["gold"] = Field(description="The upper bound: every record's gold main content, where the "
                                       "inputs carry it; a record with none is dropped as `no_gold`.")
    gold: list[str] | None = Field(None, description="JSONL files or globs of WARC-Record-ID and gold text (each "
                                   "must match a file); null: the `gold.jsonl` the sample generator writes beside "
                                   "its WARCs (needs `inputs.sample`).")
    id_field: str = Field("id", description="The JSONL field holding the record's WARC-Record-ID.")
    field: str = Field("gold_html", description="The JSONL field holding the gold main content.")
    html: bool = Field(True, description="`field` holds HTML, converted to Markdown by html2text as the Dripper "
                       "arm's output is; `false`: text, taken as it is.")

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
