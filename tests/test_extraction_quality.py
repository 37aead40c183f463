import json
from importlib import metadata

from corpus.extractors import default_arm
from corpus.extractors.trafilatura.releases import installed_release
from corpus.sample.annotated import gold_from_marks, load_pages
from evaluation.extraction.benchmark import evaluate, score_page

MARKED = (
    '<html><body><div class="nav mark-selected-not">Home | About</div>'
    '<div cc-select="true" class="post mark-selected"><h1>Tide tables</h1>'
    "<p>The harbor tide rises twice a day and the ferry schedule follows it closely every season.</p></div>"
    "<footer>Copyright</footer></body></html>"
)


def arms(*kinds):
    return {k: default_arm(k) for k in kinds}


def test_generated_page_scores_one_when_fed_its_gold(sample_dir):
    pages = load_pages(sample_dir / "gold.jsonl")
    assert {p.lang for p in pages} == {"en", "zh"}
    for page in pages[:10]:
        assert score_page(page, page.gold) == {"rouge5_f1": 1.0, "token_f1": 1.0, "rouge5_f1_plain": 1.0}


def test_webmainbench_marks_give_the_gold_and_never_reach_the_extractor(tmp_path):
    path = tmp_path / "wmb.jsonl"
    path.write_text(json.dumps({"track_id": "t1", "html": MARKED, "url": "https://x.example/",
                                "meta": {"level": "hard", "table": True, "language": "en-US"}}) + "\n")
    [page] = load_pages(path)
    assert "cc-select" not in page.html and "mark-selected " not in page.html and "mark-selected\"" not in page.html
    assert "mark-selected-not" in page.html  # only the annotation class goes
    assert page.gold == gold_from_marks(MARKED)
    assert page.gold.startswith("# Tide tables") and "Copyright" not in page.gold and "Home" not in page.gold
    assert (page.difficulty, page.content_types, page.lang, page.dataset) == ("hard", ("tables",), "en", "wmb")


def test_partial_gold_pages_get_snippet_scores(tmp_path):
    path = tmp_path / "partial" / "pages.jsonl"
    path.parent.mkdir()
    html = MARKED.replace(' cc-select="true"', "")
    path.write_text(json.dumps({"id": "p", "html": html, "text": "", "partial": True,
                                "with": ["the harbor tide rises twice a day", "not on the page"],
                                "without": ["Copyright"]}) + "\n")
    [page] = load_pages(path)
    assert page.dataset == "partial" and page.gold is None
    assert score_page(page, "The harbor tide rises twice a day.") == {"snippet_recall": 0.5, "snippet_leakage": 0.0}


def test_evaluate_writes_pages_summary_table_and_charts(tmp_path, sample_dir):
    wmb = tmp_path / "wmb.jsonl"
    wmb.write_text(json.dumps({"id": "t1", "html": MARKED, "groundtruth_content": "# Tide tables\n\nThe harbor tide "
                               "rises twice a day and the ferry schedule follows it closely every season."}) + "\n")
    pages = load_pages(sample_dir / "gold.jsonl")[:12] + load_pages(wmb)
    summary = evaluate(arms("trafilatura", "html2text"), pages, tmp_path / "out")
    out = tmp_path / "out"
    rows = [json.loads(line) for line in (out / "pages.jsonl").read_text().splitlines()]
    assert len(rows) == 2 * len(pages)
    assert {"generated-sample.png", "wmb.png"} <= {p.name for p in out.glob("*.png")}
    table = (out / "summary.md").read_text()
    assert "| generated-sample | 12 |" in table and "| mean over sets |" in table and "| mean over pages |" in table
    assert f"| extractor | | trafilatura {installed_release()} | html2text {metadata.version('html2text')} |" in table
    traf, floor = summary["trafilatura"], summary["html2text"]
    assert traf["datasets"]["wmb"]["rouge5_f1"] > 0.5
    # extracting beats keeping the whole page on generated pages full of boilerplate
    assert traf["datasets"]["generated-sample"]["rouge5_f1"] > floor["datasets"]["generated-sample"]["rouge5_f1"]
    assert set(traf["languages"]) >= {"en", "zh"} and "code" in traf["content_types"]
    assert traf["pages_per_s"] > 0
