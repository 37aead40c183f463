"""Time and peak memory of `python -m slurm.status` on a fake output root at the paper's task counts.

    python -m bench.status [--scale 1.0] [--exact] [--keep DIR] [--out bench/results/status.json]

Builds, in a temporary folder, what `configs/paper.yaml`'s corpus flow leaves when all but its last
task have finished (557,663 of 557,664 completion markers at scale 1), each task with its datatrove stats file (the step
names, counters and time fields datatrove writes, 0.5 to 7 KB each), its log and its output shard; one shard
is then removed (a marker that outlived its output: a failure to report), one task log ends on a
traceback with its marker gone, `logs/slurm/jobs.jsonl` records the arrays, and the fake `squeue`
and `sacct` of the test suite (tests/conftest.py) answer for them: nothing queued any more, every
array task in sacct (557,664 rows), the last one FAILED. The command then runs three times, each in a fresh process: a first
call (an empty cache: a stage of more than slurm.status.SAMPLE finished tasks reads a random
sample of their stats and scales the rest), a refresh (the cache the first left: a sample more
a stage read), and a refresh after one more task finished (the last: 557,664 markers). With
`--exact`, first a call with `--exact` and no cache (every stats file read: minutes). Prints a
table; writes JSON to `--out`.
`--scale` shrinks every stage's tasks (at least one each) for a quick try.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# the fake squeue and sacct of the test suite, so the benchmark asks them what the tests do
sys.path.insert(0, str(REPO / "tests"))

RUN = """
import json, resource, sys, time
t0 = time.perf_counter()
from configs.experiment import load_experiment_or_exit
from slurm.status import experiment_status
config = load_experiment_or_exit("configs/paper.yaml").model_copy(update={"output_root": __import__("pathlib").Path(sys.argv[1])})
t1 = time.perf_counter()
status = experiment_status(config, "configs/paper.yaml", use_cache=sys.argv[2] != "exact", exact=sys.argv[2] == "exact")
t2 = time.perf_counter()
own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"import_and_config_s": t1 - t0, "status_s": t2 - t1, "failures": len(status["failures"]),
                  "own_cpu_s": own.ru_utime + own.ru_stime, "squeue_sacct_cpu_s": children.ru_utime + children.ru_stime,
                  "done": sum(r["done"] for r in status["rows"]), "estimated": sum(r["estimated"] for r in status["rows"]),
                  "next": status["next"]}))
"""


def step(name: str, counters: dict[str, int], seconds: float) -> dict:
    """One step's stats as datatrove writes them: its time and counters, doc_len with its spread."""
    def spread(total: float, n: int, unit: str) -> dict:
        return {"total": total, "n": n, "mean": total / n, "variance": 0.001, "std_dev": 0.03, "min": 0.0001, "max": 0.5,
                **({"unit": unit} if unit else {}),
                **({f"{k}_human": f"{total:.2f} seconds" for k in ("total", "mean", "std_dev", "min", "max")}
                   if not unit else {})}

    stats = {k: v for k, v in counters.items()}
    stats["doc_len"] = spread(2_500.0 * counters.get("total", 1), max(counters.get("total", 1), 1), "doc")
    return {"name": name, "time_stats": spread(seconds, 1000, ""), "stats": stats}


