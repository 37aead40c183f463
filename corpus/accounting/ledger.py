"""The ledger: every input record of every arm, from WARC to training tokens.

    python -m corpus.accounting.ledger CONFIG

Reads datatrove's own per-task stats of every stage (nothing is re-counted) and prints, side by
side for all arms, one row per stage: documents in and out, removed by reason, tokens in and out
(tokens are counted with the experiment's tokenizer, end-of-document token included, right
after extraction). Every row is checked: in = out + removed, and each stage's input is the
previous stage's output. "Every record accounted for" needs more: the arm ran, every input file of
the extractor arms read whole (each counted by outcome: read whole, read around damage, skipped,
failed, not read, with its records, retries and unreadable bytes; a file not read whole is named
with its records read of those it holds), every task of every stage the arm goes through finished
(datatrove's completion markers; a stage with a missing task would only count part of the
records), and every file an arm read whole gave the records it holds (the input manifest's count,
else that of the other arms' whole reads; whole reads that disagree count against every arm). A
reference-corpus arm starts at its read row (documents read, not drawn, written) and joins where it
joins. An input file read without a known size (`inputs.unknown_size: read`) leaves the arm `not
verified`: whether the file ended where its stream did is unknown. Then the
overlap between arms: how many source records (WARC record ids) survive post-processing, and the
token budget, in both arms or only in one, counted per document: a record id that repeats in an arm
(the same WARC-Record-ID in two input files) is matched once per copy, and the ledger warns of it.
Writes `<output_root>/ledger.json`.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from itertools import combinations, pairwise
from pathlib import Path

import numpy as np
from datatrove.pipeline.tokens import TokensCounter
from datatrove.pipeline.writers import JsonlWriter

from configs.durable import write_atomically
from configs.experiment import ExperimentConfig, load_experiment_or_exit
from corpus.accounting.summary import (
    counters,
    file_note,
    files_cell,
    find_step,
    labeler_text,
    merged_stats,
    not_read_whole,
    summarize_arm,
    unverified,
)
from corpus.extractors.base import versions_text
from corpus.postprocess.stages import arm_stages, postprocessed_arms
from corpus.postprocess.steps import EXTRACT_STAGE, FILTER_STAGE, POSTPROCESS_STEPS, enabled_steps
from corpus.read.inputs import inputs_folder, read_by_arm
from corpus.read.manifest import MANIFEST, read_manifest
from corpus.read.reference_steps import ReferenceDraw, TokenQuota
from corpus.read.warc import READ_WHOLE
from corpus.stage import label, record_hash, unfinished_tasks
from corpus.tokens.budget import manifest_path
from corpus.tokens.stages import dataset_stages, tokenizer_stage

# The ledger's rows by name (post-processing rows are named as their steps) and their titles.
EXTRACTION, READ, BUDGET = "extraction", "read", "budget"
ROW_TITLES = {EXTRACTION: "extraction", READ: "read (reference corpus)", **{s.name: s.title for s in POSTPROCESS_STEPS},
              BUDGET: "token budget"}


def _row(stage: str, docs_in: int, docs_out: int, removed: dict[str, int], tokens_in, tokens_out) -> dict:
    return {"stage": stage, "documents_in": docs_in, "documents_out": docs_out, "removed": removed,
            "tokens_in": tokens_in, "tokens_out": tokens_out,
            "balanced": docs_in == docs_out + sum(removed.values())}


def _removed(c: dict[str, int], reason: str = "removed") -> dict[str, int]:
    """Drops by reason; drops the step counted without one get `reason`."""
    reasons = {k.removeprefix("dropped_"): v for k, v in c.items() if k.startswith("dropped_")}
    unexplained = c.get("dropped", 0) - sum(reasons.values())
    return reasons | ({reason: unexplained} if unexplained else {})


def rows_by_name(arm_ledger: dict) -> dict[str, dict]:
    """An arm's ledger rows (as `ledger.json` holds them) by row name: `extraction`, each
    post-processing step's name, `budget`."""
    names = {title: name for name, title in ROW_TITLES.items()}
    return {names[row["stage"]]: row for row in arm_ledger["rows"]}


def _tokens_out(step: dict, tokens_in: int | None) -> int | None:
    """Tokens of the documents a step let through (0 if none); None where tokens are not counted."""
    if tokens_in is None:
        return None
    value = step["stats"].get("doc_len_tokens")
    return int(value["total"]) if isinstance(value, dict) else 0


