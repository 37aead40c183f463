"""Per-arm accounting of the extraction stage, read from datatrove's own per-task stats.

    python -m corpus.accounting.summary CONFIG

For each arm: records read, dropped by the record guard (by reason), extracted, extracted by
fallback (by reason), dropped by the extractor (by reason), documents and characters out. The
identity `records = extracted + fallbacks + drops` is checked and reported as `balanced`. Then the
input files as the reader's tasks recorded them (corpus.read.warc): by outcome, and each file not
read whole, named.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

from datatrove.pipeline.writers import JsonlWriter

from configs.durable import write_atomically
from configs.experiment import ExperimentConfig, load_experiment_or_exit
from corpus.extractors.base import versions_text
from corpus.extractors.dripper.labelers.revision import recorded_commit
from corpus.extractors.prefilters import LANGUAGE_PREFILTER, LanguagePrefilter, RecordGuard
from corpus.postprocess.steps import EXTRACT_STAGE, enabled_steps
from corpus.read.warc import INPUT_FILES, NOT_READ, READ_WHOLE, AccountedWarcReader, read_input_files


def counters(step: dict) -> dict[str, int]:
    """A step's counters: datatrove stores each as a metric whose `total` is the count."""
    out = {}
    for key, value in step["stats"].items():
        out[key] = int(value["total"]) if isinstance(value, dict) else int(value)
    return out


def find_step(steps: list[dict], step_class) -> dict:
    """The stats of the step of `step_class`, found by the '<type>: <name>' datatrove records for
    it (never by position)."""
    label = f"{step_class.type}: {step_class.name}"
    matches = [s for s in steps if s["name"] == label]
    if len(matches) != 1:
        raise ValueError(f"expected one {label!r} step in the stats, found {len(matches)}")
    return matches[0]


def merged_stats(logs_dir: Path, task: int | None = None) -> tuple[list[dict], int]:
    """Sum the per-task stats files (written by every executor), or read only `task`'s;
    returns (steps, task count). Each step's counters by name: a sum keeps the order each first
    appeared in, task after task, which would make every count by reason depend on the split."""
    from datatrove.utils.stats import PipelineStats

    files = sorted((logs_dir / "stats").glob("*.json" if task is None else f"{task:05d}.json"))
    total = PipelineStats()
    for f in files:
        total = total + PipelineStats.from_json(json.loads(f.read_text()))
    steps = json.loads(total.to_json())
    for step in steps:
        step["stats"] = dict(sorted(step["stats"].items()))
    return steps, len(files)


def input_files(config: ExperimentConfig, arm_name: str, task: int | None = None) -> dict:
    """The arm's input files as its reader's tasks recorded them: how many by outcome, their records
    and retries, the records whose digest was checked, every file not read whole, every file read
    without a known size (`unverified`: whether it ended where its stream did is unknown) and the
    bytes after files' last records that hold no record."""
    files = read_input_files(config.arm_dir(arm_name) / "logs" / INPUT_FILES, task)
    damage = [d for f in files for d in f.get("damage", [])]
    return {"files": len(files), "outcomes": dict(Counter(f["outcome"] for f in files)),
            "records": sum(f["records"] for f in files), "retries": sum(f["retries"] for f in files),
            "digests_checked": sum(f.get("digests_checked", 0) for f in files),
            "unreadable_bytes": sum(d["bytes"] or 0 for d in damage),
            "records_lost_at_least": sum(d["records"] or 0 for d in damage),
            "trailing_bytes": sum(f.get("trailing_bytes", 0) for f in files),
            "not_read_whole": [f for f in files if f["outcome"] != READ_WHOLE],
            "unverified": [f["file"] for f in files if f.get("unverified")]}


