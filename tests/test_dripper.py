import gzip
import json
import re

import pytest
from datatrove.data import Document
from lxml import html as lxml_html

from corpus.extractors import DripperArm
from corpus.extractors.dripper.labelers import MAIN, OTHER, BlockLabeler, PageLabels
from corpus.extractors.dripper.step import main_html_from_labels, simplify_page
from corpus.markdown import html_to_markdown
from corpus.sample import generate_pages

WORD = re.compile(r"\w+")


def block_words(simplified: str) -> dict[int, set[str]]:
    """Words of each block; simplification cuts long blocks at 500 characters, so the last
    (possibly cut) word is left out."""
    root = lxml_html.fromstring(simplified)
    return {int(el.get("_item_id")): set(WORD.findall(el.text_content())[:-1] or WORD.findall(el.text_content()))
            for el in root.xpath("//*[@_item_id]")}


class ConstantLabeler(BlockLabeler):
    def __init__(self, result):
        self.result = result

    def label(self, pages):
        return [self.result(page) for page in pages]


ARM = DripperArm.model_validate({"extractor": "dripper", "labeler": {"kind": "endpoint", "url": "http://unused"}})


@pytest.mark.parametrize("template_index", range(8))
def test_mapping_keeps_exactly_the_blocks_labelled_main(template_index):
    page = generate_pages(8, seed=11)[template_index]
    simplified, map_html, ids = simplify_page(page.html)
    words = block_words(simplified)
    gold_words = set(WORD.findall(page.gold_text))
    labels = {i: MAIN if words[i] and words[i] <= gold_words else OTHER for i in ids}
    assert MAIN in labels.values() and OTHER in labels.values()
    text = html_to_markdown(main_html_from_labels(map_html, labels))
    out_words = set(WORD.findall(text))
    for i, label in labels.items():
        boilerplate_only = words[i] - gold_words
        if label == OTHER and boilerplate_only:  # words only boilerplate has must be gone
            assert not boilerplate_only <= out_words, f"block {i} ({sorted(words[i])[:8]}) was labelled other but survived"
    for block in page.main:
        if block.html.startswith("<p>"):
            assert block.text.split(". ")[0][:40] in text.replace("\n", " ")


def run_step(labeler, docs, arm=ARM):
    step = arm.step(labeler)
    out = list(step.run(iter(docs)))
    counts = {k: int(v.total) for k, v in step.stats.stats.items()}
    return out, counts


def docs_for(pages):
    return [Document(text=p.html, id=str(i), metadata={"url": p.url}) for i, p in enumerate(pages)]


def test_all_main_labels_keep_the_page_and_are_counted_extracted(monkeypatch):
    pages = generate_pages(4, seed=2)
    out, counts = run_step(ConstantLabeler(lambda p: PageLabels(labels={i: MAIN for i in p.item_ids})), docs_for(pages))
    assert len(out) == 4 and counts["extracted"] == 4
    assert all(d.metadata["extraction"] == "labels" for d in out)


def test_labeler_errors_fall_back_to_trafilatura_with_their_reason(monkeypatch):
    pages = generate_pages(4, seed=2)
    out, counts = run_step(ConstantLabeler(lambda p: PageLabels(error="too_long")), docs_for(pages))
    assert counts["fallback_too_long"] == 4 and "extracted" not in counts
    assert [d.metadata["extraction"] for d in out] == ["fallback:too_long"] * 4
    assert all(d.text and "<" not in d.text[:50] for d in out)


def test_all_other_labels_drop_the_page_as_empty(monkeypatch):
    pages = generate_pages(3, seed=2)
    out, counts = run_step(ConstantLabeler(lambda p: PageLabels(labels={i: OTHER for i in p.item_ids})), docs_for(pages))
    assert out == [] and counts["dropped_empty"] == 3


def test_page_without_blocks_falls_back(monkeypatch):
    docs = [Document(text="<html><body></body></html>", id="x", metadata={})]
    out, counts = run_step(ConstantLabeler(lambda p: pytest.fail("labeler called")), docs)
    assert out == [] and counts["total"] == 1 and counts["dropped_empty"] == 1


def test_every_document_is_accounted_for(monkeypatch):
    pages = generate_pages(9, seed=3)
    flip = iter(range(100))

    def mixed(page):
        n = next(flip) % 3
        if n == 0:
            return PageLabels(error="parse_error")
        return PageLabels(labels={i: MAIN if n == 1 else OTHER for i in page.item_ids})

    out, counts = run_step(ConstantLabeler(mixed), docs_for(pages))
    fallbacks = sum(v for k, v in counts.items() if k.startswith("fallback_"))
    drops = sum(v for k, v in counts.items() if k.startswith("dropped_"))
    assert counts["total"] == 9 == counts.get("extracted", 0) + fallbacks + drops
    assert len(out) == counts.get("extracted", 0) + fallbacks


@pytest.mark.parametrize("seed", range(4))
def test_fast_mapping_equals_mineru_html_mapping(seed):
    import random

    from mineru_html.process.map_to_main import extract_main_html

    rng = random.Random(seed)
    for page in generate_pages(8, seed=seed):
        _, map_html, ids = simplify_page(page.html)
        labels = {i: rng.choice([MAIN, OTHER]) for i in ids}
        assert main_html_from_labels(map_html, labels) == extract_main_html(map_html, {str(k): v for k, v in labels.items()})


class DeadEngine:
    """A mineru-html backend whose engine has died: every batch raises, as vLLM's EngineDeadError."""

    def process(self, inputs):
        raise RuntimeError("EngineDeadError: EngineCore encountered an issue")


def test_a_dead_engine_fails_the_task_and_its_rerun_redoes_it(tmp_path):
    """No page of the task goes to the fallback; the task is not marked complete; a re-run with a
    working engine redoes it and only it."""
    from datatrove.executor import LocalPipelineExecutor
    from datatrove.pipeline.readers import JsonlReader
    from datatrove.pipeline.writers import JsonlWriter

    from corpus.extractors.dripper.labelers import LabelerEngineError
    from corpus.extractors.dripper.labelers.llm import MineruBackendLabeler

    pages = generate_pages(6, seed=3)
    (tmp_path / "in").mkdir()
    with gzip.open(tmp_path / "in" / "pages.jsonl.gz", "wt") as f:
        f.writelines(json.dumps({"text": d.text, "id": d.id, "metadata": d.metadata}) + "\n" for d in docs_for(pages))

    def run(labeler):
        LocalPipelineExecutor([JsonlReader(str(tmp_path / "in")), ARM.step(labeler),
                               JsonlWriter(str(tmp_path / "out"), output_filename="${rank}.jsonl.gz")],
                              tasks=1, workers=1, logging_dir=str(tmp_path / "logs")).run()

    with pytest.raises(LabelerEngineError, match="no page went to the fallback"):
        run(MineruBackendLabeler(DeadEngine(), "v2"))
    assert not (tmp_path / "logs" / "completions" / "00000").exists()
    assert not list((tmp_path / "logs" / "stats").glob("*.json"))

    run(ConstantLabeler(lambda p: PageLabels(labels={i: MAIN for i in p.item_ids})))
    assert (tmp_path / "logs" / "completions" / "00000").exists()
    out = [json.loads(line) for line in gzip.open(tmp_path / "out" / "00000.jsonl.gz", "rt")]
    assert len(out) == 6 and {d["metadata"]["extraction"] for d in out} == {"labels"}
