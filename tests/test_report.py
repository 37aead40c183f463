"""The report's maths on hand-made result files: known scores in, known tables, intervals, notes out."""

import json
import warnings

import numpy as np
import pytest

from configs.experiment import ExperimentConfig
from conftest import metric_samples, pretrain_experiment, write_eval_run
from evaluation.decisions import decision_rows
from evaluation.headline import category_means, centered
from evaluation.markdown import mdd_lines, report_markdown
from evaluation.report import build_report, main
from evaluation.tasks.suite import load_suite

SUITE = load_suite()
CLEAN = {"clean_text": {"sets": [{"name": "web", "generated": {"pages": 4, "seed": 11}}]}}


def write_run(config, arm, seed, step, items: dict[str, np.ndarray], **kwargs):
    """Every suite task's per-document score (under its benchmark's metric)."""
    write_eval_run(config, arm, seed, step, {t: metric_samples(SUITE.benchmark_of(t).score, v) for t, v in items.items()},
                   **kwargs)


def config_for(tmp_path, seeds=(1, 2, 3), **evaluation) -> ExperimentConfig:
    raw = pretrain_experiment(tmp_path, evaluation=evaluation or {})
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
    report = build_report(config, SUITE)
    average = report["table"]["a"]["columns"]["average"]
    assert [round(v, 6) for v in average] == [0.4, 0.5, 0.6]  # the final step of each seed
    assert report["table"]["a"]["steps"] == [20, 20, 20] and report["compared_steps"] == [20]
    assert "b seed 1: no evaluated checkpoint" in report["missing"]
    accuracy = report["families"]["accuracy"]
    assert set(accuracy["checkpoints"]["a"]["1"]) == {"10", "20"}  # every checkpoint, per seed
    assert accuracy["checkpoints"]["a"]["3"]["20"]["columns"]["average"] == pytest.approx(0.6)
    # noise: seeds 0.4, 0.5, 0.6 -> SD 0.1; each run's two checkpoints 0.1 and its score
    noise = accuracy["noise"]["columns"]["average"]
    assert noise["seed_sd"] == pytest.approx(0.1) and noise["signal"] is None
    assert noise["checkpoint_sd"] == pytest.approx(np.sqrt(np.mean([np.var([0.1, s], ddof=1) for s in (0.4, 0.5, 0.6)])))


def test_averaging_the_last_checkpoints_is_applied_and_stated(tmp_path):
    config = config_for(tmp_path, seeds=(1,), average_last=2)
    for arm in ("a", "b"):
        for step, score in ((10, 0.2), (20, 0.4), (30, 0.6)):
            write_run(config, arm, 1, step, {t: constant_items(score) for t in SUITE.all_tasks()})
    report = build_report(config, SUITE)
    assert report["compared_steps"] == [20, 30] and report["average_last"] == 2
    assert report["table"]["a"]["columns"]["average"] == [pytest.approx(0.5)]
    assert "the mean over steps 20, 30 (evaluation.average_last: 2)" in report_markdown(report, SUITE)


def test_interval_covers_a_known_difference_and_excludes_zero(tmp_path):
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
    pair = build_report(config, SUITE)["families"]["accuracy"]["pairs"]["b − a"]
    average = pair["columns"]["average"]
    assert average["difference"] == pytest.approx(0.15) and average["seeds"] == [1, 2, 3]
    assert average["low"] <= 0.15 <= average["high"] and average["resolved"] and average["seeds_agree"]
    assert all(d["resolved_holm"] for d in pair["units"].values() if d["difference"])


def test_interval_includes_zero_without_a_difference(tmp_path):
    config = config_for(tmp_path, seeds=(1,))
    rng = np.random.default_rng(1)
    write_run(config, "a", 1, 5, {t: (rng.random(300) < 0.5).astype(float) for t in SUITE.all_tasks()})
    write_run(config, "b", 1, 5, {t: (rng.random(300) < 0.5).astype(float) for t in SUITE.all_tasks()})
    average = build_report(config, SUITE)["families"]["accuracy"]["pairs"]["b − a"]["columns"]["average"]
    assert average["low"] < 0 < average["high"] and not average["resolved"] and average["seed_part"] == 0


def test_a_missing_checkpoint_is_reported_not_filled(tmp_path):
    config = config_for(tmp_path, seeds=(1, 2))
    for arm in ("a", "b"):
        for seed in (1, 2):
            for step in (10, 20):
                if (arm, seed, step) != ("b", 2, 20):  # b seed 2 stopped early
                    write_run(config, arm, seed, step, {t: constant_items(step / 100) for t in SUITE.all_tasks()})
    report = build_report(config, SUITE)
    assert report["compared_steps"] == [10]  # the largest step every run reached, for every run
    assert all(t["steps"] == [10, 10] for t in report["table"].values())
    assert "a seed 1: evaluated up to step 20, compared at step 10 (the largest step every run reached); " \
           "steps [20] not compared" in report["comparison_notes"]
    assert "b seed 2: no evaluated checkpoint at steps [20], which other runs have" in report["comparison_notes"]


