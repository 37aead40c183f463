"""How the report is shown: `report.md` and the console's text, from the report's dict
(evaluation/report.py and the modules of its sections compute everything; nothing here does arithmetic beyond formatting)."""

from __future__ import annotations

import math
import statistics

from configs.experiment import ExperimentConfig
from corpus.accounting.ledger import summary_line
from corpus.extractors.base import versions_text
from evaluation.metrics import DECISION
from evaluation.power_print import rho_phi_lines
from evaluation.statistics.accuracy_slope import converted_text, slope_text
from evaluation.tasks.suite import CATEGORY_TITLES, COLUMNS, Suite

COLUMN_TITLES = {"average": "Avg", **CATEGORY_TITLES}
REPORTED_PACKAGES = ("datatrove", "trafilatura", "torch", "megatron-core", "lm-eval", "transformers", "vllm")
FAMILY_SHORT = {"accuracy": "accuracy", "bpb": "bits/byte of gold answers", "p_gold": "p(gold)",
                "clean_text": "clean text bits/byte"}


def _number(value: float, family: dict, sign: bool = False) -> str:
    v = round(value * family["scale"], family["decimals"]) + 0.0  # no "-0.00"
    return f"{v:+.{family['decimals']}f}" if sign else f"{v:.{family['decimals']}f}"


def mean_cell(values: list[float | None], family: dict) -> str:
    """Mean ± spread over the seeds, and how many seeds it rests on where some have no value."""
    present = [v for v in values if v is not None]
    if not present:
        return "-"
    of = f" ({len(present)} of {len(values)} seeds)" if len(present) < len(values) else ""
    if len(present) == 1:
        return _number(present[0], family) + of
    return f"{_number(statistics.fmean(present), family)} ± {_number(statistics.stdev(present), family)}{of}"


def diff_cell(interval: dict | None, family: dict, mark: bool = False) -> str:
    """`+0.53 [-1.97, +3.17]`; with `mark`, `*` where it is a result after Holm's adjustment. An interval
    with no measured noise (standard error 0: the seeds agree exactly and the documents' part is all
    interaction) is no interval and says so, not `[-12.50, -12.50]`."""
    if not interval:
        return "-"
    star = "*" if mark and interval.get("result_holm") else ""
    star += "‡" if interval.get("seed_source") else ""
    if interval.get("se") == 0:  # no measured variation: a bracket of no width would read as certainty
        return f"{_number(interval['difference'], family, True)}{star} (no noise measured: no interval)"
    return (f"{_number(interval['difference'], family, True)}{star} "
            f"[{_number(interval['low'], family, True)}, {_number(interval['high'], family, True)}]")


def verdict(cell: dict) -> str:
    """What a cell of a decision table says: a result (better or worse for the arm), or why not."""
    if cell["result"]:
        return f"**{cell['result']}**"
    if not cell["seeds_measured"]:
        return "not decided: one seed"
    if cell["resolved"]:
        return "resolved, not after Holm" if cell["seeds_agree"] else "resolved, seeds split"
    return "noise"


def notes_markdown(report: dict) -> list[str]:
    return ["Notes on these numbers:", "", *(f"- {note}" for note in report["statistics_notes"])] \
        if report["statistics_notes"] else []


def compared_line(report: dict) -> str:
    steps = report["compared_steps"]
    if not steps:
        return "No step every evaluated run reached: nothing compared."
    what = (f"the mean over steps {', '.join(map(str, steps))} (evaluation.average_last: {report['average_last']})"
            if len(steps) > 1 else f"step {steps[-1]}")
    return (f"Every run compared at {what}, {report['compared_tokens']:,} training tokens: the largest step every "
            "evaluated run reached.")


