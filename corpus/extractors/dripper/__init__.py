"""Dripper: mineru-html simplification -> block labels -> mapping back -> Markdown
(`extractor: dripper`). The step is `step`; the labelers behind one interface `labelers/` (the LLM
in vLLM or behind an endpoint, the project's CPU encoder); `labels` builds training examples,
`training` trains the encoder on them, `random_model` builds a tiny random LLM for tests."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar, Literal

from pydantic import Field

from corpus.extractors.base import ExtractorArm, installed_versions
from corpus.extractors.dripper.labelers.config import LabelerConfig
from corpus.extractors.trafilatura import TrafilaturaOptions


class DripperArm(ExtractorArm):
    """Pages the labeler cannot take (over the context, labeler or parse error) fall back to
    Trafilatura with `fallback` options; every fallback is counted with its reason."""

    extractor: Literal["dripper"] = Field(description="Dripper: mineru-html simplifies the page, an LM labels its "
                                          "blocks main or other, the main blocks become Markdown.")
    labeler: LabelerConfig = Field(description="What labels the blocks, by `kind`: `vllm` (the model in-process), "
                                   "`endpoint` (an OpenAI-compatible server) or `encoder` (the project's CPU "
                                   "encoder).")
    markdown: Literal["html2text", "mineru"] = Field("html2text", description="How the main blocks become "
                                                     "Markdown: `html2text`, or `mineru`, MinerU's converter (the "
                                                     "mineru-webkit package).")
    batch_pages: int = Field(64, ge=1, description="Pages simplified and sent to the labeler together.")
    fallback: TrafilaturaOptions = Field(TrafilaturaOptions(), description="Trafilatura options of the fallback, "
                                         "for pages the labeler cannot take (over the context, labeler or parse "
                                         "error), each counted with its reason.")
    packages: ClassVar = ("mineru-html",)

    def step(self, labeler=None, arm_dir: Path | None = None):
        """`labeler`: a BlockLabeler to use instead of building the configured one (benchmarks,
        tests); it must then live in the process that runs the step. `arm_dir`: the run's arm
        folder, where the driver recorded the hub model's commit (labelers.revision)."""
        from corpus.extractors.dripper.step import DripperExtractor

        return DripperExtractor(self, labeler, str(arm_dir) if arm_dir else None)

    def run_step(self, arm_dir: Path):
        return self.step(arm_dir=arm_dir)

    def versions(self) -> dict[str, str]:
        """mineru-html (simplification, prompt, mapping back), the labeler's engine where it runs
        here (vLLM, or transformers for the CPU encoder) and the fallback's Trafilatura."""
        engine = {"vllm": ("vllm",), "encoder": ("transformers",)}.get(self.labeler.kind, ())
        return super().versions() | installed_versions(engine) | {"trafilatura": self.fallback.release}

    @property
    def one_local_process(self) -> bool:
        return self.labeler.kind == "vllm"

    def accounting(self, counters: dict[str, int]) -> tuple[int, dict[str, int], dict[str, int]]:
        """The Dripper step counts `extracted`, `fallback_<reason>` and `dropped_<reason>` directly."""
        fallbacks = {k.removeprefix("fallback_"): v for k, v in counters.items() if k.startswith("fallback_")}
        drops = {k.removeprefix("dropped_"): v for k, v in counters.items() if k.startswith("dropped_")}
        return counters.get("extracted", 0), fallbacks, drops