def test_a_missing_document_is_reported_and_every_run_compared_on_the_same_ones(tmp_path):
    config = config_for(tmp_path, seeds=(1,))
    items = {t: constant_items(0.5, 40) for t in SUITE.all_tasks()}
    write_run(config, "a", 1, 5, items)
    short = dict(items, mmlu_continuation=np.ones(30))  # cut from 40 to 30 lines; lm-eval scored 40
    write_run(config, "b", 1, 5, short, scored={"mmlu_continuation": 40})
    report = build_report(config, SUITE)
    notes = report["comparison_notes"]
    assert notes.count("mmlu_continuation: b seed 1 step 5 logged 30 of the 40 documents lm-eval scored") == 1
    assert "mmlu_continuation: compared on the 30 of 40 documents every run logged alike" in notes
    mmlu = report["families"]["accuracy"]["pairs"]["b − a"]["units"]["MMLU"]
    assert mmlu["difference"] == pytest.approx(1.0 - 20 / 30)  # the same 30 documents on both sides
    # the headline's rows are lm-eval's (b: 30 right of the 40 it scored); the difference row says why it differs
    assert "documents every compared run logged alike" in report["headline_differences"]["b"]["average"]
    text = report_markdown(report, SUITE)
    assert text.count("logged 30 of the 40 documents") == 1 and "† not the difference of the rows above" in text


def test_a_short_log_of_a_checkpoint_not_compared_is_named_and_left_out_of_the_curves(tmp_path):
    config = config_for(tmp_path, seeds=(1,))
    items = {t: constant_items(0.5, 40) for t in SUITE.all_tasks()}
    for arm in ("a", "b"):
        for step in (3, 5):
            cut = (arm, step) == ("b", 3)
            write_run(config, arm, 1, step, dict(items, mmlu_continuation=np.ones(30)) if cut else items,
                      **({"scored": {"mmlu_continuation": 40}} if cut else {}))
    report = build_report(config, SUITE)
    assert report["compared_steps"] == [5]
    assert "mmlu_continuation: b seed 1 step 3 logged 30 of the 40 documents lm-eval scored" in report["comparison_notes"]
    curves = report["families"]["accuracy"]["checkpoints"]["b"]["1"]
    assert curves["3"]["units"]["MMLU"] is None and curves["5"]["units"]["MMLU"] == pytest.approx(0.5)


def clean_samples(bits_per_doc: list[float], nbytes: int = 100) -> list[dict]:
    """Rolling log-likelihood documents of a clean-text task, `bits_per_doc` bits each."""
    return [{"bits_per_byte": [-b * np.log(2), nbytes]} for b in bits_per_doc]


def test_clean_text_decision_table_format_flags_and_every_pair(tmp_path):
    config = config_for(tmp_path, seeds=(1, 2), **CLEAN)
    rolling = {"output_type": "loglikelihood_rolling"}
    rng = np.random.default_rng(2)
    for seed in (1, 2):
        for arm, plain, markdown in (("a", 60.0, 60.0), ("b", 50.0, 70.0)):  # b: better in plain text, worse in Markdown
            samples = {t: metric_samples(SUITE.benchmark_of(t).score, constant_items(0.5, 20)) for t in SUITE.all_tasks()}
            samples["clean_text_web_plain"] = clean_samples(list(plain + rng.normal(0, 1, 30)))
            samples["clean_text_web_markdown"] = clean_samples(list(markdown + rng.normal(0, 1, 30)))
            write_eval_run(config, arm, seed, 5, samples,
                           configs={"clean_text_web_plain": rolling, "clean_text_web_markdown": rolling})
    report = build_report(config, SUITE)
    clean = report["families"]["clean_text"]
    assert clean["finals"]["units"]["clean_text_web_plain"]["b"][0] == pytest.approx(0.5, abs=0.01)  # 50 bits / 100 bytes
    pair = clean["pairs"]["b − a"]
    assert pair["columns"]["plain"]["high"] < 0 < pair["columns"]["markdown"]["low"]
    (flag,) = report["format_flags"]  # the difference itself changes with the view: plain − Markdown about −0.2
    assert flag["pair"] == "b − a" and flag["why"] == "the sign flips"
    assert flag["interaction"]["difference"] == pytest.approx(pair["columns"]["plain"]["difference"]
                                                              - pair["columns"]["markdown"]["difference"])
    (row,) = report["decision"]  # Holm over the table's 3 differences (no bits per byte of gold answers here)
    assert row["clean_text:plain"]["result"] == "better" and row["clean_text:markdown"]["result"] == "worse"
    assert row["accuracy:average"]["result"] is None and row["clean_text:plain"]["tests"] == 3
    assert report["every_pair"][0]["clean_text:plain"]["result"] == "better"
    for family in report["families"].values():  # every pair, each with low and high
        assert all({"low", "high"} <= set(i) for p in family["pairs"].values() for i in p["columns"].values())


