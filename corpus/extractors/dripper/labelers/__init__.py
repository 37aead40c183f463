"""Block labelers behind one interface (`BlockLabeler`), built from the arm's labeler config
(`build_labeler`: the configs import none of the labelers' code).

`get_labeler` keeps one labeler per config per process: a vLLM engine is built once per
datatrove task and serves all its batches.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from corpus.extractors.dripper.labelers.base import MAIN, OTHER, BlockLabeler, BlockPage, LabelerEngineError, PageLabels

if TYPE_CHECKING:
    from corpus.extractors.dripper.labelers.config import LabelerConfig

_LABELERS: dict[str, BlockLabeler] = {}


def build_labeler(config: LabelerConfig) -> BlockLabeler:
    """A new labeler of the config's kind, in this process (a vLLM one starts its engine)."""
    if config.kind == "encoder":
        from corpus.extractors.dripper.labelers.encoder import EncoderLabeler

        return EncoderLabeler(config.model, config.batch_windows)
    from corpus.extractors.dripper.labelers.llm import build_llm_labeler

    return build_llm_labeler(config)


def get_labeler(config: LabelerConfig) -> BlockLabeler:
    key = config.model_dump_json()
    if key not in _LABELERS:
        _LABELERS[key] = build_labeler(config)
    return _LABELERS[key]


def release_labelers() -> None:
    """Drop the labelers this process built and stop their vLLM engines now, rather than at
    interpreter exit: for a process that goes on without them."""
    from corpus.extractors.dripper.labelers.llm import MineruBackendLabeler
    from corpus.shims import shut_down_engine

    for labeler in _LABELERS.values():
        if isinstance(labeler, MineruBackendLabeler):
            shut_down_engine(labeler)
    _LABELERS.clear()


__all__ = ["MAIN", "OTHER", "BlockLabeler", "BlockPage", "LabelerEngineError", "PageLabels", "build_labeler", "get_labeler",
           "release_labelers"]
