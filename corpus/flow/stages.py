"""The corpus flow of an experiment as a list of datatrove stages, each package building its own:

    extract (per arm: corpus.extractors.stages) ─► tokenizer (all arms: corpus.tokens.stages)
    ─► post-processing (per arm, 7 stages: corpus.postprocess.stages) ─► tokenise (per arm)
    ─► budget (all arms: corpus.tokens.stages)

A reference-corpus arm has a read stage instead of extraction (corpus.read.reference_steps),
after the tokenizer (it counts tokens as it reads); its documents join after post-processing, or
before it with `postprocess: true`.

Each stage names the stages it waits for; the flow only lists them and orders them so that every
stage runs after the ones it needs (corpus.flow.execute runs them here, or submits them to Slurm).
"""

from __future__ import annotations

from pathlib import Path

from configs.experiment import ExperimentConfig
from corpus.extractors.stages import extraction_stages
from corpus.postprocess.stages import postprocess_stages
from corpus.read.reference_steps import reference_stages
from corpus.stage import Stage
from corpus.tokens.stages import token_stages

UNTIL = ("extract", "postprocess", "dataset")
DATASET_STAGES = ("tokenize", "budget")


def corpus_stages(config: ExperimentConfig, base: str, paths_file: Path, until: str = "dataset",
                  arms: list[str] | None = None) -> list[Stage]:
    """Every stage up to `until`, in an order that runs each after the stages it needs. `arms`
    limits the extraction stage (extractor arms only); the later stages need every arm and are
    built only for all of them."""
    stages = extraction_stages(config, base, paths_file, arms)
    if until != "extract" and not arms:
        tokens = token_stages(config)  # the tokenizer listed first, so each arm's post-processing runs in one piece
        stages += [*tokens[:1], *reference_stages(config), *postprocess_stages(config), *tokens[1:]]
    if until == "postprocess":
        stages = [s for s in stages if s.name not in DATASET_STAGES]
    return in_running_order(stages)


def in_running_order(stages: list[Stage]) -> list[Stage]:
    """The stages in the order listed, each moved after the stages it needs (depth first, so that
    the stages of one part stay together)."""
    by_label = {stage.label: stage for stage in stages}
    ordered: dict[str, Stage] = {}

    def visit(stage: Stage, path: tuple[str, ...]) -> None:
        if stage.label in ordered:
            return
        if stage.label in path:
            raise ValueError(f"stages wait for each other: {' → '.join(path + (stage.label,))}")
        for need in stage.needs:
            if need not in by_label:
                raise ValueError(f"stage {stage.label} needs {need}, which this run does not build")
            visit(by_label[need], path + (stage.label,))
        ordered[stage.label] = stage

    for stage in stages:
        visit(stage, ())
    return list(ordered.values())