def reference_row(config: ExperimentConfig, arm: str, task: int | None = None) -> dict | None:
    """A reference arm's read stage: documents read, not drawn, written; tokens of those written,
    where counted."""
    steps, _ = merged_stats(config.arm_dir(arm) / "logs", task)
    if not steps:
        return None
    draw, written = counters(find_step(steps, ReferenceDraw)), counters(find_step(steps, JsonlWriter))
    removed = {"not drawn": draw.get("dropped_not_drawn", 0)}
    tokens = counters(find_step(steps, TokenQuota)).get("tokens", 0) if config.dataset else None
    return _row(ROW_TITLES[READ], draw.get("read", 0), written.get("total", 0), {k: v for k, v in removed.items() if v},
                None, tokens)


def arm_ledger(config: ExperimentConfig, arm: str, task: int | None = None) -> dict:
    """The arm's rows from extraction to the budget; with `task`, that task's share of every
    per-document stage (the planner's pilot runs one task per input file)."""
    if arm in config.reference_arms:
        rows = [row] if (row := reference_row(config, arm, task)) else []
        extraction = {"balanced": True, "not_extracted": None, "input_files": None}
    else:
        extraction = summarize_arm(config, arm, task)
        rows = []
        if extraction.get("records") is not None:
            rows.append(_row(ROW_TITLES[EXTRACTION], extraction["records"], extraction["documents_out"],
                             extraction["dropped"], None, None)
                        | {"fallback": extraction["fallback"]})
    logs = config.post_dir(arm) / "logs"
    stage_stats = {stage: merged_stats(logs / stage, task)[0] for stage in {s.stage for s in POSTPROCESS_STEPS}}
    tokens = None
    if stage_stats[FILTER_STAGE] and config.tokenizer:  # counted right after the reader: the extracted documents
        tokens = counters(find_step(stage_stats[FILTER_STAGE], TokensCounter)).get("tokens", 0)
        if rows:
            rows[-1]["tokens_out"] = tokens
    post_steps = [s for s in enabled_steps(config) if s.stage_for(config, arm) != EXTRACT_STAGE]
    for step in post_steps:  # (record-level steps that ran before extraction are in its row)
        steps = stage_stats[step.stage]
        if not steps:
            continue
        c = counters(find_step(steps, step.step_class))
        rows.append(_row(step.title, c.get("total", 0), c.get("forwarded", 0), _removed(c, step.reason or "removed"),
                         tokens, _tokens_out(find_step(steps, step.tokens_class or step.step_class), tokens)))
        tokens = rows[-1]["tokens_out"]
    manifest = manifest_path(config)
    arm_manifest = json.loads(manifest.read_text())["arms"].get(arm, {}) if manifest.is_file() and task is None else {}
    # the budget stage's manifest has the cut's counts; datasets made outside the flow (benchmarks, tests:
    # pretrain.verify.record_datasets) record their digests only, and have no budget row
    if "available_documents" in arm_manifest:
        docs_in = arm_manifest["available_documents"]
        rows.append(_row(ROW_TITLES[BUDGET], docs_in, arm_manifest["documents"],
                         {"over budget": docs_in - arm_manifest["documents"]},
                         arm_manifest["available_tokens"], arm_manifest["tokens"]))
    chained = all(a["documents_out"] == b["documents_in"]
                  and (None in (a["tokens_out"], b["tokens_in"]) or a["tokens_out"] == b["tokens_in"])
                  for a, b in pairwise(rows))
    balanced = chained and all(r["balanced"] for r in rows) and extraction.get("balanced", False)
    unfinished = unfinished_stages(config, arm) if task is None else []
    files = extraction["input_files"]
    return {"arm": arm, "rows": rows, "chained": chained, "balanced": balanced, "unfinished": unfinished,
            "accounted": balanced and not unfinished and not (files and (files["not_read_whole"] or files.get("unverified"))),
            "not_extracted": extraction.get("not_extracted"), "input_files": files,
            "versions": extraction.get("versions", {}), "labeler": extraction.get("labeler")}


def unfinished_stages(config: ExperimentConfig, arm: str) -> list[str]:
    """The stages the arm's records pass (its own, the tokenizer, the budget) with a task that did
    not finish, each as `<label> (tasks ...)`."""
    first = config.arm_dir(arm) / "logs", config.arms[arm].resources.tasks
    stages = [(label("extract" if arm in config.extractor_arms else "read", arm), *first)]
    later = [*(arm_stages(config, arm) if arm in postprocessed_arms(config) else []),
             *([tokenizer_stage(config)] if config.tokenizer else []),
             *(s for s in (dataset_stages(config) if config.dataset else []) if s.arm in (arm, None))]
    stages += [(s.label, s.logs, s.tasks) for s in later]
    out = []
    for name, logs, tasks in stages:
        if missing := unfinished_tasks(logs, tasks):
            shown = ", ".join(map(str, missing[:5])) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
            out.append(f"{name} (task{'s' if len(missing) > 1 else ''} {shown} of {tasks})")
    return out


