"""The draft of the speculative Dripper labeler: the block classifier's label for each of Dripper's
own blocks (the simplified page's `_item_id` elements, as corpus.extractors.dripper.items makes them
Blocks), from a model trained on the labels corpus.extractors.dripper.labels builds for those blocks
(`python -m corpus.extractors.dripper.draft_training`). A few CPU milliseconds a page; the LLM then
verifies the whole proposed answer and decodes only where it disagrees
(corpus.extractors.dripper.labelers.speculative), so the draft changes the speed, never a label.
"""

from __future__ import annotations

from pathlib import Path

from corpus.extractors.dripper.labelers.base import MAIN, OTHER, BlockPage
from corpus.extractors.dripper.labelers.config import DRAFT_MODEL_HINT


class BlockDraft:
    """Proposes main/other for every block of a page, P(main) > 0.5 (the most likely label: what
    maximises agreement, unlike the arm's extraction threshold and its empty-page rescue)."""

    def __init__(self, folder: str | Path):
        from configs.base import require_model_folder
        from corpus.extractors.block_classifier.model import META, BlockModel

        require_model_folder(str(folder), META, DRAFT_MODEL_HINT)
        self.model = BlockModel.load(Path(folder))
        if self.model.unit != "items":
            raise ValueError(f"{folder}: a block classifier of a page's own blocks, not of mineru-html's; {DRAFT_MODEL_HINT}")

    def labels(self, page: BlockPage) -> dict[int, str]:
        from corpus.extractors.block_classifier.features import page_features
        from corpus.extractors.dripper.items import item_blocks

        blocks = item_blocks(page.simplified_html, page.item_ids)
        p = self.model.probabilities(blocks, page_features(blocks))
        return {i: MAIN if pi > 0.5 else OTHER for i, pi in zip(page.item_ids, p, strict=True)}
