import pytest

from conftest import make_config
from corpus.extractors import default_arm, standalone_kinds
from corpus.flow.run import run_corpus
from corpus.sample import generate_pages

BASELINES = [kind for kind in standalone_kinds() if kind != "trafilatura"]  # every kind that needs no model


@pytest.mark.parametrize("name", BASELINES)
def test_baseline_keeps_the_article_text(name):
    page = generate_pages(1, seed=5)[0]  # a news article
    text = default_arm(name).step().extract(page.html)
    body = [b.text for b in page.main if len(b.text) > 80]
    assert any(p[:60] in text.replace("\n", " ") for p in body)


def test_whole_page_floor_keeps_the_boilerplate_too():
    page = generate_pages(1, seed=5)[0]
    text = default_arm("html2text").step().extract(page.html)
    assert "All rights reserved" in text


@pytest.mark.slow
def test_baselines_run_as_corpus_arms(tmp_path, sample_dir):
    config = make_config(tmp_path / "out", sample_dir / "sample.warc.gz", {n: {"extractor": n} for n in BASELINES})
    summaries = run_corpus(config, until="extract")
    assert all(s["balanced"] and s["documents_out"] > 0 for s in summaries), summaries
