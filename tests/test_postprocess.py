"""Post-processing, the shared tokenizer, the token budget and the ledger, on constructed documents.

Two arms get hand-made "extraction outputs" (two shards each, so dedup works across tasks): every
filter has documents it must remove, and the rest must survive to the Megatron datasets.
"""

import gzip
import json
import random
import shutil
import time

import pytest
from pydantic import ValidationError

from configs.experiment import ExperimentConfig
from conftest import make_config
from corpus.accounting.ledger import arm_ledger, overlap
from corpus.flow.execute import forget_what_depends_on_reruns, run_local
from corpus.flow.stages import corpus_stages
from corpus.postprocess.exact_dedup import normalised_text
from corpus.postprocess.positions import PositionsChanged
from corpus.postprocess.steps import FILTER_STAGE, MINHASH_FILTER_STAGE, filter_steps
from corpus.read.inputs import resolve_inputs
from corpus.sample.text import Prose
from corpus.stage import record_hash
from corpus.tokens.budget import BudgetError, check_budget, manifest_path

ARMS = {"a": {"extractor": "trafilatura"}, "b": {"extractor": "trafilatura"}}


def article(seed: int) -> str:
    prose = Prose(random.Random(seed))
    return "\n\n".join(prose.paragraph((4, 6)) for _ in range(4))


def constructed_documents() -> tuple[list[list[dict]], dict[str, str]]:
    """Two shards of documents; the expected fate of the special ones by id."""
    keep = [{"id": f"keep-{i}", "text": article(i), "url": f"https://news.example.com/{i}"} for i in range(24)]
    near = keep[1]["text"].replace("\n\n", "\n\nIn short, ", 1) + "\n\nThis story was first published elsewhere."
    special = [
        # the same text as keep-0 up to case and layout, in the other shard: an exact duplicate (of
        # copies the lowest record hash is kept: see test_the_copies_dropped_are_those_of_the_higher_record_hash)
        {"id": "exact-copy", "text": "  " + keep[0]["text"].upper().replace("\n\n", "\n \n"), "url": "https://m.example.com/0"},
        {"id": "near-dup", "text": near, "url": "https://copy.example.com/1"},
        {"id": "german", "text": "Die Stadtverwaltung hat heute bekannt gegeben, dass die neue Brücke über den Fluss "
         "im kommenden Frühjahr eröffnet wird. " * 8, "url": "https://zeitung.example.com/1"},
        {"id": "short", "text": "Click here to subscribe to our newsletter today.", "url": "https://news.example.com/s"},
        {"id": "repetitive", "text": "\n".join(["The best deals of the year are here, and they will not last."] * 40), "url": "https://deals.example.com/1"},
        {"id": "blocked", "text": article(100), "url": "https://blocked.example.com/story"},
        {"id": "keyword", "text": article(101) + "\n\nIt mentions the forbidden phrase once.", "url": "https://news.example.com/k"},
    ]
    shards = [keep[:12] + special[1:], keep[12:] + special[:1]]
    fate = {"exact-copy": "exact_dedup", "near-dup": "minhash", "german": "language", "short": "gopher_quality",
            "repetitive": "gopher_repetition", "blocked": "url_blocklist", "keyword": "keyword_blocklist"}
    return shards, fate


def write_extraction_output(config: ExperimentConfig, arm: str, shards: list[list[dict]], replace: bool = False) -> None:
    out = config.arm_dir(arm) / "output"
    out.mkdir(parents=True, exist_ok=replace)
    for rank, docs in enumerate(shards):
        with gzip.open(out / f"{rank:05d}.jsonl.gz", "wt", encoding="utf-8") as f:
            for d in docs:
                f.write(json.dumps({"id": d["id"], "text": d["text"], "metadata": {"url": d["url"]}}) + "\n")


def post_config(tmp_path, sample_dir, tokens_per_arm=3000, **post) -> ExperimentConfig:
    blocklist = tmp_path / "keywords.txt"
    blocklist.write_text("# banned\nforbidden phrase\n")
    return make_config(tmp_path / "out", sample_dir / "sample.warc.gz", ARMS, postprocess={
        "exact_dedup": {"finder_tasks": 2},
        # the extraction output is hand-made here, so the URL filter runs in post-processing
        "safety": {"banned_domains": ["blocked.example.com"], "keyword_blocklist": str(blocklist),
                   "before_extraction": False},
        "minhash": {"num_buckets": 4, "hashes_per_bucket": 4},
        "resources": {"tasks": 2, "workers": 1}, **post,
    }, tokenizer={"kind": "sentencepiece", "vocab_size": 600, "sample_chars_per_arm": 20000},
        dataset={"tokens_per_arm": tokens_per_arm, "seed": 3})


