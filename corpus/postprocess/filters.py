"""datatrove filters made to run offline, and the one filter datatrove lacks (a keyword list).

- `LocalLanguageFilter`: datatrove's LanguageFilter with its fastText model read from a local
  file (the stock one downloads lid.176.bin on first use).
- `KeywordFilter`: drops documents whose text contains a banned word or phrase.
"""

from __future__ import annotations

import re
from pathlib import Path

from datatrove.data import Document
from datatrove.pipeline.filters import LanguageFilter
from datatrove.pipeline.filters.base_filter import BaseFilter
from datatrove.pipeline.writers.disk_base import DiskWriter

from corpus.language import LocalFastTextLID


class LocalLanguageFilter(LanguageFilter):
    name = "🌍 Language ID (local model)"

    def __init__(self, model_path: Path, languages: list[str], language_threshold: float,
                 backend: str = "ft176", exclusion_writer: DiskWriter | None = None):
        super().__init__(languages, language_threshold, exclusion_writer, backend=backend)
        self.model = LocalFastTextLID(model_path, languages)

    def filter(self, doc: Document) -> bool | tuple[bool, str]:
        # the stock filter drops with no reason; the ledger wants one
        return super().filter(doc) or (False, "language")


class KeywordFilter(BaseFilter):
    """Whole-word, case-insensitive match of any line of a blocklist file."""

    name = "🚫 Keyword blocklist"

    def __init__(self, blocklist: Path, exclusion_writer: DiskWriter | None = None):
        super().__init__(exclusion_writer)
        words = [w.strip() for w in Path(blocklist).read_text(encoding="utf-8").splitlines()]
        words = sorted({w.lower() for w in words if w and not w.startswith("#")})
        self.pattern = re.compile(r"\b(?:" + "|".join(map(re.escape, words)) + r")\b", re.IGNORECASE) if words else None

    def filter(self, doc: Document) -> bool | tuple[bool, str]:
        if self.pattern is not None and self.pattern.search(doc.text):
            return False, "banned_keyword"
        return True