def headline_markdown(report: dict) -> list[str]:
    arms, table, ref = report["arms"], report["table"], report["reference_arm"]
    accuracy = report["families"]["accuracy"]
    form = {"cloze": "cloze forms (MMLU: mmlu_continuation, CommonsenseQA: commonsense_qa_cloze)",
            "standard": "standard (letter-choice) forms"}[report["headline_form"]]
    lines = [f"Accuracy in %, mean ± spread across seeds; the headline uses the {form}. {compared_line(report)}", "",
             "| arm | seeds | tokens | " + " | ".join(COLUMN_TITLES[c] for c in COLUMNS) + " | Avg (centered) |",
             "|---|---:|---:|" + "---:|" * (len(COLUMNS) + 1)]
    for arm in arms:
        t = table[arm]
        lines.append(f"| {arm} | {len(t['seeds'])} | {max(t['tokens']):,} | "
                     + " | ".join(mean_cell(t["columns"][c], accuracy) for c in COLUMNS)
                     + f" | {mean_cell(t['centered_columns']['average'], accuracy)} |")
    gaps = report["headline_differences"]
    for arm in arms[1:]:
        pair = accuracy["pairs"][f"{arm} − {ref}"]
        if "not_compared" in pair:
            lines.append(f"| {arm} − {ref} | 0 | | not compared: {pair['not_compared']} |" + " |" * len(COLUMNS))
            continue

        def cell(column: str, arm=arm, pair=pair) -> str:
            return diff_cell(pair["columns"].get(column), accuracy) + (" †" if column in gaps.get(arm, {}) else "")

        lines.append(f"| {arm} − {ref} | {len(pair['seeds'])} | | " + " | ".join(cell(c) for c in COLUMNS)
                     + f" | {cell('average_centered')} |")
    why = sorted({w for by_column in gaps.values() for w in by_column.values()})
    if why:
        lines += ["", "† not the difference of the rows above: the paired difference is taken " + "; or ".join(why) + "."]
    return lines


def primary_markdown(report: dict) -> list[str]:
    """The pre-registered primary decision, or that there is none."""
    primary = report.get("primary")
    if not primary:
        return ["No primary decision is pre-registered (`evaluation.primary`): every table below is exploratory."]
    family, column = primary["score"].split(":")
    fam = report["families"][family]
    head = f"**{primary['arm']} − {primary['reference']}** on {_decision_title(fam, family, column)}"
    lines = ["## Primary decision (pre-registered: evaluation.primary)", ""]
    cell = primary["interval"]
    if documents := primary.get("documents_interval"):
        seeds = len(documents["seeds"])
        return lines + [f"{head}: {diff_cell(documents, fam)} (item-only interval: the test documents' noise alone), "
                        f"{seeds} paired seed{'s' if seeds != 1 else ''}: not decided, no p-value: {primary['why']}.",
                        "", *mdd_lines(primary, fam), record_line(primary["record"])]
    if primary["why"] and cell is None:
        return lines + [f"{head}: not compared: {primary['why']}.", "", record_line(primary["record"])]
    seeds = len(cell["seeds"])
    p = f", p = {primary['p']:.3g} ({primary['sides']})" if primary["deciding"] else ""
    said = (f"{head}: {diff_cell(cell, fam)}{p}, {seeds} paired seed{'s' if seeds != 1 else ''}"
            + (f" (seed variance {cell['seed_source']})" if cell["seed_source"] else "") + ": "
            + (f"**{primary['result']}**" if primary["result"] else
               f"not decided ({primary['why']})" if primary["why"] else
               "resolved, seeds split" if cell["resolved"] else "noise")
            + (" (exploratory: see the record)" if primary["record"]["status"] == "exploratory" else "") + ".")
    return lines + [said, "", *mdd_lines(primary, fam), record_line(primary["record"]), "",
                    "The rule: this one comparison is decided alone, at "
                    "its deciding rung, at α = 0.05 (a result when its p-value is below it and every seed agrees in "
                    "sign); the other rungs' results are descriptive, and every other difference below is "
                    "exploratory, Holm over its own table."]


def mdd_lines(primary: dict, fam: dict) -> list[str]:
    """The primary decision's MDD in its score's unit and in accuracy points (with the slope that
    converts it, or why it does not), each followed by a blank line; none where neither was computed."""
    if "accuracy_slope" not in primary:
        return []
    slope, unit = primary["accuracy_slope"], "points" if fam["scale"] == 100 else fam["unit"]
    if primary.get("mdd") is None:
        said = ("Primary MDD: not measured here (it needs two paired seeds of both arms)"
                + (f"; accuracy {slope_text(slope, fam['scale'], fam['unit'])}" if slope else "") + ".")
    else:
        said = (f"Primary MDD (80% power, alone at α = 0.05, at the configured seeds, priced on this pair's measured "
                f"noise): {fam['scale'] * primary['mdd']:.{fam['decimals']}f} {unit}"
                + (f"; {converted_text(primary['mdd'], slope, fam['scale'], fam['unit'])}" if slope else "") + ".")
    priced_on = [f"Priced on its {line}." for line in rho_phi_lines(primary["rho"])] if primary.get("rho") else []
    return [said, "", *[x for line in priced_on for x in (line, "")]]


