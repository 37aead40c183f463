"""The fault matrix: inject every fault the suite is meant to survive or refuse, rerun, and print one
row per fault: the fault, the stage, the outcome, the first line of the message.

    python -m bench.faults [--pages 40] [--work DIR] [--out bench/results/faults.json]

At a small shape (a generated WARC of `--pages` pages, two extractor arms, a 600-piece tokenizer,
12,000 tokens an arm, a 2-layer decoder of 512 positions trained 10 steps, lm-eval's offline tasks at 2 documents
each) it builds a clean run, then injects each fault into a copy of it (or a fresh root) and runs
the command a user would run next, as a subprocess. Outcomes:
- `resumed byte-identical`: the rerun exits 0 and every output (all but logs) has the clean run's bytes
  (for training: the same losses, step by step);
- `refused: clear message`: the command exits non-zero with one line naming what is wrong, and no traceback;
- `silent`: the command exits 0 as if nothing happened;
- `traceback` / `failed`: a raw traceback, or another failure; `not run`: the fault needs what this
  machine lacks (a small filesystem for the full disk needs root to mount a tmpfs).
Kills are SIGKILL to the run's whole process group, 50 ms into a task of each of KILLED_STAGES,
chained: each rerun is killed in the next stage, and the last one runs to the end. Writes the
table as JSON. A benchmark, not a test: the same cases are tests (tests/test_dataset_check.py,
test_result_files.py, test_checkpoint_resume.py, test_lost_outputs.py, test_driver_lock.py,
test_stage_errors.py and the earlier rounds' tests).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# 512 positions: lm-eval asserts that every answer fits the model's context
MODEL = {"num_layers": 2, "hidden_size": 32, "ffn_hidden_size": 64, "num_attention_heads": 4, "num_query_groups": 2,
         "seq_length": 512}
TRAIN_STEPS = 10
# the stages killed, one after the other (of arm trafilatura where a stage is per arm)
KILLED_STAGES = ("extract", "tokenizer", "exact-signatures", "filter", "minhash-buckets", "tokenize", "budget")

# the corpus flow with a step at the front of one stage's pipeline that SIGKILLs the run's process
# group a moment after the stage's task began
KILLED_RUN = """
import os, signal, sys, threading

import corpus.flow.run

label, delay = sys.argv[2], float(sys.argv[3])


def kill_soon(data=None, rank=0, world_size=1):
    threading.Timer(delay, os.killpg, (0, signal.SIGKILL)).start()
    return data if data is not None else iter(())


build = corpus.flow.run.corpus_stages


def corpus_stages(*args, **kwargs):
    stages = build(*args, **kwargs)
    for stage in stages:
        if stage.label == label:
            stage.pipeline.insert(0, kill_soon)
    return stages


corpus.flow.run.corpus_stages = corpus_stages
if __name__ == "__main__":
    sys.exit(corpus.flow.run.main([sys.argv[1]]))
"""

FAILING_SBATCH = """#!/usr/bin/env bash
echo "sbatch: error: Batch job submission failed: Invalid account or account/partition combination specified" >&2
exit 1
"""
EMPTY_SQUEUE = "#!/usr/bin/env bash\nexit 0\n"


def experiment(root: Path, warc: Path, **changes) -> dict:
    config = {
        "name": "faults", "output_root": str(root), "inputs": {"warc": [str(warc)]},
        "arms": {"trafilatura": {"extractor": "trafilatura"}, "html2text": {"extractor": "html2text"}},
        "tokenizer": {"kind": "sentencepiece", "vocab_size": 600},
        "dataset": {"tokens_per_arm": 12000, "seed": 0},
        "postprocess": {"minhash": {"num_buckets": 4, "hashes_per_bucket": 4}},
        "pretrain": {"model": MODEL, "seeds": [1], "training": {
            "global_batch_size": 2, "micro_batch_size": 1, "lr": 3e-3, "checkpoint_every": 5}},
        "evaluation": {"tasks": "offline", "offline_items": 4, "limit": 2, "batch_size": 1},
    }
    for key, value in changes.items():
        config[key] = value
    return config


def write_config(path: Path, config: dict) -> Path:
    path.write_text(json.dumps(config))
    return path


def run(args: list[str], env: dict | None = None, timeout: int = 600) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "XSUITE_VERBOSE"} | {"PYTHONPATH": str(REPO)} | (env or {})
    return subprocess.run([sys.executable, *args], cwd=REPO, capture_output=True, text=True, timeout=timeout, env=env,
                          start_new_session=True)


def output_hashes(root: Path) -> dict[str, str]:
    """sha256 of every file under `root` but the logs (which hold times and host names)."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file() and "logs" not in p.relative_to(root).parts}