def file_note(f: dict) -> str:
    """A file not read whole in a few words: its outcome, why, the bytes damage made unreadable, and
    its records read, of how many (`expected_records`: what the ledger knows the file holds)."""
    damage = f.get("damage", [])
    reasons = dict.fromkeys([*(d["reason"] for d in damage), *([f["reason"]] if f.get("reason") else [])])
    notes = [", ".join(reason.replace("_", " ") for reason in reasons)] if reasons else []
    if damage:
        lost, records = sum(d["bytes"] or 0 for d in damage), sum(d["records"] or 0 for d in damage)
        notes.append(f"{lost:,} bytes unreadable in {len(damage)} place{'s' if len(damage) > 1 else ''}, "
                     f"at least {records:,} record{'s' if records != 1 else ''} lost")
    if f["outcome"] != NOT_READ:
        expected = f.get("expected_records")
        notes.append(f"{f['records']:,} of {expected:,} records" if expected is not None else f"{f['records']:,} records read")
    return f"{f['file']} {f['outcome']}" + (f" ({'; '.join(notes)})" if notes else "")


def unverified(files: dict, named: int = 3) -> str:
    """The input files read without a known size, the first `named` named; '' when there are none."""
    if not (names := files.get("unverified")):
        return ""
    shown = ", ".join(names[:named]) + (f", +{len(names) - named} more" if len(names) > named else "")
    return (f"{len(names)} input file{'s' if len(names) > 1 else ''} of unknown size read to the end of "
            f"{'their' if len(names) > 1 else 'its'} stream, completeness not verified: {shown}")


def not_read_whole(files: dict, named: int = 3) -> str:
    """The input files not read whole, the first `named` named with their outcome and counts; ''
    when every file was read whole."""
    bad = files["not_read_whole"]
    if not bad:
        return ""
    names = ", ".join(file_note(f) for f in bad[:named])
    names += f", +{len(bad) - named} more" if len(bad) > named else ""
    return f"{len(bad)} input file{'s' if len(bad) > 1 else ''} not read whole: {names}"


def summarize_arm(config: ExperimentConfig, arm_name: str, task: int | None = None) -> dict:
    """The arm's extraction accounting, over every task or for one task (one input file when the
    stage has a task per file, as the planner's pilot does)."""
    arm = config.extractor_arms[arm_name]
    steps, tasks_done = merged_stats(config.arm_dir(arm_name) / "logs", task)
    files = input_files(config, arm_name, task)
    if not steps:
        return {"arm": arm_name, "extractor": arm.extractor, "tasks_done": 0, "tasks": arm.resources.tasks,
                "complete": False, "input_files": files}
    extractor_stats = find_step(steps, type(arm.step()))
    reader, guard, extractor, writer = (counters(find_step(steps, AccountedWarcReader)), counters(find_step(steps, RecordGuard)),
                                        counters(extractor_stats), counters(find_step(steps, JsonlWriter)))
    guard_drops = {k.removeprefix("dropped_"): v for k, v in guard.items() if k.startswith("dropped_")}
    # record-level steps that ran before the extractor, by name: post-processing's, the language pre-filter
    before = {s.name: counters(find_step(steps, s.step_class)).get("dropped", 0)
              for s in enabled_steps(config, EXTRACT_STAGE, arm_name)}
    if config.postprocess.language.prefilter_threshold is not None:
        before[LANGUAGE_PREFILTER] = counters(find_step(steps, LanguagePrefilter)).get("dropped", 0)
    extracted, fallbacks, extractor_drops = arm.accounting(extractor)
    dropped = guard_drops | {name: n for name, n in before.items() if n}
    for reason, n in extractor_drops.items():
        dropped[reason] = dropped.get(reason, 0) + n
    records = reader.get("response_records", 0)
    docs_out = writer.get("total", 0)
    chars_out = int(extractor_stats["stats"].get("doc_len", {}).get("total", 0))
    return {
        "arm": arm_name,
        "extractor": arm.extractor,
        "versions": arm.versions() | recorded_commit(config.arm_dir(arm_name)),  # a hub model's: its commit
        "tasks_done": tasks_done,
        "tasks": arm.resources.tasks,
        "complete": tasks_done == arm.resources.tasks,
        "records": records,
        "extracted": extracted,
        "fallback": fallbacks,
        "dropped": dropped,
        "documents_out": docs_out,
        "characters_out": chars_out,
        "balanced": records == extracted + sum(fallbacks.values()) + sum(dropped.values())
        and docs_out == extracted + sum(fallbacks.values()),
        "skipped_records": {k: v for k, v in reader.items() if k.startswith("skipped_")},
        # pages no extractor saw: dropped by the record guard or a record-level filter
        "not_extracted": sum(guard_drops.values()) + sum(before.values()),
        "input_files": files,
        "labeler": labeler_work(extractor),
    }