def read_per_file(read: dict[str, list[dict]]) -> dict[str, dict[str, dict]]:
    """Every extractor arm that has read anything (`read`: corpus.read.inputs.read_by_arm): its
    reader's per-file record of each input file (the arms may split the files into different tasks)."""
    return {arm: {record["file"]: record for record in records} for arm, records in read.items() if records}


def read_by_two_tasks(records: list[dict]) -> str | None:
    """The input files more than one task of an arm read, as the ledger names them: its extraction
    ran at two splits (an output root resumed at another `resources.tasks` before the flow refused
    that), so some records were read twice and others maybe never."""
    tasks: dict[str, set[int]] = {}
    for record in records:
        tasks.setdefault(record["file"], set()).add(record["task"])
    twice = sorted(file for file, ranks in tasks.items() if len(ranks) > 1)
    if not twice:
        return None
    return (f"{len(twice):,} input file{'s' if len(twice) > 1 else ''} read by two tasks (the extraction ran at two "
            f"splits): {', '.join(twice[:3])}{f' +{len(twice) - 3} more' if len(twice) > 3 else ''}")


def records_per_file(config: ExperimentConfig, read: dict[str, dict[str, dict]]) -> dict[str, tuple[int, str]]:
    """The response records each input file holds, where known, with where that is known from: the
    input manifest's `records`, else the count of the arms that read the file whole (the reader is
    deterministic, so one whole read is the truth; whole reads that disagree tell nothing)."""
    manifest = inputs_folder(config) / MANIFEST
    out = {path: (entry["records"], "the input manifest")
           for path, entry in (read_manifest(manifest)["files"] if manifest.is_file() else {}).items()
           if entry.get("records") is not None}
    whole: dict[str, dict[str, int]] = {}
    for arm, files in read.items():
        for path, record in files.items():
            if record["outcome"] == READ_WHOLE:
                whole.setdefault(path, {})[arm] = record["records"]
    for path, counts in whole.items():
        if path not in out and len(set(counts.values())) == 1:
            out[path] = (next(iter(counts.values())), ", ".join(counts))
    return out


def ledgers(config: ExperimentConfig) -> list[dict]:
    """Every arm's ledger, with each extractor arm's records per input file checked against what the
    file holds (`records_per_file`): an arm that read a file whole with another count is not
    accounted for, and neither are arms whose whole reads of a file disagree where nothing else says
    which is right, nor an arm that read a file in two tasks (`read_by_two_tasks`). A file not read
    whole gets the count it holds beside the count read; an arm that never ran is `not run`."""
    out = [arm_ledger(config, arm) for arm in config.arms]
    by_arm = read_by_arm(config)
    read = read_per_file(by_arm)
    truth = records_per_file(config, read)
    for ledger in out:
        if ledger["arm"] not in config.extractor_arms:
            continue
        if twice := read_by_two_tasks(by_arm[ledger["arm"]]):
            ledger["read_twice"], ledger["accounted"] = twice, False
        mine = read.get(ledger["arm"], {})
        ledger["not_run"] = not mine and not ledger["rows"]
        differing = []
        for path, record in mine.items():
            if record["outcome"] != READ_WHOLE:
                record_expected(ledger, path, truth.get(path))
            elif path in truth and record["records"] != truth[path][0]:
                count, source = truth[path]
                differing.append(f"{path} read whole with {record['records']:,} records, {count:,} by {source}")
            elif path not in truth:
                others = ", ".join(f"{files[path]['records']:,} by {arm}" for arm, files in read.items()
                                   if arm != ledger["arm"] and files.get(path, {}).get("outcome") == READ_WHOLE)
                differing.append(f"{path} read whole with {record['records']:,} records, {others}: the arms read "
                                 "different bytes of it")
        if differing:
            ledger["records_differ"] = "; ".join(differing[:3]) + (f"; +{len(differing) - 3} more" if len(differing) > 3 else "")
            ledger["accounted"] = False
        if ledger["not_run"]:
            ledger["accounted"] = False
    return out