def record_line(record: dict) -> str:
    """The primary decision's pre-registration record as the report states it."""
    when = (f"fixed in commit {record['commit'][:12]} of {record['config']} on {record['date']}, "
            + ("before its deciding runs existed" if record["fixed_before_runs"] else "after its deciding runs existed")
            + (f" (first evaluated {record['first_deciding_run']})" if record["first_deciding_run"] else " (none yet)")
            if record["commit"] else "")  # not recorded: the status's reason says why
    return (f"Pre-registration record: {' − '.join(record['pair'])} on {record['score']}, {record['sides']}, deciding "
            f"rung {record['deciding_rung']}, α = {record['alpha']:.2g}"
            + ("; chosen after seeing pilot runs (stated: evaluation.primary.pilot_informed)" if record["pilot_informed"]
               else "") + (f"; {when}" if when else "") + f". Status: **{record['status']}**"
            + (f" ({record['why']})" if record["why"] else "") + ".")


def decision_markdown(report: dict) -> list[str]:
    ref, fams = report["reference_arm"], report["families"]
    shown = [(f, c) for f, c in DECISION if c in fams.get(f, {}).get("columns", {})]
    if not report["decision"]:
        return []
    tests = _tests(report["decision"])
    exploratory = " Exploratory beside the primary decision." if report.get("primary") else ""
    lines = [f"## Decision: each arm against {ref}", "",
             f"A difference is a **result** (`better`/`worse` for the arm) when it stays resolved after Holm's "
             f"adjustment over the {tests} differences of this table whose seeds' noise is measured (family-wise error "
             "5%) and every seed agrees in sign; the 95% interval shown is each difference's own, unadjusted. "
             "`resolved, not after Holm`: its interval excludes zero, but not once the table's other differences are "
             "counted; `noise`: this run cannot tell it from zero; `not decided: one seed`: an arm of the pair has one "
             "seed and no seed variance is named for it, so the interval covers the test documents alone and is no "
             "test; ‡: an arm of the pair has one seed and the seeds' part is the variance named for it (the notes "
             "say where it was measured or stated). Intervals: test documents and training seeds, the seeds' part "
             "from the pair's own paired seed differences (never pooled over other arms), a generalized interval on "
             f"their degrees of freedom (evaluation/statistics/intervals.py).{exploratory}", "",
             "| arm | " + " | ".join(_decision_title(fams[f], f, c) for f, c in shown) + " |",
             "|---|" + "---|" * len(shown)]
    lines += [_decision_row(row, shown, fams) for row in report["decision"]]
    lines += _source_lines(report["decision"], fams) + _dropped_lines(report["decision"], fams)
    notes = notes_markdown(report)
    return lines + ([""] + notes if notes else [])


def _source_lines(rows: list[dict], fams: dict) -> list[str]:
    """Every ‡ cell's seed variance not measured on its own seeds at this rung, by where it comes from."""
    named = [f"{row['arm']} − {row['reference']}, {_decision_title(fams[f], f, c)}: {cell['seed_source']}"
             for row in rows for key, cell in row.items() if isinstance(cell, dict) and cell.get("seed_source")
             for f, c in [key.split(":")]]
    return ["", "‡ the seed variance each such cell rests on: " + "; ".join(named) + "."] if named else []


def _dropped_lines(rows: list[dict], fams: dict) -> list[str]:
    """Every empty cell of a decision table and why (a task one of its arms, or every arm, has no
    documents of; no seed in common)."""
    dropped = [f"{row['arm']} − {row['reference']}, {_decision_title(fams[f], f, c)}: {why}"
               for row in rows for (f, c), why in ((key.split(":"), why) for key, why in row["dropped"])]
    return ["", "Not compared (each empty cell, and why): " + "; ".join(dropped) + "."] if dropped else []


def _tests(rows: list[dict]) -> int:
    """The differences a decision table's Holm adjustment covers (every cell carries the count)."""
    return next((cell["tests"] for row in rows for cell in row.values() if isinstance(cell, dict)), 0)


def _decision_row(row: dict, shown: list[tuple[str, str]], fams: dict) -> str:
    cells = []
    for f, c in shown:
        cell = row[f"{f}:{c}"]
        cells.append(f"{diff_cell(cell, fams[f])} {verdict(cell)}" if cell else "-")
    return f"| {row['arm']} − {row['reference']} | " + " | ".join(cells) + " |"


