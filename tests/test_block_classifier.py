"""The CPU block classifier: its blocks, features, models, training sources and corpus arm."""

import json
from pathlib import Path

import numpy as np
import pytest

from conftest import make_config
from corpus.extractors.block_classifier.blocks import blocks_markdown, page_blocks
from corpus.extractors.block_classifier.features import CONTEXT_NAMES, FEATURE_NAMES, context_features, page_features
from corpus.extractors.block_classifier.model import BlockModel, train
from corpus.extractors.block_classifier.training import examples_from_generated, examples_from_teacher, page_example

PAGE = """<html><head><title>t</title><style>p {}</style></head><body>
<div class="nav"><ul><li><a href="/">Home</a></li><li><a href="/news">News</a></li></ul></div>
<div id="main-content" class="article">
  <h1>A Title</h1>
  <p>First paragraph with <a href="x">a link</a> and <b>bold</b> text.</p>
  Loose text directly in the container <span>with a span</span>.
  <table><tr><th>k</th><th>v</th></tr><tr><td>a</td><td>1</td></tr></table>
  <table><tr><td><p>Layout cell paragraph.</p></td><td>layout cell text</td></tr></table>
  <pre>def f():
    return 1</pre>
  <ol><li>one</li><li>two</li></ol>
  <math><semantics><mi>x</mi><annotation encoding="application/x-tex">x^2</annotation></semantics></math>
  <p>中文段落，测试。
  <div><div><p>Deeply nested paragraph.</p></div></div>
</div>
<script>var x = 1;</script>
<footer><p>Copyright 2024</p></footer>
</body></html>"""


def test_blocks_of_a_constructed_page_in_document_order():
    blocks = page_blocks(PAGE)
    assert [(b.tag, b.text) for b in blocks] == [
        ("ul", "Home News"), ("h1", "A Title"), ("p", "First paragraph with a link and bold text."),
        ("#inline", "Loose text directly in the container with a span."), ("table", "k v a 1"),
        ("p", "Layout cell paragraph."), ("#inline", "layout cell text"), ("pre", "def f(): return 1"),
        ("ol", "one two"), ("math", "x^2"), ("p", "中文段落，测试。"), ("p", "Deeply nested paragraph."),
        ("p", "Copyright 2024"),
    ]
    markdown = {b.tag: b.markdown for b in blocks}
    assert markdown["h1"] == "# A Title"
    assert markdown["table"] == "| k | v |\n| --- | --- |\n| a | 1 |"
    assert markdown["pre"] == "```\ndef f():\n    return 1\n```"
    assert markdown["ol"] == "1. one\n2. two" and markdown["math"] == "$$x^2$$"
    first = blocks[2]
    assert first.link_chars == len("a link") and first.ancestors == ("html", "body", "div")
    assert {"main", "content", "article"} <= set(first.words) and blocks[0].words == ("nav",)
    assert blocks[-1].ancestors[-1] == "footer"
    assert "\n\n# A Title\n\n" in blocks_markdown(blocks)
    article = blocks[1].containers
    assert all(b.containers[:len(article)] == article for b in blocks[1:12]) and blocks[0].containers[:-1] == article[:-1]
    assert blocks[11].containers[:len(article)] == article and len(blocks[11].containers) == len(article) + 2


def test_text_after_an_elements_last_block_is_that_elements():
    blocks = page_blocks('<body><div class="sidebar"><p>Box title</p> more <a href="/">links</a></div>'
                         '<div class="post"><p>Body.</p></div> tail</body>')
    assert [(b.text, b.words) for b in blocks] == [("Box title", ("sidebar",)), ("more links", ("sidebar",)),
                                                  ("Body.", ("post",)), ("tail", ())]
    assert blocks[0].parent == blocks[1].parent != blocks[2].parent and blocks[1].link_chars == len("links")


def test_broken_markup_and_pages_without_text():
    blocks = page_blocks("<html><body><div><p>unclosed <b>bold<p>second</div><table><tr><td>cell")
    assert [b.text for b in blocks] == ["unclosed bold", "second", "cell"]
    assert page_blocks("") == [] and page_blocks("<html><body><script>x</script></body></html>") == []
    assert page_features([]).shape == (0, len(FEATURE_NAMES))


def test_processing_instructions_are_skipped_as_the_parser_skips_them():
    with_php = "<body><table><tr><td><!-- start --><?php $title = \"a “b”\"; ?><p>Kept paragraph.</p></td></tr></table></body>"
    without = "<body><table><tr><td><!-- start --><p>Kept paragraph.</p></td></tr></table></body>"
    assert [b.text for b in page_blocks(with_php)] == [b.text for b in page_blocks(without)] == ["Kept paragraph."]


