"""The one interface every block labeler implements.

A labeler gets simplified pages (mineru-html's simplified HTML with `_item_id` blocks) and
returns, per page, a main/other label for every block id, or the reason it could not. A page's
errors are data, not exceptions: one bad page never fails a batch. A dead engine is an exception
(LabelerEngineError): it fails the task, which a re-run then redoes.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass

MAIN, OTHER = "main", "other"


class LabelerEngineError(RuntimeError):
    """The model could not answer at all (engine died, server unreachable after its retries)."""


@dataclass(frozen=True)
class BlockPage:
    simplified_html: str
    item_ids: tuple[int, ...]


@dataclass(frozen=True)
class PageLabels:
    """Labels for every block id of one page, or `error`: too_long, labeler_error, parse_error,
    incomplete_labels."""

    labels: dict[int, str] | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


class BlockLabeler(ABC):
    @abstractmethod
    def label(self, pages: Sequence[BlockPage]) -> list[PageLabels]:
        """One PageLabels per page, in order."""


def labels_from_response(response: str, item_ids: Sequence[int]) -> PageLabels:
    """Parse a model response with mineru-html's parser and check it covers exactly the page's ids."""
    from mineru_html.process.parse_result import parse_llm_response

    try:
        parsed = parse_llm_response(response)
    except Exception:
        return PageLabels(error="parse_error")
    labels = {}
    for key, value in parsed.items():
        if not str(key).isdigit() or value not in (MAIN, OTHER):
            return PageLabels(error="parse_error")
        labels[int(key)] = value
    if set(labels) != set(item_ids):
        return PageLabels(error="incomplete_labels")
    return PageLabels(labels=labels)
