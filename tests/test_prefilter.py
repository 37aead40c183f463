"""The URL blocklist runs before extraction, so no extractor sees the pages it removes, and the
corpus comes out byte-identical to running it in post-processing."""

import gzip
import json

from conftest import make_config
from corpus.accounting.ledger import arm_ledger
from corpus.accounting.summary import summarize_arm
from corpus.flow.run import run_corpus
from corpus.flow.stages import corpus_stages
from corpus.read.inputs import resolve_inputs

ARMS = {"trafilatura": {"extractor": "trafilatura"}, "resiliparse": {"extractor": "resiliparse"}}


def config_for(root, sample_dir, before: bool):
    return make_config(root, sample_dir / "sample.warc.gz", ARMS, postprocess={
        "gopher_quality": {"max_non_alpha_words_ratio": 0.7}, "minhash": {"num_buckets": 4},
        "safety": {"banned_domains": ["blocked.example.com"], "before_extraction": before}},
        tokenizer={"kind": "sentencepiece", "vocab_size": 600, "sample_chars_per_arm": 200_000},
        dataset={"tokens_per_arm": 3000, "seed": 1})


def documents(folder) -> list[tuple[str, str]]:
    return [(d["id"], d["text"]) for path in sorted(folder.glob("*.jsonl.gz"))
            for d in map(json.loads, gzip.open(path, "rt", encoding="utf-8"))]


def test_the_url_filter_runs_in_every_arms_extraction_stage_before_the_extractor(tmp_path, sample_dir):
    config = config_for(tmp_path, sample_dir, before=True)
    base, paths = resolve_inputs(config)
    for stage in corpus_stages(config, base, paths):
        names = [type(step).__name__ for step in stage.pipeline]
        if stage.name == "extract":
            assert names.index("OfflineURLFilter") == names.index("RecordGuard") + 1
        else:
            assert "OfflineURLFilter" not in names


def test_filtering_urls_before_extraction_gives_the_same_datasets(tmp_path, sample_dir):
    runs = {}
    for before in (True, False):
        config = config_for(tmp_path / str(before), sample_dir, before)
        run_corpus(config)
        runs[before] = config
    first, after = runs[True], runs[False]
    assert (first.tokenizer_file().read_bytes() == after.tokenizer_file().read_bytes())
    for arm in ARMS:
        saved = summarize_arm(first, arm)
        assert saved["dropped"]["url_blocklist"] > 0 and saved["balanced"]
        assert "url_blocklist" not in summarize_arm(after, arm)["dropped"]
        assert arm_ledger(first, arm)["balanced"] and arm_ledger(after, arm)["balanced"]
        assert arm_ledger(first, arm)["not_extracted"] > arm_ledger(after, arm)["not_extracted"]
        assert documents(first.post_dir(arm) / "output") == documents(after.post_dir(arm) / "output")
        for suffix in (".bin", ".idx"):
            a, b = (f"{c.dataset_prefix(arm)}{suffix}" for c in (first, after))
            assert open(a, "rb").read() == open(b, "rb").read(), f"{arm}{suffix} differs"
        assert (first.dataset_dir(arm) / "selected_ids.txt.gz").is_file()
