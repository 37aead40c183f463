"""Both arms over the sample WARC, end to end through datatrove's local executor."""

import gzip
import json
import re
from pathlib import Path

import pytest

import corpus.extractors.dripper.step as dripper
from conftest import TEST_KV_CACHE_BYTES, StubCompletionsServer, make_config
from corpus.accounting.ledger import ledgers
from corpus.extractors.dripper.labelers import MAIN, BlockLabeler, BlockPage, PageLabels, release_labelers
from corpus.extractors.dripper.labelers.config import EndpointLabelerConfig
from corpus.extractors.dripper.labelers.llm import build_llm_labeler
from corpus.extractors.dripper.step import simplify_page
from corpus.extractors.plain import plain_text
from corpus.flow.run import run_corpus
from corpus.read.warc import INPUT_FILES
from corpus.sample import generate_pages, read_gold

TRAFILATURA = {"extractor": "trafilatura"}


def dripper_arm(labeler: dict) -> dict:
    return {"extractor": "dripper", "labeler": labeler, "batch_pages": 16}


def output_docs(config, arm: str) -> dict[str, dict]:
    docs = {}
    for path in sorted((config.arm_dir(arm) / "output").glob("*.jsonl.gz")):
        with gzip.open(path, "rt") as f:
            for line in f:
                doc = json.loads(line)
                docs[doc["id"]] = doc
    return docs


def check_accounting(config, summaries, sample_dir: Path):
    gold = read_gold(sample_dir / "gold.jsonl")
    expected_drops = {}
    for r in gold:
        if r["expect"] != "extract":
            expected_drops[r["expect"]] = expected_drops.get(r["expect"], 0) + 1
    outputs = {}
    for summary in summaries:
        assert summary["complete"] and summary["balanced"], summary
        assert summary["records"] == len(gold)
        for reason, n in expected_drops.items():  # the bad records, counted, not crashed on
            assert summary["dropped"].get(reason, 0) >= n, (summary["arm"], reason)
        docs = output_docs(config, summary["arm"])
        assert len(docs) == summary["documents_out"]
        outputs[summary["arm"]] = docs
    # the same record has the same id, URL and WARC offset in every arm
    gold_ids = {r["id"] for r in gold}
    shared = set.intersection(*(set(d) for d in outputs.values()))
    assert shared and all(set(d) <= gold_ids for d in outputs.values())
    for doc_id in shared:
        metas = [docs[doc_id]["metadata"] for docs in outputs.values()]
        assert len({(m["url"], m["warc_offset"], m["warc_file"]) for m in metas}) == 1
    return outputs


class FirstHalfMain(BlockLabeler):
    """Deterministic stand-in for a model: the first half of each page's blocks are main."""

    def label(self, pages):
        return [PageLabels(labels={i: MAIN if n < len(p.item_ids) / 2 else "other" for n, i in enumerate(p.item_ids)})
                for p in pages]


def test_both_arms_on_the_sample_account_for_every_record(tmp_path, sample_dir, monkeypatch):
    monkeypatch.setattr(dripper, "get_labeler", lambda config: FirstHalfMain())
    config = make_config(tmp_path / "out", sample_dir / "sample.warc.gz",
                         {"trafilatura": TRAFILATURA, "dripper": dripper_arm({"kind": "endpoint", "url": "http://unused"})})
    summaries = run_corpus(config, until="extract")
    outputs = check_accounting(config, summaries, sample_dir)
    for summary in summaries:
        assert (config.arm_dir(summary["arm"]) / "summary.json").is_file()
    traf = next(iter(outputs["trafilatura"].values()))
    assert "Trafilatura" not in traf["text"] and traf["metadata"]["mime"] == "text/html"

    # the ledger does not call the records accounted for until every stage ran, and every arm read the same records
    unfinished = {ledger["arm"]: ledger["unfinished"] for ledger in ledgers(config)}
    assert all(u and not any(s.startswith("extract") for s in u) for u in unfinished.values())  # post-processing has not run
    files = config.arm_dir("dripper") / "logs" / INPUT_FILES / "00000.jsonl"
    lines = [json.loads(line) for line in files.read_text().splitlines()]
    lines[0]["records"] -= 1
    files.write_text("".join(json.dumps(line) + "\n" for line in lines))
    records, name = len(read_gold(sample_dir / "gold.jsonl")), lines[0]["file"]
    differ = {ledger["arm"]: ledger.get("records_differ") for ledger in ledgers(config)}
    assert differ == {  # two whole reads that disagree: neither arm is taken for the right one
        "trafilatura": f"{name} read whole with {records} records, {records - 1} by dripper: the arms read different bytes of it",
        "dripper": f"{name} read whole with {records - 1} records, {records} by trafilatura: the arms read different bytes of it"}


def test_plain_text_keeps_the_words_and_drops_the_marks():
    markdown = ("# Title\nAccording to *x* and **bold** \\- escaped &amp; [link](http://a.b) ![img](x.png)\n\n"
                "  * Home\n  * News\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n```\ncode here\n```\n\n> quote\n\n---\n\n"
                "end `inline`\nsecond line")
    assert plain_text(markdown) == ("Title\n\nAccording to x and bold - escaped & link\n\nHome\nNews\n\na\tb\n1\t2\n\n"
                                    "code here\n\nquote\n\nend inline\nsecond line")


