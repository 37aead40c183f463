"""The equal token budget, one shard at a time, against a brute-force cut of the same documents."""

import gzip

import numpy as np
import pytest
from datatrove.data import Document

import corpus.tokens.budget as budget
from conftest import make_config
from corpus.stage import record_hash
from corpus.tokens.budget import DocumentKeys, TokenBudget, draw_keys, histogram, token_shards

ARM = "a"


def budget_config(tmp_path, sample_dir, tokens: int, seed: int = 5):
    return make_config(tmp_path / "out", sample_dir / "sample.warc.gz", {ARM: {"extractor": "trafilatura"}},
                       tokenizer={"kind": "sentencepiece", "vocab_size": 600}, dataset={"tokens_per_arm": tokens, "seed": seed})


def documents(n: int) -> list[tuple[str, np.ndarray]]:
    rng = np.random.default_rng(0)
    return [(f"<urn:uuid:{i:08d}>", rng.integers(3, 200, size=int(rng.integers(1, 60))).astype(np.uint16)) for i in range(n)]


def write_shards(config, docs: list[tuple[str, np.ndarray]], shards: int) -> None:
    """What the tokenisation stage leaves: per task a `.bin/.idx` and the record ids beside it."""
    from megatron.core.datasets.indexed_dataset import IndexedDatasetBuilder

    folder = config.dataset_dir(ARM) / "tokens"
    folder.mkdir(parents=True)
    for rank in range(shards):
        part = docs[rank::shards]
        prefix = folder / f"{ARM}_{rank:05d}_tokens"
        builder = IndexedDatasetBuilder(f"{prefix}.bin", dtype=np.uint16)
        for _, tokens in part:
            builder.add_document(tokens, [len(tokens)])
        builder.finalize(f"{prefix}.idx")
        list(DocumentKeys(str(folder), save_filename=ARM).run((Document(text="", id=i) for i, _ in part), rank))


def brute_force(docs, tokens: int, seed: int) -> tuple[dict[str, int], str]:
    """Tokens taken of each selected record, and the record cut short."""
    keys = draw_keys(np.array([record_hash(i) for i, _ in docs], dtype=np.uint64), seed)
    taken, total = {}, 0
    for k in np.argsort(keys, kind="stable"):
        record, doc = docs[k]
        taken[record] = min(len(doc), tokens - total)
        total += taken[record]
        if total == tokens:
            return taken, record
    raise AssertionError("not enough tokens")


def cut(config) -> tuple[dict[str, int], str, dict]:
    from megatron.core.datasets.indexed_dataset import IndexedDataset

    shards = token_shards(config, ARM)
    entry = TokenBudget(config).cut_arm(ARM, shards, histogram(shards, config.dataset.seed))
    dataset = IndexedDataset(str(config.dataset_prefix(ARM)))
    ids = gzip.open(config.dataset_dir(ARM) / "selected_ids.txt.gz", "rt").read().split()
    return {record: len(dataset[n]) for n, record in enumerate(ids)}, ids, entry


@pytest.mark.parametrize("shift", [budget.SHIFT, 60])  # 60: 16 bins, many documents in the one the budget falls in
def test_the_cut_is_the_brute_force_cut_whatever_the_sharding(tmp_path, sample_dir, monkeypatch, shift):
    monkeypatch.setattr(budget, "SHIFT", shift)
    docs, tokens = documents(400), 5_000
    expected, last = brute_force(docs, tokens, seed=5)
    for shards in (1, 7):
        config = budget_config(tmp_path / f"{shards}", sample_dir, tokens)
        write_shards(config, docs, shards)
        taken, ids, entry = cut(config)
        assert taken == expected and len(ids) == len(set(ids)) == entry["documents"]
        assert entry["last_document_kept_tokens"] == expected[last] < entry["last_document_tokens"]
        contents = dict(docs)
        from megatron.core.datasets.indexed_dataset import IndexedDataset

        dataset = IndexedDataset(str(config.dataset_prefix(ARM)))
        for n, record in enumerate(ids):  # the tokens themselves, the cut one its first tokens
            assert np.array_equal(dataset[n], contents[record][: taken[record]])


def test_the_draw_prefers_the_same_records_in_every_arm_and_changes_with_the_seed():
    hashes = np.array([record_hash(f"r{i}") for i in range(1000)], dtype=np.uint64)
    assert np.array_equal(draw_keys(hashes, 1), draw_keys(hashes.copy(), 1))
    assert np.corrcoef(np.argsort(draw_keys(hashes, 1)), np.argsort(draw_keys(hashes, 2)))[0, 1] < 0.2


def test_the_streamed_index_is_megatron_s_own(tmp_path):
    from megatron.core.datasets.indexed_dataset import IndexedDatasetBuilder

    from corpus.shims import write_megatron_index

    lengths = np.random.default_rng(1).integers(1, 50, size=300).astype(np.int32)
    builder = IndexedDatasetBuilder(str(tmp_path / "m.bin"), dtype=np.uint16)
    for n in lengths:
        builder.add_document(np.zeros(n, dtype=np.uint16), [int(n)])
    builder.finalize(str(tmp_path / "m.idx"))
    (tmp_path / "lengths").write_bytes(lengths.tobytes())
    write_megatron_index(str(tmp_path / "ours.idx"), np.uint16, tmp_path / "lengths", len(lengths), chunk=64)
    assert (tmp_path / "ours.idx").read_bytes() == (tmp_path / "m.idx").read_bytes()
