"""The CPU block classifier: its blocks, features, models, training sources and corpus arm."""

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import make_config

from corpus.block_features import FEATURE_NAMES, page_features
from corpus.block_model import BlockModel, train
from corpus.block_training import examples_from_generated, examples_from_teacher, page_example
from corpus.blocks import blocks_markdown, page_blocks

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

    script = ("import gzip, itertools, json, sys; from corpus.blocks import page_blocks; "
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


@pytest.mark.parametrize("kind", ["gbdt", "sequence"])
def test_a_model_trained_seconds_on_generated_pages_beats_chance_and_reloads_identically(kind, tmp_path):
    train_examples = list(examples_from_generated(60, seed=1))
    test_examples = list(examples_from_generated(30, seed=2))
    model = train(train_examples, kind, max_seconds=10, trees=60)
    x = np.vstack([e.features for e in test_examples])
    y = np.concatenate([e.labels for e in test_examples]) > 0
    accuracy = np.mean(np.concatenate([model.main_blocks(e.features) for e in test_examples]) == y)
    majority = max(y.mean(), 1 - y.mean())
    assert accuracy > majority + 0.1, (accuracy, majority)
    reloaded = BlockModel.load(model.save(tmp_path / "model"))
    assert np.array_equal(reloaded.probabilities(x), model.probabilities(x))
    meta = json.loads((tmp_path / "model" / "block_model.json").read_text())
    assert meta["kind"] == kind and meta["report"]["pages"] == len(train_examples)


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


def test_arm_accounts_for_every_record_of_the_sample(tmp_path, sample_dir):
    from corpus.extract import run_corpus

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
