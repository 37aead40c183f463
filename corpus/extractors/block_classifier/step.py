"""The block classifier's datatrove step (its config: corpus.extractors.block_classifier)."""

from __future__ import annotations

from pathlib import Path

from datatrove.data import DocumentsPipeline
from datatrove.pipeline.base import PipelineStep

from corpus.extractors.block_classifier.blocks import blocks_markdown, page_blocks
from corpus.extractors.block_classifier.features import page_features
from corpus.extractors.block_classifier.model import BlockModel


class BlockClassifier(PipelineStep):
    """Blocks → features → the model's main blocks → Markdown, in the task's own process: every
    part is linear in the page (whose size the record guard bounds), so it needs no sandbox with a
    timeout, and a forked sandbox would inherit the trees' OpenMP state. Counts as datatrove's
    extractors do: `extracted` per page processed, `dropped` for an empty result, `clean_error`
    for a page that raised."""

    type = "🛢 - EXTRAC"
    name = "🧱 Block classifier"

    def __init__(self, model: str):
        super().__init__()
        self.model_dir = model
        self._model: BlockModel | None = None

    def extract(self, html: str) -> str:
        if self._model is None:
            self._model = BlockModel.load(Path(self.model_dir))
        blocks = page_blocks(html)
        keep = self._model.main_blocks(blocks, page_features(blocks))
        return blocks_markdown([b for b, k in zip(blocks, keep, strict=True) if k])

    def run(self, data: DocumentsPipeline, rank: int = 0, world_size: int = 1) -> DocumentsPipeline:
        for doc in data:
            self.stat_update("total")
            with self.track_time():
                try:
                    doc.text = self.extract(doc.text)
                except Exception:  # one unparseable page is counted, not fatal
                    self.stat_update("clean_error")
                    continue
            self.stat_update("extracted")
            if not doc.text:
                self.stat_update("dropped")
                continue
            self.stat_update("forwarded")
            self.update_doc_stats(doc)
            yield doc