def _decision_title(family: dict, name: str, column: str) -> str:
    lower = ", lower is better" if family["lower_is_better"] else ""
    return f"{FAMILY_SHORT[name]}, {family['columns'][column]} ({family['unit']}{lower})"


def unit_table(report: dict, name: str, suite: Suite) -> list[str]:
    """One row per benchmark (or clean-text task): every arm's score and its difference to the
    reference arm, `*` where Holm's adjustment over every pair and benchmark resolves it."""
    family, arms, ref = report["families"][name], report["arms"], report["reference_arm"]
    accuracy = name == "accuracy"
    lines = ["| benchmark | " + ("category | metric | " if accuracy else "") + " | ".join(arms)
             + "".join(f" | {a} − {ref}" for a in arms[1:]) + " |",
             "|---|" + ("---|---|" if accuracy else "") + "---:|" * (2 * len(arms) - 1)]
    for unit, tasks in family["units"].items():
        b = next((b for b in suite.benchmarks if b.name == unit), None)
        values = [report["table"][a]["benchmarks"][unit] if accuracy else family["finals"]["units"].get(unit, {}).get(a, [])
                  for a in arms]
        head = f"| {unit} ({'+'.join(tasks)}) | " + (f"{b.category} | {b.score} | " if accuracy else "") \
            if b else f"| {unit} | "
        lines.append(head + " | ".join(mean_cell(v, family) for v in values)
                     + "".join(f" | {diff_cell(family['pairs'][f'{a} − {ref}']['units'].get(unit), family, mark=True)}"
                               for a in arms[1:]) + " |")
        if accuracy and b.cloze and report["headline_form"] == "cloze":
            lines.append(f"| {unit} ({'+'.join(b.tasks)}, letter choice) | {b.category} | {b.score} | "
                         + " | ".join(mean_cell(report["table"][a]["standard_form"][unit], family) for a in arms)
                         + " |" * (len(arms) - 1) + " |")
    empty = [f"{pair}, {family['columns'].get(score, score) if kind == 'columns' else score}: {why}"
             for pair, p in family["pairs"].items() for (kind, _, score), why in
             ((key.partition(":"), why) for key, why in p["dropped"].items())]
    empty += [f"{pair}: {p['not_compared']}" for pair, p in family["pairs"].items() if "not_compared" in p]
    return lines + (["", "Empty cells (`-`), and why: " + "; ".join(empty) + "."] if empty else [])


def family_section(report: dict, name: str, suite: Suite) -> list[str]:
    family = report["families"][name]
    if not family["finals"]["units"]:
        return []
    scale = " in %" if family["scale"] == 100 else f" in {family['unit']}"
    lines = [f"## {family['title']}", "",
             f"Mean ± spread across seeds{scale}; differences to {report['reference_arm']} with 95% intervals, `*` "
             f"where the difference is a result after Holm's adjustment over every pair of arms and every benchmark of "
             f"this table ({family['holm_tests']} differences) and every seed agrees in sign.", ""]
    if name != "accuracy":
        lines += column_table(report, name) + [""]
    return lines + unit_table(report, name, suite)


def column_table(report: dict, name: str) -> list[str]:
    """Per arm the family's columns (average and categories, or the clean-text views)."""
    family = report["families"][name]
    columns = [c for c in family["columns"] if c in family["finals"]["columns"]]
    lines = ["| arm | " + " | ".join(family["columns"][c] for c in columns) + " |", "|---|" + "---:|" * len(columns)]
    for arm in report["arms"]:
        lines.append(f"| {arm} | " + " | ".join(mean_cell(family["finals"]["columns"][c].get(arm, []), family)
                                                for c in columns) + " |")
    return lines


def pairs_table(report: dict) -> list[str]:
    """Every pair of arms on the decision's scores, Holm over every cell of this table."""
    fams = report["families"]
    shown = [(f, c) for f, c in DECISION if c in fams.get(f, {}).get("columns", {})]
    if not report["every_pair"]:
        return []
    tests = _tests(report["every_pair"])
    lines = ["## Every pair of arms", "",
             f"As the decision table, with Holm's adjustment over the {tests} differences of this table.", "",
             "| pair | " + " | ".join(_decision_title(fams[f], f, c) for f, c in shown) + " |", "|---|" + "---|" * len(shown)]
    return lines + [_decision_row(row, shown, fams) for row in report["every_pair"]] \
        + _source_lines(report["every_pair"], fams) + _dropped_lines(report["every_pair"], fams)


