"""`evaluation:`: lm-eval over every exported checkpoint, the clean-text sets, and the report's averaging."""

from __future__ import annotations

import glob
import re
from typing import Literal

from pydantic import Field, field_validator, model_validator

from configs.base import SLURM_WORD, StrictModel


class EvaluationSlurm(StrictModel):
    """One array task per checkpoint, one GPU each."""

    partition: str = Field("gpu", pattern=SLURM_WORD, description="Slurm partition of the evaluation array.")
    gpus: int = Field(1, ge=1, description="GPUs of each array task (one checkpoint).")
    cpus_per_task: int = Field(8, ge=1, description="CPU cores of each array task.")
    mem_gb: int = Field(64, ge=1, description="Memory of each array task in GB.")
    time: str = Field("04:00:00", description="Slurm time limit of each array task, `[days-]hours:minutes:seconds`.")
    qos: str = Field("normal", pattern=SLURM_WORD, description="Slurm quality of service of the array.")
    parallel: int = Field(32, ge=1, description="Array tasks running at once (the array's `%` limit).")


class GeneratedReference(StrictModel):
    """The gold main content of English pages the project's generator writes (corpus.sample),
    with a seed the training sample does not use."""

    pages: int = Field(120, ge=2, description="Pages generated, one reference document each.")
    seed: int = Field(11, description="Seed of the generated pages; it must not be a seed of the training sample "
                      "(`inputs.sample`), which is checked at load.")


class HubReference(StrictModel):
    """A Hugging Face dataset (hub id or local folder; on a cluster from the cache)."""

    dataset: str = Field(description="Hugging Face dataset: a hub id or a local folder (on a cluster, from the "
                         "cache).")
    subset: str | None = Field(None, description="The dataset's config (subset); null: its default.")
    split: str = Field("test", description="The split read.")


class CleanTextSet(StrictModel):
    """One reference of clean main content, scored by bits per byte (evaluation/tasks/clean_text.py).
    Exactly one source: `generated` pages, `jsonl` or `parquet` files (globs), or a `huggingface`
    dataset; `field` holds the text, in `format`: Markdown gives two views of the same reference
    (the Markdown, and its plain text by corpus/extractors/plain.py), plain text one."""

    name: str = Field(pattern=r"^[a-z0-9_]+$", description="The set's name, unique among `sets`; part of its "
                      "lm-eval task names.")
    generated: GeneratedReference | None = Field(None, description="Pages the project's generator writes, with "
                                                 "their gold main content. One source of four.")
    jsonl: list[str] | None = Field(None, description="JSONL files or globs (each must match a file). One source of "
                                    "four.")
    parquet: list[str] | None = Field(None, description="Parquet files or globs (each must match a file). One "
                                      "source of four.")
    huggingface: HubReference | None = Field(None, description="A Hugging Face dataset. One source of four.")
    field: str = Field("text", description="The column holding the text (not for `generated`, which is refused).")
    format: Literal["markdown", "plain"] = Field("markdown", description="What `field` holds: `markdown` is scored "
                                                 "twice, as Markdown and as its plain text (by "
                                                 "`corpus/extractors/plain.py`); `plain` once.")
    max_documents: int = Field(1000, ge=2, description="Documents scored: the first ones, in file order.")

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

    sets: list[CleanTextSet] = Field([], description="References the project turns into lm-eval tasks, scored by "
                                     "bits per byte.")
    lm_eval_tasks: list[str] = Field([], description="lm-eval's own perplexity tasks by name (`wikitext`, "
                                     "`paloma_c4_en`, ...; their data from the hub or its cache).")

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

    pair: tuple[str, str] = Field(description="`[arm, reference]`: two different trained arms; the difference "
                                  "decided is arm minus reference.")
    score: str = Field("accuracy:average", pattern=r"^[a-z_]+:[a-z0-9_]+$", description="The score compared, a "
                       "family's column as `family:column` (`accuracy:average`, `bpb:average`, `p_gold:average`, "
                       "`clean_text:plain`, ...); the report refuses one the run has no family or column for.")
    sides: Literal["two-sided", "one-sided"] = Field("two-sided", description="`two-sided`: a result either way "
                                                     "(the default); `one-sided`: only the arm better than the "
                                                     "reference is a result, at the same alpha. Printed with the "
                                                     "decision.")
    deciding_rung: str | None = Field(None, description="The ladder rung whose runs decide it; the other rungs' "
                                      "results are descriptive (their agreement with it). null: the ladder's last "
                                      "(largest) rung.")
    pilot_informed: bool = Field(False, description="true: the pair or score was chosen after seeing pilot runs "
                                 "(fine for a pilot; the report says so beside the decision). The report also "
                                 "checks, from git, that this section was committed before the deciding runs "
                                 "existed, and reports the decision as exploratory where it was not.")

    @model_validator(mode="after")
    def _two_arms(self) -> PrimaryDecision:
        if self.pair[0] == self.pair[1]:
            raise ValueError(f"evaluation.primary.pair: two different arms, got {list(self.pair)}")
        return self


