"""The gold arm's datatrove step (its config: corpus.extractors.gold)."""

from __future__ import annotations

import glob
import json
from typing import TYPE_CHECKING

from datatrove.data import DocumentsPipeline
from datatrove.pipeline.base import PipelineStep

from corpus.markdown import html2text_markdown

if TYPE_CHECKING:
    from corpus.extractors.gold import GoldArm


class GoldText(PipelineStep):
    """A record's text becomes its gold main content; records without gold are dropped."""

    type = "🛢 - EXTRAC"
    name = "🥇 Gold main content"

    def __init__(self, arm: GoldArm):
        super().__init__()
        self.arm = arm
        self._gold: dict[str, str] | None = None

    def gold(self) -> dict[str, str]:
        """Record id -> gold text, read once per task (only the texts, not the pages)."""
        if self._gold is None:
            self._gold = {}
            for path in sorted(p for pattern in self.arm.gold for p in glob.glob(pattern)):
                with open(path, encoding="utf-8") as f:
                    for line in f:
                        row = json.loads(line)
                        if row.get(self.arm.field):
                            self._gold[row[self.arm.id_field]] = row[self.arm.field]
        return self._gold

    def run(self, data: DocumentsPipeline, rank: int = 0, world_size: int = 1) -> DocumentsPipeline:
        gold = self.gold()
        for doc in data:
            self.stat_update("total")
            with self.track_time():
                value = gold.get(doc.id)
                text = (html2text_markdown(value) if self.arm.html else value.strip()) if value else ""
            if not value:
                self.stat_update("dropped_no_gold")
                continue
            if not text:
                self.stat_update("dropped_empty")
                continue
            doc.text = text
            self.stat_update("extracted")
            self.update_doc_stats(doc)
            yield doc