def format_markdown(report: dict) -> list[str]:
    if "clean_text" not in report["families"]:
        return []
    family = report["families"]["clean_text"]
    tests = sum(len(by_pair) for by_pair in family["interactions"].values())
    if not tests:
        return []
    lines = ["## Format-dependent pairs", "",
             "The same clean text in two views, plain and Markdown. A pair of arms is format-dependent when its "
             "difference itself changes with the view: the paired interval of (plain − Markdown) of its difference, "
             "over the same documents and seeds, resolved after Holm's adjustment over the "
             f"{tests} pairs and sets, every seed agreeing. Its ranking is then about the reference's marks as much as "
             "about what the extractors kept. A pair whose difference is the same in both views is not flagged, "
             "whatever each view's own verdict.", ""]
    if not report["format_flags"]:
        return lines + ["No pair of arms depends on the view."]
    lines += ["| set | pair | plain | Markdown | plain − Markdown | how |", "|---|---|---|---|---|---|"]
    for flag in report["format_flags"]:
        lines.append(f"| {flag['set']} | {flag['pair']} | {diff_cell(flag['plain'], family)} | "
                     f"{diff_cell(flag['markdown'], family)} | {diff_cell(flag['interaction'], family)} | {flag['why']} |")
    return lines


def noise_markdown(report: dict) -> list[str]:
    k = report["noise_checkpoints"]
    lines = ["## Signal and noise", "",
             "Seed SD: spread of an arm's score across its seeds (pooled over arms). Checkpoint SD: spread over a "
             f"run's last {k} evaluated checkpoints (pooled over runs; Signal and Noise's noise, trend included). "
             "Signal: max − min of the arms' scores. Floor: the signal these arms show on average with no true "
             "difference, at their measured noise (its mean); `above`: the signal, over the standard error of the two "
             "arms it is made of, exceeds that ratio's 95th percentile with no difference (each arm's seed variance on "
             "its own degrees of freedom; `signal_floor_95` in report.json is that percentile in the score's unit), so "
             "pure noise gets there one run in twenty; `-` where an arm's seeds' noise is neither measured nor named. "
             "SNR: signal / checkpoint SD (and / seed SD), each beside its value at the floor. Scores in the family's "
             "unit (accuracy and p(gold) in points).", "",
             "| family | score | seed SD | checkpoint SD | signal | floor | above | SNR (floor) | SNR seeds (floor) |",
             "|---|---|---:|---:|---:|---:|---|---:|---:|"]
    for name, family in report["families"].items():
        for kind in ("columns", "units"):
            for score, n in family["noise"][kind].items():
                title = family["columns"][score] if kind == "columns" else score
                cells = [_number(n[k], family) if n[k] is not None else "-"
                         for k in ("seed_sd", "checkpoint_sd", "signal", "signal_floor")]
                cells.append({True: "yes", False: "no", None: "-"}[n["above_floor"]])
                cells += [f"{n[k]:.2f} ({n[k + '_floor']:.2f})" if n[k] is not None and n[k + "_floor"] is not None
                          else f"{n[k]:.2f}" if n[k] is not None else "-" for k in ("snr", "snr_seeds")]
                lines.append(f"| {FAMILY_SHORT[name]} | {title} | " + " | ".join(cells) + " |")
    return lines


def extraction_markdown(report: dict) -> list[str]:
    extraction = report["extraction"]
    if not extraction:
        return []
    lines = ["## What each arm trained on", "",
             "| arm | source | ROUGE-5 F1 (extraction benchmark) | records | documents post-processed "
             "| tokens post-processed | documents in budget | tokens in budget |",
             "|---|---|---:|---:|---:|---:|---:|---:|"]
    for arm in report["arms"]:
        e = extraction.get(arm, {})
        counts = " | ".join(f"{e[key]:,}" if e.get(key) is not None else "-" for key in (
            "records", "documents_post_processed", "tokens_post_processed", "documents_in_budget", "tokens_in_budget"))
        rouge = f"{e['rouge5_f1']:.4f}" if "rouge5_f1" in e else "-"
        lines.append(f"| {arm} | {e.get('source', '-')} | {rouge} | {counts} |")
    return lines


