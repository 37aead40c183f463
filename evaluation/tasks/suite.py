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

    name: str
    category: Literal["knowledge", "reasoning", "reading"]
    tasks: list[str] = Field(min_length=1)  # the standard lm-eval tasks; a benchmark of several is their mean
    cloze: list[str] | None = None  # the cloze form, where the standard one is letter-choice
    score: Literal["acc", "acc_norm", "f1", "em"]
    chance: float = Field(ge=0, lt=1)
    shots: int = Field(0, ge=0)
    items: list[int] = Field(min_length=1)  # documents of each task's scored split (hub version)
    continuous: list[Literal["bpb", "p_gold"]] = []  # likelihood scores of the headline form (evaluation/metrics/)

    @model_validator(mode="after")
    def _items_per_task(self) -> Benchmark:
        if len(self.items) != len(self.tasks):
            raise ValueError(f"{self.name}: one item count per task ({self.tasks}), got {self.items}")
        return self

    def form(self, headline: str) -> list[str]:
        return self.cloze if headline == "cloze" and self.cloze else self.tasks


class Suite(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    headline: Literal["cloze", "standard"]
    benchmarks: list[Benchmark] = Field(min_length=1)

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