def record_expected(ledger: dict, path: str, truth: tuple[int, str] | None) -> None:
    """The records a file the arm did not read whole holds, beside its entry in the arm's ledger."""
    for entry in (ledger["input_files"] or {}).get("not_read_whole", []):
        if entry["file"] == path and truth is not None:
            entry["expected_records"] = truth[0]


def accounted_text(ledger: dict) -> str:
    """'yes'; 'not verified' and which files, where all that keeps it from yes is input files read
    without a known size; or 'NO' and why."""
    if ledger["accounted"]:
        return "yes"
    if ledger.get("not_run"):
        return "NO (not run)"
    files = ledger["input_files"]
    why = ([] if ledger["balanced"] or not ledger["rows"] else ["unbalanced"]) + \
        ([not_read_whole(files)] if files and files["not_read_whole"] else []) + \
        ([f"unfinished: {'; '.join(ledger['unfinished'])}"] if ledger["unfinished"] else []) + \
        ([ledger["records_differ"]] if ledger.get("records_differ") else []) + \
        ([ledger["read_twice"]] if ledger.get("read_twice") else [])
    unsized = unverified(files) if files else ""
    if unsized and not why and ledger["balanced"]:
        return f"not verified ({unsized})"
    return f"NO ({'; '.join(why + ([unsized] if unsized else [])) or 'unbalanced'})"


def _ids(paths: list[Path]) -> tuple[np.ndarray, np.ndarray]:
    """The documents' record ids as 64-bit hashes (corpus.stage.record_hash), sorted and unique, and
    how many documents carry each: 8 bytes a record where a set of id strings holds ~130, so a
    crawl-sized arm (~3e8 records) fits in ~2.6 GB."""
    hashes = [np.empty(0, dtype=np.uint64)]
    for path in paths:
        with gzip.open(path, "rt", encoding="utf-8") as f:
            ids = (line.strip() for line in f) if path.name.endswith(".txt.gz") else (json.loads(line)["id"] for line in f)
            hashes.append(np.fromiter(map(record_hash, ids), dtype=np.uint64))
    return np.unique(np.concatenate(hashes), return_counts=True)


def overlap(config: ExperimentConfig) -> dict:
    """Per pair of extractor arms (the gold bound included; reference corpora have other
    records), documents whose record is present in both / only in one, after post-processing and in
    the token budget (by record hash: a collision among 3e8 records is a few-in-a-thousand chance).
    A record id an arm holds n times (the same WARC-Record-ID in several input files) pairs with at
    most n of the other arm's: the counts add up to each arm's documents, and `repeated` says how many
    documents of each arm share their id with another."""
    arms = list(config.extractor_arms)
    levels = {
        "post-processed": {arm: sorted((config.post_dir(arm) / "ids").glob("*.jsonl.gz")) for arm in arms},
        "in the token budget": {arm: sorted(config.dataset_dir(arm).glob("selected_ids.txt.gz")) for arm in arms},
    }
    out = {}
    for level, files in levels.items():
        if not all(files.values()):
            continue
        ids = {arm: _ids(paths) for arm, paths in files.items()}
        out[level] = []
        for a, b in combinations(arms, 2):
            (ua, ca), (ub, cb) = ids[a], ids[b]
            _, ia, ib = np.intersect1d(ua, ub, assume_unique=True, return_indices=True)
            both = int(np.minimum(ca[ia], cb[ib]).sum())
            pair = {"arms": [a, b], "both": both, f"only_{a}": int(ca.sum()) - both, f"only_{b}": int(cb.sum()) - both}
            if repeated := {arm: int(ids[arm][1].sum()) - len(ids[arm][0]) for arm in (a, b)
                            if len(ids[arm][0]) < ids[arm][1].sum()}:
                pair["repeated"] = repeated
            out[level].append(pair)
    return out


