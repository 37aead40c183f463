"""lm-eval end to end on CPU: a tiny trained-and-exported decoder on the offline versions of the
13 benchmarks and the clean-text tasks (gold main content of generated pages, two views), then the
report from those files."""

import json

import pytest

from configs.experiment import ExperimentConfig
from conftest import build_pretrain_corpus, pretrain_experiment
from corpus.extractors.trafilatura.releases import installed_release
from evaluation.evaluate import main as evaluate_main
from evaluation.evaluate import pending
from evaluation.report import main as report_main
from evaluation.tasks.suite import load_suite

pytestmark = pytest.mark.slow


def test_offline_suite_scores_every_benchmark_and_the_report_renders(tmp_path, capsys):
    from pretrain.train import train

    build_pretrain_corpus(tmp_path / "out")
    raw = pretrain_experiment(tmp_path / "out", training={"checkpoint_every": 1000},
                              evaluation={"tasks": "offline", "offline_items": 6, "batch_size": 8, "max_gen_toks": 8,
                                          "clean_text": {"sets": [{"name": "web", "generated": {"pages": 5, "seed": 11}}]}})
    raw["pretrain"]["model"] = {**raw["pretrain"]["model"], "seq_length": 128}  # room for the longest answers
    path = tmp_path / "exp.yaml"
    path.write_text(json.dumps(raw))
    config = ExperimentConfig.model_validate(raw)
    for arm in config.arms:
        train(config, arm, seed=1)
    assert len(pending(config)) == 2

    assert evaluate_main([str(path)]) == 0
    assert pending(config) == []  # a re-run has nothing to do
    suite = load_suite()
    for arm in config.arms:
        result_dir = next(config.eval_dir(arm, 1).glob("step_*"))
        results = json.loads((result_dir / "results.json").read_text())
        assert set(suite.all_tasks()) <= set(results["results"])
        for b in suite.benchmarks:
            for task in b.form(suite.headline):
                assert f"{b.score},none" in results["results"][task], (task, results["results"][task])
                assert len((result_dir / f"samples_{task}.jsonl").read_text().splitlines()) == 6
        assert results["arm"] == arm and results["step"] > 0
        for view in ("plain", "markdown"):  # in the same lm-eval call, offline
            assert results["results"][f"clean_text_web_{view}"]["bits_per_byte,none"] > 0
            assert len((result_dir / f"samples_clean_text_web_{view}.jsonl").read_text().splitlines()) == 5

    assert report_main([str(path)]) == 0
    printed = capsys.readouterr().out  # the headline table and what made it; report.md has every benchmark
    report_md = (config.output_root / "report" / "report.md").read_text()
    for b in suite.benchmarks:
        assert f"| {b.name} (" in report_md and f"| {b.name} (" not in printed
    assert "b − a" in printed and "## Missing" not in printed and "## Decision: each arm against a" in printed
    assert "## Clean text, bits per byte; lower is better" in report_md and "## Signal and noise" in report_md
    assert "## Format-dependent pairs" in report_md and "## Every pair of arms" in report_md
    report = json.loads((config.output_root / "report" / "report.json").read_text())
    clean = report["families"]["clean_text"]["finals"]["units"]["clean_text_web_plain"]
    assert {arm: len(v) for arm, v in clean.items()} == {"a": 1, "b": 1}
    assert "## What made these numbers" in printed and "every output: commit" in printed
    assert f"- extractors: a: trafilatura {installed_release()}; b: trafilatura {installed_release()}" in printed
    for family in ("accuracy", "bpb", "p_gold", "clean_text"):
        assert (config.output_root / "report" / f"curves_{family}.png").stat().st_size > 0
