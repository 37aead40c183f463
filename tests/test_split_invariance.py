"""The corpus an experiment builds does not depend on how its run is split: the same records in
three WARC files, run in one task per stage, and again in many (extraction per file, several
post-processing and finder tasks, MinHash's bucket merge one file at a time, a token shard per
post-processing task), train byte-identical SentencePiece tokenizers and write byte-identical
datasets (`.bin/.idx`, the selected record ids, the manifest)."""

import hashlib
from pathlib import Path

import pytest

from conftest import make_config, split_warc
from corpus.flow.run import run_corpus

pytestmark = pytest.mark.slow
ARMS = {"traf": {"extractor": "trafilatura"}, "page": {"extractor": "html2text"}}
SPLITS = {"one": (1, 1, 1, 512), "many": (3, 4, 3, 1)}  # extraction, post-processing, finder tasks; MinHash batch files


def experiment(root: Path, parts: list[str], split: str):
    extraction, post, finders, batch = SPLITS[split]
    return make_config(root / split, Path(parts[0]), {arm: {**options, "resources": {"tasks": extraction}}
                                                      for arm, options in ARMS.items()},
                       inputs={"warc": parts},
                       # a sample smaller than an arm's text, so that which documents it takes matters
                       tokenizer={"kind": "sentencepiece", "vocab_size": 600, "sample_chars_per_arm": 8000},
                       dataset={"tokens_per_arm": 3000, "seed": 3},
                       postprocess={"resources": {"tasks": post, "workers": 1}, "exact_dedup": {"finder_tasks": finders},
                                    "minhash": {"num_buckets": 4, "hashes_per_bucket": 4, "batch_files": batch}})


def corpus_bytes(root: Path) -> dict[str, str]:
    """sha256 of the tokenizer's and the datasets' files (not the token shards: one per task)."""
    files = [*(root / "tokenizer").glob("tokenizer*"), root / "datasets" / "manifest.json",
             *(p for arm in ARMS for p in (root / "datasets" / arm).glob(f"{arm}_text_document.*")),
             *(root / "datasets" / arm / "selected_ids.txt.gz" for arm in ARMS)]
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(files)}


def test_every_split_writes_the_same_tokenizer_and_datasets(tmp_path, sample_dir):
    parts = split_warc(sample_dir / "sample.warc.gz", tmp_path / "parts", 3)
    written = {}
    for split in SPLITS:
        config = experiment(tmp_path, parts, split)
        run_corpus(config)
        written[split] = corpus_bytes(config.output_root)
        shards = {arm: len(list((config.dataset_dir(arm) / "tokens").glob("*.idx"))) for arm in ARMS}
        assert shards == {arm: SPLITS[split][1] for arm in ARMS}
    assert len(written["one"]) == 1 + 3 + 2 * 3 and "tokenizer/tokenizer.json" in written["one"]
    assert written["many"] == written["one"]
