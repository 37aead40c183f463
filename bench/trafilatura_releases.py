"""Trafilatura's installed release against earlier ones (the paper's 1.11.0), side by side in one run.

    python -m bench.trafilatura_releases [--releases 1.11.0] [--max-pages N] [--timeout-s 60] [--no-demo]
                                         [--out bench/results/trafilatura_releases]

Each release is the Trafilatura arm with the same options (the default arm's: Markdown,
favour_precision, tables; `options.version` pins the earlier releases, which run in their own
environments: `make setup` makes 1.11.0's, `make trafilatura-release TRAFILATURA=X` another's).

1. Quality: every shared annotated set (../shared/data/extraction/*/pages.jsonl.gz) through each
   release's arm (its timeout raised to --timeout-s, so that a loaded machine does not turn a slow
   page into a timeout: the speed rounds measure time), scored by evaluation.extraction (WebMainBench
   protocol): ROUGE-5 F1 per full-gold
   set and its means over sets and over pages; snippet recall / leakage on partial-gold sets. Then
   the installed release minus each other, paired page by page, with 95% intervals over the pages
   (evaluation.statistics.intervals): ROUGE-5 F1 as the protocol scores it (Markdown), in the plain view (the
   marks of both sides removed: what is left is content, not dialect) and bag-of-words token F1.
2. Speed: pages/s per core, from the CPU seconds of `trafilatura.extract` over the same pages, each
   release in a worker process of its own environment (the installed release too, so that both
   pay the same pipe), in A B B A order; the pages no release timed out on in (1).
3. Yield on the demo: the demo's corpus flow (configs/local.yaml: its generated WARC, guard,
   pre-filters, tokenizer and post-processing) with one Trafilatura arm per release, up to
   post-processing: documents and tokens after post-processing per 1,000 WARC records, and how
   many post-processed records the releases share.

Prints the tables; writes `summary.json` and `summary.md` in --out, the quality run's files in
`quality/`, the demo run under `demo/`.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
import yaml

from corpus.extractors.trafilatura import TrafilaturaArm, TrafilaturaOptions
from corpus.extractors.trafilatura.releases import installed_release
from corpus.extractors.trafilatura.step import Trafilatura
from corpus.sample.annotated import SHARED_PAGE_SETS, LabelledPage, load_pages
from evaluation.extraction.benchmark import evaluate, markdown_table
from evaluation.statistics.intervals import SeedVariance, paired_interval

DEMO_CONFIG = Path("configs/local.yaml")
SCORES = {"rouge5_f1": "ROUGE-5 F1, Markdown (the protocol)", "rouge5_f1_plain": "ROUGE-5 F1, plain view",
          "token_f1": "token F1 (bag of words)"}


def arm_name(release: str) -> str:
    """`trafilatura-1-11-0`: an arm name names folders (no dots); the tables name the release."""
    return f"trafilatura-{release.replace('.', '-')}"


def release_arms(releases: list[str], timeout_s: float) -> dict[str, TrafilaturaArm]:
    """The installed release's arm (no version: what the default arm runs) and one per pinned
    release, with the default arm's options but the timeout."""
    return {arm_name(release or installed_release()):
            TrafilaturaArm(extractor="trafilatura", options=TrafilaturaOptions(version=release, timeout_s=timeout_s))
            for release in [None, *releases]}


def page_scores(folder: Path) -> dict[str, dict[str, dict[str, list[float]]]]:
    """arm -> score -> full-gold set -> per-page values, in one page order for every arm."""
    rows = sorted(map(json.loads, (folder / "pages.jsonl").read_text().splitlines()), key=lambda r: (r["dataset"], r["id"]))
    scores: dict = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    for row in rows:
        for score in SCORES:
            if row.get(score) is not None:
                scores[row["arm"]][score][row["dataset"]].append(row[score])
    return scores