def test_the_same_difference_in_both_views_is_not_format_dependent(tmp_path):
    config = config_for(tmp_path, seeds=(1, 2, 3), **CLEAN)
    rolling = {"output_type": "loglikelihood_rolling"}
    rng = np.random.default_rng(5)
    page = rng.normal(0, 3, 30)  # a page's own difficulty, shared by both views and every arm
    for seed in (1, 2, 3):
        for arm, shift in (("a", 0.0), ("b", -5.0)):  # b: 0.05 bits/byte better in both views
            samples = {t: metric_samples(SUITE.benchmark_of(t).score, constant_items(0.5, 20)) for t in SUITE.all_tasks()}
            samples["clean_text_web_plain"] = clean_samples(list(60 + shift + page + rng.normal(0, 1, 30)))
            samples["clean_text_web_markdown"] = clean_samples(list(70 + shift + page + rng.normal(0, 1, 30)))
            write_eval_run(config, arm, seed, 5, samples,
                           configs={"clean_text_web_plain": rolling, "clean_text_web_markdown": rolling})
    report = build_report(config, SUITE)
    (row,) = report["decision"]
    assert row["clean_text:plain"]["result"] == row["clean_text:markdown"]["result"] == "better"
    assert report["format_flags"] == []
    assert "No pair of arms depends on the view." in report_markdown(report, SUITE)


def decision_report(cells: dict[str, list[tuple[float, bool]]]) -> dict:
    """A report of arms whose accuracy averages against `a` have the given (p-value, seeds agree)."""
    arms = ["a", *cells]
    pairs = {f"{arm} − a": {"columns": {"average": {"difference": 0.01, "p": p, "seeds_agree": agree, "seeds_measured": True}}}
             for arm, [(p, agree)] in cells.items()}
    return {"arms": arms, "reference_arm": "a", "families": {"accuracy": {"lower_is_better": False, "pairs": pairs}}}


def test_the_decision_table_is_holm_adjusted_over_its_cells_and_needs_every_seed_to_agree():
    rows = decision_rows(decision_report({"b": [(0.01, True)], "c": [(0.02, True)], "d": [(0.04, True)], "e": [(0.001, False)]}))
    cells = {row["arm"]: row["accuracy:average"] for row in rows}
    assert [cells[a]["p_holm"] for a in "bcde"] == pytest.approx([0.03, 0.04, 0.04, 0.004])
    assert cells["b"]["result"] == cells["c"]["result"] == cells["d"]["result"] == "better"
    assert cells["e"]["result"] is None  # resolved, but its seeds split
    rows = decision_rows(decision_report({"b": [(0.02, True)], "c": [(0.03, True)], "d": [(0.04, True)]}))
    assert [row["accuracy:average"]["result"] for row in rows] == [None, None, None]  # 0.06, 0.06, 0.06 after Holm


def test_arms_that_share_no_seed_are_not_compared_and_say_so(tmp_path):
    config = config_for(tmp_path, seeds=(1, 2, 3))
    rng = np.random.default_rng(4)
    for arm, seeds in (("a", (1, 2)), ("b", (3,))):
        for seed in seeds:
            write_run(config, arm, seed, 5, {t: (rng.random(40) < 0.5).astype(float) for t in SUITE.all_tasks()})
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        report = build_report(config, SUITE)
        text = report_markdown(report, SUITE)
    pair = report["families"]["accuracy"]["pairs"]["b − a"]
    assert pair["not_compared"] == "no seed in common (a: seeds [1, 2], b: seeds [3])" and pair["columns"] == {}
    assert "b − a: not compared, no seed in common (a: seeds [1, 2], b: seeds [3])." in report["statistics_notes"]
    assert "| b − a | 0 | | not compared: no seed in common" in text and "nan" not in text
    assert report["decision"][0]["accuracy:average"] is None


def test_seeds_that_change_nothing_are_named(tmp_path):
    config = config_for(tmp_path, seeds=(1, 2))
    rng = np.random.default_rng(6)
    for arm in ("a", "b"):
        items = {t: (rng.random(40) < 0.5).astype(float) for t in SUITE.all_tasks()}
        for seed in (1, 2):
            write_run(config, arm, seed, 5, items)  # the same answers from both seeds
    report = build_report(config, SUITE)
    (note,) = [n for n in report["statistics_notes"] if n.startswith("Every seed gave the same value")]
    assert "a, b on accuracy" in note and "covers the test documents alone" in note
    assert "bits/byte" not in note  # a family absent from the logs measured nothing, the same or not
    assert report["families"]["accuracy"]["pairs"]["b − a"]["columns"]["average"]["var_seeds"] == 0