def stats_of(name: str) -> str:
    """A finished task's stats file for the stage: the extraction's six steps, the filters' nine,
    two or three for the others."""
    docs = 1200
    if name == "extract":
        steps = [step("📖 - READER: 🕷 Warc (every record)", {"input_files": 1, "response_records": docs, "documents": docs}, 9.0),
                 *(step(f"🔻 - FILTER: {f}", {"total": docs, "forwarded": docs - 10, "dropped": 10, "dropped_x": 10}, 2.0)
                   for f in ("🛡 Record guard", "😈 Url-filter", "🌍 Language pre-filter (whole page)")),
                 step("🛢 - EXTRAC: ⛏ Trafilatura", {"total": docs - 30, "extracted": docs - 30, "forwarded": docs - 30}, 60.0),
                 step("💽 - WRITER: 🐿 Jsonl", {"XXXXX.jsonl.gz": docs - 30, "total": docs - 30}, 1.0)]
    elif name == "filter":
        steps = [step("📖 - READER: 🐿 Jsonl", {"documents": docs}, 1.0),
                 *(step(f"🔻 - FILTER: {f}", {"total": docs, "forwarded": docs - 50, "dropped": 50, "dropped_reason": 50}, 3.0)
                   for f in ("exact", "language", "gopher quality", "gopher repetition", "url", "keywords", "fineweb")),
                 step("💽 - WRITER: 🐿 Jsonl", {"XXXXX.jsonl.gz": docs - 350, "total": docs - 350}, 1.0)]
    else:
        steps = [step("📖 - READER: 🐿 Jsonl", {"documents": docs}, 1.0),
                 step(f"🔢 - {name.upper()}", {"total": docs, "forwarded": docs, "tokens": docs * 900}, 5.0),
                 step("💽 - WRITER: 🐿 Jsonl", {"XXXXX.jsonl.gz": docs, "total": docs}, 1.0)]
    return json.dumps(steps, indent=4)