def differences(folder: Path, current: str, other: str) -> dict[str, dict[str, dict]]:
    """current − other per score: per full-gold set, over sets (each set alike) and over pages (each
    page alike), each with its 95% interval over the paired pages (one run: no seeds)."""
    scores = page_scores(folder)
    out = {}
    for score in SCORES:
        a = {ds: np.array([v]) for ds, v in scores[other][score].items()}
        b = {ds: np.array([v]) for ds, v in scores[current][score].items()}
        pages = sum(m.shape[1] for m in a.values())
        weights = {f"set {ds}": {ds: 1.0} for ds in a} | {"mean over sets": {ds: 1 / len(a) for ds in a},
                                                          "mean over pages": {ds: m.shape[1] / pages for ds, m in a.items()}}
        out[score] = {name: paired_interval(a, b, w, SeedVariance(0.0, 0)).to_json() for name, w in weights.items()}
    return out


def children_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def cpu_pages_per_s(arm: TrafilaturaArm, pages: list[LabelledPage]) -> float:
    """Pages per CPU second of the arm's release, in a worker of its environment started here (its
    CPU time is this process's children's once it has ended)."""
    step = Trafilatura(arm.options, python=Path(sys.executable) if arm.options.release == installed_release() else None)
    before = children_cpu_seconds()
    for page in pages:
        step.extract(page.html)
    step.close()
    return len(pages) / (children_cpu_seconds() - before)


def speed(arms: dict[str, TrafilaturaArm], pages: list[LabelledPage]) -> dict[str, dict]:
    """Each release twice, in A B B A order (a machine's load drifts over minutes)."""
    names = list(arms)
    rounds = {name: [] for name in names}
    for name in names + names[::-1]:
        rounds[name].append(cpu_pages_per_s(arms[name], pages))
    return {name: {"pages": len(pages), "pages_per_cpu_s": sum(r) / len(r), "rounds": r} for name, r in rounds.items()}


def timed_out(quality: dict, folder: Path) -> set[tuple[str, str]]:
    """(dataset, id) of the pages without output in an arm that timed out on some page: the speed
    rounds have no timeout, and a corpus run would drop those pages at the arm's limit."""
    arms = {arm for arm, s in quality.items() if s["step_counters"].get("timeout")}
    rows = map(json.loads, (folder / "pages.jsonl").read_text().splitlines())
    return {(row["dataset"], row["id"]) for row in rows if row["arm"] in arms and not row["extracted"]}


def demo_config(arms: dict[str, TrafilaturaArm], out: Path):
    """configs/local.yaml with its Trafilatura arm's options for every release and no other arm,
    up to post-processing; written to `out/config.yaml` (for the ledger: python -m
    corpus.accounting.ledger out/config.yaml)."""
    from configs.experiment import load_experiment

    raw = yaml.safe_load(DEMO_CONFIG.read_text())
    options = raw["arms"]["trafilatura"]["options"]
    raw["arms"] = {name: {"extractor": "trafilatura", "options": options | {"version": arm.options.version},
                          "resources": dict(raw["arms"]["trafilatura"]["resources"])} for name, arm in arms.items()}
    for section in ("dataset", "pretrain", "evaluation"):
        raw.pop(section, None)
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.yaml").write_text(yaml.safe_dump(raw | {"name": "trafilatura_releases", "output_root": str(out)},
                                                    sort_keys=False))
    return load_experiment(out / "config.yaml")


def demo_yield(arms: dict[str, TrafilaturaArm], out: Path) -> dict[str, dict]:
    """Documents and tokens after post-processing per 1,000 WARC records, on the demo's sample."""
    from corpus.accounting.ledger import ledgers, overlap
    from corpus.flow.run import run_corpus

    config = demo_config(arms, out)
    run_corpus(config, until="postprocess")
    result = {}
    for ledger in ledgers(config):
        first, last = ledger["rows"][0], ledger["rows"][-1]
        records = first["documents_in"]
        result[ledger["arm"]] = {
            "records": records, "documents_extracted": first["documents_out"], "tokens_extracted": first["tokens_out"],
            "documents": last["documents_out"], "tokens": last["tokens_out"], "accounted": ledger["accounted"],
            "documents_per_1000_records": 1000 * last["documents_out"] / records,
            "tokens_per_1000_records": 1000 * last["tokens_out"] / records}
    return {"arms": result, "overlap": overlap(config)["post-processed"]}