def test_report_renders_partial_results_and_writes_its_files(tmp_path, capsys):
    config = config_for(tmp_path, seeds=(1,))
    items = {t: constant_items(0.5) for t in SUITE.all_tasks() if t != "coqa"}
    write_run(config, "a", 1, 5, items)
    path = tmp_path / "exp.yaml"
    raw = pretrain_experiment(tmp_path)
    path.write_text(json.dumps(raw))
    assert main([str(path)]) == 0
    printed = capsys.readouterr().out
    assert "tasks missing ['coqa']" in printed and "b seed 1: no evaluated checkpoint" in printed
    report = config.report_dir()
    for name in ("report.md", "report.json", "summary.csv", "tasks.csv", "curves_accuracy.png"):
        assert (report / name).stat().st_size > 0


def test_a_ladder_reports_every_rung_and_whether_the_small_ones_decide_as_the_large_one(tmp_path, capsys):
    import shutil

    from tokenizers import Tokenizer, models

    raw = pretrain_experiment(tmp_path)
    raw["arms"]["c"] = {"extractor": "trafilatura"}
    shared = raw["pretrain"]
    raw["pretrain"] = {"training": shared["training"], "ladder": [
        {"name": "small", "model": shared["model"], "tokens": 1000, "seeds": [1, 2, 3]},
        {"name": "mid", "model": shared["model"] | {"hidden_size": 48, "ffn_hidden_size": 96}, "tokens": 2000,
         "seeds": [1, 2, 3]},
        {"name": "large", "model": shared["model"] | {"hidden_size": 64, "ffn_hidden_size": 128}, "seeds": [1, 2, 3]}]}
    path = tmp_path / "ladder.yaml"
    path.write_text(json.dumps(raw | {"name": "ladder"}))
    config = ExperimentConfig.model_validate(raw | {"name": "ladder"})
    # the compute is known from the tokenizer before any run has trained
    config.tokenizer_dir().mkdir(parents=True)
    Tokenizer(models.WordLevel({f"t{i}": i for i in range(600)}, unk_token="t0")).save(str(config.tokenizer_file()))
    # b beats a at every size; c is above a at the small rung, level at mid, below it at the large one
    scores = {"small": {"a": 0.5, "b": 0.6, "c": 0.55}, "mid": {"a": 0.5, "b": 0.65, "c": 0.5},
              "large": {"a": 0.5, "b": 0.7, "c": 0.4}}
    steps = {rung: config.for_rung(rung).training_steps()[0] for rung in scores}
    assert steps["small"] < steps["mid"] < steps["large"]
    for rung, by_arm in scores.items():
        one = config.for_rung(rung)
        for arm, score in by_arm.items():
            for seed in (1, 2, 3):
                write_run(one, arm, seed, steps[rung], {t: constant_items(score + 0.01 * seed) for t in SUITE.all_tasks()})
    assert main([str(path)]) == 0
    printed = capsys.readouterr().out
    out = config.report_dir()
    assert out == tmp_path / "report" / "ladder" and (out / "ladder.png").stat().st_size > 0
    report = json.loads((out / "report.json").read_text())
    assert report["rung"] == "large" and set(report["ladder"]["reports"]) == {"small", "mid", "large"}
    ladder = report["ladder"]
    assert ladder["reference"] == ladder["target"] == "large" and ladder["target_evaluated"]
    # compute: FLOPs per token at the tokenizer's vocabulary x the tokens at the compared step
    for rung in scores:
        one = config.for_rung(rung)
        assert ladder["compute"][rung] == one.pretrain.model.flops_per_token(600) * one.pretrain.tokens_at(steps[rung])
    accuracy = ladder["agreement"]["small"]["by_metric"]["accuracy:average"]
    assert (accuracy["pairs"], accuracy["sign_agrees"]) == (3, 2)  # c − a flips sign
    rows = {r["pair"]: r for r in ladder["agreement"]["small"]["rows"] if r["metric"] == "accuracy:average"}
    assert rows["b − a"]["sign_agrees"] and not rows["c − a"]["sign_agrees"] and rows["c − b"]["sign_agrees"]
    assert rows["b − a"]["target"] == "better" and accuracy["target_resolved"] == 3
    assert accuracy["resolved_same"] + accuracy["called_noise"] + accuracy["resolved_opposite"] == 3
    assert accuracy["resolved_opposite"] == (rows["c − a"]["rung"] == "better")
    assert set(ladder["agreement"]) == {"small", "mid"}
    # the fit goes through the rungs below the target: its prediction there is out of sample
    fit = ladder["scores"]["accuracy:average"]["arms"]["b"]["fit"]
    assert fit["form"] == "log-linear" and fit["through"] == ["small", "mid"]  # two compute points
    points = ladder["scores"]["accuracy:average"]["arms"]["b"]["points"]
    (x0, y0), (x1, y1) = [(np.log10(points[r]["compute"]), np.mean(points[r]["scores"])) for r in ("small", "mid")]
    x = np.log10(ladder["compute"]["large"])
    assert fit["prediction"] == pytest.approx(y0 + (y1 - y0) * (x - x0) / (x1 - x0))  # the line through their means
    md = (out / "report.md").read_text()
    assert md.startswith("# ladder, rung large: downstream scores per arm")
    assert "## The model ladder" in md and "### Rung small" in md and "### Rung mid" in md
    assert "**A prediction, not a result**" in md and "| small, mid |" in md
    assert "rungs: small (evaluated), mid (evaluated), large (headline)" in printed
    assert "  small: accuracy Avg 2/3;" in printed

    # one arm evaluated at the target decides nothing: the largest rung with two arms is read against
    for arm in ("b", "c"):
        for seed in (1, 2, 3):
            shutil.rmtree(config.for_rung("large").eval_dir(arm, seed))
    assert main([str(path)]) == 0
    printed = capsys.readouterr().out
    ladder = json.loads((out / "report.json").read_text())["ladder"]
    assert ladder["reference"] == "mid" and not ladder["target_evaluated"] and ladder["evaluated"] == ["small", "mid"]
    assert set(ladder["agreement"]) == {"small"}
    assert "rungs: small (evaluated), mid (headline), large (one arm evaluated)" in printed
    a = ladder["scores"]["accuracy:average"]["arms"]["a"]  # the arm that ran at large: its fit is still tested there
    assert a["fit"]["through"] == ["small", "mid"] and "large" in a["points"]
    md = (out / "report.md").read_text()
    assert "The target rung large has fewer than two arms with evaluated runs" in md
    # an arm of the reference rung with one seed: said in bold, its intervals leave the seeds' noise out
    for seed in (2, 3):
        shutil.rmtree(config.for_rung("mid").eval_dir("a", seed))
    assert main([str(path)]) == 0
    md = (out / "report.md").read_text()
    assert "**mid has an arm with one evaluated seed**" in md and "an arm with one seed: decided only against" in md
    # mid's one-seed arm a is decided against its seeds' variance at the nearest rung where it has three (small and
    # large are as near: the larger)
    mid = json.loads((out / "report.json").read_text())["ladder"]["reports"]["mid"]
    assert mid["families"]["accuracy"]["pairs"]["b − a"]["columns"]["average"]["seed_source"] == "a: measured at rung large"


