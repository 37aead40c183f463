"""The tables a user reads as decisions: the decision table (each arm against the reference arm), the
every-pair table, the pre-registered primary comparison, the format-dependent clean-text pairs, and
the notes on what the numbers rest on where it is less than the method assumes."""

from __future__ import annotations

import statistics
from itertools import combinations

from configs.experiment import ExperimentConfig
from evaluation import markdown
from evaluation.metrics import DECISION, Family
from evaluation.preregistration import preregistration
from evaluation.statistics.intervals import (
    LEVEL,
    decidable_beyond,
    holm,
)
from evaluation.tasks.suite import COLUMNS


def _decide(cells: list[dict], lower_is_better: list[bool]) -> None:
    """Holm over the cells of one table (intervals, copied) whose seeds' noise is in the interval
    (measured, or named for a one-seed arm): each gets `p_holm` and its `result`, better or worse for
    the arm where the adjusted p is below 0.05 and every seed agrees, else None. A cell without it
    is no test: no `p_holm`, no result, and not in the count (`tests`) Holm adjusts for."""
    tested = [i for i, c in enumerate(cells) if c["seeds_measured"]]
    for cell in cells:
        cell |= {"p_holm": None, "tests": len(tested), "result": None}
    for i, adjusted in zip(tested, holm([cells[i]["p"] for i in tested]), strict=True):
        cell = cells[i]
        better = (cell["difference"] < 0) == lower_is_better[i]
        cell |= {"p_holm": adjusted,
                 "result": ("better" if better else "worse") if adjusted < 1 - LEVEL and cell["seeds_agree"] else None}


def _table(report: dict, pairs: list[tuple[str, str]]) -> list[dict]:
    """One row per pair (arm, reference) on the decision's scores, Holm over every cell shown; a
    score the pair is not compared on is None, and `dropped` lists [score, why] for every such cell."""
    rows, cells, lower = [], [], []
    for arm, ref in pairs:
        row: dict = {"arm": arm, "reference": ref, "dropped": []}
        for family, column in DECISION:
            if family not in report["families"]:  # a family this run does not evaluate (no clean text): no column
                continue
            fam = report["families"][family]
            pair = fam["pairs"][f"{arm} − {ref}"]
            interval = pair.get("columns", {}).get(column)
            row[f"{family}:{column}"] = dict(interval) if interval else None
            if interval:
                cells.append(row[f"{family}:{column}"])
                lower.append(fam["lower_is_better"])
            else:
                row["dropped"].append([f"{family}:{column}", pair.get("not_compared") or pair["dropped"][f"columns:{column}"]])
        rows.append(row)
    _decide(cells, lower)
    return rows


def decision_rows(report: dict) -> list[dict]:
    """Per arm against the reference arm: accuracy average, continuous average (bits per byte of
    the gold answers), clean-text bits per byte in each view; Holm over every cell of the table."""
    ref = report["reference_arm"]
    return _table(report, [(arm, ref) for arm in report["arms"][1:]])


def every_pair_rows(report: dict) -> list[dict]:
    """Every pair of arms on the decision's scores; Holm over every cell of this table."""
    return _table(report, [(b, a) for a, b in combinations(report["arms"], 2)])


def format_flags(report: dict) -> list[dict]:
    """Every pair of arms whose clean-text difference changes with the view: the paired interval of
    plain − Markdown (the view-by-arm interaction) resolved after Holm over every pair and set, and
    every seed agreeing. Two differences of the same size in both views are no flag, whatever each
    view's own verdict."""
    family = report["families"].get("clean_text")
    if not family:
        return []
    tests = [(s, pair, dict(i)) for s, by_pair in family["interactions"].items() for pair, i in by_pair.items()
             if i["seeds_measured"]]  # one seed: the view-by-arm interaction's seeds' part is not measured, no test
    flags = []
    for (s, pair, interaction), adjusted in zip(tests, holm([i["p"] for _, _, i in tests]), strict=True):
        interaction |= {"p_holm": adjusted, "tests": len(tests)}
        if adjusted < 1 - LEVEL and interaction["seeds_agree"]:
            plain, markdown = (family["pairs"][pair]["units"].get(f"clean_text_{s}_{view}") for view in ("plain", "markdown"))
            flipped = plain and markdown and (plain["difference"] > 0) != (markdown["difference"] > 0)
            flags.append({"set": s, "pair": pair, "plain": plain, "markdown": markdown, "interaction": interaction,
                          "why": "the sign flips" if flipped else
                          f"{'larger' if abs(plain['difference']) > abs(markdown['difference']) else 'smaller'} in plain text"})
    return flags


