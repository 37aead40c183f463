"""The report's maths on hand-made result files: known scores in, known tables and intervals out."""

import json

import numpy as np
import pytest

from configs.experiment import ExperimentConfig
from conftest import pretrain_experiment
from evaluation.report import build_report, category_means, centered, final_runs, load_runs, main, paired_bootstrap
from evaluation.suite import load_suite

SUITE = load_suite()


def write_run(config, arm, seed, step, items: dict[str, np.ndarray]) -> None:
    """results.json and samples_<task>.jsonl with the given per-document scores of every task."""
    out = config.eval_dir(arm, seed) / f"step_{step:07d}"
    out.mkdir(parents=True)
    results = {}
    for task, values in items.items():
        metric = SUITE.benchmark_of(task).score
        results[task] = {f"{metric},none": float(np.mean(values))}
        with open(out / f"samples_{task}.jsonl", "w") as f:
            for i, v in enumerate(values):
                f.write(json.dumps({"doc_id": i, metric: float(v)}) + "\n")
    (out / "results.json").write_text(json.dumps({
        "results": results, "group_subtasks": {}, "arm": arm, "seed": seed, "step": step}))


def config_for(tmp_path, seeds=(1, 2, 3)) -> ExperimentConfig:
    raw = pretrain_experiment(tmp_path)
    raw["pretrain"]["seeds"] = list(seeds)
    return ExperimentConfig.model_validate(raw)


def constant_items(score: float, n: int = 200) -> np.ndarray:
    values = np.zeros(n)
    values[: round(score * n)] = 1.0
    return values


def test_category_and_average_means_follow_the_suite():
    scores = {b.name: 0.5 for b in SUITE.benchmarks}
    scores["MMLU"] = 0.25
    means = category_means(scores, SUITE)
    knowledge = [b for b in SUITE.benchmarks if b.category == "knowledge"]
    assert means["knowledge"] == pytest.approx((0.25 + 0.5 * (len(knowledge) - 1)) / len(knowledge))
    assert means["reasoning"] == means["reading"] == 0.5
    assert means["average"] == pytest.approx((0.25 + 0.5 * 12) / 13)
    assert len(SUITE.benchmarks) == 13
    scores["CoQA"] = None
    assert category_means(scores, SUITE)["reading"] is None and category_means(scores, SUITE)["knowledge"] is not None


def test_centered_accuracy_maps_chance_to_zero_and_perfect_to_one():
    mmlu = next(b for b in SUITE.benchmarks if b.name == "MMLU")
    assert centered(0.25, mmlu) == 0 and centered(1.0, mmlu) == 1 and centered(0.625, mmlu) == pytest.approx(0.5)


def test_seed_means_spreads_and_final_checkpoints(tmp_path):
    config = config_for(tmp_path)
    for seed, score in zip((1, 2, 3), (0.4, 0.5, 0.6), strict=True):
        write_run(config, "a", seed, 10, {t: constant_items(0.1) for t in SUITE.all_tasks()})  # an earlier step
        write_run(config, "a", seed, 20, {t: constant_items(score) for t in SUITE.all_tasks()})
    report = build_report(config, SUITE, replicates=200)
    average = report["table"]["a"]["columns"]["average"]
    assert [round(v, 6) for v in average] == [0.4, 0.5, 0.6]  # the final step of each seed
    assert report["table"]["a"]["steps"] == [20, 20, 20]
    assert "b seed 1: no evaluated checkpoint" in report["missing"]
    assert len(report["curves"]["a"]) == 2  # one point per training-token count


def test_bootstrap_interval_covers_a_known_difference_and_excludes_zero(tmp_path):
    config = config_for(tmp_path)
    rng = np.random.default_rng(0)
    for seed in (1, 2, 3):
        base = {t: (rng.random(400) < 0.4).astype(float) for t in SUITE.all_tasks()}
        better = {}
        for t, v in base.items():  # arm b gets 60 more documents right in every task: +0.15
            w = v.copy()
            w[np.flatnonzero(w == 0)[:60]] = 1.0
            better[t] = w
        write_run(config, "a", seed, 5, base)
        write_run(config, "b", seed, 5, better)
    finals = final_runs(load_runs(config))
    result = paired_bootstrap(finals["a"], finals["b"], SUITE, SUITE.headline, replicates=500)
    average = result["columns"]["average"]
    assert average["difference"] == pytest.approx(0.15)
    assert average["ci_low"] <= 0.15 <= average["ci_high"] and average["significant"]
    assert all(d["significant"] for d in result["benchmarks"].values())
    assert result["seeds"] == [1, 2, 3]


def test_bootstrap_interval_includes_zero_without_a_difference(tmp_path):
    config = config_for(tmp_path, seeds=(1,))
    rng = np.random.default_rng(1)
    write_run(config, "a", 1, 5, {t: (rng.random(300) < 0.5).astype(float) for t in SUITE.all_tasks()})
    write_run(config, "b", 1, 5, {t: (rng.random(300) < 0.5).astype(float) for t in SUITE.all_tasks()})
    finals = final_runs(load_runs(config))
    average = paired_bootstrap(finals["a"], finals["b"], SUITE, SUITE.headline, replicates=500)["columns"]["average"]
    assert average["ci_low"] < 0 < average["ci_high"] and not average["significant"]


def test_report_renders_partial_results_and_writes_its_files(tmp_path, capsys):
    config = config_for(tmp_path, seeds=(1,))
    items = {t: constant_items(0.5) for t in SUITE.all_tasks() if t != "coqa"}
    write_run(config, "a", 1, 5, items)
    path = tmp_path / "exp.yaml"
    path.write_text(json.dumps(pretrain_experiment(tmp_path)))
    assert main([str(path)]) == 0
    printed = capsys.readouterr().out
    assert "tasks missing ['coqa']" in printed and "b seed 1: no evaluated checkpoint" in printed
    report = config.output_root / "report"
    for name in ("report.md", "report.json", "summary.csv", "tasks.csv", "curves_average.png", "curves_categories.png"):
        assert (report / name).stat().st_size > 0
