"""The corpus an experiment builds does not depend on how its run is split: the same records in
three WARC files, run in one task per stage, and again in many (extraction in two tasks over the
three files, one of them reading the first and the last, so counts by reason first appear in
another order; several post-processing and finder tasks, MinHash's bucket merge one file at a
time, a token shard per post-processing task), train byte-identical SentencePiece tokenizers and
write byte-identical datasets (`.bin/.idx`, the selected record ids, the manifest) and ledgers.

An output root is never finished at another split than it was begun at: the resume is refused,
naming the stage and both splits (a stage's own tasks, or what its outputs are cut for)."""

import hashlib
import shutil
from pathlib import Path

import pytest

import corpus.flow.run
from conftest import make_config, output_hashes, split_warc
from corpus.accounting.ledger import accounted_text, ledgers, read_by_two_tasks, write_ledger
from corpus.flow.execute import SplitChanged, check_splits, record_splits
from corpus.flow.run import run_corpus
from corpus.flow.stages import corpus_stages
from corpus.read.inputs import resolve_inputs
from corpus.read.warc import INPUT_FILES, READ_WHOLE, read_input_files
from corpus.stage import rerun_task, unfinished_tasks

ARMS = {"traf": {"extractor": "trafilatura"}, "page": {"extractor": "html2text"}}
SPLITS = {"one": (1, 1, 1, 512), "many": (2, 4, 3, 1)}  # extraction, post-processing, finder tasks; MinHash batch files


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
    """sha256 of the tokenizer's and the datasets' files (not the token shards: one per task), and
    of the ledger."""
    files = [*(root / "tokenizer").glob("tokenizer*"), root / "datasets" / "manifest.json", root / "ledger.json",
             *(p for arm in ARMS for p in (root / "datasets" / arm).glob(f"{arm}_text_document.*")),
             *(root / "datasets" / arm / "selected_ids.txt.gz" for arm in ARMS)]
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(files)}


@pytest.mark.slow
def test_every_split_writes_the_same_tokenizer_and_datasets(tmp_path, sample_dir):
    parts = split_warc(sample_dir / "sample.warc.gz", tmp_path / "parts", 3)
    written = {}
    for split in SPLITS:
        config = experiment(tmp_path, parts, split)
        run_corpus(config)
        write_ledger(config)
        written[split] = corpus_bytes(config.output_root)
        shards = {arm: len(list((config.dataset_dir(arm) / "tokens").glob("*.idx"))) for arm in ARMS}
        assert shards == {arm: SPLITS[split][1] for arm in ARMS}
    assert len(written["one"]) == 2 + 3 + 2 * 3 and "tokenizer/tokenizer.json" in written["one"]
    for path, sha256 in written["one"].items():
        assert written["many"][path] == sha256, path


def extraction(root: Path, parts: list[str], tasks: int):
    return make_config(root, Path(parts[0]), {"page": {"extractor": "html2text", "resources": {"tasks": tasks}}},
                       inputs={"warc": parts})


@pytest.mark.slow
def test_an_extraction_resumed_at_another_split_is_refused_naming_the_stage_and_both_splits(tmp_path, sample_dir,
                                                                                           monkeypatch):
    parts = split_warc(sample_dir / "sample.warc.gz", tmp_path / "parts", 3)
    root = tmp_path / "out"
    [one] = run_corpus(extraction(root, parts, 1), until="extract")
    logs, before = extraction(root, parts, 3).arm_dir("page") / "logs", output_hashes(root)
    with pytest.raises(SplitChanged, match="extract-page: 1 task finished at tasks=1; the config now says tasks=3") as refused:
        run_corpus(extraction(root, parts, 3), until="extract")
    assert f"rm -r {logs / 'completions'}" in str(refused.value)
    assert output_hashes(root) == before and unfinished_tasks(logs, 3) == [1, 2]  # nothing run, nothing forgotten

    # as before the refusal: tasks 1 and 2 of 3 read again files task 0 of 1 read, and the ledger says so
    monkeypatch.setattr(corpus.flow.run, "check_splits", lambda stages: None)
    [mixed] = run_corpus(extraction(root, parts, 3), until="extract")
    assert mixed["records"] > one["records"] and mixed["balanced"]  # every document counted: balance alone says yes
    [ledger] = ledgers(extraction(root, parts, 3))
    assert "2 input files read by two tasks (the extraction ran at two splits)" in accounted_text(ledger)
    monkeypatch.undo()

    # the way out the message gives: the stage again whole at the new split, every record read once
    shutil.rmtree(logs / "completions")
    [three] = run_corpus(extraction(root, parts, 3), until="extract")
    assert (three["records"], three["documents_out"]) == (one["records"], one["documents_out"]) and three["balanced"]
    assert three["input_files"]["outcomes"] == {READ_WHOLE: 3}
    assert read_by_two_tasks(read_input_files(logs / INPUT_FILES)) is None

    # begun at 3 tasks, one finished: at 1 task the stage would look finished, two files never read
    for rank in (1, 2):
        rerun_task(logs, rank)
    with pytest.raises(SplitChanged, match="extract-page: 1 task finished at tasks=3; the config now says tasks=1"):
        run_corpus(extraction(root, parts, 1), until="extract")


def test_a_stage_whose_outputs_are_cut_for_another_split_of_the_next_is_refused(tmp_path, sample_dir):
    """Exact dedup's signatures are written a file per finder task: signatures cut for 3 finders
    are not read whole by 1."""
    def config(finders: int):
        return make_config(tmp_path / "out", sample_dir / "sample.warc.gz", {"page": {"extractor": "html2text"}},
                           postprocess={"exact_dedup": {"finder_tasks": finders}})

    base, paths_file = resolve_inputs(config(3))
    stages = corpus_stages(config(3), base, paths_file, until="postprocess")
    record_splits(stages)
    signatures = next(stage for stage in stages if stage.label == "exact-signatures-page")
    (signatures.logs / "completions").mkdir(parents=True)
    (signatures.logs / "completions" / "00000").touch()
    check_splits(corpus_stages(config(3), base, paths_file, until="postprocess"))  # the same split: resumed
    with pytest.raises(SplitChanged, match=r"exact-signatures-page: 1 task finished at tasks=1, "
                                           r"postprocess.exact_dedup.finder_tasks=3; the config now says tasks=1, "
                                           r"postprocess.exact_dedup.finder_tasks=1\n(.|\n)*rm -r .*exact-signatures"):
        check_splits(corpus_stages(config(1), base, paths_file, until="postprocess"))