def shifted_runs(config, shifts: dict[str, float], seeds=(1,), n: int = 200, rng_seed: int = 8, skip=()):
    """Arms whose every task is right on 40% of documents plus `shifts[arm]`, one seed each; `skip`:
    (arm, seed, task) left out of that run's logs."""
    rng = np.random.default_rng(rng_seed)
    base = {t: rng.random(n) for t in SUITE.all_tasks()}
    for arm, shift in shifts.items():
        for seed in seeds:
            noise = rng.normal(0, 0.02)  # a seed's shift of the whole arm
            write_run(config, arm, seed, 5, {t: (u < 0.4 + shift + noise).astype(float) for t, u in base.items()
                                             if (arm, seed, t) not in skip})


def test_one_seed_per_arm_decides_nothing_without_a_named_seed_variance(tmp_path):
    config = config_for(tmp_path, seeds=(1,), primary={"pair": ["b", "a"]})
    shifted_runs(config, {"a": 0.0, "b": 0.3})  # a large difference: the documents alone would call it
    report = build_report(config, SUITE)
    (row,) = report["decision"]
    cell = row["accuracy:average"]
    assert cell["p"] < 1e-6 and not cell["seeds_measured"] and cell["result"] is None and cell["p_holm"] is None
    assert cell["tests"] == 0 and report["families"]["accuracy"]["holm_tests"] == 0
    assert all(c.get("result_holm") is None for c in report["families"]["accuracy"]["pairs"]["b − a"]["units"].values())
    assert any(n.startswith("a: one seed and no seed variance named") for n in report["statistics_notes"])
    assert report["families"]["accuracy"]["noise"]["columns"]["average"]["above_floor"] is None
    text = report_markdown(report, SUITE)
    assert "not decided: one seed" in text
    # the primary line: no p-value and no inferential interval, the documents' interval labelled as such
    primary = report["primary"]
    assert primary["interval"] is None and primary["result"] is None and "p" not in primary["documents_interval"]
    assert primary["documents_interval"]["difference"] == pytest.approx(cell["difference"])
    line = next(ln for ln in text.splitlines() if ln.startswith("**b − a**"))
    assert "p =" not in line and "item-only interval" in line and "seeds' noise is unmeasured" in line


