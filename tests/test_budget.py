"""The equal token budget, a block of a shard at a time, against a brute-force cut of the same
documents: the same documents, the same tokens, in the order of the draw, whatever the sharding."""

import gzip
import hashlib

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


def documents(n: int) -> list[tuple[str, str, np.ndarray]]:
    """(record id, text, tokens); a few records repeated, as a reference corpus may: one with
    another text, one copied whole."""
    rng = np.random.default_rng(0)
    docs = [(f"<urn:uuid:{i:08d}>", f"text {i}", rng.integers(3, 200, size=int(rng.integers(1, 60))).astype(np.uint16))
            for i in range(n)]
    return docs + [(docs[3][0], "another text", docs[5][2]), docs[7], docs[7]]


def write_shards(config, docs: list[tuple[str, str, np.ndarray]], shards: int) -> None:
    """What the tokenisation stage leaves: per task a `.bin/.idx` and the record ids beside them."""
    from megatron.core.datasets.indexed_dataset import IndexedDatasetBuilder

    folder = config.dataset_dir(ARM) / "tokens"
    folder.mkdir(parents=True)
    for rank in range(shards):
        part = docs[rank::shards]
        prefix = folder / f"{ARM}_{rank:05d}_tokens"
        builder = IndexedDatasetBuilder(f"{prefix}.bin", dtype=np.uint16)
        for _, _, tokens in part:
            builder.add_document(tokens, [len(tokens)])
        builder.finalize(f"{prefix}.idx")
        list(DocumentKeys(str(folder), save_filename=ARM).run((Document(text=t, id=i) for i, t, _ in part), rank))


def brute_force(docs, tokens: int, seed: int) -> list[tuple[str, np.ndarray]]:
    """The records and tokens taken, in the draw's order (key, then the text's hash)."""
    keys = draw_keys(np.array([record_hash(i) for i, _, _ in docs], dtype=np.uint64), seed)
    texts = np.array([record_hash(t) for _, t, _ in docs], dtype=np.uint64)
    taken, total = [], 0
    for k in np.lexsort((texts, keys)):
        record, _, doc = docs[k]
        taken.append((record, doc[: tokens - total]))
        total += len(taken[-1][1])
        if total == tokens:
            return taken
    raise AssertionError("not enough tokens")


def cut(config) -> tuple[list[tuple[str, np.ndarray]], dict]:
    from megatron.core.datasets.indexed_dataset import IndexedDataset

    shards = token_shards(config, ARM)
    entry = TokenBudget(config).cut_arm(ARM, shards, histogram(shards, config.dataset.seed))
    dataset = IndexedDataset(str(config.dataset_prefix(ARM)))
    ids = gzip.open(config.dataset_dir(ARM) / "selected_ids.txt.gz", "rt").read().split()
    assert not (config.dataset_dir(ARM) / "budget-spill").exists()
    return [(record, np.array(dataset[n])) for n, record in enumerate(ids)], entry


def dataset_bytes(config) -> str:
    prefix = config.dataset_prefix(ARM)
    files = [f"{prefix}.bin", f"{prefix}.idx", config.dataset_dir(ARM) / "selected_ids.txt.gz"]
    return hashlib.sha256(b"".join(open(f, "rb").read() for f in files)).hexdigest()


def inside_the_copies(docs, seed: int) -> int:
    """A budget that ends one token into the second of the three copies of one document."""
    everything = brute_force(docs, sum(len(t) for _, _, t in docs), seed)
    first = next(n for n, (record, _) in enumerate(everything) if record == docs[-1][0])
    return sum(len(t) for _, t in everything[:first]) + len(docs[-1][2]) + 1


