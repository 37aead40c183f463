"""The extraction stage of every extractor arm, one datatrove pipeline each:

    AccountedWarcReader (corpus.read.warc) ─► record guard and record-level filters
    (corpus.extractors.prefilters) ─► the arm's extractor ─► [plain text] ─► JSONL

Every arm reads the same files through the same reader and prefilters; what differs between arms
is the extractor step alone. With `extraction.text_format: plain` every arm's text then loses its
Markdown marks in the same step (corpus.extractors.plain), so arms differ in content, not format.
"""

from __future__ import annotations

from pathlib import Path

from configs.experiment import ExperimentConfig
from corpus.extractors.plain import PlainText
from corpus.extractors.prefilters import LANGUAGE_PREFILTER, URL_BLOCKLIST, prefilter_steps
from corpus.read.inputs import input_folder, input_manifest
from corpus.read.warc import INPUT_FILES, AccountedWarcReader
from corpus.stage import Stage, documents_writer


def extraction_pipeline(config: ExperimentConfig, arm: str, base: str, paths_file: Path) -> list:
    return [
        AccountedWarcReader(input_folder(config.inputs, base), paths_file=str(paths_file),
                            manifest=str(manifest) if (manifest := input_manifest(paths_file)) else None,
                            on_corrupt=config.inputs.on_corrupt, retries=config.inputs.retries,
                            files_log=str(config.arm_dir(arm) / "logs" / INPUT_FILES),
                            verify_digests=config.inputs.verify_digests),
        *prefilter_steps(config, arm),
        config.arms[arm].run_step(config.arm_dir(arm)),
        *([PlainText()] if config.extraction.text_format == "plain" else []),
        documents_writer(config.arm_dir(arm) / "output"),
    ]


def extraction_stages(config: ExperimentConfig, base: str, paths_file: Path, arms: list[str] | None = None) -> list[Stage]:
    """One stage per extractor arm (`arms`: only those) over the WARC files `paths_file` lists
    under `base`."""
    return [Stage("extract", arm, extraction_pipeline(config, arm, base, paths_file), config.arms[arm].resources,
                  config.arm_dir(arm) / "logs", one_local_process=config.arms[arm].one_local_process,
                  outputs=[config.arm_dir(arm) / "output", config.arm_dir(arm) / "logs" / INPUT_FILES,
                           *(config.removed_dir(arm, name) for name in (URL_BLOCKLIST, LANGUAGE_PREFILTER))])
            for arm in arms or config.extractor_arms]
