"""Block labels from a reference text: which share of each block's characters aligns to the
page's gold main content (the Web2Text method), for the labelers that learn from gold (the Dripper
arm's encoder, corpus.extractors.dripper.labels; the block classifier,
corpus.extractors.block_classifier.training)."""

from __future__ import annotations

import re

_MARKDOWN = re.compile(r"(^|\n)\s*(#{1,6}\s|[-*+]\s|>\s|\d+\.\s)|[*_`|]+")


def aligned_shares(texts: list[str], gold_text: str) -> list[float]:
    """Web2Text alignment: the share of each text's characters (texts in page order) that align
    to the gold text (its Markdown marks removed); 0 for an empty text."""
    from web2text import align, normalize_text

    leaves = [(None, normalize_text(t)) for t in texts]
    scores = align(leaves, _MARKDOWN.sub(" ", gold_text))
    return [scores.get(n, 0.0) if leaf[1] else 0.0 for n, leaf in enumerate(leaves)]