CLEANEVAL = Path(__file__).resolve().parents[2] / "shared" / "data" / "extraction" / "cleaneval" / "pages.jsonl.gz"


@pytest.mark.skipif(not CLEANEVAL.is_file(), reason="../shared absent")
def test_the_cleaneval_page_that_crashed_lexbor_parses():
    """Its `<?php … ?>` made selectolax's node iteration segfault (in a child: a crash fails the test)."""
    import subprocess
    import sys

    script = ("import gzip, itertools, json, sys; from corpus.extractors.block_classifier.blocks import page_blocks; "
              f"line = next(itertools.islice(gzip.open({str(CLEANEVAL)!r}, 'rt'), 567, None)); "
              "print(len(page_blocks(json.loads(line)['html'])))")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          cwd=Path(__file__).resolve().parents[1])
    assert done.returncode == 0 and int(done.stdout) > 10, done.stderr[-500:]


def test_features_of_a_known_page():
    blocks = page_blocks(PAGE)
    x = page_features(blocks)
    assert x.shape == (len(blocks), len(FEATURE_NAMES)) and x.dtype == np.float32
    col = {name: i for i, name in enumerate(FEATURE_NAMES)}
    nav, title, first = x[0], x[1], x[2]
    assert nav[col["link_density"]] == pytest.approx(8 / 9) and nav[col["tag_ul"]] == 1.0 and nav[col["negative_words"]] == 1
    assert title[col["tag_h1"]] == 1.0 and title[col["positive_words"]] == 3  # main, content, article
    assert first[col["link_density"]] == pytest.approx(len("a link") / len(blocks[2].text))
    assert first[col["position"]] == pytest.approx(2 / len(blocks))
    assert first[col["n-1_present"]] == 1 and x[0, col["n-1_present"]] == 0 and x[-1, col["n+1_present"]] == 0
    assert x[10, col["cjk_share"]] > 0.7 and first[col["cjk_share"]] == 0
    longest = int(np.argmax([len(b.text) for b in blocks]))
    assert x[longest, col["to_longest"]] == 1.0 and x[longest, col["distance_to_longest"]] == 0
    # the article div is where Readability's score puts the content: its blocks are in it, the nav and footer not
    assert [int(v) for v in x[:, col["in_best_container"]]] == [0] + [1] * 11 + [0]
    article_chars = sum(len(b.text) for b in blocks[1:12])
    assert first[col["best_container_share"]] == pytest.approx(article_chars / sum(len(b.text) for b in blocks))
    assert nav[col["up1_link_density"]] == pytest.approx(8 / 9) and first[col["up1_share"]] == pytest.approx(
        article_chars / sum(len(b.text) for b in blocks))


def test_context_features_of_first_pass_labels():
    blocks = page_blocks('<body><div><p>aaaa</p><p>bb</p></div><div><p>cc</p></div></body>')
    x = context_features(blocks, np.array([0.8, 0.2, 0.4]))
    col = {name: i for i, name in enumerate(CONTEXT_NAMES)}
    assert x.shape == (3, len(CONTEXT_NAMES)) and x.dtype == np.float32
    assert list(x[:, col["first_pass_n-1"]]) == pytest.approx([0, 0.8, 0.2])
    assert list(x[:, col["first_pass_n+2"]]) == pytest.approx([0.4, 0, 0])
    # the mean over the enclosing div weighs blocks by characters: (4*0.8 + 2*0.2) / 6
    assert x[0, col["first_pass_up1"]] == pytest.approx(0.6) and x[2, col["first_pass_up1"]] == pytest.approx(0.4)
    assert x[1, col["first_pass_up2"]] == pytest.approx((4 * 0.8 + 2 * 0.2 + 2 * 0.4) / 8)
    assert list(x[:, col["page_rank"]]) == pytest.approx([1, 0, 0.5]) and x[1, col["to_page_max"]] == pytest.approx(0.25)
    assert x[0, col["page_main_share"]] == pytest.approx(0.5)
    assert context_features([], np.zeros(0)).shape == (0, len(CONTEXT_NAMES))