def ledger_text(report: dict) -> str:
    """Every arm's documents through the corpus flow, one line each (corpus.accounting.ledger)."""
    ledgers = report["ledgers"]
    if not any(ledger["rows"] for ledger in ledgers):
        return ""
    stages = [r["stage"] for r in ledgers[0]["rows"]]
    return "\n".join(["## Every record accounted for", "", "documents: in → after " + " → ".join(stages),
                      *(summary_line(ledger, stages) for ledger in ledgers)]) + "\n"


def outputs_text(config: ExperimentConfig) -> str:
    root = config.output_root
    where = {"extracted documents": root / "extract", "post-processed documents and what was removed": root / "post",
             "tokenizer": config.tokenizer_dir(), "token-matched datasets": root / "datasets",
             "checkpoints and training logs": root / "train", "lm-eval results and samples": root / "eval",
             "library logs": root / "logs"}
    return "\n".join(["## Where everything is", "", *(f"  {what}: {path}" for what, path in where.items() if path.exists())])


def missing_text(report: dict) -> str:
    notes = [*report["comparison_notes"], *report["missing"]]
    return "\n".join(["## Missing or left out", "", *[f"- {m}" for m in notes]]) + "\n" if notes else ""


def provenance_text(report: dict) -> str:
    """Commit, config hash, package set and seeds; every folder made differently is named."""
    made = report["made_by"]
    if not made:
        return ""
    key = ("git_commit", "config_sha256", "package_set_sha256")
    groups: dict[tuple, list[str]] = {}
    for folder, p in made.items():
        groups.setdefault(tuple(p.get(k) for k in key), []).append(folder)
    first = next(iter(made.values()))
    packages = ", ".join(f"{k} {v}" for k, v in first["packages"].items() if k in REPORTED_PACKAGES)
    extractors = "; ".join(f"{arm}: {versions_text(v)}" for arm, v in first.get("extractors", {}).items() if v)
    lines = ["## What made these numbers", "", f"- packages: {packages}; python {first['python']}",
             *([f"- extractors: {extractors}"] if extractors else []),
             "- seeds: " + ", ".join(f"{k} {v}" for k, v in first["seeds"].items()), f"- {report['minhash_scope']}"]
    for (commit, config_hash, package_set), folders in groups.items():
        where = "every output" if len(groups) == 1 else ", ".join(folders)
        lines.append(f"- {where}: commit {commit}, config {config_hash[:12]}, package set {package_set[:12]}")
    if len(groups) > 1:
        lines.append("- **outputs made by different commits, configs or package sets: compare with care**")
    return "\n".join(lines) + "\n"


def _verdict_cell(cell: dict | None, family: dict) -> str:
    if not cell:
        return "-"
    return f"{_number(cell['difference'], family, True)} {cell['result'] or 'noise'}"


