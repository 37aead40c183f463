"""Where each arm's text came from and what the numbers rest on: the extractor and its releases, or the
reference corpus; ROUGE-5 and the ledger's documents and tokens per arm; the runs and tasks missing;
the provenance of every output folder."""

from __future__ import annotations

import json

from configs.experiment import ExperimentConfig
from configs.provenance import read_provenance
from corpus.accounting.ledger import BUDGET, EXTRACTION, READ, ledgers, minhash_scope_line, rows_by_name
from corpus.extractors.base import versions_text
from corpus.postprocess.steps import output_step
from corpus.read.reference import HUB, ReferenceArm
from evaluation.runs import Comparison, Run


def arm_source(config: ExperimentConfig, name: str, arm) -> str:
    """The corpus, or the extractor with the releases its extraction ran (its folder's provenance)."""
    if isinstance(arm, ReferenceArm):
        where = arm.dataset + (f"/{arm.subset}" if arm.subset else "") if arm.corpus == HUB else f"{arm.corpus} files"
        return f"corpus: {where}" + (", post-processed here" if arm.postprocess else "")
    versions = versions_text(((read_provenance(config.arm_dir(name)) or {}).get("extractors") or {}).get(name, {}))
    return f"extractor: {arm.extractor}" + (f" ({versions})" if versions else "")


def extraction_context(config: ExperimentConfig, ledgers: list[dict]) -> dict:
    """Where each arm's text comes from, ROUGE-5 per arm (extraction benchmark) and
    documents/tokens kept (ledger), where present."""
    context = {name: {"source": arm_source(config, name, arm)} for name, arm in config.arms.items()}
    quality = config.output_root / "extraction_quality" / "summary.json"
    if quality.is_file():
        summary = json.loads(quality.read_text())
        for arm, s in summary.items():
            scores = [d["rouge5_f1"] for d in s["datasets"].values() if d.get("rouge5_f1") is not None]
            if scores:
                context.setdefault(arm, {})["rouge5_f1"] = sum(scores) / len(scores)
                context[arm]["rouge5_datasets"] = sorted(s["datasets"])
    for ledger in ledgers:
        if ledger["rows"]:
            rows = rows_by_name(ledger)
            entry = context.setdefault(ledger["arm"], {})
            if EXTRACTION in rows:
                entry["records"] = rows[EXTRACTION]["documents_in"]
            # a reference corpus that joins after post-processing was filtered by its makers
            post = rows.get(output_step().name) or rows.get(READ)
            if post:
                entry["documents_post_processed"] = post["documents_out"]
                entry["tokens_post_processed"] = post["tokens_out"]
            if BUDGET in rows:
                entry["documents_in_budget"] = rows[BUDGET]["documents_out"]
                entry["tokens_in_budget"] = rows[BUDGET]["tokens_out"]
    return context


def missing_pieces(config: ExperimentConfig, runs: list[Run], tasks: list[str]) -> list[str]:
    notes = []
    evaluated = {(r.arm, r.seed) for r in runs}
    for arm, seed in config.runs():
        if (arm, seed) not in evaluated:
            notes.append(f"{arm} seed {seed}: no evaluated checkpoint")
    for run in runs:
        absent = [t for t in tasks if t not in run.result["results"]]
        if absent:
            notes.append(f"{run.label()}: tasks missing {absent}")
    return notes


def made_by(config: ExperimentConfig) -> dict[str, dict]:
    """The provenance of every output folder the numbers come from, by folder."""
    folders = [config.output_root / "datasets"]
    folders += [d for arm, seed in config.runs() for d in (config.run_dir(arm, seed), config.eval_dir(arm, seed))]
    return {config.relative(f): p for f in folders if (p := read_provenance(f))}



def source_sections(config: ExperimentConfig, runs: list[Run], comparison: Comparison, tasks: list[str]) -> dict:
    """The report's closing sections: each arm's source and counts (`extraction`), the `ledgers`, the
    MinHash scope, the comparison's notes, what is `missing` of `tasks`, and the folders' provenance."""
    arm_ledgers = ledgers(config)
    return {"extraction": extraction_context(config, arm_ledgers), "ledgers": arm_ledgers,
            "minhash_scope": minhash_scope_line(config),
            "comparison_notes": comparison.notes,
            "missing": missing_pieces(config, runs, tasks),
            "made_by": made_by(config)}
