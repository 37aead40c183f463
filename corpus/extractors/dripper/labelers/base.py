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
    incomplete_labels. An LLM labeler in vLLM also says how many forward passes wrote the answer
    (`answer_passes`: one a token in plain decoding, fewer where a draft was accepted) and, with a
    draft, the draft's labels (for its agreement with the answer)."""

    labels: dict[int, str] | None = None
    error: str | None = None
    answer_passes: int | None = None
    draft: dict[int, str] | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


def compact_answer(labels: dict[int, str]) -> str:
    """The Dripper model's answer in the compact format: `<answer>1main2other…</answer>`."""
    return "<answer>" + "".join(f"{i}{label}" for i, label in sorted(labels.items())) + "</answer>"


class BlockLabeler(ABC):
    prompt_version = "short_compact"  # mineru-html's prompt of the Dripper model the labeler stands for

    @abstractmethod
    def label(self, pages: Sequence[BlockPage]) -> list[PageLabels]:
        """One PageLabels per page, in order."""

    def count_tokens(self, text: str) -> int:
        """Tokens of `text` for the model. A labeler without an LLM tokenizer counts 4 UTF-8 bytes a
        token (a stand-in: BPE tokenizers give 3-5 on HTML and English); the LLM labelers count
        with their model's tokenizer."""
        return -(-len(text.encode("utf-8")) // 4)

    def work(self, page: BlockPage, labels: PageLabels) -> tuple[int, int]:
        """(prompt tokens, answer tokens) the Dripper model spends on the page: what a labeler's
        GPU time scales with."""
        from mineru_html.process.build_prompt import get_full_prompt

        answer = compact_answer(labels.labels or dict.fromkeys(page.item_ids, MAIN))
        return self.count_tokens(get_full_prompt(page.simplified_html, self.prompt_version)), self.count_tokens(answer)


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
