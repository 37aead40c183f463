"""The Dripper extractor as a datatrove step (its config: corpus.extractors.dripper).

Per batch of documents: mineru-html simplifies each page into `_item_id` blocks, the labeler
labels every block main/other (many pages per call), mineru-html maps the main blocks back onto
the page, and the main HTML is converted to Markdown. A page the labeler cannot take (over the
context, engine or parse error, labels that do not cover its ids) or that mineru-html cannot
simplify or map falls back to Trafilatura; every fallback is counted as `fallback_<reason>` and
recorded in the document's `extraction` metadata.

Stats: total = extracted + fallback_* + dropped_* (dropped_empty: nothing was main content or the
fallback found nothing; dropped_fallback_timeout / dropped_fallback_error). The labeler's work:
sent_to_labeler, labeler_ms, prompt_tokens, answer_tokens; in vLLM also answered_pages,
answered_tokens and answer_passes (the pages answered in full, their answer tokens and the forward
passes that wrote them: one a token without a draft), and with a draft drafted_pages, draft_blocks
and draft_blocks_agreed.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from datatrove.data import Document, DocumentsPipeline
from datatrove.pipeline.base import PipelineStep
from datatrove.utils.batching import batched

from corpus.extractors.dripper.labelers import MAIN, BlockLabeler, BlockPage, PageLabels, get_labeler
from corpus.extractors.dripper.labelers.revision import pinned_labeler
from corpus.extractors.spans import MAX_NESTING, nesting_depth
from corpus.extractors.trafilatura import trafilatura_step
from corpus.markdown import html_to_markdown
from corpus.shims import cpu_time_sandbox

if TYPE_CHECKING:
    from corpus.extractors.dripper import DripperArm


def simplify_page(html: str) -> tuple[str, str, tuple[int, ...]]:
    """mineru-html's simplification: (simplified HTML, mapping HTML, block ids)."""
    from mineru_html.process.simplify_html import simplify_html
    from mineru_html.utils import get_all_item_ids

    simplified, map_html = simplify_html(html)
    return simplified, map_html, tuple(get_all_item_ids(simplified))


def main_html_from_labels(map_html: str, labels: dict[int, str]) -> str:
    """mineru-html's mapping (`extract_main_html`): keep the blocks labelled main with their
    ancestors and descendants, recall adjacent <br>, unwrap tail blocks.

    Same steps and helpers as mineru-html, and byte-identical output (tested), but the blocks
    are found in one pass over the tree: mineru-html runs a document-wide XPath per main block,
    which is quadratic and was most of the mapping's cost on real pages.
    """
    from mineru_html.constants import ITEM_ID_ATTR, TAIL_BLOCK_TAG
    from mineru_html.process.html_utils import decode_http_urls_only, element_to_html, html_to_element
    from mineru_html.process.map_to_main import remove_recursive_by_condition

    root = html_to_element(map_html)
    first_with_id = {}
    for element in root.iter():
        if isinstance(element.tag, str) and (item_id := element.get(ITEM_ID_ATTR)) is not None:
            first_with_id.setdefault(item_id, element)
    keep = set()
    for item_id, label in labels.items():
        element = first_with_id.get(str(item_id))
        if label == MAIN and element is not None:
            keep.update(element.iter())
            keep.update(element.iterancestors())
    previous = None
    for element in root.iter():
        if previous is not None:
            if element.tag == "br" and previous in keep and previous.tag != "br":
                keep.add(element)
            if previous.tag == "br" and element in keep and element.tag != "br":
                keep.add(previous)
        previous = element
    remove_recursive_by_condition(root, lambda x: x not in keep)
    for tail_block in root.xpath(f"//{TAIL_BLOCK_TAG}"):
        tail_block.drop_tag()
    return decode_http_urls_only(element_to_html(root))


@dataclass
class DripperPage:
    """One page on its way through simplify -> label -> map -> Markdown. `error` is the reason it
    falls back to Trafilatura; once set, the later stages skip the page (mineru-html's case
    object, errors as data)."""

    doc: Document
    simplified: str = ""
    map_html: str = ""
    item_ids: tuple[int, ...] = ()
    labels: dict[int, str] | None = None
    error: str | None = None

    def simplify(self) -> None:
        if nesting_depth(self.doc.text) > MAX_NESTING:  # to the fallback (sandboxed), not parsed here
            self.error = "too_deep"
            return
        try:
            self.simplified, self.map_html, self.item_ids = simplify_page(self.doc.text)
        except Exception:
            self.error = "simplify_error"
            return
        if not self.item_ids:
            self.error = "no_blocks"
            return
        self.doc.metadata["n_blocks"] = len(self.item_ids)

    def take_labels(self, result: PageLabels) -> None:
        if result.ok:
            self.labels = result.labels
        else:
            self.error = result.error

    def convert(self, markdown: str) -> None:
        """The main blocks mapped back onto the page, as Markdown, become the document's text."""
        try:
            main_html = main_html_from_labels(self.map_html, self.labels)
            text = html_to_markdown(main_html, markdown, self.doc.metadata.get("url"))
        except Exception:
            self.error = "mapping_error"
            return
        self.doc.metadata["n_main_blocks"] = sum(1 for v in self.labels.values() if v == MAIN)
        self.doc.metadata["extraction"] = "labels"
        self.doc.text = text