def test_plain_text_format_writes_every_arm_without_marks(tmp_path, sample_dir):
    config = make_config(tmp_path / "out", sample_dir / "sample.warc.gz",
                         {"trafilatura": TRAFILATURA, "whole_page": {"extractor": "html2text"}},
                         extraction={"text_format": "plain"})
    outputs = check_accounting(config, run_corpus(config, until="extract"), sample_dir)
    marks = re.compile(r"^(#{1,6} |\s*[*+-] |\s*\d+\. |> )|\*\*", re.M)
    for arm, docs in outputs.items():
        assert docs and not any(marks.search(d["text"]) for d in docs.values()), arm
    stats = json.loads(next((config.arm_dir("whole_page") / "logs" / "stats").glob("*.json")).read_text())
    (step,) = [s for s in stats if "Plain text" in s["name"]]
    assert step["stats"]["chars_removed"]["total"] > 0  # the whole page's navigation lists, its headings


def test_rerun_skips_finished_tasks(tmp_path, sample_dir):
    warcs = tmp_path / "warcs"
    warcs.mkdir()
    for name in ("a", "b"):
        (warcs / f"{name}.warc.gz").write_bytes((sample_dir / "sample.warc.gz").read_bytes())
    config = make_config(tmp_path / "out", warcs / "*.warc.gz",
                         {"trafilatura": {**TRAFILATURA, "resources": {"tasks": 2}}, "page": {"extractor": "html2text"}})
    run_corpus(config, until="extract")
    # the arms split the files into different tasks, and read the same records of the same files
    assert [ledger.get("records_differ") for ledger in ledgers(config)] == [None, None]
    logs = config.arm_dir("trafilatura") / "logs"
    first = {p.name: p.stat().st_mtime_ns for p in (logs / "stats").glob("*.json")}
    assert len(first) == 2
    (logs / "completions" / "00001").unlink()  # task 1 "failed"
    (logs / "stats" / "00001.json").unlink()
    summary = run_corpus(config, until="extract", arms=["trafilatura"])[0]
    assert (logs / "stats" / "00000.json").stat().st_mtime_ns == first["00000.json"]  # not run again
    assert (logs / "stats" / "00001.json").is_file()
    # both tasks counted once each: every record of the two copies, none twice
    assert summary["complete"] and summary["balanced"] and summary["records"] == 2 * len(read_gold(sample_dir / "gold.jsonl"))


# ---------------------------------------------------------------- the LLM labeler paths


def block_pages(n: int, seed: int) -> list[BlockPage]:
    pages = []
    for page in generate_pages(n, seed):
        simplified, _, ids = simplify_page(page.html)
        pages.append(BlockPage(simplified, ids))
    return pages


def test_endpoint_labeler_sends_the_constrained_request(stub_server, random_model):
    config = EndpointLabelerConfig(kind="endpoint", url=stub_server, model="served-name", tokenizer=str(random_model),
                                   max_context_tokens=4096, concurrency=4)
    pages = block_pages(6, seed=4)
    results = build_llm_labeler(config).label(pages)
    sent = StubCompletionsServer.requests
    assert len(sent) == sum(r.error != "too_long" for r in results) > 0
    assert all(r["model"] == "served-name" and r["temperature"] == 0 for r in sent)
    assert all(r["prompt"].startswith("<|im_start|>system") for r in sent)  # mineru-html's chat template
    for page, result in zip(pages, results, strict=True):
        if result.ok:
            assert set(result.labels) == set(page.item_ids)


def extract_and_release(config):
    """In the vLLM host: the extract stage of every arm."""
    try:
        return run_corpus(config, until="extract")
    finally:
        release_labelers()  # the engine shuts down now, not at the host's exit


@pytest.mark.slow
def test_vllm_labeler_drives_the_real_engine_end_to_end(tmp_path, sample_dir, random_model, vllm_host):
    """A tiny random decoder in a real vLLM engine: every answer parses and covers exactly its
    page's block ids; pages over the context fall back to Trafilatura, counted."""
    # the random model spells its answer one character per token: leave room for that
    labeler = {"kind": "vllm", "model": str(random_model), "max_context_tokens": 2048, "max_output_tokens": 1024,
               "answer_margin_tokens": 512, "engine_kwargs": {"kv_cache_memory_bytes": TEST_KV_CACHE_BYTES}}
    config = make_config(tmp_path / "out", sample_dir / "sample.warc.gz",
                         {"trafilatura": TRAFILATURA, "dripper": dripper_arm(labeler)})
    summaries = vllm_host.submit(extract_and_release, config).result()
    check_accounting(config, summaries, sample_dir)
    drip = next(s for s in summaries if s["arm"] == "dripper")
    assert drip["extracted"] > 0, drip
    assert drip["fallback"].get("too_long", 0) > 0, drip
    assert set(drip["fallback"]) <= {"too_long"}, f"the constrained answers must always parse: {drip}"