def corpus_outputs(root: Path) -> dict[str, str]:
    """What the corpus flow makes (training, evaluation and the report aside)."""
    return {k: v for k, v in output_hashes(root).items() if k.split("/")[0] not in ("train", "eval", "report", "plan")}


def text_of(proc: subprocess.CompletedProcess) -> str:
    return (proc.stderr or "") + (proc.stdout or "")


def first_line(text: str, fragment: str | None) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    hit = next((line for line in lines if fragment and fragment in line), None)
    return (hit or (lines[-1] if lines else ""))[:300]


def refusal(proc: subprocess.CompletedProcess, fragment: str) -> tuple[str, str]:
    """(outcome, message) of a command that should refuse, its message holding `fragment`."""
    text = text_of(proc)
    if "Traceback (most recent call last)" in text:
        return "traceback", first_line(text, "Error")
    if proc.returncode == 0:
        return "silent", first_line(text, None)
    line = first_line(text, fragment)
    return ("refused: clear message" if fragment in line else "failed"), line


def resumed(proc: subprocess.CompletedProcess, same: bool, fragment: str | None = None,
            done: str = "resumed byte-identical") -> tuple[str, str]:
    """(outcome, message) of a rerun that should end as the clean run did (`same`)."""
    text = text_of(proc)
    if "Traceback (most recent call last)" in text:
        return "traceback", first_line(text, "Error")
    if proc.returncode != 0:
        return "failed", first_line(text, None)
    if fragment and fragment not in text:
        return "silent", first_line(text, None)
    return (done if same else "silent"), first_line(text, fragment) if fragment else ""


class Matrix:
    def __init__(self):
        self.rows: list[dict] = []

    def add(self, fault: str, stage: str, outcome: tuple[str, str], began: float) -> None:
        row = {"fault": fault, "stage": stage, "outcome": outcome[0], "message": outcome[1],
               "seconds": round(time.perf_counter() - began, 1)}
        self.rows.append(row)
        print(f"{row['fault'][:44]:44} {row['stage'][:22]:22} {row['outcome']:24} {row['seconds']:6.1f}s  {row['message'][:110]}",
              flush=True)


def copy_root(clean: Path, to: Path) -> Path:
    shutil.copytree(clean, to, symlinks=True)
    return to


