"""The comparison report: downstream scores per arm, the paired differences, and what led to them.

    python -m evaluation.report [CONFIG]        (default: configs/local.yaml)

Reads `<output_root>/eval/<arm>/<rung>/seed<S>/step_*/` (results and per-document logs), and where
they exist the extraction-quality summary and the ledger. Prints the headline table and the decision
table, and writes `<output_root>/report/<name>/`: `report.md` (everything below), `summary.csv` (one row
per arm), `tasks.csv` (one row per benchmark or clean-text task, metric family and arm),
`report.json` (every figure: per arm, seed, checkpoint, benchmark and metric; the paired
difference of every pair of arms) and `curves_<family>.png`.

- Every run is compared at the largest step all evaluated runs reached (evaluation/runs.py; with
  `evaluation.average_last` k, the mean over the last k such steps, said wherever it is used).
- The headline is the paper's Table 5 layout: per arm the suite's accuracy (lm-eval's own
  numbers), mean ± spread across seeds, and centered accuracy beside the raw average.
- Beside accuracy, continuous scores from the same logs (evaluation/metrics/): bits per byte
  of the gold answer and the probability on it per benchmark, and bits per byte on clean web
  text in two views (evaluation/tasks/clean_text.py), its own category.
- Differences between every pair of arms come with 95% intervals sound with 2-3 seeds
  (evaluation/statistics/intervals.py: each pair's own seed variance, a generalized interval). The decision
  table opens the comparison, per arm against the reference arm (the config's first): a
  difference is a result when it stays resolved after Holm's adjustment over every cell of the
  table and every seed agrees in sign; the every-pair table is adjusted over its own cells, the
  per-benchmark marks over every pair and benchmark of the family.
- Noise measured from the run and the signal-to-noise ratio per family and score, beside the
  floor it has with no difference (evaluation/statistics/noise.py); the clean-text pairs whose difference
  itself changes with the view (the view-by-arm interaction, Holm over pairs and sets) are
  flagged as format-dependent.
- Notes on what the numbers rest on where it is less than the method assumes: one seed, arms that
  share no seed, seeds that change nothing, cells not decidable at this many seeds, headline
  differences that are not the difference of the rows above them.
- Missing pieces (runs not evaluated, tasks absent, checkpoints or documents that differ between
  runs) are listed, and everything that exists is still reported.
"""

from __future__ import annotations

import argparse
import json
import sys

from configs.durable import write_atomically
from configs.experiment import ExperimentConfig, load_experiment_or_exit
from evaluation import markdown
from evaluation.decisions import decision_sections
from evaluation.evaluate import DamagedResult
from evaluation.family_report import family_report, named_seed_variances, stated_seed_checks
from evaluation.headline import headline_table
from evaluation.ladder import ladder_report
from evaluation.metrics import families
from evaluation.plots import plot_curves, plot_ladder
from evaluation.primary_scale import primary_noise, report_slope
from evaluation.runs import compare, load_runs
from evaluation.sources import source_sections
from evaluation.tables import write_tables
from evaluation.tasks.clean_text import clean_text_tasks
from evaluation.tasks.suite import Suite, load_suite


def build_report(config: ExperimentConfig, suite: Suite | None = None, measured_at: dict[str, dict] | None = None) -> dict:
    """The report of one rung (`config.for_rung`); `measured_at`: the other rungs' reports, nearest
    first, whose seeds name the seed variance of an arm with one seed here. Its sections in the
    order report.json holds them: what was compared, the headline, every family, the decisions,
    and where the numbers come from."""
    suite = suite or load_suite()
    evaluation = config.evaluation
    clean = clean_text_tasks(evaluation.clean_text) if evaluation else []
    noise_k = evaluation.noise_checkpoints if evaluation else 3
    runs = load_runs(config)
    comparison = compare(runs, evaluation.average_last if evaluation else 1)
    arms = [arm for arm in config.arms if arm in comparison.by_arm]
    fams = families(suite, clean)
    named = named_seed_variances(fams, [arm for arm in arms if len(comparison.by_arm[arm]) == 1], measured_at,
                                 evaluation.seed_sd if evaluation else None)
    report = {"experiment": config.name, "rung": config.pretrain.rung.name if config.pretrain else None,
              "headline_form": suite.headline, "arms": arms,
              "reference_arm": arms[0] if arms else None,
              "compared_steps": comparison.steps,
              "compared_tokens": config.pretrain.tokens_at(comparison.steps[-1]) if comparison.steps else None,
              "average_last": evaluation.average_last if evaluation else 1,
              "noise_checkpoints": noise_k,
              "table": headline_table(comparison, suite, arms),
              "families": {name: family_report(f, comparison, arms, noise_k, clean, named[name])
                           for name, f in fams.items()} if arms else {}}
    report["stated_seed_checks"] = stated_seed_checks(report["families"])
    report |= decision_sections(report, config, fams)
    if primary := report.get("primary"):  # its MDD in its own unit and in accuracy points, and its rho and phi
        family, column = primary["score"].split(":")
        pair = (primary["arm"], primary["reference"])
        priced = primary_noise(comparison, fams[family], column, pair, len(config.pretrain.seeds),
                               primary["sides"]) if config.pretrain else None
        primary["mdd"], primary["rho"] = (priced["mdd"], priced["rho"]) if priced else (None, None)
        primary["accuracy_slope"] = report_slope(report["families"], primary["score"],
                                                 {arm: sorted(seeds) for arm, seeds in comparison.by_arm.items()})
    report["clean_text_tasks"] = [{"task": t.task, "set": t.set, "view": t.view} for t in clean]
    return report | source_sections(config, runs, comparison, suite.all_tasks() + [t.task for t in clean])