LABELER_COUNTERS = ("sent_to_labeler", "answered_pages", "answered_tokens", "answer_passes", "drafted_pages", "draft_blocks",
                    "draft_blocks_agreed")


def labeler_work(extractor: dict[str, int]) -> dict[str, int] | None:
    """A Dripper step's labeler counters (corpus.extractors.dripper.step); None for other extractors."""
    return {k: extractor.get(k, 0) for k in LABELER_COUNTERS} if "sent_to_labeler" in extractor else None


def labeler_text(work: dict[str, int] | None) -> str:
    """The labeler's decoding in one cell: forward passes per answer (answer tokens per page beside
    them: plain decoding spends one a token) and, with a draft, the share of drafted labels kept."""
    if not work or not work["sent_to_labeler"]:
        return "-"
    text = f"{work['sent_to_labeler']:,} pages"
    if work["answered_pages"]:
        text += (f"; {work['answered_pages']:,} answered in {work['answer_passes'] / work['answered_pages']:.1f} forward "
                 f"passes a page for {work['answered_tokens'] / work['answered_pages']:.0f} answer tokens")
    if work["draft_blocks"]:
        text += f"; draft kept for {work['draft_blocks_agreed'] / work['draft_blocks']:.1%} of {work['draft_blocks']:,} blocks"
    return text


def write_summary(config: ExperimentConfig, arm_name: str, summary: dict) -> Path:
    path = config.arm_dir(arm_name) / "summary.json"
    write_atomically(path, json.dumps(summary, indent=2) + "\n")
    return path


def print_summaries(summaries: list[dict]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="Extraction: every record accounted for, per arm")
    table.add_column("")
    for s in summaries:
        table.add_column(s["arm"], justify="right")

    def fmt(counts: dict) -> str:
        return ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "-"

    rows = [
        ("extractor", lambda s: versions_text(s.get("versions", {})) or s["extractor"]),
        ("records in", lambda s: str(s.get("records", "-"))),
        ("extracted", lambda s: str(s.get("extracted", "-"))),
        ("fell back", lambda s: f"{sum(s.get('fallback', {}).values())} ({fmt(s.get('fallback', {}))})"),
        ("dropped", lambda s: f"{sum(s.get('dropped', {}).values())} ({fmt(s.get('dropped', {}))})"),
        ("documents out", lambda s: str(s.get("documents_out", "-"))),
        ("characters out", lambda s: f"{s.get('characters_out', 0):,}"),
        ("labeler", lambda s: labeler_text(s.get("labeler"))),
        ("tasks done", lambda s: f"{s['tasks_done']}/{s['tasks']}"),
        ("input files", lambda s: files_cell(s["input_files"])),
        ("balanced", lambda s: "yes" if s.get("balanced") else "NO"),
    ]
    for label, cell in rows:
        table.add_row(label, *(cell(s) for s in summaries))
    Console(width=max(100, 40 + 45 * len(summaries))).print(table)


def files_cell(files: dict) -> str:
    """An arm's input files in a table cell: how many by outcome, the retries."""
    outcomes = ", ".join(f"{n:,} {outcome}" for outcome, n in sorted(files["outcomes"].items()))
    unreadable, trailing, unsized = files.get("unreadable_bytes"), files.get("trailing_bytes"), files.get("unverified")
    return (outcomes or "-") + (f"; {files['retries']:,} retries" if files["retries"] else "") + \
        (f"; {unreadable:,} bytes unreadable" if unreadable else "") + \
        (f"; {trailing:,} bytes after last records (no record in them)" if trailing else "") + \
        (f"; {len(unsized):,} of unknown size (completeness not verified)" if unsized else "")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m corpus.accounting.summary", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("config")
    args = parser.parse_args(argv)
    config = load_experiment_or_exit(args.config)
    summaries = []
    for arm_name in config.extractor_arms:
        summary = summarize_arm(config, arm_name)
        if summary["tasks_done"]:
            write_summary(config, arm_name, summary)
        summaries.append(summary)
    print_summaries(summaries)
    return 0


if __name__ == "__main__":
    sys.exit(main())