def build(root: Path, scale: float) -> dict:
    """The finished flow at `scale`, one lost output and one failed task; returns what was built."""
    from configs.experiment import load_experiment_or_exit
    from conftest import FAKE_SACCT, FAKE_SQUEUE
    from corpus.flow.submit import job_name, record
    from slurm.status import flow_stages, shard_writers

    config = load_experiment_or_exit("configs/paper.yaml").model_copy(update={"output_root": root / "out"})
    stages = flow_stages(config)
    counts = {stage.label: max(1, round(stage.tasks * scale)) for stage in stages}
    sacct, markers = [], 0
    for i, stage in enumerate(stages):
        text = stats_of(stage.name)
        shards = shard_writers(stage)
        for folder in ("completions", "stats", "logs"):
            (stage.logs / folder).mkdir(parents=True, exist_ok=True)
        for folder in shards:
            folder.mkdir(parents=True, exist_ok=True)
        job = str(1000 + i)
        name = job_name(config, stage.label)
        record(config, {"submitted": "2026-12-01T00:00:00", "jobs": {name: [job]}})
        last = i == len(stages) - 1
        for rank in range(counts[stage.label] - (1 if last else 0)):
            (stage.logs / "stats" / f"{rank:05d}.json").write_text(text)
            for folder in shards:
                (folder / f"{rank:05d}.jsonl.gz").write_bytes(b"")
            (stage.logs / "logs" / f"task_{rank:05d}.log").write_text(f"... | SUCCESS | Processing done for rank={rank}\n")
            (stage.logs / "completions" / f"{rank:05d}").write_bytes(b"")
            sacct.append(f"{job}_{rank}|{name}|COMPLETED|{600 + rank % 300}|{stage.resources.cpus_per_task}|"
                         f"cpu={stage.resources.cpus_per_task}" + (f",gres/gpu={stage.resources.gpus_per_task}"
                                                                    if stage.resources.gpus_per_task else ""))
            markers += 1
        if last:  # its last task failed: the traceback in its log, FAILED in sacct
            rank = counts[stage.label] - 1
            (stage.logs / "logs" / f"task_{rank:05d}.log").write_text(
                "Traceback (most recent call last):\n  File \"x.py\", line 1\nOSError: [Errno 28] No space left on device\n")
            sacct.append(f"{job}_{rank}|{name}|FAILED|30|1|cpu=1")
    lost = next(s for s in stages if s.name == "minhash-filter")
    (shard_writers(lost)[0] / "00000.jsonl.gz").unlink()
    bin_dir = root / "bin"
    bin_dir.mkdir()
    for name, text in (("squeue", FAKE_SQUEUE), ("sacct", FAKE_SACCT)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    (root / "squeue.txt").write_text("")
    (root / "sacct.txt").write_text("\n".join(sacct) + "\n")
    stats_bytes = sum(len(stats_of(s.name)) * (counts[s.label] - (s is stages[-1])) for s in stages)
    rank = counts[stages[-1].label] - 1
    return {"markers": markers, "stats_files": markers, "stats_bytes": stats_bytes, "sacct_rows": len(sacct),
            "next_task": {"stage": stages[-1].name, "marker": str(stages[-1].logs / "completions" / f"{rank:05d}"),
                          "stats": str(stages[-1].logs / "stats" / f"{rank:05d}.json")}}


def measure(root: Path, env: dict, mode: str = "cached") -> dict:
    """One run of the command's work in a fresh process (`mode` "exact": with --exact, no cache):
    its times, its CPU time (with that of the squeue and sacct it runs), and its peak resident memory."""
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", RUN, str(root / "out"), mode], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, text=True)
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    if status:
        raise SystemExit(f"the status run failed (exit status {status})")
    return json.loads(out) | {"wall_s": time.perf_counter() - start, "peak_rss_mb": usage.ru_maxrss / 1024,
                              "cpu_s": usage.ru_utime + usage.ru_stime}


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.status", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", type=float, default=1.0, help="share of every stage's tasks (default: the paper's)")
    parser.add_argument("--out", type=Path, default=Path("bench/results/status.json"))
    parser.add_argument("--exact", action="store_true",
                        help="also time a call with --exact and no cache first (every stats file read: minutes at scale 1)")
    parser.add_argument("--keep", type=Path, metavar="DIR",
                        help="build in DIR and keep it (at scale 1: about 5.5 GB on disk, 2 million files); a DIR built before "
                             "(its built.json) is measured again as it is")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="status-bench-") as tmp:
        root = args.keep or Path(tmp)
        if (root / "built.json").is_file():
            built = json.loads((root / "built.json").read_text())
        else:
            began = time.perf_counter()
            built = build(root, args.scale) | {"scale": args.scale}
            built["build_s"] = time.perf_counter() - began
            (root / "built.json").write_text(json.dumps(built))
        shutil.rmtree(root / "cache", ignore_errors=True)
        env = os.environ | {"PATH": f"{root / 'bin'}:{os.environ['PATH']}", "FAKE_SQUEUE_ROWS": str(root / "squeue.txt"),
                            "FAKE_SACCT_ROWS": str(root / "sacct.txt"), "XDG_CACHE_HOME": str(root / "cache"),
                            "PYTHONPATH": str(REPO)}
        runs = {"--exact, no cache (every stats file read)": measure(root, env, "exact")} if args.exact else {}
        runs["first call (a sample a stage read)"] = measure(root, env)
        runs["refresh, nothing new (a sample more)"] = measure(root, env)
        task = built.pop("next_task")  # one more task finishes: the next refresh reads its stats alone
        Path(task["marker"]).write_bytes(b"")
        Path(task["stats"]).write_text(stats_of(task["stage"]))
        runs["refresh, one more task finished"] = measure(root, env)
        Path(task["marker"]).unlink()  # the state as built, for a kept DIR's next measurement
        Path(task["stats"]).unlink()
        if args.keep is None:
            shutil.rmtree(root / "out")
    load = os.getloadavg()
    result = {**built, "runs": runs, "cpus": os.cpu_count(),
              "load_average_1_5_15": load, "machine": platform.platform(), "python": platform.python_version()}
    print(f"fake output root of configs/paper.yaml at scale {built['scale']}: {built['markers']:,} completion markers, "
          f"{built['stats_files']:,} stats files ({built['stats_bytes'] / 1e9:.2f} GB), {built['sacct_rows']:,} sacct rows; "
          f"built in {built['build_s']:.0f} s" if built["build_s"] is not None else "built before")
    print(f"{'run':42} {'wall s':>7} {'status s':>8} {'import+config s':>15} {'CPU s':>6} {'of which squeue+sacct':>21} "
          f"{'peak MB':>7}  failures  {'done':>9}  {'estimated':>9}")
    for name, r in runs.items():
        print(f"{name:42} {r['wall_s']:7.1f} {r['status_s']:8.1f} {r['import_and_config_s']:15.1f} {r['cpu_s']:6.1f} "
              f"{r['squeue_sacct_cpu_s']:21.1f} {r['peak_rss_mb']:7.0f}  {r['failures']:8}  {r['done']:9,}  {r['estimated']:9,}")
    print(f"machine: {os.cpu_count()} CPUs, load average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} (1/5/15 min) at the end")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"written: {args.out}")


if __name__ == "__main__":
    main()