def test_one_seed_is_decided_against_the_seed_sd_the_config_states(tmp_path):
    config = config_for(tmp_path, seeds=(1,), seed_sd={"accuracy": 1.0, "accuracy:average": 0.5})
    shifted_runs(config, {"a": 0.0, "b": 0.3})
    report = build_report(config, SUITE)
    cell = report["decision"][0]["accuracy:average"]
    # each arm's seed variance is stated as (0.5 points)^2, known: the seeds' part adds both over one seed
    assert cell["seeds_measured"] and cell["var_seeds"] == pytest.approx(2 * 0.005 ** 2) and cell["df_seeds"] is None
    assert cell["result"] == "better"
    stated = "stated in evaluation.seed_sd (accuracy:average: 0.5 points)"
    assert cell["seed_source"] == f"a: {stated}; b: {stated}"
    assert f"‡ the seed variance each such cell rests on: b − a, accuracy, Avg (points): a: {stated}" \
        in report_markdown(report, SUITE)
    mmlu = report["families"]["accuracy"]["pairs"]["b − a"]["units"]["MMLU"]
    assert mmlu["var_seeds"] == pytest.approx(2 * 0.01 ** 2)  # the family's SD where the score has none of its own
    assert "‡" in report_markdown(report, SUITE)
    with pytest.raises(SystemExit, match="evaluation.seed_sd: accuracy:nothing: no such family or score"):
        build_report(config_for(tmp_path / "x", seeds=(1,), seed_sd={"accuracy:nothing": 1.0}), SUITE)


def test_a_stated_seed_sd_below_what_the_rung_measured_on_its_other_arms_is_refused(tmp_path):
    config = config_for(tmp_path, seeds=(1, 2, 3), seed_sd={"accuracy:average": 0.1})
    shifted_runs(config, {"a": 0.0}, seeds=(1, 2, 3))  # a's seeds shift its score by 2 points (SD)
    shifted_runs(config, {"b": 0.1}, seeds=(1,))  # b has one seed: decided against the stated SD
    with pytest.raises(SystemExit, match=r"evaluation.seed_sd: stated in evaluation.seed_sd \(accuracy:average: 0.1 "
                                         r"points\) on accuracy columns:average is below what this rung measured on a"):
        build_report(config, SUITE)
    config = config_for(tmp_path, seeds=(1, 2, 3), seed_sd={"accuracy:average": 5.0})
    report = build_report(config, SUITE)
    (check,) = [c for c in report["stated_seed_checks"] if c["score"] == "columns:average"]
    assert check["arms"] == ["a"] and check["df"] == 2 and check["low"] <= check["measured_sd"] <= check["high"]
    assert any("seed SD stated in evaluation.seed_sd (accuracy:average: 5 points), beside" in n
               for n in report["statistics_notes"])


def test_a_task_missing_for_one_arm_drops_its_scores_for_that_arms_pairs_only(tmp_path):
    config = config_for(tmp_path, seeds=(1, 2))
    config = ExperimentConfig.model_validate(config.model_dump(mode="json") | {
        "arms": {"a": {"extractor": "trafilatura"}, "b": {"extractor": "trafilatura"}, "c": {"extractor": "trafilatura"}}})
    skip = {("b", s, "copa") for s in (1, 2)} | {("c", 2, "piqa")}  # b never logged COPA; c's seed 2 missed PIQA
    shifted_runs(config, {"a": 0.0, "b": 0.0, "c": 0.2}, seeds=(1, 2), skip=skip)
    report = build_report(config, SUITE)
    accuracy = report["families"]["accuracy"]
    assert "average" not in accuracy["pairs"]["b − a"]["columns"] and "reasoning" not in accuracy["pairs"]["b − a"]["columns"]
    assert accuracy["pairs"]["b − a"]["dropped"]["columns:average"] == "b has no documents of copa"
    assert "knowledge" in accuracy["pairs"]["b − a"]["columns"] and "COPA" not in accuracy["pairs"]["b − a"]["units"]
    # c lacks PIQA (one seed of two): c's pairs lose the average, a − b keeps nothing of c's absence
    assert accuracy["pairs"]["c − a"]["dropped"]["columns:average"] == "c has no documents of piqa"
    assert "piqa: c seed 2 step 5 logged none of its documents: c is compared without piqa" in report["comparison_notes"]
    (b_row, c_row) = report["decision"]
    assert b_row["accuracy:average"] is None and b_row["dropped"][0] == ["accuracy:average", "b has no documents of copa"]
    text = report_markdown(report, SUITE)
    assert "Not compared (each empty cell, and why): " in text
    assert "b − a, accuracy, Avg (points): b has no documents of copa" in text
    assert "Empty cells (`-`), and why: b − a, COPA: b has no documents of copa" in text
    # a family no arm logged (these runs log accuracy only): every empty cell of every table says why
    for row in report["decision"] + report["every_pair"]:
        empty = {key for key, cell in row.items() if cell is None}
        assert empty and empty == {key for key, _ in row["dropped"]}
    assert dict(b_row["dropped"])["bpb:average"].startswith("no arm has documents of ")
    assert "b − a, bits/byte of gold answers, Avg (bits/byte, lower is better): no arm has documents of " in text
    # the headline: c's average from the seed that has every task, and says so
    assert "(1 of 2 seeds)" in text


