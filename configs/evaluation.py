"""`evaluation:`: lm-eval over every exported checkpoint, the clean-text sets, and the report's averaging."""

from __future__ import annotations

import glob
import re
from typing import Literal

from pydantic import Field, field_validator, model_validator

from configs.base import PARTITION_HELP, QOS_HELP, SLURM_WORD, StrictModel


class EvaluationSlurm(StrictModel):
    """One array task per checkpoint, one GPU each."""

    partition: str = Field("gpu", pattern=SLURM_WORD, description=PARTITION_HELP)
    gpus: int = Field(1, ge=1)
    cpus_per_task: int = Field(8, ge=1)
    mem_gb: int = Field(64, ge=1)
    time: str = "04:00:00"
    qos: str = Field("normal", pattern=SLURM_WORD, description=QOS_HELP)
    parallel: int = Field(32, ge=1)  # array tasks running at once


class GeneratedReference(StrictModel):
    """The gold main content of English pages the project's generator writes (corpus.sample),
    with a seed the training sample does not use."""

    pages: int = Field(120, ge=2)
    seed: int = 11


class HubReference(StrictModel):
    """A Hugging Face dataset (hub id or local folder; on a cluster from the cache)."""

    dataset: str
    subset: str | None = None
    split: str = "test"


class CleanTextSet(StrictModel):
    """One reference of clean main content, scored by bits per byte (evaluation/tasks/clean_text.py).
    Exactly one source: `generated` pages, `jsonl` or `parquet` files (globs), or a `huggingface`
    dataset; `field` holds the text, in `format`: Markdown gives two views of the same reference
    (the Markdown, and its plain text by corpus/extractors/plain.py), plain text one."""

    name: str = Field(pattern=r"^[a-z0-9_]+$")  # part of the lm-eval task names
    generated: GeneratedReference | None = None
    jsonl: list[str] | None = None
    parquet: list[str] | None = None
    huggingface: HubReference | None = None
    field: str = "text"
    format: Literal["markdown", "plain"] = "markdown"
    max_documents: int = Field(1000, ge=2)  # the first ones, in file order

    @model_validator(mode="after")
    def _one_source(self) -> CleanTextSet:
        given = [k for k in ("generated", "jsonl", "parquet", "huggingface") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(f"clean text set {self.name!r}: give exactly one of generated, jsonl, parquet, "
                             f"huggingface (got {given or 'none'})")
        if self.generated is not None and "field" in self.model_fields_set:
            raise ValueError(f"clean text set {self.name!r}: generated pages have no field; drop it")
        for pattern in (self.jsonl or []) + (self.parquet or []):
            if not glob.glob(pattern):
                raise ValueError(f"clean text set {self.name!r}: no file matches {pattern!r}")
        return self

    @property
    def views(self) -> tuple[str, ...]:
        return ("plain", "markdown") if self.format == "markdown" else ("plain",)


class CleanTextConfig(StrictModel):
    """Bits per byte on clean web text, its own category of the report. `sets`: references the
    project turns into lm-eval tasks; `lm_eval_tasks`: lm-eval's own perplexity tasks by name
    (`wikitext`, `paloma_c4_en`, ...; their data from the hub or its cache)."""

    sets: list[CleanTextSet] = []
    lm_eval_tasks: list[str] = []

    @model_validator(mode="after")
    def _unique(self) -> CleanTextConfig:
        names = [s.name for s in self.sets]
        if len(names) != len(set(names)):
            raise ValueError(f"clean text set names repeat: {names}")
        return self


class PrimaryDecision(StrictModel):
    """The one comparison the study pre-registers: `pair: [arm, reference]` (the difference arm −
    reference) on `score`, a family's column as `family:column` (accuracy:average, bpb:average,
    p_gold:average, clean_text:plain, ...; the report refuses one the run has no family or column
    for). The report decides it first, alone, at alpha 0.05 (every seed agreeing in sign); every
    other difference is exploratory, Holm over its own table."""

    pair: tuple[str, str]
    score: str = Field("accuracy:average", pattern=r"^[a-z_]+:[a-z0-9_]+$")

    @model_validator(mode="after")
    def _two_arms(self) -> PrimaryDecision:
        if self.pair[0] == self.pair[1]:
            raise ValueError(f"evaluation.primary.pair: two different arms, got {list(self.pair)}")
        return self


class EvaluationConfig(StrictModel):
    """lm-eval over every exported checkpoint (the suite itself is evaluation/tasks/suite.yaml).

    `tasks: hub` reads the real datasets (a cluster with the Hugging Face cache or network);
    `offline` generates small local data in each task's schema (evaluation/tasks/offline.py)."""

    tasks: Literal["hub", "offline"] = "hub"
    offline_items: int = Field(40, ge=2)
    batch_size: int | Literal["auto"] = "auto"
    max_gen_toks: int | None = None  # generation budget (CoQA); None: the task's own (256)
    limit: int | None = Field(None, ge=1)  # documents per task, for quick looks; None: all
    cpu_threads: int = Field(2, ge=1)  # torch threads on CPU: the same scores on any machine
    clean_text: CleanTextConfig = CleanTextConfig()
    # the report: a run's score is the mean over its last `average_last` compared checkpoints
    # (1: the final one); checkpoint noise is the SD over each run's last `noise_checkpoints`
    average_last: int = Field(1, ge=1)
    noise_checkpoints: int = Field(3, ge=2)
    primary: PrimaryDecision | None = None
    # an arm with one seed is decided against a seed variance named for it: measured at another rung
    # of the ladder where it has two seeds or more, else this one, stated: the SD of an arm's score
    # across seeds, in the family's shown unit (points for accuracy and p_gold, bits/byte for bpb and
    # clean_text), per family (`accuracy`) or per score (`accuracy:average`, `bpb:ARC`), the score's
    # own key first. Without either its pairs decide nothing.
    seed_sd: dict[str, float] = {}
    slurm: EvaluationSlurm = EvaluationSlurm()

    @field_validator("seed_sd")
    @classmethod
    def _seed_sd_keys(cls, value: dict[str, float]) -> dict[str, float]:
        for key, sd in value.items():
            if not re.fullmatch(r"[a-z_]+(:[A-Za-z0-9_]+)?", key) or sd <= 0:
                raise ValueError(f"evaluation.seed_sd: {key}: {sd}: a key is a family (accuracy) or family:score "
                                 "(accuracy:average), a value a standard deviation above 0")
        return value