def ladder_markdown(report: dict) -> list[str]:
    """The ladder's section: its rungs, whether each smaller rung decides every pair as the largest
    evaluated one does, per decision score, and the scaling fits' predictions at the target."""
    ladder = report.get("ladder")
    if not ladder:
        return []
    reports, reference, target = ladder["reports"], ladder["reference"], ladder["target"]
    lines = ["## The model ladder: do the small rungs decide as the large one does?", "",
             "| rung | non-embedding parameters | training tokens | compute (FLOPs, causal attention) | seeds | evaluated at |",
             "|---|---:|---:|---:|---|---|"]
    one_seed = {r for r in ladder["rungs"] if reports[r]["arms"] and
                min(len(reports[r]["table"][arm]["seeds"]) for arm in reports[r]["arms"]) == 1}
    for rung in ladder["rungs"]:
        shape, done = ladder["shapes"][rung], reports[rung]
        compute = ladder.get("compute", {}).get(rung)
        seeds_run = sorted({seed for arm in done["arms"] for seed in done["table"][arm]["seeds"]})
        at = (f"{done['compared_tokens']:,} tokens, {len(done['arms'])} arms, seeds {', '.join(map(str, seeds_run))}"
              + (" (an arm with one seed: decided only against a seed variance named for it, its notes say which)"
                 if rung in one_seed else "")) if done["arms"] and done["compared_tokens"] else "not yet"
        lines.append(f"| {rung}{' (target)' if rung == target else ''} | {shape['non_embedding_parameters']:,} | "
                     f"{shape['tokens']:,} | {f'{compute:.3g}' if compute else '-'} | "
                     f"{', '.join(map(str, shape['seeds']))} | {at} |")
    if reference is None:
        return lines + ["", "No rung has two arms with evaluated runs yet: nothing to compare."]
    if not ladder["target_evaluated"]:
        lines += ["", f"The target rung {target} has fewer than two arms with evaluated runs: every rung below is "
                      f"read against {reference}, the largest rung where two arms have."]
    if reference in one_seed:
        lines += ["", f"**{reference} has an arm with one evaluated seed**: its verdicts rest on the seed variance named "
                      "for that arm (measured at the nearest rung where it has two seeds, or stated in evaluation.seed_sd; "
                      "without one, none of its pairs is decided), and so does every agreement count against them."]
    fams = reports[reference]["families"]
    if primary := ladder.get("primary"):
        family, column = primary["score"].split(":")
        deciding = next((rung for rung, r in primary["rungs"].items() if r["deciding"]), reference)
        lines += ["", f"The primary decision at every rung: {primary['arm']} − {primary['reference']} on "
                      f"{_decision_title(fams[family], family, column)}, decided once, at its deciding rung alone at "
                      "α = 0.05 (every seed agreeing); the other rungs are descriptive, their sign beside "
                      f"{deciding}'s.", "",
                  "| rung | difference [95% interval] | verdict | sign as at " + deciding + " |", "|---|---|---|---|"]
        for rung, r in primary["rungs"].items():
            interval = "-" if r["difference"] is None else diff_cell(r, fams[family])
            verdict = r["verdict"] + (f" ({r['why']})" if r["why"] else "")
            sign = "-" if r["sign_agrees"] is None else "yes" if r["sign_agrees"] else "no"
            lines.append(f"| {rung} | {interval} | {verdict} | {sign} |")
    lines += ["", f"Decision accuracy (DataDecide's): the share of pairs of arms whose difference has the same sign at a "
                  f"rung as at {reference}; of the pairs {reference} resolves (its every-pair table, Holm over its cells, "
                  "every seed agreeing), how many the rung resolves the same way, calls noise, or resolves the other "
                  "way. Point signs of unresolved differences are themselves noisy: read the resolved counts first.", "",
              "| rung | score | signs agree | resolved at " + reference + " | same | noise | opposite |",
              "|---|---|---:|---:|---:|---:|---:|"]
    for rung, part in ladder["agreement"].items():
        for metric, a in part["by_metric"].items():
            family, column = metric.split(":")
            lines.append(f"| {rung} | {_decision_title(fams[family], family, column)} | {a['sign_agrees']}/{a['pairs']} "
                         f"({a['decision_accuracy']:.0%}) | {a['target_resolved']} | {a['resolved_same']} | "
                         f"{a['called_noise']} | {a['resolved_opposite']} |")
    evaluated = ladder["evaluated"]
    for family, column in DECISION:
        if column not in fams.get(family, {}).get("columns", {}):
            continue
        rows = {row["arm"] + " − " + row["reference"]: row for row in reports[reference]["every_pair"]}
        if not any(row.get(f"{family}:{column}") for row in rows.values()):
            continue
        lines += ["", f"{_decision_title(fams[family], family, column)}, every pair at every rung:", "",
                  "| pair | " + " | ".join(evaluated) + " |", "|---|" + "---|" * len(evaluated)]
        for pair in rows:
            cells = []
            for rung in evaluated:
                theirs = {r["arm"] + " − " + r["reference"]: r for r in reports[rung]["every_pair"]}.get(pair, {})
                cells.append(_verdict_cell(theirs.get(f"{family}:{column}"), fams[family]))
            lines.append(f"| {pair} | " + " | ".join(cells) + " |")
    fits = [(score, arm, data["fit"]) for score, s in ladder["scores"].items() for arm, data in s["arms"].items()
            if data["fit"]]
    if fits:
        lines += ["", f"Scaling fits, per arm: the score against training compute through the seeds of the rungs "
                      f"below {target} (score = e ± a·C^(−b) through three compute points or more, a line in log C "
                      f"through two), and its value at {target}'s compute ({ladder['compute'][target]:.3g} FLOPs) "
                      f"with a 95% bootstrap interval over seeds, beside what {target} scored where it has run (a test "
                      "out of sample). With a few seeds a rung the bootstrap sees less than their variance: the "
                      "interval is a floor on the uncertainty, and '-' where a rung has one seed. **A prediction, not "
                      "a result**: DataDecide found that extrapolations like these did not pick the better corpus "
                      "more often than ranking at one small size for the same compute.", "",
                  "| score | arm | form | through | prediction at " + target + " | interval | observed there |",
                  "|---|---|---|---|---:|---|---:|"]
        for score, arm, fit in fits:
            s = ladder["scores"][score]
            family = reports[reference]["families"][s["family"]]
            observed = s["arms"][arm]["points"].get(target)
            low, high = fit["interval"]
            interval = "-" if math.isnan(low) else f"[{_number(low, family)}, {_number(high, family)}]"
            lines.append(f"| {s['title']} | {arm} | {fit['form']} | {', '.join(fit['through'])} | "
                         f"{_number(fit['prediction'], family)} | {interval} | "
                         f"{mean_cell(observed['scores'], family) if observed else '-'} |")
    else:
        lines += ["", f"No scaling fit: a fit goes through two rungs below {target} or more, with scores of the arm "
                      "at each (and the tokenizer, for the compute)."]
    for rung in evaluated:
        if rung == report["rung"]:
            continue
        lines += ["", f"### Rung {rung}", "", compared_line(reports[rung]), ""]
        lines += decision_markdown(reports[rung])[2:] + [""] + pairs_table(reports[rung])[2:]
    return lines