def difference_table(diffs: dict, title: str) -> list[str]:
    def cell(d: dict) -> str:
        mark = "**" if d["resolved"] else ""
        return f"{mark}{d['difference']:+.4f}{mark} [{d['low']:+.4f}, {d['high']:+.4f}]"

    rows = list(next(iter(diffs.values())))
    return [f"### {title}", "", "| | " + " | ".join(SCORES[s] for s in diffs) + " |", "|---|" + "---:|" * len(diffs),
            *(f"| {row.removeprefix('set ')} | " + " | ".join(cell(diffs[s][row]) for s in diffs) + " |" for row in rows),
            "", "95% intervals over the paired pages; **bold**: the interval excludes zero."]


def tables(summary: dict) -> str:
    quality, speeds, demo = summary["quality"], summary["speed"], summary.get("demo")
    arms = list(quality)
    lines = ["## Quality on the shared annotated sets", "", markdown_table(quality), ""]
    for other, diffs in summary["differences"].items():
        lines += difference_table(diffs, f"{arms[0]} − {other}") + [""]
    lines += ["## Speed: pages/s per core (CPU seconds of trafilatura.extract, A B B A rounds)", "",
              "| release | pages | pages/s per core | rounds |", "|---|---:|---:|---|"]
    for arm in arms:
        s = speeds[arm]
        lines.append(f"| {arm} | {s['pages']:,} | {s['pages_per_cpu_s']:.1f} | "
                     + " / ".join(f"{r:.1f}" for r in s["rounds"]) + " |")
    if demo:
        lines += ["", "## Yield on the demo (configs/local.yaml's sample and post-processing)", "",
                  "| release | WARC records | documents extracted | documents post-processed | tokens post-processed "
                  "| documents / 1,000 records | tokens / 1,000 records |", "|---|---:|---:|---:|---:|---:|---:|"]
        for arm in arms:
            d = demo["arms"][arm]
            lines.append(f"| {arm} | {d['records']:,} | {d['documents_extracted']:,} | {d['documents']:,} | "
                         f"{d['tokens']:,} | {d['documents_per_1000_records']:,.0f} | {d['tokens_per_1000_records']:,.0f} |")
        shared = [f"{', '.join(o['arms'])}: {o['both']} in both, " + ", ".join(
            f"{n} {k.replace('_', ' ')}" for k, n in o.items() if k.startswith("only_")) for o in demo["overlap"]]
        lines += ["", "Records post-processed: " + "; ".join(shared) + ".",
                  "Tokens: the run's shared SentencePiece tokenizer, trained on both releases' text."]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.trafilatura_releases", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--releases", nargs="+", default=["1.11.0"], help="pinned releases beside the installed one")
    parser.add_argument("--max-pages", type=int, help="at most this many pages per set")
    parser.add_argument("--timeout-s", type=float, default=60.0, help="per page, in the quality run (the arm's: 10)")
    parser.add_argument("--no-demo", action="store_true", help="skip the yield on the demo")
    parser.add_argument("--out", type=Path, default=Path("bench/results/trafilatura_releases"))
    args = parser.parse_args()
    files = sorted(SHARED_PAGE_SETS.glob("*/pages.jsonl.gz"))
    if not files:
        print(f"no page sets under {SHARED_PAGE_SETS}", file=sys.stderr)
        return 1
    try:
        arms = release_arms(args.releases, args.timeout_s)
    except ValueError as e:  # a release without its environment: the message says how to make it
        print(e, file=sys.stderr)
        return 2
    pages = [p for f in files for p in load_pages(f, args.max_pages)]
    quality = evaluate(arms, pages, args.out / "quality")
    slow = timed_out(quality, args.out / "quality")
    current, *others = arms
    summary = {"installed": installed_release(), "releases": args.releases, "quality": quality,
               "differences": {other: differences(args.out / "quality", current, other) for other in others},
               "speed": speed(arms, [p for p in pages if (p.dataset, p.id) not in slow])}
    if not args.no_demo:
        summary["demo"] = demo_yield(arms, args.out / "demo")
    text = tables(summary)
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2, ensure_ascii=False) + "\n")
    (args.out / "summary.md").write_text(text + "\n")
    print(text)
    print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
