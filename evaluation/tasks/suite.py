"""The benchmark suite (evaluation/tasks/suite.yaml): 13 benchmarks, their lm-eval tasks, the metric
each contributes, its chance level and category. Loaded and validated once; everything that
runs or reports the suite asks it, so the suite is defined in one place."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, model_validator

SUITE_FILE = Path(__file__).with_name("suite.yaml")
TASKS_DIR = Path(__file__).with_name("lm_eval_tasks")  # the project's task YAMLs (lm-eval include_path)
CATEGORIES = ("knowledge", "reasoning", "reading")
COLUMNS = ("average", *CATEGORIES)  # the headline's columns: the average and each category
CATEGORY_TITLES = {"knowledge": "General Knowledge", "reasoning": "Reasoning", "reading": "Reading"}


class Benchmark(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(description="The benchmark's name in the report's tables.")
    category: Literal["knowledge", "reasoning", "reading"] = Field(description="The report's category the benchmark "
                                                                   "is averaged into.")
    tasks: list[str] = Field(min_length=1, description="The standard lm-eval tasks; a benchmark of several scores "
                             "their mean.")
    cloze: list[str] | None = Field(None, description="The cloze form (scored on the answer text), where the "
                                    "standard one is letter-choice, on which small models sit at chance; null: none.")
    score: Literal["acc", "acc_norm", "f1", "em"] = Field(description="The lm-eval metric averaged into the category "
                                                          "and overall means.")
    chance: float = Field(ge=0, lt=1, description="The score of random guessing, for centered accuracy (score - "
                          "chance) / (1 - chance).")
    shots: int = Field(0, ge=0, description="Few-shot examples in each prompt.")
    items: list[int] = Field(min_length=1, description="Documents of each task's scored split (the hub version), "
                             "one count per task; the minimum detectable difference is computed from them.")
    continuous: list[Literal["bpb", "p_gold"]] = Field([], description="The likelihood scores read from the "
                                                       "headline form's per-document logs (`evaluation/metrics/`): "
                                                       "`bpb`, bits per byte of the gold continuation; `p_gold`, "
                                                       "the probability on the gold choice.")

    @model_validator(mode="after")
    def _items_per_task(self) -> Benchmark:
        if len(self.items) != len(self.tasks):
            raise ValueError(f"{self.name}: one item count per task ({self.tasks}), got {self.items}")
        return self

    def form(self, headline: str) -> list[str]:
        return self.cloze if headline == "cloze" and self.cloze else self.tasks


class Suite(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    headline: Literal["cloze", "standard"] = Field(description="Which form of a benchmark with a cloze form the "
                                                   "category and overall means use.")
    benchmarks: list[Benchmark] = Field(min_length=1, description="The benchmarks; a task appears in one only.")

    @model_validator(mode="after")
    def _unique(self) -> Suite:
        names = [t for b in self.benchmarks for t in b.tasks + (b.cloze or [])]
        if len(names) != len(set(names)):
            raise ValueError("a task appears in two benchmarks")
        return self

    def all_tasks(self) -> list[str]:
        """Every task the suite runs: both forms where a benchmark has two."""
        return [t for b in self.benchmarks for t in b.tasks + (b.cloze or [])]

    def benchmark_of(self, task: str) -> Benchmark:
        return next(b for b in self.benchmarks if task in b.tasks + (b.cloze or []))


@lru_cache(maxsize=1)
def load_suite(path: Path = SUITE_FILE) -> Suite:
    return Suite.model_validate(yaml.safe_load(path.read_text()))
