"""What runs before any extractor, identically in every arm: the URL blocklist (the corpus comes
out byte-identical to running it in post-processing) and the language pre-filter (the corpus
differs from a run without it only by the records it removed)."""

import gc
import gzip
import json

import pytest
from datatrove.data import Document

from conftest import make_config
from corpus.accounting.ledger import arm_ledger
from corpus.accounting.summary import summarize_arm
from corpus.extractors.prefilters import LANGUAGE_PREFILTER, LanguagePrefilter, OfflineURLFilter
from corpus.flow.run import run_corpus
from corpus.flow.stages import corpus_stages
from corpus.language import default_lid_model
from corpus.read.inputs import resolve_inputs
from corpus.sample import generate_pages
from corpus.shims import bundled_url_lists

ARMS = {"trafilatura": {"extractor": "trafilatura"}, "resiliparse": {"extractor": "resiliparse"}}


def config_for(root, sample_dir, before: bool, prefilter: float | None = 0.02):
    return make_config(root, sample_dir / "sample.warc.gz", ARMS, postprocess={
        "gopher_quality": {"max_non_alpha_words_ratio": 0.7}, "minhash": {"num_buckets": 4},
        "language": {"prefilter_threshold": prefilter},
        "safety": {"banned_domains": ["blocked.example.com"], "before_extraction": before}},
        tokenizer={"kind": "sentencepiece", "vocab_size": 600, "sample_chars_per_arm": 200_000},
        dataset={"tokens_per_arm": 3000, "seed": 1})


@pytest.fixture(scope="module")
def runs(tmp_path_factory, sample_dir):
    """The flow with the URL filter before extraction, after it, and without the language pre-filter."""
    root = tmp_path_factory.mktemp("prefilter")
    configs = {"before": config_for(root / "before", sample_dir, True), "after": config_for(root / "after", sample_dir, False),
               "no prefilter": config_for(root / "none", sample_dir, True, prefilter=None)}
    run_corpus(configs["before"])
    run_corpus(configs["after"])
    # what the language test compares is the post-processed documents: no tokenizer or datasets needed
    run_corpus(configs["no prefilter"], until="postprocess")
    return configs


def documents(folder) -> list[tuple[str, str]]:
    return [(d["id"], d["text"]) for path in sorted(folder.glob("*.jsonl.gz"))
            for d in map(json.loads, gzip.open(path, "rt", encoding="utf-8"))]


def test_the_record_filters_run_in_every_arms_extraction_stage_before_the_extractor(tmp_path, sample_dir):
    config = config_for(tmp_path, sample_dir, before=True)
    base, paths = resolve_inputs(config)
    for stage in corpus_stages(config, base, paths):
        names = [type(step).__name__ for step in stage.pipeline]
        if stage.name == "extract":
            guard = names.index("RecordGuard")
            assert names[guard + 1:guard + 3] == ["OfflineURLFilter", "LanguagePrefilter"]
        else:
            assert "OfflineURLFilter" not in names and "LanguagePrefilter" not in names


def test_the_bundled_url_lists_are_parsed_once_a_process_and_each_filter_adds_its_own_domains():
    plain, own = OfflineURLFilter(), OfflineURLFilter(extra_domains=["blocked.example.com"])
    plain.download_data()
    own.download_data()
    bundled = bundled_url_lists()
    assert bundled_url_lists.cache_info().misses == 1
    assert plain.block_listed_domains is bundled["block_listed_domains"]  # shared, not copied
    assert own.block_listed_domains.maps[-1] is bundled["block_listed_domains"]  # its own beside them, not a copy
    assert not gc.is_tracked(bundled["block_listed_domains"])  # no full collection walks 4.5 million domains
    assert "blocked.example.com" not in bundled["block_listed_domains"]  # the own domain is the filter's alone

    def page(domain: str) -> Document:
        return Document(text="", id=domain, metadata={"url": f"https://{domain}/news/story.html"})

    listed = min(bundled["block_listed_domains"])
    assert plain.filter(page(listed))[0] is False and own.filter(page(listed))[0] is False
    assert own.filter(page("blocked.example.com"))[0] is False and plain.filter(page("blocked.example.com")) is True


def test_the_pre_filter_judges_the_whole_page():
    chinese, english = next(p for p in generate_pages(8, seed=3) if p.lang == "zh"), generate_pages(1, seed=3)[0]
    prefilter = LanguagePrefilter(default_lid_model(), ["en"], 0.02)
    assert prefilter.probability(chinese.html) < 0.02 < 0.5 < prefilter.probability(english.html)


@pytest.mark.slow
def test_filtering_urls_before_extraction_gives_the_same_datasets(runs):
    first, after = runs["before"], runs["after"]
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


@pytest.mark.slow
def test_the_language_pre_filter_removes_records_from_every_arm_and_nothing_else(runs):
    with_it, without = runs["before"], runs["no prefilter"]
    removed = {}
    for arm in ARMS:
        summary = summarize_arm(with_it, arm)
        assert summary["dropped"][LANGUAGE_PREFILTER] > 0 and summary["balanced"]  # counted as pages no extractor saw
        extraction = arm_ledger(with_it, arm)["rows"][0]
        assert extraction["removed"][LANGUAGE_PREFILTER] == summary["dropped"][LANGUAGE_PREFILTER]
        removed[arm] = {d["id"] for d in map(json.loads, gzip.open(next(
            with_it.removed_dir(arm, LANGUAGE_PREFILTER).glob("*.jsonl.gz")), "rt"))}
        kept, all_docs = dict(documents(with_it.post_dir(arm) / "output")), dict(documents(without.post_dir(arm) / "output"))
        assert set(all_docs) - set(kept) <= removed[arm] and set(kept) <= set(all_docs)  # only its records are missing
        assert all(kept[i] == all_docs[i] for i in kept)  # and the rest are the same documents
    assert len(set(map(frozenset, removed.values()))) == 1  # the same records in every arm


def test_url_filters_share_one_suffix_trie_and_one_list_with_the_same_own_domains():
    import pickle

    first, second = OfflineURLFilter(extra_domains=["x.example.com"]), OfflineURLFilter(extra_domains=["x.example.com"])
    first.download_data()
    second.download_data()
    assert first.tldextractor is second.tldextractor  # built at the first URL, once a process
    assert first.block_listed_domains.maps[1] is second.block_listed_domains.maps[1]  # the bundled list, never copied
    assert "x.example.com" in first.block_listed_domains
    copy = pickle.loads(pickle.dumps(first))  # a step sent to a worker: the worker's own extractor
    assert copy.tldextractor is first.tldextractor and copy.block_listed_domains == first.block_listed_domains
    assert copy.filter(Document(text="", id="x", metadata={"url": "https://x.example.com/a.html"}))[0] is False
