"""One function builds an arm's extraction stage as a list of datatrove steps.

Every arm: the same reader over the same WARC files, the same record guard, then the arm's
extractor, then a JSONL writer. What differs between arms is the extractor step alone.
"""

from __future__ import annotations

from pathlib import Path

from datatrove.pipeline.extractors import Trafilatura
from datatrove.pipeline.writers import JsonlWriter

from corpus.config import BaselineArm, DripperArm, ExperimentConfig, TrafilaturaArm, TrafilaturaOptions
from corpus.records import AccountedWarcReader, RecordGuard


def trafilatura_step(options: TrafilaturaOptions) -> Trafilatura:
    # deduplicate=False: trafilatura's per-process cache blanks paragraphs it has seen before,
    # which silently empties documents built from repeated templates.
    return Trafilatura(
        favour_precision=options.favour_precision,
        timeout=options.timeout_s,
        deduplicate=False,
        output_format=options.output_format,
        include_tables=options.include_tables,
    )


def extractor_step(arm: TrafilaturaArm | DripperArm | BaselineArm):
    if isinstance(arm, TrafilaturaArm):
        return trafilatura_step(arm.options)
    if isinstance(arm, BaselineArm):
        from corpus.baselines import BASELINES, Justext

        if arm.extractor == "justext":
            return Justext(arm.justext_language, timeout=arm.timeout_s)
        return BASELINES[arm.extractor](timeout=arm.timeout_s)
    from corpus.dripper import DripperExtractor

    return DripperExtractor(arm)


def extraction_pipeline(config: ExperimentConfig, arm_name: str, base: str, paths_file: Path) -> list:
    arm = config.arms[arm_name]
    return [
        AccountedWarcReader(base, paths_file=str(paths_file), doc_progress=True),
        RecordGuard(config.extraction.max_html_bytes, config.extraction.max_control_char_ratio),
        extractor_step(arm),
        JsonlWriter(str(config.arm_dir(arm_name) / "output"), output_filename="${rank}.jsonl.gz"),
    ]


def extractor_accounting(arm: TrafilaturaArm | DripperArm | BaselineArm, step_stats: dict[str, int]) -> tuple[int, dict[str, int], dict[str, int]]:
    """(extracted, fallbacks by reason, drops by reason) from an extractor step's counters.

    datatrove's extractors count `extracted` for every successful call, then `dropped` for the
    empty results; `timeout`, `broken_process` and `clean_error` are failures. The Dripper step
    counts `extracted`, `fallback_<reason>` and `dropped_<reason>` directly.
    """
    if isinstance(arm, DripperArm):
        fallbacks = {k.removeprefix("fallback_"): v for k, v in step_stats.items() if k.startswith("fallback_")}
        drops = {k.removeprefix("dropped_"): v for k, v in step_stats.items() if k.startswith("dropped_")}
        return step_stats.get("extracted", 0), fallbacks, drops
    drops = {"empty": step_stats.get("dropped", 0), "timeout": step_stats.get("timeout", 0),
             "error": step_stats.get("broken_process", 0) + step_stats.get("clean_error", 0)}
    return step_stats.get("extracted", 0) - drops["empty"], {}, {k: v for k, v in drops.items() if v}