class DripperExtractor(PipelineStep):
    name = "💧 Dripper"
    type = "🛢 - EXTRAC"

    def __init__(self, arm: DripperArm, labeler: BlockLabeler | None = None, arm_dir: str | None = None):
        super().__init__()
        self.arm = arm
        self.labeler = labeler  # None: the configured one, built in the task's process
        self.arm_dir = arm_dir  # where the driver recorded the hub model's commit (labelers.revision)

    def run(self, data: DocumentsPipeline, rank: int = 0, world_size: int = 1) -> DocumentsPipeline:
        labeler = self.labeler or get_labeler(pinned_labeler(self.arm.labeler, self.arm_dir))
        fallback = trafilatura_step(self.arm.fallback)
        fallback.check_release()
        with cpu_time_sandbox()(timeout=self.arm.fallback.timeout_s) as sandbox:
            for batch in batched(data, self.arm.batch_pages):
                yield from self._extract_batch(batch, labeler, lambda html: sandbox.process_document(html, fallback.extract))

    def _extract_batch(self, batch: list[Document], labeler: BlockLabeler, fallback_extract) -> Iterable[Document]:
        pages = [DripperPage(doc) for doc in batch]
        with self.track_time("batch"):
            for page in pages:
                self.stat_update("total")
                page.simplify()
            to_label = [page for page in pages if page.error is None]
            started = time.perf_counter()
            results = labeler.label([BlockPage(page.simplified, page.item_ids) for page in to_label])
            # what the planner prices: pages the labeler saw, and its own time (GPU time on a GPU)
            self.stat_update("sent_to_labeler", value=len(to_label))
            self.stat_update("labeler_ms", value=round(1000 * (time.perf_counter() - started)))
            for page, result in zip(to_label, results, strict=True):
                # the model's work on the page (what the planner prices its GPU time by)
                prompt_tokens, answer_tokens = labeler.work(BlockPage(page.simplified, page.item_ids), result)
                self.stat_update("prompt_tokens", value=prompt_tokens)
                self.stat_update("answer_tokens", value=answer_tokens)
                self._count_decoding(result, answer_tokens)
                page.take_labels(result)
                if page.error is None:
                    page.convert(self.arm.markdown)
        for page in pages:
            doc = page.doc
            if page.error is not None:
                doc = self._fall_back(doc, page.error, fallback_extract)
                if doc is None:
                    continue
            elif not doc.text.strip():
                self.stat_update("dropped", "dropped_empty")
                continue
            else:
                self.stat_update("extracted")
            self.stat_update("forwarded")
            self.update_doc_stats(doc)
            yield doc

    def _count_decoding(self, result: PageLabels, answer_tokens: int) -> None:
        """How the answer was decoded (vLLM labelers, pages answered in full): forward passes that wrote
        it beside its tokens, and with a draft the blocks whose drafted label the model's answer kept
        (the speculative labeler's acceptance)."""
        if result.answer_passes is not None and result.ok:
            self.stat_update("answered_pages")
            self.stat_update("answered_tokens", value=answer_tokens)
            self.stat_update("answer_passes", value=result.answer_passes)
        if result.draft is not None and result.ok:
            self.stat_update("drafted_pages")
            self.stat_update("draft_blocks", value=len(result.draft))
            self.stat_update("draft_blocks_agreed", value=sum(result.labels.get(i) == label for i, label in result.draft.items()))

    def _fall_back(self, doc: Document, reason: str, fallback_extract) -> Document | None:
        with self.track_time("fallback"):
            try:
                text = fallback_extract(doc.text)
            except TimeoutError:
                self.stat_update("dropped", "dropped_fallback_timeout")
                return None
            except Exception:  # the sandbox re-raises the extractor's error or a dead process
                self.stat_update("dropped", "dropped_fallback_error")
                return None
        if not text or not text.strip():
            self.stat_update("dropped", "dropped_empty")
            return None
        self.stat_update(f"fallback_{reason}")
        doc.text = text
        doc.metadata["extraction"] = f"fallback:{reason}"
        return doc
