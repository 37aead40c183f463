"""The planner: a pilot of a few generated WARC files predicts the full run, and a config whose
inputs fall short is refused by `plan` and by `slurm/extract.sh` unless overridden."""

import json
import subprocess
from pathlib import Path

import pytest
import yaml

from configs.experiment import load_experiment
from corpus.accounting.ledger import arm_ledger, rows_by_name
from corpus.extractors.trafilatura.releases import installed_release
from corpus.flow.pilot import folder_bytes
from corpus.flow.plan import check_plan
from corpus.flow.plan import main as plan_main
from corpus.flow.stages import corpus_stages
from corpus.flow.verdict import verdict, yield_interval
from corpus.read.inputs import resolve_inputs

REPO = Path(__file__).resolve().parents[1]


def experiment(root: Path, tokens_per_arm: int) -> dict:
    return {
        "name": "plan-test", "output_root": str(root), "inputs": {"sample": {"pages": 40, "seed": 0, "files": 6}},
        "arms": {"trafilatura": {"extractor": "trafilatura"}, "resiliparse": {"extractor": "resiliparse"}},
        "postprocess": {"gopher_quality": {"max_non_alpha_words_ratio": 0.7}, "minhash": {"num_buckets": 4},
                        "safety": {"banned_domains": ["blocked.example.com"]}},
        "tokenizer": {"kind": "sentencepiece", "vocab_size": 1000, "sample_chars_per_arm": 50_000},
        "dataset": {"tokens_per_arm": tokens_per_arm},
        "pretrain": {"model": "tiny", "seeds": [1, 2],
                     "training": {"global_batch_size": 2, "micro_batch_size": 1, "checkpoint_every": 20}},
        "evaluation": {"tasks": "offline"},
        "plan": {"pilot_files": 3},
    }


def write(path: Path, raw: dict) -> Path:
    path.write_text(yaml.safe_dump(raw))
    return path


def test_the_sample_generator_writes_several_warc_files(tmp_path):
    config = load_experiment(write(tmp_path / "exp.yaml", experiment(tmp_path / "out", 1000)))
    base, paths_file = resolve_inputs(config)
    paths = paths_file.read_text().split()
    assert len(paths) == 6 and all((Path(base) / p).is_file() for p in paths)
    assert all((Path(base) / p).with_name("gold.jsonl").is_file() for p in paths)
    assert len({(Path(base) / p).read_bytes() for p in paths}) == 6  # each file its own seed


def test_the_verdict_needs_the_interval_lower_bound_to_reach_the_budget():
    y = yield_interval([900, 1000, 1100], 0.95)  # mean 1000, sd 100, t(0.975, 2) = 4.303
    assert y["low"] == pytest.approx(1000 - 4.302653 * 100 / 3 ** 0.5, rel=1e-6)
    ok = verdict({"a": y}, input_files=20, budget=10_000)
    assert not ok["short"] and ok["files_needed"] == 14  # ceil(10,000 / 751.6)
    short = verdict({"a": y, "b": y | {"low": 100.0}}, input_files=20, budget=10_000, snapshots=4)
    assert short["short"] and short["binding_arm"] == "b" and short["files_needed"] == 100
    assert short["files_needed_per_snapshot"] == 25


