"""Reference-corpus arms (Parquet, JSONL, a Hugging Face dataset folder) and the gold bound, through
the whole corpus flow with an extractor arm: tokenizer, post-processing, the exact budget, the
ledger; then training, evaluation and the report (slow)."""

import gzip
import json
import random

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from configs.base import ConfigError
from configs.experiment import load_experiment
from conftest import PRETRAIN_MODEL, make_config
from corpus.accounting.ledger import READ, ROW_TITLES, arm_ledger, rows_by_name
from corpus.flow.run import run_corpus
from corpus.markdown import html2text_markdown
from corpus.read.reference_steps import ReferenceDraw
from corpus.sample import read_gold
from corpus.sample.text import Prose
from corpus.tokens.budget import manifest_path

BUDGET = 3000
CORPUS_DOCS = 400
SHARD_TOKENS = 1000  # a reference arm's files: its 1.2 x 3000 tokens (one read task) in four


def corpus_rows(seed: int) -> list[dict]:
    rng = random.Random(seed)
    return [{"doc_id": f"ref-{seed}-{i}", "content": "\n\n".join(Prose(rng).paragraph() for _ in range(2)),
             "url": f"https://reference{seed}.example.org/{i}"} for i in range(CORPUS_DOCS)]


def write_corpora(root):
    """The same kind of rows as three Parquet files, a JSONL.gz and a dataset folder."""
    (root / "parquet").mkdir(parents=True)
    rows = corpus_rows(1)
    for part in range(3):
        pq.write_table(pa.Table.from_pylist(rows[part::3]), root / "parquet" / f"part-{part}.parquet")
    with gzip.open(root / "corpus.jsonl.gz", "wt") as f:
        f.writelines(json.dumps({"text": r["content"], "id": r["doc_id"], "url": r["url"]}) + "\n" for r in corpus_rows(2))
    (root / "hub").mkdir()
    pq.write_table(pa.Table.from_pylist(corpus_rows(3)), root / "hub" / "train.parquet")


def arms(root, sample_dir) -> dict:
    return {
        "trafilatura": {"extractor": "trafilatura"},
        "gold": {"extractor": "gold", "gold": [str(sample_dir / "gold.jsonl")]},
        "parquet": {"corpus": "parquet", "paths": [str(root / "parquet" / "*.parquet")], "text_field": "content",
                    "id_field": "doc_id", "seed": 3},
        # through the experiment's post-processing, half of it drawn
        "jsonl": {"corpus": "jsonl", "paths": [str(root / "corpus.jsonl.gz")], "postprocess": True,
                  "sample_rate": 0.5, "seed": 1},
        "hub": {"corpus": "huggingface", "dataset": str(root / "hub"), "text_field": "content", "id_field": "doc_id"},
    }


def experiment(root, sample_dir, **sections) -> dict:
    return {"tokenizer": {"kind": "sentencepiece", "vocab_size": 600, "sample_chars_per_arm": 20000},
            "dataset": {"tokens_per_arm": BUDGET, "seed": 0, "reference_shard_tokens": SHARD_TOKENS},
            "postprocess": {"safety": {"banned_domains": ["blocked.example.com"]},
                            "minhash": {"num_buckets": 4, "hashes_per_bucket": 4}}, **sections}


@pytest.fixture(scope="module")
def flow(tmp_path_factory, sample_dir):
    root = tmp_path_factory.mktemp("reference")
    write_corpora(root)
    config = make_config(root / "out", sample_dir / "sample.warc.gz", arms(root, sample_dir), **experiment(root, sample_dir))
    run_corpus(config)
    return config


def output_docs(folder) -> dict[str, str]:
    return {(d := json.loads(line))["id"]: d["text"] for p in folder.glob("*.jsonl.gz") for line in gzip.open(p, "rt")}


@pytest.mark.slow
def test_every_arm_gets_exactly_the_budget(flow):
    manifest = json.loads(manifest_path(flow).read_text())
    assert set(manifest["arms"]) == set(flow.arms)
    for arm, entry in manifest["arms"].items():
        assert entry["tokens"] == BUDGET, arm


@pytest.mark.slow
def test_reference_arms_read_only_what_the_budget_needs(flow):
    for arm in ("parquet", "hub"):
        read = rows_by_name(arm_ledger(flow, arm))[READ]
        # stopped at 1.2 x the budget: a few dozen of the 400 documents, each ~100 tokens
        assert read["tokens_out"] >= 1.2 * BUDGET
        assert read["documents_in"] < CORPUS_DOCS / 4, read
        assert read["documents_in"] == read["documents_out"]
    # the seed orders the files: the draw starts in one of the three Parquet files
    ids = output_docs(flow.post_dir("parquet") / "output")
    assert len({int(i.split("-")[-1]) % 3 for i in ids}) == 1