def headline_differences(report: dict) -> dict[str, dict[str, str]]:
    """Per arm and headline column where the paired difference is not the difference of the arms'
    rows above it (lm-eval's scores, every seed and document), why not."""
    out: dict[str, dict[str, str]] = {}
    table, ref, accuracy = report["table"], report["reference_arm"], report["families"]["accuracy"]
    for arm in report["arms"][1:]:
        pair = accuracy["pairs"][f"{arm} − {ref}"]
        for column in (*COLUMNS, "average_centered"):
            rows = [table[a]["centered_columns" if column == "average_centered" else "columns"][column.replace("_centered", "")]
                    for a in (arm, ref)]
            interval = pair["columns"].get(column)
            if not interval or any(v is None for r in rows for v in r):
                continue
            gap = statistics.fmean(rows[0]) - statistics.fmean(rows[1]) - interval["difference"]
            if abs(gap) * accuracy["scale"] < 0.5 * 10 ** -accuracy["decimals"]:
                continue
            seeds = [table[a]["seeds"] for a in (arm, ref)]
            why = (f"on the paired seeds {pair['seeds']} (the rows: {arm} {seeds[0]}, {ref} {seeds[1]})"
                   if seeds[0] != pair["seeds"] or seeds[1] != pair["seeds"] else
                   "on the documents every compared run logged alike (the rows: lm-eval's scores over every document "
                   "it scored; see Missing or left out)")
            out.setdefault(arm, {})[column] = why
    return out


def statistics_notes(report: dict) -> list[str]:
    """What the intervals and decisions rest on, where it is less than the method assumes."""
    notes, fams, table = [], report["families"], report["table"]
    for pair, p in fams.get("accuracy", {}).get("pairs", {}).items():
        if "not_compared" in p:
            notes.append(f"{pair}: not compared, {p['not_compared']}.")
    for arm in (a for a in report["arms"] if len(table[a]["seeds"]) == 1):
        sources = {v["source"] or None for f in fams.values() for by_score in f["seed_variances"].values()
                   for by_arm in by_score.values() for a, v in by_arm.items() if a == arm}
        named = sorted(s for s in sources if s)
        if not named:
            notes.append(f"{arm}: one seed and no seed variance named for it, so the seeds' noise of its pairs is not "
                         "measured: their intervals cover the test documents alone, and no table decides them (train a "
                         "second seed, measure it at another rung of the ladder, or state evaluation.seed_sd).")
        else:
            notes.append(f"{arm}: one seed; its pairs are decided against its seed variance {' and '.join(named)}"
                         + (" (where none is named for a score, that score is not decided)" if None in sources else "")
                         + ": a result there is one against that named variance, not this rung's own seeds (the "
                         "cells say which: ‡).")
    for check in report.get("stated_seed_checks", []):
        scale, unit = fams[check["family"]]["scale"], fams[check["family"]]["unit"]
        notes.append(f"{markdown.FAMILY_SHORT[check['family']]} {check['score'].partition(':')[2]}: seed SD "
                     f"{check['stated']}, beside {scale * check['measured_sd']:.3g} {unit} measured at this rung on "
                     f"{', '.join(check['arms'])} (95% interval [{scale * check['low']:.3g}, {scale * check['high']:.3g}], "
                     f"{check['df']:g} degrees of freedom): within or above it, so accepted.")
    unvaried = {name: f["unvaried_seeds"] for name, f in fams.items() if f.get("unvaried_seeds")}
    if unvaried:
        notes.append("Every seed gave the same value on every document (" + "; ".join(
            f"{', '.join(arms)} on {markdown.FAMILY_SHORT[name]}" for name, arms in unvaried.items())
            + "): the seeds measured no noise there. Check that the seed reaches the initial weights and the data order; "
            "where both arms of a pair are so, its interval covers the test documents alone.")
    undecided = []
    for row in report["decision"]:
        for key, cell in row.items():
            if isinstance(cell, dict) and not cell["result"] and cell["df_seeds"] is not None and cell["df_seeds"] < 3 \
                    and cell["seed_part"] > 0.5:
                family, column = key.split(":")
                fam = fams[family]
                beyond = decidable_beyond(cell, (1 - LEVEL) / cell["tests"])
                bound = ("never: it would take more than 100 points" if fam["scale"] == 100 and beyond > 1
                         else f"only beyond ±{fam['scale'] * beyond:.{fam['decimals']}f}")
                undecided.append(f"{row['arm']} − {row['reference']} on {markdown.FAMILY_SHORT[family]}, "
                                 f"{fam['columns'][column]} ({bound})")
    if undecided:
        notes.append("Not decided at this many seeds: " + "; ".join(undecided) + ". Seeds make most of their noise, and "
                     "a pair's seed noise rests on its paired seeds − 1 degrees of freedom, so the table can call such a "
                     "difference a result only beyond the bound given (`python -m evaluation.power CONFIG --from-run` "
                     "says how many seeds would resolve it).")
    return notes