@pytest.mark.slow
def test_a_pilot_predicts_the_full_run_and_short_inputs_are_refused(tmp_path):
    root = tmp_path / "out"
    config_path = write(tmp_path / "exp.yaml", experiment(root, 20_000))
    assert plan_main([str(config_path)]) == 0
    plan = json.loads((root / "plan" / "plan.json").read_text())
    assert len(plan["pilot"]["files"]) == 3 and all(f["balanced"] for a in plan["pilot"]["arms"].values() for f in a["files"])
    assert {source for _, source in plan["rates"]["arms"]["trafilatura"].values()} == {"pilot (generated pages)"}
    assert plan["rates"]["extractor_versions"]["trafilatura"] == {"trafilatura": installed_release()}  # whose rates
    assert plan["costs"]["totals"]["gpu_hours"] > 0
    piloted = plan["pilot"]["arms"]["trafilatura"]
    assert 0 < piloted["digest_seconds"] < piloted["cpu_seconds"]["extraction"]  # the digest checks, priced
    assert {n["stage"] for n in plan["global_stages"]} == {"exact-find", "minhash-buckets", "minhash-cluster", "tokenizer",
                                                           "budget"}
    footprint = plan["footprint"]
    assert footprint["fits"] is not None and footprint["submissions"] == 1  # no queue limit: one submission
    assert next(r for r in footprint["stages"] if r["stage"] == "minhash-buckets-trafilatura")["temporary_bytes"] > 0

    # the same inputs against a budget they cannot reach: plan exits 1, extract refuses
    short_path = write(tmp_path / "short.yaml", experiment(root, 5_000_000))
    assert plan_main([str(short_path)]) == 1
    short_config = load_experiment(short_path)
    message = check_plan(short_config, resolve_inputs(short_config)[1])
    assert "short of dataset.tokens_per_arm = 5,000,000" in message and "files" in message
    refused = subprocess.run(["bash", "slurm/extract.sh", str(short_path)], cwd=REPO, capture_output=True, text=True)
    assert refused.returncode == 2 and "refused before any work" in refused.stderr and "--allow-short" in refused.stderr
    assert not (root / "extract").exists()

    # the override runs the whole flow; it stops, correctly, at the budget: the post-processed
    # tokens of every arm fall inside the plan's projected interval
    allowed = subprocess.run(["bash", "slurm/extract.sh", str(short_path), "--allow-short"], cwd=REPO,
                             capture_output=True, text=True)
    assert allowed.returncode == 2 and "lower dataset.tokens_per_arm" in allowed.stderr, allowed.stderr[-2000:]
    config = load_experiment(short_path)
    for arm in config.arms:
        tokens = rows_by_name(arm_ledger(config, arm))["minhash"]["tokens_out"]
        projected = plan["verdict"]["arms"][arm]["projected_tokens"]
        assert projected["low"] <= tokens <= projected["high"], (arm, tokens, projected)
    # and each stage's storage, projected from 3 files to 6, is what the run wrote, within the files' spread
    stages = corpus_stages(config, *resolve_inputs(config))
    projected = {r["stage"]: r["final_bytes"] for r in footprint["stages"]}
    for stage in stages:
        if stage.outputs and stage.name not in ("tokenizer", "budget"):
            written = sum(folder_bytes(folder) for folder in stage.outputs)
            assert 0.5 * projected[stage.label] <= written <= 2 * projected[stage.label], (stage.label, written)


def test_an_arm_not_piloted_here_is_priced_from_the_assumed_labeler_rate(tmp_path):
    from corpus.flow.pricing import costs, labeler_lines, rates

    raw = experiment(tmp_path / "out", 1_000_000)
    raw["arms"] = {"trafilatura": {"extractor": "trafilatura"},
                   "dripper": {"extractor": "dripper", "labeler": {"kind": "vllm"},
                               "resources": {"workers": 4, "gpus_per_task": 1}}}
    config = load_experiment(write(tmp_path / "exp.yaml", raw))
    per_file = {"records": 100, "not_extracted": 10, "sent_to_labeler": 0, "prefiltered": 6, "tokens": 1000, "documents": 50,
                "stages": [{"stage": "extraction", "documents_out": 90, "tokens_out": 3000}]}
    pilot = {"pages": "generated", "arms": {"trafilatura": {"files": [per_file, per_file],
                                      "cpu_seconds": {"extraction": 4.0, "postprocess": 10.0}, "digest_seconds": 0.2,
                                      "bytes": {"extracted": 200, "intermediate": 300, "removed": 50, "post_processed": 100}}}}
    r = rates(config, pilot, None, vocab_size=1000)
    assert r["arms"]["dripper"]["labeler_prompt_tokens_per_gpu_s"] == (
        3.08 * 6960, "assumed: plan.labeler_prompt_tokens_per_gpu_s, the paper's A100 rate")
    assert r["arms"]["dripper"]["labeler_prompt_tokens_per_page"] == (6960, "config (plan.labeler_prompt_tokens_per_page)")
    assert r["arms"]["trafilatura"]["extraction_pages_per_core_s"] == (50.0, "pilot (generated pages)")  # 200 records / 4 s
    stages = {(s["stage"], s["arm"]): s for s in costs(config, pilot, r, input_files=1000, vocab_size=1000)["stages"]}
    dripper = stages[("extraction", "dripper")]
    assert dripper["gpu_hours"] == pytest.approx(1000 * 90 / 3.08 / 3600)  # pages past the guard, per file
    assert dripper["wall_hours"] == pytest.approx(dripper["gpu_hours"] / 4)  # 4 tasks of one GPU at once
    assert stages[("extraction", "trafilatura")]["cpu_hours"] == pytest.approx(1000 * 2.0 / 3600)
    # 0.1 s a file of its 2.0 s checks the records' digests
    assert stages[("extraction", "trafilatura")]["note"] == ("0.0278 CPU-h of it (5.0%) checking WARC digests "
                                                            "(inputs.verify_digests)")
    assert stages[("post-processing", "dripper")]["bytes"] == 1000 * 450 // 2  # pilot totals over its 2 files
    line = labeler_lines(config, pilot, r, input_files=1000)["dripper"]  # the pages the pre-filter saves
    assert (line["pages_per_file"], line["pages_per_file_without_prefilter"]) == (90, 96)
    assert line["gpu_hours_without_prefilter"] == pytest.approx(1000 * 96 / 3.08 / 3600)


