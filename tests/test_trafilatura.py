"""The Trafilatura arm: its options in each release's API, a pinned release in its own environment
(`options.version`), and the release named wherever its numbers are."""

import io
import json
import subprocess
import sys
from pathlib import Path

import psutil
import pytest
from datatrove.data import Document

from configs.provenance import write_provenance
from conftest import make_config
from corpus.accounting.ledger import arm_ledger
from corpus.extractors import TrafilaturaArm
from corpus.extractors.trafilatura import TrafilaturaOptions
from corpus.extractors.trafilatura.releases import installed_release, release_environment
from corpus.extractors.trafilatura.step import ReleaseError, Trafilatura, extract_kwargs
from corpus.flow.run import run_corpus
from corpus.sample.annotated import load_pages
from evaluation.sources import arm_source
from slurm import console

REPO = Path(__file__).resolve().parents[1]
PAPER_RELEASE = "1.11.0"
paper_release_env = pytest.mark.skipif(not (release_environment(PAPER_RELEASE) / "bin" / "python").exists(),
                                       reason=f"no {release_environment(PAPER_RELEASE).name}: make trafilatura-release")
# CommonMark's inline characters in prose: 2.x's Markdown escapes them, 1.11 writes them as they are
ESCAPED = ("<html><body><article><h1>Naming things</h1><p>Python names use snake_case, as in read_page and "
           "write_page: one underscore between words, never a [bracket] or a *star*, in every module of the "
           "project we keep, and the tests check it for every name.</p>" + "<p>Another paragraph of the article "
           "that says the same thing once more, at length, so that the extractor keeps it as main text.</p>" * 3
           + "</article><footer>Home | About</footer></body></html>")


def run_step(step, htmls: list[str]) -> list[str]:
    return [doc.text for doc in step.run(Document(text=html, id=str(i)) for i, html in enumerate(htmls))]


def test_options_go_to_each_release_in_its_api():
    options = TrafilaturaOptions(favour_precision=False, include_tables=False, output_format="txt")
    old, new = extract_kwargs(options, "1.11.0"), extract_kwargs(options, "2.3.1")
    for kwargs in (old, new):
        assert kwargs["deduplicate"] is False and kwargs["include_comments"] is False
        assert (kwargs["favor_precision"], kwargs["include_tables"], kwargs["output_format"]) == (False, False, "txt")
    assert old["no_fallback"] is False and "fast" not in old  # 2.0 renamed it
    assert new["fast"] is False and "no_fallback" not in new


def test_the_default_arm_runs_the_installed_release_and_names_it():
    arm = TrafilaturaArm(extractor="trafilatura")
    assert arm.options.version is None and arm.versions() == {"trafilatura": installed_release()}
    assert arm.step().python is None  # in the sandbox, as datatrove's own step


def test_a_release_the_step_cannot_run_is_refused_at_load(tmp_path, sample_dir):
    def load(version: str):
        return make_config(tmp_path, sample_dir / "sample.warc.gz",
                           {"t": {"extractor": "trafilatura", "options": {"version": version}}})

    with pytest.raises(ValueError, match=r"trafilatura 1\.12\.2 is not the installed release .* make trafilatura-release "
                                         r"TRAFILATURA=1\.12\.2"):
        load("1.12.2")
    with pytest.raises(ValueError, match=r"3\.0\.0: the step maps its options onto releases 1\.11\.0 to 2\.x only"):
        load("3.0.0")
    with pytest.raises(ValueError, match=r"'2\.3': give a release as on PyPI"):
        load("2.3")


def test_the_release_worker_extracts_what_the_installed_release_extracts_here(sample_dir):
    htmls = [p.html for p in load_pages(sample_dir / "gold.jsonl")[:12]]
    htmls.append(htmls[0])  # the same page again: with the deduplicate cache off it keeps its text
    here = run_step(Trafilatura(TrafilaturaOptions()), htmls)
    through_worker = run_step(Trafilatura(TrafilaturaOptions(), python=Path(sys.executable)), htmls)
    assert through_worker == here and len(here) == len(htmls) and here[-1] == here[0]