def corpus_faults(m: Matrix, work: Path, warc: Path, clean: Path, expected: dict) -> None:
    from configs.experiment import ExperimentConfig
    from corpus.flow.stages import corpus_stages
    from corpus.read.inputs import resolve_inputs

    # a second driver on the same root while the first runs (it tokenizes both arms again and cuts
    # the budget); the first ends as the clean run did
    began = time.perf_counter()
    both = copy_root(clean, work / "both")
    both_config = write_config(work / "both.json", experiment(both, warc))
    for arm in ("trafilatura", "html2text"):
        shutil.rmtree(both / "datasets" / arm / "logs" / "tokenize" / "completions")
    first = subprocess.Popen([sys.executable, "-m", "corpus.flow", str(both_config)], cwd=REPO, start_new_session=True,
                             env=os.environ | {"PYTHONPATH": str(REPO)}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
    while first.poll() is None and not (both / "driver.lock").exists():
        time.sleep(0.05)
    second = run(["-m", "corpus.flow", str(both_config)])
    m.add("second driver on the same output root", "corpus flow", refusal(second, "is driven by"), began)
    out, err = first.communicate(timeout=900)
    m.add("the first driver, beside the refused one", "corpus flow",
          resumed(subprocess.CompletedProcess(first.args, first.returncode, out, err), corpus_outputs(both) == expected),
          began)

    # kill -9 in every stage, chained; the stale lock a kill leaves
    root = work / "killed"
    config_file = write_config(work / "killed.json", experiment(root, warc))
    config = ExperimentConfig.model_validate_json(config_file.read_text())
    script = work / "killed_run.py"
    script.write_text(KILLED_RUN)
    base, paths = resolve_inputs(config)
    labels = [s.label for s in corpus_stages(config, base, paths, "dataset", None)
              if s.name in KILLED_STAGES and s.arm in (None, "trafilatura")]
    shutil.rmtree(root)  # resolve_inputs wrote the input list: the killed run starts from nothing
    for i, label in enumerate(labels):
        began = time.perf_counter()
        proc = subprocess.Popen([sys.executable, str(script), str(config_file), label, "0.05"], cwd=REPO,
                                env=os.environ | {"PYTHONPATH": str(REPO)}, start_new_session=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        proc.communicate(timeout=900)
        killed = proc.returncode == -signal.SIGKILL
        m.add("kill -9", label, ("killed (rerun below)" if killed else "not injected (stage ended first)", ""), began)
        if i == 0 and killed:
            began = time.perf_counter()
            rerun = run(["-m", "corpus.flow", str(config_file), "--until", "extract"])
            taken = "took over" in text_of(rerun)
            m.add("stale lock left by kill -9", "corpus flow",
                  ("taken over with a message" if taken and rerun.returncode == 0 else "failed",
                   first_line(text_of(rerun), "took over")), began)
    began = time.perf_counter()
    final = run(["-m", "corpus.flow", str(config_file)])
    m.add("rerun after every kill above", "corpus flow", resumed(final, corpus_outputs(root) == expected), began)

    # a completion marker whose output is gone
    began = time.perf_counter()
    lost = copy_root(clean, work / "lost")
    lost_config = write_config(work / "lost.json", experiment(lost, warc))
    for shard in (lost / "extract" / "trafilatura" / "output").glob("*"):
        shard.unlink()
    proc = run(["-m", "corpus.flow", str(lost_config)])
    m.add("extraction output deleted, marker kept", "extract-trafilatura",
          resumed(proc, corpus_outputs(lost) == expected, "run again"), began)

    # a resume at another split
    began = time.perf_counter()
    split = copy_root(clean, work / "split")
    raw = experiment(split, warc)
    raw["arms"]["trafilatura"]["resources"] = {"tasks": 3}
    proc = run(["-m", "corpus.flow", str(write_config(work / "split.json", raw))])
    m.add("resume with another split", "extract-trafilatura", refusal(proc, "refused"), began)

    # a failed sbatch
    began = time.perf_counter()
    bin_dir = work / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name, text in (("sbatch", FAILING_SBATCH), ("squeue", EMPTY_SQUEUE)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    proc = run(["-m", "corpus.flow", str(write_config(work / "sbatch.json", experiment(work / "sbatch", warc))),
                "--executor", "slurm"], env={"PATH": f"{bin_dir}:{os.environ['PATH']}"})
    m.add("sbatch fails", "submission", refusal(proc, "sbatch of"), began)

    # a damaged WARC member
    began = time.perf_counter()
    damaged = work / "damaged.warc.gz"
    data = bytearray(warc.read_bytes())
    data[len(data) // 2] ^= 0xFF
    damaged.write_bytes(bytes(data))
    proc = run(["-m", "corpus.flow", str(write_config(work / "damaged.json", experiment(work / "damaged", damaged))),
                "--arms", "trafilatura"])
    m.add("damaged WARC member", "extract", refusal(proc, str(damaged)), began)

    # an input changed after the first run read it
    began = time.perf_counter()
    changed = work / "changed.warc.gz"
    shutil.copy(warc, changed)
    changed_config = write_config(work / "changed.json", experiment(work / "changed", changed))
    first = run(["-m", "corpus.flow", str(changed_config), "--arms", "trafilatura"])
    with open(changed, "ab") as f:
        f.write(warc.read_bytes()[:64])
    proc = run(["-m", "corpus.flow", str(changed_config), "--arms", "trafilatura"])
    m.add("input WARC changed after the first run", "inputs",
          refusal(proc, str(changed)) if first.returncode == 0 else ("failed", first_line(text_of(first), None)), began)


def fill_disk(root: Path) -> None:
    """Fill the filesystem of `root` to its last byte."""
    with open(root / "filler", "wb") as f:
        try:
            while True:
                f.write(b"\0" * (1 << 20))
        except OSError:
            pass


def disk_full(m: Matrix, work: Path, warc: Path) -> None:
    began = time.perf_counter()
    mount = work / "small-disk"
    mount.mkdir()
    made = os.geteuid() == 0 and subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1100m", "tmpfs", str(mount)],
                                                capture_output=True).returncode == 0
    if not made:
        m.add("disk full", "corpus flow", ("not run", "needs root to mount a small tmpfs"), began)
        return
    try:
        root = mount / "out"
        config_file = write_config(work / "full.json", experiment(root, warc))
        proc = subprocess.Popen([sys.executable, "-m", "corpus.flow", str(config_file)], cwd=REPO, start_new_session=True,
                                env=os.environ | {"PYTHONPATH": str(REPO)}, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        while proc.poll() is None and not (root / "logs" / "extract-trafilatura.log").exists():
            time.sleep(0.05)
        fill_disk(mount)
        out, err = proc.communicate(timeout=600)
        done = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
        outcome = refusal(done, "no space left")
        lines = len([line for line in err.splitlines() if line.strip()])
        m.add("disk full", "corpus flow", (outcome[0], outcome[1] + f" [{lines} lines on stderr]"), began)
    finally:
        subprocess.run(["umount", str(mount)], capture_output=True)


def dataset_faults(m: Matrix, config_file: Path, clean: Path) -> None:
    prefix = clean / "datasets" / "trafilatura" / "trafilatura_text_document"
    bin_, idx, tokenizer = Path(f"{prefix}.bin"), Path(f"{prefix}.idx"), clean / "tokenizer" / "tokenizer.json"

    def swap_two_tokens(path: Path) -> None:
        data = bytearray(path.read_bytes())
        data[40:42], data[42:44] = data[42:44], data[40:42]
        path.write_bytes(bytes(data))

    faults = [("same-size change of a .bin", bin_, swap_two_tokens, "the manifest records"),
              ("random bytes in a .bin", bin_, lambda p: p.write_bytes(os.urandom(p.stat().st_size)), "the manifest records"),
              ("cut .bin", bin_, lambda p: os.truncate(p, p.stat().st_size - 100), "its index says"),
              ("cut .idx", idx, lambda p: os.truncate(p, p.stat().st_size - 10), "its header says"),
              ("another tokenizer", tokenizer, lambda p: p.write_text(p.read_text().replace("</s>", "</S>", 1)),
               "the datasets were cut with tokenizer")]
    for fault, path, damage, fragment in faults:
        kept = path.read_bytes()
        damage(path)
        try:
            for stage, args in (("training", ["-m", "pretrain.train", str(config_file), "--arm", "trafilatura"]),
                                ("evaluation", ["-m", "evaluation.evaluate", str(config_file)])):
                began = time.perf_counter()
                m.add(fault, stage, refusal(run(args), fragment), began)
        finally:
            path.write_bytes(kept)


def checkpoint_and_result_faults(m: Matrix, config_file: Path, clean: Path) -> None:
    run_dir = clean / "train" / "trafilatura" / "model" / "seed1"

    def losses() -> list[float]:
        return [json.loads(line)["loss"] for line in (run_dir / "log.jsonl").read_text().splitlines()]

    began = time.perf_counter()
    whole = losses()
    shard = max((run_dir / "checkpoints" / f"step_{TRAIN_STEPS:07d}").glob("*.distcp"), key=lambda p: p.stat().st_size)
    os.truncate(shard, shard.stat().st_size // 2)
    proc = run(["-m", "pretrain.train", str(config_file), "--arm", "trafilatura", "--stop-at", str(TRAIN_STEPS)])
    m.add("checkpoint shard cut short", "training", resumed(proc, losses() == whole, "skipped",
                                                            "resumed, the same losses"), began)

    began = time.perf_counter()
    proc = run(["-m", "evaluation.evaluate", str(config_file)])
    if proc.returncode:  # the result faults need an evaluated checkpoint
        m.add("(the clean evaluation)", "evaluation", ("failed", first_line(text_of(proc), "Error")), began)
        return
    results = next((clean / "eval").rglob("results.json"))
    began = time.perf_counter()
    results.write_text(results.read_text()[:100])
    m.add("results.json cut", "report", refusal(run(["-m", "evaluation.report", str(config_file)]), "redo it"), began)
    began = time.perf_counter()
    results.write_text("")
    proc = run(["-m", "evaluation.evaluate", str(config_file)])
    m.add("results.json empty", "evaluation", resumed(proc, bool(json.loads(results.read_text() or "null")),
                                                      "evaluated again", "evaluated again"), began)


def build_clean(work: Path, pages: int) -> tuple[Path, Path, Path, dict]:
    from corpus.sample import write_sample

    warc, _ = write_sample(work / "sample", pages, seed=1)
    clean = work / "clean"
    config_file = write_config(work / "clean.json", experiment(clean, warc))
    for args in (["-m", "corpus.flow", str(config_file)],
                 ["-m", "pretrain.train", str(config_file), "--arm", "trafilatura", "--stop-at", str(TRAIN_STEPS)]):
        proc = run(args)
        if proc.returncode:
            raise SystemExit(f"the clean run failed at {' '.join(args[:2])}:\n{text_of(proc)[-3000:]}")
    return warc, clean, config_file, corpus_outputs(clean)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.faults", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pages", type=int, default=40, help="pages of the generated WARC")
    parser.add_argument("--work", type=Path, help="where the runs go (default: a temporary folder, removed after)")
    parser.add_argument("--out", type=Path, default=Path("bench/results/faults.json"))
    args = parser.parse_args(argv)
    began = time.perf_counter()
    work = args.work or Path(tempfile.mkdtemp(prefix="faults-"))
    work.mkdir(parents=True, exist_ok=True)
    m = Matrix()
    try:
        warc, clean, config_file, expected = build_clean(work, args.pages)
        print(f"clean run: {time.perf_counter() - began:.0f} s; faults:")
        print(f"{'fault':44} {'stage':22} {'outcome':24} {'time':>7}  message (first line)")
        corpus_faults(m, work, warc, clean, expected)
        disk_full(m, work, warc)
        dataset_faults(m, config_file, clean)  # before the evaluation: its checkpoints are pending
        checkpoint_and_result_faults(m, config_file, clean)
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    bad = [r for r in m.rows if r["outcome"] in ("silent", "traceback", "failed")]
    result = {"pages": args.pages, "seconds": round(time.perf_counter() - began), "cpus": os.cpu_count(),
              "rows": m.rows, "silent_or_traceback": len(bad)}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"{len(m.rows)} faults in {result['seconds']} s; silent, traceback or failed: {len(bad)}; wrote {args.out}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