@pytest.mark.parametrize("kind", ["gbdt", "sequence"])
@pytest.mark.slow
def test_a_model_trained_seconds_on_generated_pages_beats_chance_and_reloads_identically(kind, tmp_path):
    train_examples = list(examples_from_generated(60, seed=1))
    test_examples = list(examples_from_generated(30, seed=2))
    model = train(train_examples, kind, max_seconds=10, trees=60)
    y = np.concatenate([e.labels for e in test_examples]) > 0
    accuracy = np.mean(np.concatenate([model.main_blocks(e.blocks, e.features) for e in test_examples]) == y)
    majority = max(y.mean(), 1 - y.mean())
    assert accuracy > majority + 0.1, (accuracy, majority)
    reloaded = BlockModel.load(model.save(tmp_path / "model"))
    for e in test_examples:
        assert np.array_equal(reloaded.probabilities(e.blocks, e.features), model.probabilities(e.blocks, e.features))
    meta = json.loads((tmp_path / "model" / "block_model.json").read_text())
    assert meta["kind"] == kind and meta["report"]["pages"] == len(train_examples)
    if kind == "gbdt":  # one source: the second pass learns from first-pass labels of 5 page folds
        assert meta["report"]["folds"] == 5


def test_the_second_pass_learns_from_sources_the_first_pass_did_not_see():
    from corpus.extractors.block_classifier.model import _folds

    examples = list(examples_from_generated(6, seed=1))
    for e, source in zip(examples, "aabbbc", strict=True):
        e.source = source
    assert _folds(examples) == [[0, 1], [2, 3, 4], [5]]


def test_teacher_text_becomes_block_labels():
    from datatrove.data import Document

    class StubTeacher:
        """Extracts the headings and paragraphs, nothing else."""

        def run(self, documents):
            for doc in documents:
                doc.text = "\n\n".join(b.markdown for b in page_blocks(doc.text) if b.tag in ("h1", "p"))
                yield doc

    (example,) = examples_from_teacher(StubTeacher(), [Document(text=PAGE, id="page")])
    tags = [b.tag for b in page_blocks(PAGE)]
    assert example.source == "teacher"
    assert [bool(v) for v in example.labels] == [t in ("h1", "p") for t in tags]
    assert page_example(PAGE, "", "align").labels.sum() == 0


@pytest.mark.slow
def test_arm_accounts_for_every_record_of_the_sample(tmp_path, sample_dir):
    from corpus.flow.run import run_corpus

    model = train(list(examples_from_generated(40, seed=3)), "gbdt", trees=40).save(tmp_path / "model")
    config = make_config(tmp_path / "out", sample_dir / "sample.warc.gz",
                         {"blocks": {"extractor": "block_classifier", "model": str(model)}})
    (summary,) = run_corpus(config, until="extract")
    assert summary["balanced"] and summary["complete"]
    assert summary["records"] == summary["extracted"] + sum(summary["dropped"].values())
    assert summary["documents_out"] > 0.8 * (summary["records"] - summary["not_extracted"])


def test_a_missing_model_folder_fails_at_load(tmp_path, sample_dir):
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="block_model.json"):
        make_config(tmp_path, sample_dir / "sample.warc.gz", {"b": {"extractor": "block_classifier", "model": str(tmp_path)}})


def test_a_model_of_other_features_fails_at_config_load(tmp_path, sample_dir):
    from pydantic import ValidationError

    folder = train(list(examples_from_generated(10, seed=3)), "gbdt", trees=5).save(tmp_path / "model")
    meta = json.loads((folder / "block_model.json").read_text())
    del meta["context"]  # a one-pass model of an earlier version
    (folder / "block_model.json").write_text(json.dumps(meta))
    with pytest.raises(ValidationError, match="retrain it"):
        make_config(tmp_path / "out", sample_dir / "sample.warc.gz",
                    {"b": {"extractor": "block_classifier", "model": str(folder)}})
    with pytest.raises(ValueError, match="retrain it"):
        BlockModel.load(folder)


class RunsCodeWhenUnpickled:
    def __reduce__(self):
        return exec, ("import builtins; builtins.xs_model_ran_code = True",)


def test_a_sequence_model_file_that_would_run_code_is_refused_unloaded(tmp_path):
    import builtins

    import torch

    from corpus.extractors.block_classifier.model import PageGRU

    model = BlockModel("sequence")
    model.network = PageGRU(len(FEATURE_NAMES), 4)
    model.mean = model.std = np.ones(len(FEATURE_NAMES), dtype=np.float32)
    folder = model.save(tmp_path / "model")
    assert BlockModel.load(folder).network.hidden == 4  # tensors and an int: loaded with weights_only=True
    saved = torch.load(folder / "sequence.pt", weights_only=True)
    torch.save({**saved, "payload": RunsCodeWhenUnpickled()}, folder / "sequence.pt")
    with pytest.raises(ValueError, match="could run code"):
        BlockModel.load(folder)
    assert not hasattr(builtins, "xs_model_ran_code")