@pytest.fixture(scope="module")
def processed(tmp_path_factory, sample_dir):
    tmp_path = tmp_path_factory.mktemp("post")
    config = post_config(tmp_path, sample_dir)
    shards, fate = constructed_documents()
    for arm in config.arms:
        write_extraction_output(config, arm, shards)
    base, paths_file = resolve_inputs(config)
    stages = corpus_stages(config, base, paths_file)
    run_local(config, [s for s in stages if s.name != "extract"])  # extraction output is hand-made
    return config, shards, fate


def read_ids(folder) -> set[str]:
    return {json.loads(line)["id"] for path in folder.glob("*.jsonl.gz") for line in gzip.open(path, "rt")}


@pytest.mark.slow
def test_each_filter_removes_what_it_should(processed):
    config, shards, fate = processed
    post = config.post_dir("a")
    kept = read_ids(post / "output")
    for doc_id, step in fate.items():
        assert doc_id not in kept
        assert doc_id in read_ids(post / "removed" / step), f"{doc_id} not removed by {step}"
    assert {f"keep-{i}" for i in range(24)} <= kept  # the first of the duplicates stays
    for step, reason in (("exact_dedup", "exact_duplicate"), ("minhash", "near_duplicate"), ("language", "language")):
        removed = [json.loads(line) for path in (post / "removed" / step).glob("*.gz") for line in gzip.open(path, "rt")]
        assert {r["metadata"]["filter_reason"] for r in removed} == {reason}


def test_the_copies_dropped_are_those_of_the_higher_record_hash():
    assert record_hash("exact-copy") > record_hash("keep-0") and record_hash("near-dup") > record_hash("keep-1")


def test_exact_dedup_normalises_case_unicode_and_layout():
    assert normalised_text("  Hello\n\n  WORLD ") == normalised_text("hello world") == "hello world"
    assert normalised_text("ﬁne") == "fine"  # NFKC
    assert normalised_text("hello, world") != normalised_text("hello world")


@pytest.mark.slow
def test_ledger_accounts_for_every_document_at_every_stage(processed):
    config, shards, fate = processed
    ledger = arm_ledger(config, "a")
    rows = {r["stage"]: r for r in ledger["rows"]}
    assert ledger["chained"]
    for row in ledger["rows"]:
        assert row["documents_in"] == row["documents_out"] + sum(row["removed"].values()), row
        assert row["tokens_out"] <= row["tokens_in"]
    assert rows["exact dedup (SHA-256)"]["documents_in"] == sum(map(len, shards))
    assert rows["language id"]["removed"] == {"language": 1}
    assert rows["keyword blocklist"]["removed"] == {"banned_keyword": 1}
    assert rows["MinHash dedup"]["removed"] == {"near_duplicate": 1}
    assert rows["token budget"]["tokens_out"] == config.dataset.tokens_per_arm
    # identical inputs and post-processing: both arms keep the same records
    pair = overlap(config)["post-processed"][0]
    assert pair["only_a"] == pair["only_b"] == 0 and pair["both"] == 24


@pytest.mark.slow
def test_every_arm_gets_the_same_post_processing(processed):
    config, _, _ = processed

    def described(step):
        return type(step).__name__, {k: v for k, v in vars(step).items()
                                     if isinstance(v, (int, float, str, list, tuple, set)) and "/" not in str(v)}

    assert [described(s) for s in filter_steps(config, "a")] == [described(s) for s in filter_steps(config, "b")]
    raw = {"name": "x", "output_root": "out", "inputs": {"sample": {}},
           "arms": {"a": {"extractor": "trafilatura", "postprocess": {"language": {"languages": ["de"]}}}}}
    with pytest.raises(ValidationError, match="postprocess"):
        ExperimentConfig.model_validate(raw)