def report_markdown(report: dict, suite: Suite) -> str:
    title = [f"# {_experiment(report)}: downstream scores per arm", ""]
    if not report["arms"]:
        return "\n".join(title + ["No evaluated checkpoints yet.", "", missing_text(report)])
    sections = [title + headline_markdown(report), primary_markdown(report), ladder_markdown(report),
                decision_markdown(report)]
    sections += [family_section(report, name, suite) for name in report["families"]]
    sections += [format_markdown(report), pairs_table(report), noise_markdown(report), extraction_markdown(report)]
    text = "\n\n".join("\n".join(s) for s in sections if s) + "\n"
    return "\n".join(filter(None, [text, provenance_text(report), missing_text(report)]))


def console_text(report: dict, suite: Suite, config: ExperimentConfig) -> str:
    """The headline and the decision table, every record accounted for, what made the numbers,
    what is missing, where everything is (report.md has every benchmark and family)."""
    title = [f"# {_experiment(report)}: downstream scores per arm", ""]
    if not report["arms"]:
        return "\n".join(title + ["No evaluated checkpoints yet."]) + "\n" + missing_text(report)
    tables = "\n\n".join("\n".join(s) for s in (title + headline_markdown(report), primary_markdown(report),
                                                 decision_markdown(report)) if s)
    return "\n".join(filter(None, [tables + "\n", ladder_text(report), ledger_text(report), provenance_text(report),
                                   missing_text(report), outputs_text(config)]))


def _experiment(report: dict) -> str:
    """The experiment's name, and for a ladder the rung the report's tables are of."""
    return f"{report['experiment']}, rung {report['rung']}" if report.get("ladder") else report["experiment"]


def ladder_text(report: dict) -> str:
    """The console's lines on a ladder: which rung the tables above are, the others, and per
    decision score whether each smaller rung's signs agree with the largest evaluated one's."""
    ladder = report.get("ladder")
    if not ladder:
        return ""
    reports = ladder["reports"]
    state = {r: "headline" if r == report["rung"] else "evaluated" if r in ladder["evaluated"] else
             "one arm evaluated" if reports[r]["arms"] else "not evaluated" for r in ladder["rungs"]}
    lines = ["## The model ladder", "", "rungs: " + ", ".join(f"{r} ({s})" for r, s in state.items())]
    if primary := ladder.get("primary"):
        lines.append(f"primary decision ({primary['arm']} − {primary['reference']}, {primary['score']}): "
                     + "; ".join(f"{rung} {r['verdict']}" for rung, r in primary["rungs"].items()))
    if ladder["reference"] and ladder["agreement"]:
        fams = reports[ladder["reference"]]["families"]
        lines.append(f"decided as {ladder['reference']} decides (signs agree; resolved the same of those it resolves):")
        for rung, part in ladder["agreement"].items():
            cells = [f"{FAMILY_SHORT[m.split(':')[0]]} {fams[m.split(':')[0]]['columns'][m.split(':')[1]]} "
                     f"{a['sign_agrees']}/{a['pairs']}; {a['resolved_same']}/{a['target_resolved']}"
                     for m, a in part["by_metric"].items()]
            lines.append(f"  {rung}: " + " | ".join(cells))
    return "\n".join(lines) + "\n"
