"""The CPU extractor (`extractor: block_classifier`): the page's blocks on selectolax's Lexbor
parser (`blocks`), a small model that labels each block main or not from its features
(`features`, `model`), the main blocks as Markdown (the step: `step`). The model is a folder
written by `python -m corpus.extractors.block_classifier.training`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import ClassVar, Literal

from pydantic import Field, field_validator

from configs.base import require_model_folder
from corpus.extractors.base import ExtractorArm


class BlockClassifierArm(ExtractorArm):
    extractor: Literal["block_classifier"] = Field(description="The suite's CPU extractor: a small model labels "
                                                   "each block of the page main or not.")
    model: str = Field(description="The model folder (`block_model.json` and the model file) written by `python -m "
                       "corpus.extractors.block_classifier.training`; checked at load, a model of an earlier version "
                       "is refused.")
    packages: ClassVar = ("selectolax", "lightgbm")  # the parser and the trees (the rest is this suite's code)

    @field_validator("model")
    @classmethod
    def _model_folder(cls, value: str) -> str:
        from corpus.extractors.block_classifier.features import STALE_MODEL, computed_by_this_version

        require_model_folder(value, "block_model.json", "train one with python -m corpus.extractors.block_classifier.training")
        # a model from an earlier version fails here, not in every extraction task
        meta = json.loads((Path(value) / "block_model.json").read_text())
        if not computed_by_this_version(meta):
            raise ValueError(f"{value!r}: {STALE_MODEL}")
        if meta.get("unit", "page") != "page":
            raise ValueError(f"{value!r} labels mineru-html's blocks (a Dripper draft model), not a page's: train the arm's "
                             "model with python -m corpus.extractors.block_classifier.training")
        return value

    def step(self):
        from corpus.extractors.block_classifier.step import BlockClassifier

        return BlockClassifier(self.model)
