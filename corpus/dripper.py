"""The Dripper extractor as a datatrove step.

Per batch of documents: mineru-html simplifies each page into `_item_id` blocks, the labeler
labels every block main/other (many pages per call), mineru-html maps the main blocks back onto
the page, and the main HTML is converted to Markdown. A page the labeler cannot take (over the
context, engine or parse error, labels that do not cover its ids) or that mineru-html cannot
simplify or map falls back to Trafilatura; every fallback is counted as `fallback_<reason>` and
recorded in the document's `extraction` metadata.

Stats: total = extracted + fallback_* + dropped_* (dropped_empty: nothing was main content or the
fallback found nothing; dropped_fallback_timeout / dropped_fallback_error).
"""

from __future__ import annotations

from collections.abc import Iterable

from datatrove.data import Document, DocumentsPipeline
from datatrove.pipeline.base import PipelineStep
from datatrove.pipeline.extractors.base import ExtractorSandbox
from datatrove.utils.batching import batched

from corpus.config import DripperArm
from corpus.labelers import MAIN, BlockPage, get_labeler
from corpus.markdown import html_to_markdown


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


class DripperExtractor(PipelineStep):
    name = "💧 Dripper"
    type = "🛢 - EXTRAC"

    def __init__(self, arm: DripperArm):
        super().__init__()
        self.arm = arm  # only config here: the labeler is built in the task's process

    def run(self, data: DocumentsPipeline, rank: int = 0, world_size: int = 1) -> DocumentsPipeline:
        from corpus.arms import trafilatura_step

        labeler = get_labeler(self.arm.labeler)
        fallback = trafilatura_step(self.arm.fallback)
        with ExtractorSandbox(timeout=self.arm.fallback.timeout_s) as sandbox:
            for batch in batched(data, self.arm.batch_pages):
                yield from self._extract_batch(batch, labeler, lambda html: sandbox.process_document(html, fallback.extract))

    def _extract_batch(self, batch: list[Document], labeler, fallback_extract) -> Iterable[Document]:
        prepared: dict[int, tuple[str, str, tuple[int, ...]]] = {}  # index -> (simplified, map_html, ids)
        pending: dict[int, str] = {}  # index -> fallback reason
        with self.track_time("batch"):
            for i, doc in enumerate(batch):
                self.stat_update("total")
                try:
                    simplified, map_html, ids = simplify_page(doc.text)
                except Exception:
                    pending[i] = "simplify_error"
                    continue
                if not ids:
                    pending[i] = "no_blocks"
                    continue
                prepared[i] = (simplified, map_html, ids)
                doc.metadata["n_blocks"] = len(ids)
            order = sorted(prepared)
            results = labeler.label([BlockPage(prepared[i][0], prepared[i][2]) for i in order])
            for i, result in zip(order, results):
                doc = batch[i]
                if not result.ok:
                    pending[i] = result.error
                    continue
                try:
                    main_html = main_html_from_labels(prepared[i][1], result.labels)
                    text = html_to_markdown(main_html, self.arm.markdown, doc.metadata.get("url"))
                except Exception:
                    pending[i] = "mapping_error"
                    continue
                doc.metadata["n_main_blocks"] = sum(1 for v in result.labels.values() if v == MAIN)
                doc.metadata["extraction"] = "labels"
                doc.text = text
        for i, doc in enumerate(batch):
            if i in pending:
                doc = self._fall_back(doc, pending[i], fallback_extract)
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