@pytest.mark.parametrize("shift", [budget.SHIFT, 60])  # 60: 16 bins, many documents in the one the budget falls in
@pytest.mark.parametrize("where", ["anywhere", "inside the copies of one document"])
def test_the_cut_is_the_brute_force_cut_in_its_order_whatever_the_sharding(tmp_path, sample_dir, monkeypatch, shift,
                                                                            where):
    monkeypatch.setattr(budget, "SHIFT", shift)
    # blocks of a few documents and buckets of a few hundred tokens: every pass streams, and the
    # output is put in order bucket by bucket
    monkeypatch.setattr(budget, "BLOCK_DOCUMENTS", 7)
    monkeypatch.setattr(budget, "BLOCK_TOKENS", 150)
    monkeypatch.setattr(budget, "BUCKET_TOKENS", 400)
    monkeypatch.setattr(budget, "SPILL_BYTES", 200)
    docs = documents(400)
    tokens = 5_000 if where == "anywhere" else inside_the_copies(docs, seed=5)
    expected = brute_force(docs, tokens, seed=5)
    if where != "anywhere":
        assert expected[-1][0] == expected[-2][0] and len(expected[-1][1]) == 1
    written = set()
    for shards in (1, 7):
        config = budget_config(tmp_path / f"{shards}", sample_dir, tokens)
        write_shards(config, docs, shards)
        taken, entry = cut(config)
        assert len(taken) == len(expected) == entry["documents"]
        for (record, got), (want_record, want) in zip(taken, expected, strict=True):
            assert record == want_record and np.array_equal(got, want)
        assert entry["last_document_kept_tokens"] == len(expected[-1][1]) < entry["last_document_tokens"]
        written.add(dataset_bytes(config))
    assert len(written) == 1  # byte-identical at both shardings


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


HELD = """
import re, sys
from pathlib import Path
from megatron.core.datasets.indexed_dataset import IndexedDataset  # imported before the baseline
from configs.experiment import ExperimentConfig
import corpus.tokens.budget as budget

def status(key):
    return int(re.search(rf"{key}:\\s+(\\d+) kB", Path("/proc/self/status").read_text()).group(1)) * 1024

config = ExperimentConfig.model_validate_json(open(sys.argv[1]).read())
budget.BLOCK_TOKENS = budget.BUCKET_TOKENS = int(sys.argv[2])
before = status("VmRSS")
Path("/proc/self/clear_refs").write_text("5")  # the peak so far (the imports') forgotten: VmHWM from here
budget.TokenBudget(config).run()
print(status("VmHWM") - before)
"""


def test_the_budget_holds_what_fit_projects_whatever_the_size_of_a_shard(tmp_path, sample_dir, monkeypatch):
    """A reference shard of 8M tokens (what a reference arm's read task wrote as one file before
    its files were bounded): the budget's peak memory grows by what corpus.flow.fit projects for a
    block and a bucket, not with the shard."""
    import subprocess
    import sys
    from pathlib import Path

    from megatron.core.datasets.indexed_dataset import IndexedDatasetBuilder

    from corpus.flow.fit import BYTES_PER_UNIT, budget_tokens_held

    cap, shard_tokens = 1 << 21, 8 << 20
    monkeypatch.setattr(budget, "BLOCK_TOKENS", cap)
    monkeypatch.setattr(budget, "BUCKET_TOKENS", cap)
    config = budget_config(tmp_path, sample_dir, 6 << 20)
    folder = config.dataset_dir(ARM) / "tokens"
    folder.mkdir(parents=True)
    rng = np.random.default_rng(1)
    for rank, size in enumerate([shard_tokens // 10] * 5 + [shard_tokens]):
        lengths = rng.integers(20, 600, size // 310)
        prefix = folder / f"{ARM}_{rank:05d}_tokens"
        builder = IndexedDatasetBuilder(f"{prefix}.bin", dtype=np.uint16)
        for length in lengths:
            builder.add_document(np.ones(length, dtype=np.uint16), [int(length)])
        builder.finalize(f"{prefix}.idx")
        keys = np.zeros(len(lengths), dtype=budget.KEYS)
        keys["record"], keys["text"] = rng.integers(0, 2**63, len(lengths)), rng.integers(0, 2**63, len(lengths))
        (folder / f"{prefix.name}.keys").write_bytes(keys.tobytes())
        with gzip.open(f"{prefix}.ids.gz", "wt") as f:
            f.write("".join(f"<urn:uuid:{rank:08d}-{i:027d}>\n" for i in range(len(lengths))))
    config.tokenizer_dir().mkdir(parents=True)
    (config.tokenizer_dir() / "tokenizer.json").write_text("{}")
    (tmp_path / "config.json").write_text(config.model_dump_json())
    repo = Path(__file__).resolve().parents[1]
    out = subprocess.run([sys.executable, "-c", HELD, str(tmp_path / "config.json"), str(cap)], cwd=repo, check=True,
                         capture_output=True, text=True, env={**__import__("os").environ, "PYTHONPATH": str(repo)})
    grown = int(out.stdout.split()[-1])
    projected = BYTES_PER_UNIT["budget"] * budget_tokens_held(shard_tokens, config.dataset.tokens_per_arm)
    assert budget_tokens_held(shard_tokens, config.dataset.tokens_per_arm) == 2 * cap  # with the caps the task ran at
    assert grown <= projected, (grown, projected)