@pytest.mark.slow
def test_megatron_datasets_read_back_to_the_selected_documents(processed):
    from megatron.core.datasets.indexed_dataset import IndexedDataset
    from tokenizers import Tokenizer

    config, shards, _ = processed
    manifest = json.loads(manifest_path(config).read_text())
    tokenizer = Tokenizer.from_file(str(config.tokenizer_dir() / "tokenizer.json"))
    eos = tokenizer.token_to_id("</s>")
    texts = {d["id"]: d["text"] for shard in shards for d in shard}
    for arm in config.arms:
        dataset = IndexedDataset(str(config.dataset_prefix(arm)))
        ids = gzip.open(config.dataset_dir(arm) / "selected_ids.txt.gz", "rt").read().split()
        assert len(dataset) == len(ids) == manifest["arms"][arm]["documents"]
        assert int(dataset.sequence_lengths.sum()) == config.dataset.tokens_per_arm
        cut = []
        for i, doc_id in enumerate(ids):  # whole documents, each ending in the end-of-document token, but one
            tokens = dataset[i].tolist()
            if tokens[-1] == eos and tokenizer.decode(tokens[:-1], skip_special_tokens=False) == texts[doc_id]:
                continue
            assert texts[doc_id].startswith(tokenizer.decode(tokens, skip_special_tokens=False))
            cut.append(len(tokens))
        assert cut == [manifest["arms"][arm]["last_document_kept_tokens"]]  # the one cut to land on the budget
    assert manifest["tokenizer"]["sha256"] and manifest["tokens_per_arm"] == config.dataset.tokens_per_arm


def test_budget_fails_clearly_when_an_arm_is_short(tmp_path, sample_dir):
    config = post_config(tmp_path, sample_dir, tokens_per_arm=10_000)
    with pytest.raises(BudgetError) as err:
        check_budget(config, {"a": (12_000, 40), "b": (8_000, 30)})
    message = str(err.value)
    assert "b: 8,000 tokens in 30 documents" in message and "at most 8,000" in message
    check_budget(config, {"a": (12_000, 40), "b": (10_000, 30)})  # exactly enough is enough


def test_a_rerun_stage_reruns_what_is_built_on_it_and_a_filter_refuses_changed_documents(tmp_path, sample_dir):
    config = make_config(tmp_path / "out", sample_dir / "sample.warc.gz", ARMS, postprocess={
        "resources": {"tasks": 2}, "minhash": {"num_buckets": 2, "hashes_per_bucket": 4}})
    shards, _ = constructed_documents()
    for arm in config.arms:
        write_extraction_output(config, arm, shards)
        for rank in range(config.arms[arm].resources.tasks):  # the hand-made extraction counts as done
            (config.arm_dir(arm) / "logs" / "completions").mkdir(parents=True, exist_ok=True)
            (config.arm_dir(arm) / "logs" / "completions" / f"{rank:05d}").touch()
    stages = corpus_stages(config, *resolve_inputs(config), until="postprocess")
    post = [s for s in stages if s.name != "extract"]
    run_local(config, post)
    assert forget_what_depends_on_reruns(stages) == []

    # arm a's second extraction task re-ran after its post-processing, its exact copy (its shard's
    # only duplicate) now a new article: all of a's post-processing runs again from nothing of its
    # earlier run (an old duplicates file would drop the new article) and keeps it; b's does not run
    kept = read_ids(config.post_dir("a") / "output")
    assert shards[1][-1]["id"] == "exact-copy"
    fresh = {"id": "fresh", "text": article(200), "url": "https://news.example.com/fresh"}
    time.sleep(0.01)
    write_extraction_output(config, "a", [shards[0], shards[1][:-1] + [fresh]], replace=True)
    (config.arm_dir("a") / "logs" / "completions" / "00001").touch()
    assert forget_what_depends_on_reruns(stages) == [s.label for s in post if s.arm == "a"]
    run_local(config, post)
    assert read_ids(config.post_dir("a") / "output") == kept | {"fresh"}

    # a stage partly done when the stage it needs runs again is forgotten whole, not only its missing tasks
    (config.post_dir("b") / "logs" / MINHASH_FILTER_STAGE / "completions" / "00001").unlink()
    time.sleep(0.01)
    (config.arm_dir("b") / "logs" / "completions" / "00000").touch()
    assert f"{MINHASH_FILTER_STAGE}-b" in forget_what_depends_on_reruns(stages)
    assert not (config.post_dir("b") / "logs" / MINHASH_FILTER_STAGE / "completions").exists()
    run_local(config, post)

    # b's documents changed behind the flow's back: its dedup filter refuses them
    first = config.arm_dir("b") / "output" / "00000.jsonl.gz"
    lines = gzip.open(first, "rt").read().splitlines()
    with gzip.open(first, "wt") as f:
        f.write("\n".join(lines[1:]) + "\n")
    shutil.rmtree(config.post_dir("b") / "logs" / FILTER_STAGE / "completions")
    with pytest.raises(PositionsChanged, match=rf"task 0 read {len(lines) - 1} documents where its dedup signatures"):
        run_local(config, [s for s in post if s.label == f"{FILTER_STAGE}-b"])
