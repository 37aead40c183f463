"""The worked example of docs/guides/add-an-arm.md keeps working: the `article_tags` arm under
docs/examples/, registered as the page says (its class added to `KINDS` before anything reads the
registry), configured with the page's YAML lines, checked with `python -m evaluation.extraction`
on generated pages' gold, then extracted by the corpus flow with every record accounted for."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "docs" / "examples"
GUIDE = REPO / "docs" / "guides" / "add-an-arm.md"

# A fresh interpreter: the page's edit of `KINDS` has to come before configs.arms builds its union.
CHECK = """
import json, sys
sys.path.insert(0, {examples!r})
import corpus.extractors as registry
from article_tags import ArticleTagsArm
registry.KINDS = (*registry.KINDS, ArticleTagsArm)
from configs.experiment import load_experiment
from evaluation.extraction.__main__ import main as extraction_quality
config = load_experiment({config!r})
assert type(config.arms["article_tags"]) is ArticleTagsArm
extraction_quality(["--config", {config!r}, "--pages", {gold!r}, "--arms", "article_tags", "--out", {quality!r},
                    "--max-pages", "10"])
if {flow!r}:
    from corpus.flow.run import main as flow
    flow([{config!r}, "--arms", "article_tags"])
print(json.dumps(config.arms["article_tags"].selectors))
"""


def guide_arm_lines() -> dict:
    """The arm as the guide's YAML block gives it."""
    blocks = re.findall(r"```yaml\n(.*?)```", GUIDE.read_text(), re.S)
    return next(yaml.safe_load(b)["arms"] for b in blocks if "article_tags" in b)


def run_the_guides_checks(tmp_path: Path, sample_dir: Path, flow: bool) -> Path:
    """The guide's arm registered and configured, `python -m evaluation.extraction` on generated pages
    (and with `flow`, the flow's extraction of the arm); returns the output root."""
    arms = guide_arm_lines()
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"name": "docs-example", "output_root": str(tmp_path / "out"),
                                      "inputs": {"warc": [str(sample_dir / "sample.warc.gz")]}, "arms": arms}))
    script = CHECK.format(examples=str(EXAMPLES), config=str(config), gold=str(sample_dir / "gold.jsonl"),
                          quality=str(tmp_path / "quality"), flow=flow)
    run = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    assert json.loads(run.stdout.strip().splitlines()[-1]) == arms["article_tags"]["selectors"]
    scored = json.loads((tmp_path / "quality" / "summary.json").read_text())["article_tags"]
    assert scored["versions"].keys() == {"selectolax", "html2text"}
    # pages whose main container is an <article> come out close to their gold; the others come out empty
    assert 0 < scored["no_output"] < scored["pages"] == 10
    assert scored["rouge5_f1_mean_over_pages"] > 0.1
    return tmp_path / "out"


def test_the_guides_arm_loads_and_scores_on_generated_pages(tmp_path, sample_dir):
    run_the_guides_checks(tmp_path, sample_dir, flow=False)


@pytest.mark.slow
def test_the_guides_arm_extracts_every_record_in_the_flow(tmp_path, sample_dir):
    summary = json.loads((run_the_guides_checks(tmp_path, sample_dir, flow=True) / "extract" / "article_tags"
                          / "summary.json").read_text())
    assert summary["balanced"] and summary["complete"]
    assert summary["documents_out"] > 0 and summary["dropped"]["empty"] > 0


def test_the_step_keeps_only_the_outermost_match():
    sys.path.insert(0, str(EXAMPLES))
    try:
        from article_tags import ArticleTagsArm
    finally:
        sys.path.remove(str(EXAMPLES))
    step = ArticleTagsArm(extractor="article_tags").step()
    text = step.extract_page("<html><body><nav>Menu</nav><article><p>The story.</p><article><p>A comment.</p></article>"
                             "</article><footer>Footer</footer></body></html>")
    assert text == "The story.\n\nA comment."
    assert step.extract_page("<html><body><div>no sectioning element</div></body></html>") == ""


def test_the_guide_shows_the_example_files_as_they_are():
    """Every file of the example appears in the guide as it is, less its module docstring."""
    blocks = re.findall(r"```python\n(.*?)```", GUIDE.read_text(), re.S)
    for path in (EXAMPLES / "article_tags" / "__init__.py", EXAMPLES / "article_tags" / "step.py"):
        text = path.read_text()
        docstring_end = text.index('"""', 3) + 3
        assert text[docstring_end:].strip() + "\n" in blocks, f"{path.name} differs from its block in {GUIDE.name}"
