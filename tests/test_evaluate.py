"""A two-rung model ladder end to end on CPU, through the user's commands: `slurm/pretrain.sh`
trains two tiny decoder sizes per arm (the small one on a prefix of the same datasets),
`slurm/evaluate.sh` scores every exported checkpoint on the offline versions of the 13 benchmarks
and the clean-text tasks (gold main content of generated pages, two views), and
`evaluation.report` reports the larger rung and what the smaller one says about it."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from configs.experiment import ExperimentConfig
from conftest import build_pretrain_corpus, pretrain_experiment
from corpus.extractors.trafilatura.releases import installed_release
from evaluation.evaluate import pending
from evaluation.report import main as report_main
from evaluation.tasks.suite import load_suite

pytestmark = pytest.mark.slow


def test_a_two_rung_ladder_trains_evaluates_and_reports_through_the_slurm_scripts(tmp_path, capsys):
    build_pretrain_corpus(tmp_path / "out")
    # one torch thread each: a tiny model gains nothing from a second, and the suite runs a test on each core
    raw = pretrain_experiment(tmp_path / "out", training={"checkpoint_every": 1000, "cpu_threads": 1},
                              evaluation={"tasks": "offline", "offline_items": 6, "batch_size": 8, "max_gen_toks": 8,
                                          "cpu_threads": 1,
                                          "clean_text": {"sets": [{"name": "web", "generated": {"pages": 5, "seed": 11}}]}})
    small = {**raw["pretrain"].pop("model"), "seq_length": 128}  # room for the longest answers
    raw["pretrain"]["ladder"] = [
        {"name": "small", "model": small, "tokens": 2100, "seeds": raw["pretrain"].pop("seeds")},
        {"name": "large", "model": small | {"hidden_size": 48, "ffn_hidden_size": 96}, "seeds": [1]}]
    path = tmp_path / "exp.yaml"
    path.write_text(json.dumps(raw))
    config = ExperimentConfig.model_validate(raw)
    repo = Path(__file__).resolve().parents[1]
    env = os.environ | {"PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    for script in ("pretrain", "evaluate"):
        done = subprocess.run(["bash", f"slurm/{script}.sh", str(path)], cwd=repo, env=env, capture_output=True,
                              text=True, timeout=900)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    for rung, steps in (("small", 4), ("large", 7)):  # 2,100 and 4,000 tokens: 16 and 31 samples of 128, 4 a step
        one = config.for_rung(rung)
        for arm in config.arms:
            assert json.loads((one.run_dir(arm, 1) / "run.json").read_text())["steps"] == steps
    assert pending(config) == []  # a re-run has nothing to do
    suite = load_suite()
    for arm in config.arms:
        result_dir = next(config.for_rung("large").eval_dir(arm, 1).glob("step_*"))
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
    report_md = (config.report_dir() / "report.md").read_text()
    for b in suite.benchmarks:
        assert f"| {b.name} (" in report_md and f"| {b.name} (" not in printed
    assert "b − a" in printed and "## Missing" not in printed and "## Decision: each arm against a" in printed
    assert "## Clean text, bits per byte; lower is better" in report_md and "## Signal and noise" in report_md
    assert "## Format-dependent pairs" in report_md and "## Every pair of arms" in report_md
    report = json.loads((config.report_dir() / "report.json").read_text())
    clean = report["families"]["clean_text"]["finals"]["units"]["clean_text_web_plain"]
    assert {arm: len(v) for arm, v in clean.items()} == {"a": 1, "b": 1}
    assert "## What made these numbers" in printed and "every output: commit" in printed
    assert report["rung"] == "large" and report["ladder"]["evaluated"] == ["small", "large"]
    assert {r["pair"] for r in report["ladder"]["agreement"]["small"]["rows"]} == {"b − a"}
    assert "rungs: small (evaluated), large (headline)" in printed and "### Rung small" in report_md
    assert "No scaling fit: a fit goes through two rungs below large or more" in report_md  # one rung below
    assert f"- extractors: a: trafilatura {installed_release()}; b: trafilatura {installed_release()}" in printed
    for family in ("accuracy", "bpb", "p_gold", "clean_text"):
        assert (config.report_dir() / f"curves_{family}.png").stat().st_size > 0


def test_the_offline_task_index_holds_lm_evals_own_tasks_only_where_clean_text_names_them(tmp_path, sample_dir):
    """Offline, lm-eval's ~15,000-task index is skipped (every suite and clean-text task is a file
    of the project's); an lm-eval perplexity task named in `clean_text.lm_eval_tasks` still resolves."""
    from conftest import make_config
    from evaluation.evaluate import evaluated_tasks, task_manager

    def manager(lm_eval_tasks: list[str]):
        clean_text = {"sets": [{"name": "web", "generated": {"pages": 2, "seed": 11}}], "lm_eval_tasks": lm_eval_tasks}
        config = make_config(tmp_path / str(len(lm_eval_tasks)), sample_dir / "sample.warc.gz", {"a": {"extractor": "html2text"}},
                             evaluation={"tasks": "offline", "offline_items": 2, "clean_text": clean_text})
        return task_manager(config), config

    offline, config = manager([])
    shots = {b.shots for b in load_suite().benchmarks}
    assert {t for s in shots for t in evaluated_tasks(config, s)} <= set(offline.all_tasks)
    assert "wikitext" not in offline.all_tasks
    assert "wikitext" in manager(["wikitext"])[0].all_tasks
