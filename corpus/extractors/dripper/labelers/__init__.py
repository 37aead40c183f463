"""Block labelers behind one interface (`BlockLabeler`), built from the arm's labeler config.

`get_labeler` keeps one labeler per config per process: a vLLM engine is built once per
datatrove task and serves all its batches.
"""

from __future__ import annotations

from corpus.extractors.dripper.labelers.base import MAIN, OTHER, BlockLabeler, BlockPage, LabelerEngineError, PageLabels

_LABELERS: dict[str, BlockLabeler] = {}


def get_labeler(config) -> BlockLabeler:
    key = config.model_dump_json()
    if key not in _LABELERS:
        _LABELERS[key] = config.build()
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


__all__ = ["MAIN", "OTHER", "BlockLabeler", "BlockPage", "LabelerEngineError", "PageLabels", "get_labeler",
           "release_labelers"]