def test_a_worker_of_another_release_fails_the_task_with_the_reason():
    step = Trafilatura(TrafilaturaOptions.model_construct(version="1.11.0"), python=Path(sys.executable))
    with pytest.raises(ReleaseError, match=f"holds trafilatura {installed_release()}.*make trafilatura-release"):
        run_step(step, [ESCAPED])


def test_the_worker_dies_with_the_process_that_started_it():
    code = ("import sys; from pathlib import Path; from corpus.extractors.trafilatura import TrafilaturaOptions; "
            "from corpus.extractors.trafilatura.step import Trafilatura; "
            "Trafilatura(TrafilaturaOptions(), python=Path(sys.executable)).extract('<p>x</p>'); "
            "print('ready', flush=True); import time; time.sleep(60)")
    starter = subprocess.Popen([sys.executable, "-c", code], cwd=REPO, stdout=subprocess.PIPE, text=True)
    assert starter.stdout.readline().strip() == "ready"
    (worker,) = psutil.Process(starter.pid).children()
    starter.kill()  # as datatrove's sandbox is, on a page over the timeout
    starter.wait()
    worker.wait(timeout=10)


@paper_release_env
@pytest.mark.slow
def test_a_pinned_release_runs_in_its_environment_through_the_corpus_flow(tmp_path, sample_dir, monkeypatch):
    monkeypatch.setattr(console, "TERMINAL", terminal := io.StringIO())
    pinned = {"extractor": "trafilatura", "options": {"version": PAPER_RELEASE}}
    config = make_config(tmp_path / "out", sample_dir / "sample.warc.gz", {"current": {"extractor": "trafilatura"},
                                                                           "paper": pinned})
    summaries = {s["arm"]: s for s in run_corpus(config, until="extract")}
    assert all(s["balanced"] and s["documents_out"] for s in summaries.values())
    assert summaries["paper"]["versions"] == {"trafilatura": PAPER_RELEASE}
    assert summaries["current"]["versions"] == {"trafilatura": installed_release()}
    closing = [line for line in terminal.getvalue().splitlines() if line.startswith("✓ extract-paper")]
    assert len(closing) == 1 and f"documents by trafilatura {PAPER_RELEASE} (" in closing[0]
    ledgers = {a: arm_ledger(config, a) for a in config.arms}
    assert ledgers["paper"]["versions"] == {"trafilatura": PAPER_RELEASE}
    assert ledgers["current"]["versions"] == {"trafilatura": installed_release()}
    made = json.loads((config.arm_dir("paper") / "provenance.json").read_text())
    assert made["extractors"] == {"current": {"trafilatura": installed_release()}, "paper": {"trafilatura": PAPER_RELEASE}}
    # each release's own Markdown: 2.x escapes CommonMark's inline characters, 1.11 does not
    paper = run_step(TrafilaturaArm.model_validate(pinned).step(), [ESCAPED, ESCAPED])
    current = run_step(TrafilaturaArm(extractor="trafilatura").step(), [ESCAPED])
    assert "snake_case" in paper[0] and "snake\\_case" in current[0]
    assert paper[1] == paper[0]  # its deduplicate cache is off too


def test_the_report_names_the_release_each_arm_extracted_with(tmp_path, sample_dir):
    config = make_config(tmp_path / "out", sample_dir / "sample.warc.gz", {"t": {"extractor": "trafilatura"}})
    assert arm_source(config, "t", config.arms["t"]) == "extractor: trafilatura"  # not extracted: nothing to name
    write_provenance(config.arm_dir("t"), config, "corpus")  # what the extraction stage records when it starts
    assert arm_source(config, "t", config.arms["t"]) == f"extractor: trafilatura (trafilatura {installed_release()})"