@pytest.mark.slow
def test_a_reference_arm_is_tokenised_in_bounded_shards_a_task_each(flow):
    from megatron.core.datasets.indexed_dataset import IndexedDataset

    from corpus.flow.stages import corpus_stages
    from corpus.read.inputs import resolve_inputs

    stages = {stage.label: stage for stage in corpus_stages(flow, *resolve_inputs(flow))}
    for arm in ("parquet", "jsonl", "hub"):
        # one read task's 1.2 x 3,000 tokens (2 x with post-processing) in files of 1,000, each past
        # it by a document at most: 4 files (6), or one fewer where the documents fall that way
        files = flow.reference_arms[arm].files_written(flow.dataset)
        assert files == (6 if arm == "jsonl" else 4)
        read_files = sorted((flow.post_dir(arm) if arm != "jsonl" else flow.arm_dir(arm)).joinpath("output").glob("*.jsonl.gz"))
        assert files - 1 <= len(read_files) <= files, arm
        assert [p.name for p in read_files] == [f"00000_{n:05d}.jsonl.gz" for n in range(len(read_files))]
        # a task per file, in post-processing (jsonl) and tokenisation alike
        assert stages[f"tokenize-{arm}"].tasks == files
        if arm == "jsonl":
            assert stages["exact-signatures-jsonl"].tasks == stages["minhash-filter-jsonl"].tasks == files
        shards = [p for p in sorted((flow.dataset_dir(arm) / "tokens").glob("*.idx")) if p.with_suffix(".bin").stat().st_size]
        assert len(shards) <= len(read_files)  # post-processing (jsonl) may empty a file
        for shard in shards:
            dataset = IndexedDataset(str(shard.with_suffix("")))  # held: megatron unmaps the index when it goes
            lengths = dataset.sequence_lengths.copy()
            assert lengths.sum() - lengths[-1] < SHARD_TOKENS, (arm, shard.name)  # full only with its last document


@pytest.mark.slow
def test_ledger_follows_reference_arms_from_where_they_join(flow):
    for arm in flow.arms:
        ledger = arm_ledger(flow, arm)
        assert ledger["balanced"] and ledger["chained"], (arm, ledger["rows"])
    joined_after = [r["stage"] for r in arm_ledger(flow, "parquet")["rows"]]
    assert joined_after == [ROW_TITLES[READ], "token budget"]
    post = arm_ledger(flow, "jsonl")["rows"]
    assert post[0]["stage"] == ROW_TITLES[READ] and len(post) > 3  # then every post-processing step
    assert post[0]["removed"]["not drawn"] > 0


@pytest.mark.slow
def test_tokenizer_is_trained_on_extractor_arms_only(flow):
    stats = json.loads(next((flow.output_root / "logs" / "tokenizer" / "stats").glob("*.json")).read_text())
    sampled = {k.removeprefix("chars_") for step in stats for k in step["stats"] if k.startswith("chars_")}
    assert sampled == {"trafilatura"}


@pytest.mark.slow
def test_gold_arm_holds_exactly_the_gold_of_the_surviving_records(flow, sample_dir):
    gold = {row["id"]: row for row in read_gold(sample_dir / "gold.jsonl")}
    extracted = output_docs(flow.arm_dir("gold") / "output")
    # the gold arm sees the records the trafilatura arm sees; the sample's one page without gold
    # (HTML cut off mid-tag) is dropped as such
    summary = json.loads((flow.arm_dir("gold") / "summary.json").read_text())
    traf = json.loads((flow.arm_dir("trafilatura") / "summary.json").read_text())
    no_gold = [r for r in gold.values() if r["expect"] == "extract" and not r["gold_html"]]
    assert summary["balanced"] and summary["dropped"]["no_gold"] == len(no_gold) == 1
    seen = summary["records"] - summary["not_extracted"]
    assert seen == traf["records"] - traf["not_extracted"] == len(extracted) + len(no_gold)
    survived = output_docs(flow.post_dir("gold") / "output")
    assert 0 < len(survived) < len(extracted)
    for record_id, text in survived.items():
        assert text == html2text_markdown(gold[record_id]["gold_html"])


@pytest.mark.slow
def test_a_row_added_to_a_finished_run_gets_its_dataset_and_changes_no_other(flow):
    before = json.loads(manifest_path(flow).read_text())["arms"]
    extra = flow.arms["parquet"].model_copy(update={"seed": 4})
    bigger = flow.model_copy(update={"arms": {**flow.arms, "parquet_seed4": extra}})
    run_corpus(bigger)
    after = json.loads(manifest_path(flow).read_text())["arms"]
    assert set(after) == set(before) | {"parquet_seed4"} and after["parquet_seed4"]["tokens"] == BUDGET
    for arm, entry in before.items():
        assert (after[arm]["bin_sha256"], after[arm]["idx_sha256"]) == (entry["bin_sha256"], entry["idx_sha256"])


