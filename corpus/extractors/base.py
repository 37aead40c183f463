"""What every extractor kind's config section is: an arm of the experiment that builds one
datatrove step and knows how that step counts the records it did not extract."""

from __future__ import annotations

from abc import abstractmethod
from importlib import metadata
from pathlib import Path
from typing import ClassVar

from pydantic import Field

from configs.base import Resources, StrictModel


class ExtractorArm(StrictModel):
    """The config of one arm. A kind subclasses it with `extractor: Literal["<kind>"]` and its
    options. Only config here: steps are built inside the task's process, where the heavy
    libraries (datatrove, models) are imported."""

    resources: Resources = Field(Resources(), description="Tasks and Slurm resources of the arm's extraction "
                                 "stage; a GPU extractor needs `gpus_per_task`.")

    # A bound (the gold text), not an extractor: left out of the tokenizer's training sample and
    # of the extraction benchmark, where it would only score itself.
    bound: ClassVar[bool] = False
    # the distributions whose release decides what the kind extracts: named beside every number of the arm
    packages: ClassVar[tuple[str, ...]] = ()

    @abstractmethod
    def step(self):
        """The datatrove step that turns a page's HTML (`doc.text`) into its main content."""

    def run_step(self, arm_dir: Path):
        """The step of a flow run whose outputs go under `arm_dir` (an arm that records something
        there before its tasks start reads it back from there)."""
        return self.step()

    def versions(self) -> dict[str, str]:
        """The release of every package that decides what this arm extracts, by distribution name."""
        return installed_versions(self.packages)

    @property
    def one_local_process(self) -> bool:
        """True where the step holds the whole machine (an in-process GPU engine): locally its
        stage then runs one task at a time."""
        return False

    def accounting(self, counters: dict[str, int]) -> tuple[int, dict[str, int], dict[str, int]]:
        """(extracted, fallbacks by reason, drops by reason) from the step's counters.

        datatrove's extractors count `extracted` for every successful call, then `dropped` for the
        empty results; `timeout`, `broken_process` and `clean_error` are failures."""
        drops = {"empty": counters.get("dropped", 0), "timeout": counters.get("timeout", 0),
                 "error": counters.get("broken_process", 0) + counters.get("clean_error", 0)}
        return counters.get("extracted", 0) - drops["empty"], {}, {k: v for k, v in drops.items() if v}


def installed_versions(names) -> dict[str, str]:
    return {name: metadata.version(name) for name in names}


def versions_text(versions: dict[str, str]) -> str:
    """`trafilatura 2.3.1`, `mineru-html 1.1.2, trafilatura 2.3.1`; '' for an arm of no package."""
    return ", ".join(f"{name} {version}" for name, version in versions.items())