def pilot_arm(extracted: int, near: int, final: int, clustered: float, files: int = 4) -> dict:
    """A pilot's figures for one arm: documents per file entering each ledger row, the CPU seconds
    per document of its whole-arm stages (those of bench.global_stages), and the bytes each stage
    wrote (~4 kB a document of text)."""
    rows = [{"stage": "extraction", "documents_in": 30_000, "documents_out": extracted},
            {"stage": "MinHash dedup", "documents_in": near, "documents_out": final}]
    text = 4_000 * files
    return {"files": [{"stages": rows, "documents": final, "tokens": final * 1_500}] * files,
            "clustered": int(clustered * near * files),
            "stage_cpu_seconds": {"exact-find": 3e-6 * extracted * files, "minhash-buckets": 3e-6 * near * files,
                                  "minhash-cluster": 4e-6 * clustered * near * files},
            "bytes": {"extracted": text * extracted, "post_processed": text * final},
            "signature_bytes": 14 * 68 * near * files,
            "stage_bytes": {"exact-signatures": 48 * extracted * files, "exact-find": 1_000, "filter": text * near,
                            "minhash-signatures": 14 * 68 * near * files, "minhash-buckets": 100 * near * files,
                            "minhash-cluster": 4 * near * files, "minhash-filter": text * final}}


PAPER_PILOT = {"arms": {"trafilatura": pilot_arm(26_000, 9_000, 7_500, 0.1), "dripper": pilot_arm(25_000, 8_500, 7_000, 0.1)}}


