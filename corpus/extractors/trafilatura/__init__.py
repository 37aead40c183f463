"""Trafilatura (`extractor: trafilatura`): the paper's baseline arm, and the Dripper arm's fallback.

The step (`step.py`) is the suite's own, not datatrove's (whose `processing` extra caps Trafilatura
below 1.12): it maps the arm's options onto the API of the release that runs. That release is the
one installed with the suite unless `options.version` pins another; a pinned release that is not
the installed one runs in an environment of its own (`.venv-trafilatura-<version>` beside this
checkout, made by `make trafilatura-release TRAFILATURA=<version>`), through a worker process
(`worker.py`) that imports nothing but Trafilatura; `releases.py` says which release runs where.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator

from configs.base import StrictModel
from corpus.extractors.base import ExtractorArm
from corpus.extractors.trafilatura.releases import installed_release, release_environment, unsupported


class TrafilaturaOptions(StrictModel):
    """What the arm asks of Trafilatura. Its `deduplicate` cache is always off: it blanks
    paragraphs already seen in earlier documents of the same process. `timeout_s` is the suite's
    per-page limit in seconds of the sandbox worker's CPU time (corpus.extractors.sandbox), not a
    Trafilatura setting."""

    version: str | None = Field(None, description="The Trafilatura release that runs, as on PyPI (e.g. `1.11.0`, "
                                "the paper's release), in its own environment made by `make trafilatura-release "
                                "TRAFILATURA=<version>` (checked at load); null: the installed release.")
    output_format: Literal["markdown", "txt"] = Field("markdown", description="Trafilatura's output: Markdown or "
                                                      "plain text.")
    favour_precision: bool = Field(True, description="Trafilatura's `favor_precision`: keep less, more surely "
                                   "main content.")
    include_tables: bool = Field(True, description="Keep the text of tables.")
    timeout_s: float = Field(10.0, gt=0, description="Seconds of CPU time a page may take in the sandbox worker "
                             "(the suite's limit, not a Trafilatura setting); a page past it is dropped, counted as "
                             "a timeout.")

    @field_validator("version")
    @classmethod
    def _runnable_release(cls, version: str | None) -> str | None:
        if version is None:
            return None
        if not re.fullmatch(r"\d+\.\d+\.\d+", version):
            raise ValueError(f"{version!r}: give a release as on PyPI, e.g. 1.11.0")
        if why := unsupported(version):
            raise ValueError(why)
        if version != installed_release() and not (release_environment(version) / "bin" / "python").exists():
            raise ValueError(f"trafilatura {version} is not the installed release ({installed_release()}) and has no "
                             f"environment at {release_environment(version)}: make trafilatura-release TRAFILATURA={version}")
        return version

    @property
    def release(self) -> str:
        """The release that runs."""
        return self.version or installed_release()


def trafilatura_step(options: TrafilaturaOptions):
    from corpus.extractors.trafilatura.step import Trafilatura

    return Trafilatura(options)


class TrafilaturaArm(ExtractorArm):
    extractor: Literal["trafilatura"] = Field(description="Trafilatura, the paper's baseline arm.")
    options: TrafilaturaOptions = Field(TrafilaturaOptions(), description="What the arm asks of Trafilatura.")

    def step(self):
        return trafilatura_step(self.options)

    def versions(self) -> dict[str, str]:
        return {"trafilatura": self.options.release}
