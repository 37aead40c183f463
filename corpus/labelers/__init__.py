"""Block labelers behind one interface (`BlockLabeler`), built from the arm's labeler config.

`get_labeler` keeps one labeler per config per process: a vLLM engine is built once per
datatrove task and serves all its batches.
"""

from __future__ import annotations

from corpus.labelers.base import MAIN, OTHER, BlockLabeler, BlockPage, PageLabels

_LABELERS: dict[str, BlockLabeler] = {}


def get_labeler(config) -> BlockLabeler:
    key = config.model_dump_json()
    if key not in _LABELERS:
        if config.kind in ("vllm", "endpoint"):
            from corpus.labelers.llm import build_llm_labeler

            _LABELERS[key] = build_llm_labeler(config)
        elif config.kind == "encoder":
            from corpus.labelers.encoder import EncoderLabeler

            _LABELERS[key] = EncoderLabeler(config.model, config.batch_windows)
        else:
            raise ValueError(f"unknown labeler kind {config.kind!r}")
    return _LABELERS[key]


__all__ = ["MAIN", "OTHER", "BlockLabeler", "BlockPage", "PageLabels", "get_labeler"]