def print_ledger(ledgers: list[dict], overlaps: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(width=max(110, 30 + 48 * len(ledgers)))
    table = Table(title="Ledger: documents (tokens) in → out, removed by reason")
    table.add_column("stage")
    for ledger in ledgers:
        table.add_column(ledger["arm"], justify="right")
    present = {r["stage"] for ledger in ledgers for r in ledger["rows"]}
    stages = [title for title in ROW_TITLES.values() if title in present]

    def cell(row: dict | None) -> str:
        if row is None:
            return "-"
        tok = f" ({row['tokens_in']:,} → {row['tokens_out']:,} tok)" if row["tokens_in"] is not None else (
            f" ({row['tokens_out']:,} tok)" if row["tokens_out"] is not None else "")
        removed = ", ".join(f"{k} {v}" for k, v in sorted(row["removed"].items()) if v)
        mark = "" if row["balanced"] else " UNBALANCED"
        return f"{row['documents_in']:,} → {row['documents_out']:,}{tok}" + (f"\n−{removed}" if removed else "") + mark

    table.add_row("extracted by", *(versions_text(ledger.get("versions", {})) or "-" for ledger in ledgers))
    if any(ledger.get("labeler") for ledger in ledgers):
        table.add_row("Dripper labeler", *(labeler_text(ledger.get("labeler")) for ledger in ledgers))
    for stage in stages:
        table.add_row(stage, *(cell(next((r for r in ledger["rows"] if r["stage"] == stage), None)) for ledger in ledgers))
    table.add_row("input files", *(files_cell(ledger["input_files"]) if ledger["input_files"] else "-" for ledger in ledgers))
    table.add_row("every record accounted for", *(accounted_text(ledger) for ledger in ledgers))
    table.add_row("pages no extractor saw", *(f"{ledger['not_extracted']:,}" if ledger["not_extracted"] is not None else "-"
                                             for ledger in ledgers))
    console.print(table)
    for ledger in ledgers:
        files = ledger["input_files"] or {}
        for f in files.get("not_read_whole", []):
            faults = [f["fault"]] if f["fault"] else [d["fault"] for d in f.get("damage", [])]
            console.print(f"{ledger['arm']}: {file_note(f)}: {'; '.join(faults) or 'its task did not finish'}")
        if note := unverified(files, named=10):
            console.print(f"{ledger['arm']}: {note}")
    for level, pairs in overlaps.items():
        for pair in pairs:
            a, b = pair["arms"]
            console.print(f"records {level}: in both {pair['both']:,}, only {a} {pair[f'only_{a}']:,}, "
                          f"only {b} {pair[f'only_{b}']:,}")
        repeated = {arm: n for pair in pairs for arm, n in pair.get("repeated", {}).items()}
        for arm, n in repeated.items():
            console.print(f"warning: {n:,} documents of {arm} {level} repeat the record id of another of its documents "
                          "(the same WARC-Record-ID in several input files?): the counts above count each copy, paired "
                          "with at most one copy in the other arm")


def write_ledger(config: ExperimentConfig) -> tuple[Path, list[dict], dict]:
    """`<output_root>/ledger.json`, the same bytes at any split of the run; returns its path, the
    arms' ledgers and the overlaps."""
    arms, overlaps = ledgers(config), overlap(config)
    path = config.output_root / "ledger.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, json.dumps({"arms": arms, "overlap": overlaps, "minhash_scope": config.postprocess.minhash.scope},
                                      indent=2) + "\n")
    return path, arms, overlaps


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m corpus.accounting.ledger", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("config")
    parser.add_argument("--summary", action="store_true", help="one line per arm instead of the tables")
    args = parser.parse_args(argv)
    config = load_experiment_or_exit(args.config)
    path, arms, overlaps = write_ledger(config)
    print(minhash_scope_line(config))
    if args.summary:
        stages = [r["stage"] for r in arms[0]["rows"]]
        print("documents: in → after " + " → ".join(stages))
        print("\n".join(summary_line(ledger, stages) for ledger in arms))
        print(f"every step and reason: python -m corpus.accounting.ledger {args.config} ({path})")
    else:
        print_ledger(arms, overlaps)
        print(f"wrote {path}")
    return 0


def minhash_scope_line(config: ExperimentConfig) -> str:
    """Which documents MinHash compared: it decides what 'near duplicate' removed."""
    return {"snapshot": "MinHash scope: snapshot (near duplicates within one Common Crawl snapshot, as FineWeb)",
            "global": "MinHash scope: global (near duplicates across every input file)"}[config.postprocess.minhash.scope]


def summary_line(ledger: dict, stages: list[str]) -> str:
    """An arm's documents from its first row to its last (its stages named where they are not
    `stages`), tokens at the end, and the balance."""
    rows = ledger["rows"]
    if not rows:
        return f"  {ledger['arm']}: nothing yet; every record accounted for: {accounted_text(ledger)}"
    counts = " → ".join([str(rows[0]["documents_in"]), *(str(r["documents_out"]) for r in rows)])
    own = [r["stage"] for r in rows]
    named = f" ({' → '.join(own)})" if own != stages else ""
    tokens = f", {rows[-1]['tokens_out']:,} tokens" if rows[-1]["tokens_out"] is not None else ""
    return f"  {ledger['arm']}: {counts}{named}{tokens}; every record accounted for: {accounted_text(ledger)}"


if __name__ == "__main__":
    sys.exit(main())