def test_bad_reference_arm_configs_fail_at_load_with_the_key(tmp_path, sample_dir):
    root = tmp_path
    (root / "c.jsonl").write_text("{}\n")
    good = {"corpus": "jsonl", "paths": [str(root / "c.jsonl")]}
    cases = [
        ({**good, "extractor": "trafilatura"}, "extraction options"),
        ({**good, "labeler": {"kind": "encoder"}}, "['labeler'] are extraction options"),
        ({**good, "colour": "red"}, "colour"),
        ({"corpus": "parquet", "paths": [str(root / "missing*.parquet")]}, "no file matches"),
        ({"corpus": "huggingface"}, "needs dataset"),
        ({"corpus": "huggingface", "dataset": "HuggingFaceFW/fineweb", "paths": ["x"]}, "paths are for"),
        ({"corpus": "csv", "paths": [str(root / "c.jsonl")]}, "corpus"),
    ]
    for arm, message in cases:
        path = root / "exp.yaml"
        path.write_text(json.dumps({"name": "t", "output_root": str(root / "out"),
                                    "inputs": {"warc": [str(sample_dir / "sample.warc.gz")]},
                                    "arms": {"trafilatura": {"extractor": "trafilatura"}, "ref": arm},
                                    **experiment(root, sample_dir)}))
        with pytest.raises(ConfigError, match="arms.ref") as err:
            load_experiment(path)
        assert message in str(err.value), (arm, str(err.value))


def test_arms_that_need_their_context_fail_at_load(tmp_path, sample_dir):
    from pydantic import ValidationError

    from configs.experiment import ExperimentConfig

    warc = sample_dir / "sample.warc.gz"
    (tmp_path / "c.jsonl").write_text("{}\n")
    reference = {"corpus": "jsonl", "paths": [str(tmp_path / "c.jsonl")]}
    with pytest.raises(ValidationError, match="without a dataset section give max_documents"):
        make_config(tmp_path, warc, {"t": {"extractor": "trafilatura"}, "ref": reference})
    with pytest.raises(ValidationError, match="at least one extractor arm"):
        make_config(tmp_path, warc, {"ref": reference | {"max_documents": 10}})
    with pytest.raises(ValidationError, match="extractor: gold needs `gold` files"):
        make_config(tmp_path, warc, {"gold": {"extractor": "gold"}})
    config = ExperimentConfig.model_validate({"name": "t", "output_root": str(tmp_path), "inputs": {"sample": {"files": 2}},
                                              "arms": {"gold": {"extractor": "gold"}}})
    assert config.arms["gold"].gold == [str(tmp_path / "sample" / f"0000{i}" / "gold.jsonl") for i in range(2)]


@pytest.mark.slow
def test_preflight_reads_the_first_document_of_every_reference_corpus(flow):
    from bench.preflight import reference_checks

    checks = {c["check"]: c for c in reference_checks(flow)}
    assert all(checks[f"reference corpus ({arm})"]["ok"] for arm in ("parquet", "jsonl", "hub")), checks
    wrong = flow.arms["parquet"].model_copy(update={"text_field": "body"})
    (check,) = reference_checks(flow.model_copy(update={"arms": {"parquet": wrong}}))
    assert not check["ok"] and "no text in 'body'" in check["detail"] and "text_field" in check["fix"]


def test_reference_draw_is_seeded_and_independent_of_order():
    draw = ReferenceDraw(0.3, seed=5)
    ids = [f"doc-{i}" for i in range(2000)]
    kept = {i for i in ids if draw.kept(i)}
    assert kept == {i for i in reversed(ids) if ReferenceDraw(0.3, seed=5).kept(i)}
    assert kept != {i for i in ids if ReferenceDraw(0.3, seed=6).kept(i)}
    assert 0.25 < len(kept) / len(ids) < 0.35


@pytest.mark.slow
def test_reference_and_gold_arms_train_evaluate_and_report(flow, tmp_path, capsys):
    from evaluation.evaluate import main as evaluate_main
    from evaluation.report import main as report_main
    from pretrain.train import train

    raw = json.loads(flow.model_dump_json())
    raw["pretrain"] = {"model": PRETRAIN_MODEL | {"seq_length": 128}, "seeds": [1],
                       "training": {"global_batch_size": 2, "micro_batch_size": 2, "lr": 3e-3, "checkpoint_every": 1000}}
    raw["evaluation"] = {"tasks": "offline", "offline_items": 4, "batch_size": 8, "max_gen_toks": 8}
    path = tmp_path / "exp.yaml"
    path.write_text(json.dumps(raw))
    config = load_experiment(path)
    for arm in config.arms:
        train(config, arm, seed=1)
    assert evaluate_main([str(path)]) == 0
    assert report_main([str(path)]) == 0
    printed = capsys.readouterr().out
    for arm in ("gold", "parquet", "jsonl", "hub"):
        assert f"{arm} − trafilatura" in printed
    assert "| parquet | corpus: parquet files |" in (config.report_dir() / "report.md").read_text()