def training_compute(config: ExperimentConfig, reports: dict[str, dict]) -> dict[str, float]:
    """Per rung, the training FLOPs its scores stand for: FLOPs per token (causal attention, the
    project's one convention, configs/model.py; at the experiment's tokenizer's vocabulary, which
    every run trains with) times the tokens at the compared step; a rung without evaluated runs at
    the tokens it will train on. Empty before the tokenizer exists."""
    if not config.tokenizer_file().is_file():
        return {}
    from tokenizers import Tokenizer

    vocab = Tokenizer.from_file(str(config.tokenizer_file())).get_vocab_size()
    out = {}
    for rung in config.pretrain.ladder:
        one = config.for_rung(rung.name)
        tokens = reports[rung.name]["compared_tokens"] or one.pretrain.tokens_at(one.training_steps()[0])
        out[rung.name] = rung.model.flops_per_token(vocab) * tokens
    return out


def build_ladder(config: ExperimentConfig, suite: Suite) -> tuple[dict, dict | None]:
    """Every rung's report and, for a ladder of two rungs or more, what the rungs say together
    (evaluation/ladder.py): `(reports by rung, ladder)`."""
    rungs = config.rungs()
    reports = {rung: build_report(config.for_rung(rung), suite) for rung in rungs}
    for rung, report in reports.items():  # an arm with one seed: its seed variance measured at the nearest rung
        if len(rungs) > 1 and any(len(report["table"][arm]["seeds"]) == 1 for arm in report["arms"]):
            i = rungs.index(rung)
            nearest = sorted((r for r in rungs if r != rung), key=lambda r: (abs(rungs.index(r) - i), -rungs.index(r)))
            reports[rung] = build_report(config.for_rung(rung), suite, {r: reports[r] for r in nearest})
    if len(reports) < 2:
        return reports, None
    ladder = ladder_report(reports, training_compute(config, reports), config.rungs(), config.rungs()[-1])
    shapes = {r.name: {"non_embedding_parameters": r.model.non_embedding_parameters, "seeds": r.seeds,
                       "tokens": config.rung_tokens(r)} for r in config.pretrain.ladder}
    return reports, ladder | {"shapes": shapes}


def headline_rung(reports: dict[str, dict], ladder: dict | None) -> str:
    """The rung the ladder reads the others against (the largest where two arms have evaluated
    runs), else the largest with any, else the last configured."""
    evaluated = [rung for rung, report in reports.items() if report["arms"]]
    return (ladder or {}).get("reference") or (evaluated or list(reports))[-1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m evaluation.report", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("config", nargs="?", default="configs/local.yaml")
    args = parser.parse_args(argv)
    config = load_experiment_or_exit(args.config)
    suite = load_suite()
    try:
        reports, ladder = build_ladder(config, suite)
    except DamagedResult as e:
        print(f"{args.config}: {e}", file=sys.stderr)
        return 2
    headline = headline_rung(reports, ladder)
    report = reports[headline]
    out = config.report_dir()
    out.mkdir(parents=True, exist_ok=True)
    figures = plot_curves(report, config.for_rung(headline), out)
    if ladder:  # every rung's tables and the ladder's section beside the headline rung's report
        report = report | {"ladder": ladder | {"reports": reports}}
        figures += [f for f in [plot_ladder(ladder, out)] if f]
    write_atomically(out / "report.md", markdown.report_markdown(report, suite))
    print(markdown.console_text(report, suite, config))
    write_atomically(out / "report.json", json.dumps(report, indent=2, default=str) + "\n")
    write_tables(report, suite, out)
    print(f"  report: {out}/report.md (every benchmark and family), report.json, summary.csv, tasks.csv"
          + "".join(f", {p.name}" for p in figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