def test_the_paper_config_fits_its_nodes_at_the_paper_shape_and_a_small_node_is_named():
    from configs.base import TaskResources
    from corpus.flow.fit import global_stage_needs, what_does_not_fit

    config = load_experiment(REPO / "configs" / "paper.yaml")
    pilot = PAPER_PILOT
    needs = {n["stage"]: n for n in global_stage_needs(config, pilot, input_files=46_400)}
    assert what_does_not_fit(list(needs.values())) == []
    cluster = needs["minhash-cluster"]  # the pilot's 10% raised to the assumed share of near duplicates at scale
    assert cluster["units_per_task"] == pytest.approx(0.5 * 9_000 * 46_400) and cluster["memory_gb"] > 20
    assert needs["minhash-buckets"]["open_files"] == -(-46_400 // 512)

    post = config.postprocess.model_copy(update={"minhash": config.postprocess.minhash.model_copy(
        update={"cluster_resources": TaskResources(mem_per_cpu_gb=16), "batch_files": 16})})
    small = config.model_copy(update={"postprocess": post})
    problems = what_does_not_fit(global_stage_needs(small, pilot, input_files=46_400))
    assert any(p.startswith("minhash-cluster needs") and "postprocess.minhash.cluster_resources" in p for p in problems)
    assert any(p.startswith("minhash-buckets would hold 2,900 files open") for p in problems)


def test_the_paper_config_is_projected_whole_reference_arms_queue_and_storage(tmp_path):
    from corpus.flow.fit import global_stage_needs, what_does_not_fit
    from corpus.flow.storage import stage_footprint

    config = load_experiment(REPO / "configs" / "paper.yaml")
    paths = tmp_path / "warc_paths.txt"
    paths.write_text("".join(f"crawl-data/{i}.warc.gz\n" for i in range(46_400)))
    stages = corpus_stages(config, config.inputs.common_crawl.base_url, paths)
    footprint = stage_footprint(config, stages, PAPER_PILOT, 46_400, 32_000)
    rows = {r["stage"]: r for r in footprint["stages"]}
    assert set(rows) == {stage.label for stage in stages}
    # a reference arm: 32 read tasks, each writing its 2.36e9 tokens in files of 250M: 320 tokenisation tasks
    assert rows["read-fineweb"]["tasks"] == 32 and rows["tokenize-fineweb"]["tasks"] == 32 * 10
    assert rows["tokenize-fineweb"]["final_bytes"] == pytest.approx(1.2 * 63e9 * 2, rel=0.1)
    assert rows["minhash-buckets-dripper"]["temporary_bytes"] > 0.5 * rows["minhash-signatures-dripper"]["final_bytes"]
    # the queue: never more than the site allows at once, every task submitted
    assert footprint["largest_submission"] <= config.executor.max_queued_tasks
    assert footprint["tasks"] == sum(stage.tasks for stage in stages) and footprint["submissions"] > 1
    # every stage that sees a whole arm fits its configured node, the budget with a reference shard included
    needs = {n["stage"]: n for n in global_stage_needs(config, PAPER_PILOT, input_files=46_400)}
    assert what_does_not_fit(list(needs.values())) == []
    assert "250,000,000 tokens" in needs["budget"]["unit"] and needs["budget"]["memory_gb"] <= 8


SHARED_SETS = Path(__file__).resolve().parents[2] / "shared" / "data" / "extraction"


@pytest.mark.slow
@pytest.mark.skipif(not SHARED_SETS.is_dir(), reason="needs ../shared/data/extraction (the annotated page sets)")
def test_a_pilot_on_real_pages_gives_real_page_rates_and_the_labelers_prompt_tokens(tmp_path, random_model, stub_server,
                                                                                      capsys):
    from corpus.sample import write_annotated_sample

    sets = [SHARED_SETS / name / "pages.jsonl.gz" for name in ("cleaneval", "dragnet", "trafilatura-eval")]
    # four pages a set: each of the two files still gets English pages for the labeler and two of
    # trafilatura-eval's German ones for the pre-filter to keep from it
    warcs = [str(w) for w in write_annotated_sample(tmp_path / "real", sets, max_pages=4, files=2)]
    raw = experiment(tmp_path / "out", 20_000)
    raw["inputs"] = {"warc": warcs}
    raw["arms"] = {"trafilatura": {"extractor": "trafilatura"},
                   "dripper": {"extractor": "dripper", "batch_pages": 8,
                               "labeler": {"kind": "endpoint", "url": stub_server, "model": "stub",
                                           "tokenizer": str(random_model)}}}
    plan_main([str(write(tmp_path / "exp.yaml", raw)), "--pilot-warc", *warcs])
    plan = json.loads((tmp_path / "out" / "plan" / "plan.json").read_text())
    assert plan["pilot"]["pages"] == "annotated"
    assert {source for _, source in plan["rates"]["arms"]["trafilatura"].values()} == {"pilot (annotated pages)"}
    line = plan["labelers"]["dripper"]
    tokens, source = line["prompt_tokens_per_page"]
    assert tokens > 200 and source == f"pilot ({random_model}'s tokenizer)"
    # trafilatura-eval's pages are mostly not English: the pre-filter keeps them from the labeler
    assert line["pages_per_file_without_prefilter"] > line["pages_per_file"] > 0
    assert line["gpu_hours_without_prefilter"] > line["gpu_hours"] > 0
    printed = capsys.readouterr().out
    assert "dripper labeler:" in printed and "without the language pre-filter" in printed and "generated" not in printed


def test_a_drafted_labeler_is_priced_at_its_measured_rate_and_says_which_rate_it_is(tmp_path):
    from corpus.flow.pricing import labeler_rates

    raw = experiment(tmp_path / "out", 1_000_000)
    raw["arms"] = {"dripper": {"extractor": "dripper", "labeler": {"kind": "vllm", "draft_model": "/cluster/models/draft"}}}
    config = load_experiment(write(tmp_path / "exp.yaml", raw))
    assert config.arms["dripper"].labeler.drafted  # a cluster path need not exist where the run is planned
    plain = {"pages_per_s_per_gpu": 10.0, "prompt_tokens_per_page": 7000.0, "model": "m"}
    preflight = {"gpu": "NVIDIA H100", "labeler": plain | {"drafted": {"pages_per_s_per_gpu": 30.0}}}
    assert labeler_rates(config, "dripper", {"arms": {}}, preflight)["labeler_prompt_tokens_per_gpu_s"] == (
        210_000.0, "measured: preflight on NVIDIA H100, m, with its draft")
    measured_plain = {"gpu": "NVIDIA H100", "labeler": plain}
    assert labeler_rates(config, "dripper", {"arms": {}}, measured_plain)["labeler_prompt_tokens_per_gpu_s"] == (
        70_000.0, "measured: preflight on NVIDIA H100, m, plain decoding; the draft's rate not measured, so not in it")
    assert labeler_rates(config, "dripper", {"arms": {}}, None)["labeler_prompt_tokens_per_gpu_s"] == (
        3.08 * 6960, "assumed: plan.labeler_prompt_tokens_per_gpu_s, the paper's A100 rate; the draft's speed-up not in it")