class EvaluationConfig(StrictModel):
    """lm-eval over every exported checkpoint (the suite itself is evaluation/tasks/suite.yaml).

    `tasks: hub` reads the real datasets (a cluster with the Hugging Face cache or network);
    `offline` generates small local data in each task's schema (evaluation/tasks/offline.py)."""

    tasks: Literal["hub", "offline"] = Field("hub", description="`hub`: the benchmarks' real datasets (a cluster "
                                             "with the Hugging Face cache or network); `offline`: small local data "
                                             "generated in each task's schema (`evaluation/tasks/offline.py`), for "
                                             "the demo and tests.")
    offline_items: int = Field(40, ge=2, description="tasks: offline: items generated per task.")
    batch_size: int | Literal["auto"] = Field("auto", description="lm-eval's batch size; `auto`: the largest that "
                                              "fits.")
    max_gen_toks: int | None = Field(None, description="Generation budget in tokens of the generative tasks "
                                     "(CoQA); null: the task's own (256).")
    limit: int | None = Field(None, ge=1, description="Documents per task, for quick looks; null: all.")
    cpu_threads: int = Field(2, ge=1, description="torch threads on CPU, fixed so that scores are the same on any "
                             "machine.")
    clean_text: CleanTextConfig = Field(CleanTextConfig(), description="Bits per byte on clean web text, its own "
                                        "category of the report.")
    average_last: int = Field(1, ge=1, description="The report: a run's score is the mean over its last this many "
                              "compared checkpoints (1: the final one).")
    noise_checkpoints: int = Field(3, ge=2, description="The report: checkpoint noise is the SD over each run's last "
                                   "this many checkpoints.")
    primary: PrimaryDecision | None = Field(None, description="The one pre-registered comparison, decided first and "
                                            "alone at alpha 0.05; every other difference is exploratory. Changes "
                                            "the report only. null: none.")
    seed_sd: dict[str, float] = Field({}, description="Stated seed SDs: what an arm with one seed is decided "
                                      "against where no other rung of the ladder measured its seeds with two or "
                                      "more. The SD of an arm's score across seeds, in the family's shown unit "
                                      "(points for accuracy and p_gold, bits/byte for bpb and clean_text), keyed by "
                                      "family (`accuracy`) or score (`accuracy:average`, `bpb:ARC`; this one first); "
                                      "each above 0. Without either, such an arm's pairs decide nothing.")
    slurm: EvaluationSlurm = Field(EvaluationSlurm(), description="The evaluation array: one task per checkpoint, "
                                   "one GPU each.")

    @field_validator("seed_sd")
    @classmethod
    def _seed_sd_keys(cls, value: dict[str, float]) -> dict[str, float]:
        for key, sd in value.items():
            if not re.fullmatch(r"[a-z_]+(:[A-Za-z0-9_]+)?", key) or sd <= 0:
                raise ValueError(f"evaluation.seed_sd: {key}: {sd}: a key is a family (accuracy) or family:score "
                                 "(accuracy:average), a value a standard deviation above 0")
        return value