def test_the_primary_decision_is_decided_alone_first_and_either_way_round(tmp_path):
    rng_runs = {"a": 0.0, "b": 0.15, "c": 0.0}
    raw = pretrain_experiment(tmp_path, evaluation={"primary": {"pair": ["b", "a"], "score": "accuracy:average"}})
    raw["arms"]["c"] = {"extractor": "trafilatura"}
    raw["pretrain"]["seeds"] = [1, 2, 3]
    config = ExperimentConfig.model_validate(raw)
    shifted_runs(config, rng_runs, seeds=(1, 2, 3), n=400)
    report = build_report(config, SUITE)
    primary = report["primary"]
    cell = report["families"]["accuracy"]["pairs"]["b − a"]["columns"]["average"]
    assert primary["interval"]["difference"] == cell["difference"] > 0 and primary["alpha"] == pytest.approx(0.05)
    assert cell["p"] < 0.05 and cell["seeds_agree"] and primary["result"] == "better"
    text = report_markdown(report, SUITE)
    assert text.index("## Primary decision (pre-registered: evaluation.primary)") < text.index("## Decision: each arm")
    assert "Exploratory beside the primary decision." in text
    # its MDD at the configured seeds on the pair's measured noise; accuracy itself needs no slope to convert it
    assert primary["mdd"] > 0 and primary["accuracy_slope"] is None
    assert f"noise): {100 * primary['mdd']:.2f} points." in text
    # and the pair's own rho and phi it is priced on, each with its interval and source
    rho = primary["rho"]
    assert rho["source"] == "the primary pair b − a" and rho["low"] <= rho["rho"] <= rho["high"]
    interval = f"{rho['rho']:.2f} [{rho['low']:.2f}, {rho['high']:.2f}]"
    assert f"Priced on its item correlation rho {interval}, from the primary pair b − a." in text
    assert "Priced on its seed-by-document share phi" in text
    raw["evaluation"]["primary"]["pair"] = ["a", "b"]  # the other way round: the same interval, negated
    flipped = build_report(ExperimentConfig.model_validate(raw), SUITE)["primary"]
    assert flipped["interval"]["difference"] == pytest.approx(-cell["difference"])
    assert flipped["interval"]["low"] == pytest.approx(-cell["high"]) and flipped["result"] == "worse"
    raw["evaluation"]["primary"]["score"] = "accuracy:nothing"
    with pytest.raises(SystemExit, match="evaluation.primary.score: accuracy:nothing: no such score"):
        build_report(ExperimentConfig.model_validate(raw), SUITE)
    raw["evaluation"]["primary"] = {"pair": ["a", "z"]}
    with pytest.raises(ValueError, match="evaluation.primary.pair: z is not a trained arm"):
        ExperimentConfig.model_validate(raw)


def test_a_one_seed_rung_is_decided_against_the_seed_variance_of_the_nearest_rung(tmp_path):
    from evaluation.report import build_ladder

    raw = pretrain_experiment(tmp_path, evaluation={"primary": {"pair": ["b", "a"]}})
    model = raw["pretrain"].pop("model")
    raw["pretrain"].pop("seeds")
    raw["pretrain"]["ladder"] = [{"name": "small", "model": model, "tokens": 1000, "seeds": [1, 2]},
                                 {"name": "large", "model": model | {"hidden_size": 64, "ffn_hidden_size": 128}, "seeds": [1]}]
    config = ExperimentConfig.model_validate(raw)
    shifted_runs(config.for_rung("small"), {"a": 0.0, "b": 0.1}, seeds=(1, 2))
    shifted_runs(config.for_rung("large"), {"a": 0.0, "b": 0.2}, seeds=(1,), rng_seed=9)
    reports, ladder = build_ladder(config, SUITE)
    small, large = (reports[r]["families"]["accuracy"] for r in ("small", "large"))
    cell = large["pairs"]["b − a"]["columns"]["average"]
    measured = small["seed_variances"]["columns"]["average"]
    assert cell["seed_source"] == "a: measured at rung small; b: measured at rung small" and cell["seeds_measured"]
    assert cell["var_seeds"] == pytest.approx(measured["a"]["variance"] + measured["b"]["variance"])
    assert cell["df_seeds"] is not None and cell["df_seeds"] <= 2  # one degree of freedom an arm, as measured
    assert any("measured at rung small" in n for n in reports["large"]["statistics_notes"])
    primary = ladder["primary"]
    assert primary["score"] == "accuracy:average" and set(primary["rungs"]) == {"small", "large"}
    assert primary["rungs"]["large"]["verdict"] == (reports["large"]["primary"]["result"] or "noise")
    assert primary["rungs"]["small"]["sign_agrees"]