UNMEASURED_SEEDS = ("the seeds' noise is unmeasured (fewer than two seeds a side and no seed variance named for the "
                    "one-seed arm), so there is no test: the interval covers the test documents alone")


def primary_decision(report: dict, config: ExperimentConfig, fams: dict[str, Family]) -> dict | None:
    """The pre-registered primary comparison (`evaluation.primary`), decided alone at 0.05 at its
    deciding rung (`deciding`; at the other rungs descriptive, no result): its interval (arm −
    reference), `p` (two- or one-sided, `sides`), `result` better or worse for the arm where p < 0.05,
    the seeds' noise is in the interval and every seed agrees, else None, `why` where it is not
    compared or not tested, and its pre-registration `record` (evaluation/preregistration.py).
    Where the seeds' noise is not measured the decision has no `interval` and no p-value, only its
    `documents_interval` (the test documents' noise alone)."""
    primary = config.evaluation.primary if config.evaluation else None
    if primary is None:
        return None
    family, column = primary.score.split(":")
    if family not in fams or column not in fams[family].columns:
        raise SystemExit(f"evaluation.primary.score: {primary.score}: no such score in this run's report (a family's "
                         "column: " + ", ".join(f"{f}:{c}" for f, fam in fams.items() for c in fam.columns) + ")")
    arm, ref = primary.pair
    record = preregistration(config)
    out = {"arm": arm, "reference": ref, "score": primary.score, "alpha": 1 - LEVEL, "sides": primary.sides,
           "interval": None, "result": None, "why": None, "record": record,
           "deciding": not config.pretrain or config.pretrain.rung.name == record["deciding_rung"]}
    absent = [a for a in (arm, ref) if a not in report["arms"]]
    if absent:
        return out | {"why": f"{', '.join(absent)}: no evaluated run at the compared step"}
    pairs = report["families"][family]["pairs"]
    pair, flip = (pairs[f"{arm} − {ref}"], False) if f"{arm} − {ref}" in pairs else (pairs[f"{ref} − {arm}"], True)
    cell = pair["columns"].get(column)
    if cell is None:
        return out | {"why": pair.get("not_compared") or pair["dropped"].get(f"columns:{column}", "not compared")}
    if flip:
        cell = cell | {"difference": -cell["difference"], "low": -cell["high"], "high": -cell["low"],
                       "per_seed": [-d for d in cell["per_seed"]]}
    if not out["deciding"] and cell["seeds_measured"]:  # one hypothesis, one test: at its deciding rung
        return out | {"interval": cell, "why": f"descriptive: the deciding rung is {record['deciding_rung']}"}
    return out | decide_primary(cell, report["families"][family]["lower_is_better"], primary.sides)


def decide_primary(cell: dict, lower_is_better: bool, sides: str) -> dict:
    """The primary decision on its cell (arm − reference, `Interval.to_json()` and its seeds): its
    `interval`, `p` (two- or one-sided) and `result`; where the seeds' noise is not measured, no
    interval and no p-value, only the documents' interval and `why`."""
    if not cell["seeds_measured"]:
        # fewer than two seeds a side and no seed variance named: a p-value would test the documents alone, not the
        # question, so none is given; the documents' interval stays, labelled as such
        documents = {k: cell[k] for k in ("difference", "low", "high", "se", "per_seed", "seeds")}
        return {"documents_interval": documents, "why": UNMEASURED_SEEDS}
    better = (cell["difference"] < 0) == lower_is_better
    # one-sided: only the arm better than the reference is a result (half the two-sided tail, that side only)
    p = cell["p"] if sides == "two-sided" else cell["p"] / 2 if better else 1 - cell["p"] / 2
    decided = p < 1 - LEVEL and cell["seeds_agree"]
    return {"interval": cell, "p": p, "result": ("better" if better else "worse") if decided else None}



def decision_sections(report: dict, config: ExperimentConfig, fams: dict[str, Family]) -> dict:
    """The report's decision sections, each read from the report (its families) and those before it:
    `primary`, `decision`, `every_pair`, `format_flags`, `headline_differences`, `statistics_notes`;
    empty ones where no arm has an evaluated run."""
    arms = bool(report["arms"])
    out = {"primary": primary_decision(report, config, fams) if arms else None}
    out["decision"] = decision_rows(report) if arms else []
    out["every_pair"] = every_pair_rows(report) if arms else []
    out["format_flags"] = format_flags(report) if arms else []
    out["headline_differences"] = headline_differences(report | out) if arms else {}
    out["statistics_notes"] = statistics_notes(report | out) if arms else []
    return out