def test_an_interval_with_no_measured_noise_is_not_shown_as_a_bracket_of_no_width():
    """Two arms whose two seeds each tie exactly (40 right/wrong items: it happens) and whose documents'
    part is all seed-by-document interaction have a standard error of 0: `-12.50 [-12.50, -12.50]` read
    as a certain difference; the cell says there is no interval instead."""
    from evaluation.markdown import diff_cell

    family = {"scale": 100, "decimals": 2}
    cell = {"difference": -0.125, "low": -0.125, "high": -0.125, "se": 0.0, "p": 1.0}
    assert diff_cell(cell, family) == "-12.50 (no noise measured: no interval)"
    assert diff_cell(cell | {"low": -0.2, "high": -0.05, "se": 0.04}, family) == "-12.50 [-20.00, -5.00]"


def test_the_primary_decision_carries_its_pre_registration_record_checked_against_git(tmp_path):
    import subprocess

    import yaml

    from configs.experiment import load_experiment
    from evaluation.preregistration import preregistration

    raw = pretrain_experiment(tmp_path, evaluation={"primary": {"pair": ["b", "a"], "pilot_informed": True,
                                                                "sides": "one-sided"}})
    raw["pretrain"]["seeds"] = [1, 2, 3]
    path = tmp_path / "experiment.yaml"

    def commit(date: str) -> None:
        path.write_text(yaml.safe_dump(raw))
        env = {"GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date, "PATH": "/usr/bin:/bin"}
        for args in (["init", "-q"], ["add", path.name], ["commit", "-q", "-m", "primary"]):
            subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=tmp_path, env=env, check=True)

    commit("2020-01-01T00:00:00+00:00")  # fixed long before the runs below
    shifted_runs(load_experiment(path), {"a": 0.0, "b": 0.15}, seeds=(1, 2, 3))
    report = build_report(load_experiment(path), SUITE)
    primary, record = report["primary"], report["primary"]["record"]
    assert record["status"] == "pilot-informed" and record["fixed_before_runs"] and record["sides"] == "one-sided"
    assert record["deciding_rung"] == load_experiment(path).rungs()[-1] and len(record["commit"]) == 40
    # one-sided, the arm better: half the two-sided p-value
    assert primary["deciding"] and primary["result"] == "better" and primary["p"] == pytest.approx(primary["interval"]["p"] / 2)
    text = report_markdown(report, SUITE)
    assert "chosen after seeing pilot runs (stated: evaluation.primary.pilot_informed)" in text
    assert "before its deciding runs existed" in text and "Status: **pilot-informed**" in text
    raw["evaluation"]["primary"] |= {"sides": "two-sided", "pilot_informed": False}
    path.write_text(yaml.safe_dump(raw))  # not committed: not recorded, so exploratory
    record = preregistration(load_experiment(path))
    assert record["status"] == "exploratory" and "uncommitted changes" in record["why"]
    commit("2099-12-01T00:00:00+00:00")  # changed after its deciding runs existed
    record = preregistration(load_experiment(path))
    assert record["status"] == "exploratory" and not record["fixed_before_runs"]
    assert "after its deciding runs existed" in record["why"]
    raw["evaluation"]["primary"]["deciding_rung"] = "nowhere"
    with pytest.raises(ValueError, match="evaluation.primary.deciding_rung: nowhere is not a rung"):
        ExperimentConfig.model_validate(raw)


def test_the_primary_mdd_is_printed_in_its_unit_and_in_accuracy_points_or_why_not():
    fam = {"scale": 1, "unit": "bits/byte", "decimals": 4}
    slope = {"slope": -0.5, "low": -0.6, "high": -0.4, "arms": ["a", "b", "c"], "seeds": [3, 3, 3], "convertible": True,
             "why": ""}
    (line, blank) = mdd_lines({"mdd": 0.02, "accuracy_slope": slope}, fam)
    assert blank == "" and line.endswith(": 0.0200 bits/byte; 1.00 accuracy points [0.80, 1.20] by the slope -50 accuracy "
                                         "points per bits/byte [-60, -40] (3 arms, 3 seeds).")
    wide = slope | {"low": -0.9, "high": 0.1, "convertible": False, "why": "its interval includes 0"}
    (line, _) = mdd_lines({"mdd": 0.02, "accuracy_slope": wide}, fam)
    assert line.endswith("0.0200 bits/byte; in accuracy points: not converted: slope [-90, 10] (its interval includes 0).")
    assert mdd_lines({"mdd": None, "accuracy_slope": None}, fam)[0].startswith("Primary MDD: not measured here")
    # the rho and phi it is priced on, with their intervals and source
    rho = {"rho": 0.8, "low": 0.7, "high": 0.9, "phi": 0.4, "phi_low": 0.3, "phi_high": 0.5, "source": "the primary pair b − a"}
    (_, _, rho_line, _, phi_line, _) = mdd_lines({"mdd": 0.02, "accuracy_slope": wide, "rho": rho}, fam)
    assert rho_line == "Priced on its item correlation rho 0.80 [0.70, 0.90], from the primary pair b − a."
    assert phi_line == "Priced on its seed-by-document share phi 0.40 [0.30, 0.50], from the primary pair b − a."
