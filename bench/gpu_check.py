"""The GPU check: on one GPU, the project's 1B training beside the peers a user would otherwise pick,
in one table, sized for a short allocation (its runs stop at `--budget` seconds, 7 minutes).

    bash bench/gpu_check.sh [--model 1b] [--steps 15] [--global-batch 32] [--micro-batch 8]
                            [--unfused-micro-batch 2] [--commit SHA] [--record-dir bench/measured]
                            [--out-dir bench/results/gpu_check]

1. the matrix-product peak of this device (bf16 8192^3; fp32 1024^3 on CPU);
2. `bench.pretrain` with SDPA attention (and one step profiled: where the time goes);
3. `bench.hf_peer`: Hugging Face LlamaForCausalLM, SDPA and fused AdamW, same shape and tokens,
   then the same peer under torch.compile (what else differs: bench/hf_peer.py);
4. `bench.pretrain` again without megatron-core's torch.compile fusions (what they buy), with
   Transformer Engine's layer spec where it imports, with megatron's unfused attention at a
   micro-batch that fits (for the record: what a pip-installed node ran before SDPA), and at the
   other `--micro-batch` sizes.
Each run is its own process (its own memory, and a failure is a row, not the end; on CPU forked from
a server that imported the rows' packages once), in that order until the budget is spent (a row not
run says so). Every step is timed until the device has finished it (optimizer included); MFU counts
causal attention (configs/model.py), with the full score matrix in a column of its own. The table
gives tokens/s per GPU, step time, MFU against the spec-sheet and the measured peak, peak memory.

Writes `<out-dir>/gpu_check.json` and each run's JSON and log, and on a GPU the record the tables of
docs/reference/gpu-figures.md are made from: `<record-dir>/gpu_check-<gpu>-<model>.json`
(bench/measured/, tracked: the rows with the GPU, driver, versions, commit and command; `python -m
bench.gpu_tables --update` writes the tables). Needs only torch, transformers, numpy, megatron-core and pydantic
(plus what the training loop's config reads: pyyaml, tokenizers, tensorboard, tqdm, rich, fsspec,
psutil). On CPU it runs the same paths at `--model tiny` and records only where `--record-dir` says.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import multiprocessing
import os
import re
import runpy
import shlex
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

NEEDED = ("torch", "transformers", "numpy", "megatron.core", "pydantic", "yaml", "tokenizers", "tensorboard", "tqdm",
          "rich", "fsspec", "psutil")
GOAL_MFU = 0.40  # of the spec-sheet peak (causal-attention FLOPs), on an H100/H200-class GPU for the 1b size
MEASURED = Path(__file__).resolve().parent / "measured"  # the tracked records


def run_bench(name: str, module: str, argv: list[str], out_dir: Path, timeout: float, rows) -> dict:
    """One benchmark process (`python -m module argv`, forked from `rows`' server); its JSON row, or
    a row that says why there is none."""
    out, log = out_dir / f"{name}.json", out_dir / f"{name}.log"
    began = time.perf_counter()
    process = rows.Process(target=run_module, args=(module, [*argv, "--out", str(out)], log))
    process.start()
    process.join(timeout)
    if process.is_alive():
        process.kill()
        process.join()
        failed = f"timed out after {timeout:.0f} s"
    else:
        failed = f"exit {process.exitcode}" if process.exitcode else None
    seconds = time.perf_counter() - began
    if failed or not out.is_file():
        tail = [line for line in log.read_text(errors="replace").splitlines() if line.strip()][-1:] or [""]
        return {"run": name, "error": f"{failed or 'no result'}: {tail[0][:160]}", "log": str(log), "seconds": seconds}
    return json.loads(out.read_text()) | {"run": name, "log": str(log), "seconds": seconds}


def run_module(module: str, argv: list[str], log: Path) -> None:
    """A row's process: `python -m module argv`, its stdout and stderr (a traceback too) into `log`."""
    with log.open("w") as stream:
        os.dup2(stream.fileno(), 1)
        os.dup2(stream.fileno(), 2)
    sys.argv = [module, *argv]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


def row_processes(cuda: bool):
    """Where the rows' processes come from: a fork server, which on CPU has imported what the rows
    import (torch, megatron-core, transformers' Llama and the training loop: ~7 s of CPU a row). Not
    on a GPU: megatron-core may touch CUDA as it imports, and a process forked after that cannot use it."""
    rows = multiprocessing.get_context("forkserver")
    rows.set_forkserver_preload([] if cuda else ["torch", "megatron.core", "transformers.models.llama.modeling_llama",
                                                 "pretrain.train", "pretrain.model", "configs.experiment"])
    return rows


def machine() -> dict:
    """The GPU, its driver and the software that ran: what a measurement is read against."""
    import torch

    smi = subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader,nounits"],
                         capture_output=True, text=True) if torch.cuda.is_available() else None
    gpu = [part.strip() for part in smi.stdout.splitlines()[0].split(",")] if smi and smi.returncode == 0 else []
    return {"gpu": gpu[0] if gpu else None, "gpu_memory_mib": int(gpu[1]) if gpu else None,
            "driver": gpu[2] if gpu else None, "versions": software_versions()}


def software_versions() -> dict[str, str | None]:
    import platform
    from importlib.metadata import PackageNotFoundError, version

    import torch

    def installed(name: str) -> str | None:
        try:
            return version(name)
        except PackageNotFoundError:
            return None

    return {"python": platform.python_version(), "torch": torch.__version__, "cuda": torch.version.cuda,
            "cudnn": str(torch.backends.cudnn.version()) if torch.cuda.is_available() else None,
            "transformers": installed("transformers"), "megatron-core": installed("megatron-core"),
            "transformer-engine": installed("transformer-engine") or installed("transformer_engine")}


def record_name(device: str, model: str) -> str:
    return f"gpu_check-{re.sub(r'[^a-z0-9]+', '-', device.lower()).strip('-')}-{model}.json"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.gpu_check", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="1b")
    parser.add_argument("--steps", type=int, default=15)
    parser.add_argument("--global-batch", type=int, default=32)
    parser.add_argument("--micro-batch", type=int, nargs="+", default=[8],
                        help="SDPA runs' micro-batches: the first is profiled and is the peers'; others add rows")
    parser.add_argument("--unfused-micro-batch", type=int, default=2, help="the unfused score matrices need more memory")
    parser.add_argument("--timeout", type=int, default=240, help="seconds per run at most")
    parser.add_argument("--budget", type=int, default=420, help="seconds for all runs: rows past it are not run")
    parser.add_argument("--commit", help="the commit measured (default: git's HEAD; give it where there is no .git)")
    parser.add_argument("--record-dir", type=Path, help=f"where the tracked record goes (default on a GPU: {MEASURED})")
    parser.add_argument("--out-dir", type=Path, default=Path("bench/results/gpu_check"))
    args = parser.parse_args(argv)
    command = shlex.join(["bash", "bench/gpu_check.sh", *(sys.argv[1:] if argv is None else argv)])
    missing = [name for name in NEEDED if importlib.util.find_spec(name.split(".")[0]) is None]
    if missing:
        raise SystemExit(f"missing on this node: {', '.join(missing)} (pip install them, or carry their wheels)")

    import torch

    from bench.pretrain import device_name, matmul_peak, table_rows
    from configs.provenance import git_commit
    from pretrain.platform import spec_peak_flops

    versions = software_versions()  # the log's first line, from this interpreter (a second one costs seconds of imports)
    print(f"torch {versions['torch']}, transformers {versions['transformers']}, megatron-core {versions['megatron-core']}",
          flush=True)
    commit = args.commit or git_commit()
    record_dir = args.record_dir or (MEASURED if torch.cuda.is_available() else None)
    if record_dir and commit == "unknown":
        raise SystemExit("no git checkout here to read the commit from: give --commit SHA (the commit this tree is)")
    args.out_dir.mkdir(parents=True, exist_ok=True)
    name = device_name()
    peak = matmul_peak()
    spec = spec_peak_flops(name)
    shape = ["--model", args.model, "--steps", str(args.steps), "--global-batch", str(args.global_batch),
             "--measured-peak", str(peak["flops"])]
    micro, *more = args.micro_batch
    te = importlib.util.find_spec("transformer_engine") is not None
    # the rows the docs quote first; each later one only if time is left
    runs = [("megatron sdpa", "bench.pretrain", [*shape, "--attention", "sdpa", "--micro-batch", str(micro), "--profile"]),
            ("hugging face llama", "bench.hf_peer", [*shape, "--micro-batch", str(micro)]),
            ("hugging face llama, compiled", "bench.hf_peer", [*shape, "--micro-batch", str(micro), "--compile"]),
            ("megatron sdpa no fusions", "bench.pretrain",
             [*shape, "--attention", "sdpa", "--micro-batch", str(micro), "--no-fusions"])]
    if te:
        runs.append(("megatron te", "bench.pretrain", [*shape, "--attention", "te", "--micro-batch", str(micro)]))
    runs.append(("megatron unfused", "bench.pretrain",
                 [*shape, "--attention", "unfused", "--micro-batch", str(args.unfused_micro_batch)]))
    runs += [(f"megatron sdpa mb{m}", "bench.pretrain", [*shape, "--attention", "sdpa", "--micro-batch", str(m)])
             for m in more]
    processes = row_processes(torch.cuda.is_available())
    rows, deadline = [], time.perf_counter() + args.budget
    for run, module, run_argv in runs:
        left = deadline - time.perf_counter()
        if left < 30:
            rows.append({"run": run, "error": f"not run: the check's --budget of {args.budget} s was spent"})
            continue
        print(f"… {run}", flush=True)
        slug = re.sub(r"[^a-z0-9]+", "_", run)
        row = run_bench(slug, module, [*run_argv, "--name", run], args.out_dir, min(args.timeout, left), processes)
        rows.append(row | {"run": run})
    if not te:
        rows.append({"run": "megatron te", "error": "Transformer Engine does not import here (docs/explanation/pretraining.md)"})

    result = {"kind": "gpu_check", "device": name, **machine(), "commit": commit, "command": command,
              "date": datetime.now(UTC).strftime("%Y-%m-%d"), "model": args.model, "steps": args.steps,
              "global_batch": args.global_batch, "peak_flops_spec": spec, "peak_flops_measured": peak["flops"],
              "matmul": peak, "rows": rows}
    print(f"\n{name}: spec-sheet bf16 peak {spec / 1e12:,.0f} TFLOP/s, measured {peak['flops'] / 1e12:,.0f} "
          f"TFLOP/s ({peak['dtype']} {peak['size']}^3); model {args.model}, commit {commit[:12]}"
          if spec else f"\n{name}: measured {peak['dtype']} matmul peak {peak['flops'] / 1e9:,.1f} GFLOP/s; "
          f"model {args.model}, commit {commit[:12]}")
    print("\n".join(table_rows(rows)))
    ok = {r["run"]: r for r in rows if not r.get("error")}
    ours = ok.get("megatron sdpa")
    if ours and ours.get("profile"):
        print("megatron sdpa, one step in ms: " + ", ".join(
            f"{k.removesuffix('_ms')} {v:,.1f}" for k, v in ours["profile"].items() if v is not None))
    if ours and spec:
        goal = GOAL_MFU * spec / ours["flops_per_token"]
        result["goal"] = {"mfu_spec": GOAL_MFU, "tokens_per_s_per_device": goal, "met": ours["mfu_spec"] >= GOAL_MFU}
        print(f"goal {GOAL_MFU:.0%} MFU of the spec sheet ({goal:,.0f} tokens/s per GPU): "
              f"{'met' if result['goal']['met'] else 'not met'} ({ours['mfu_spec']:.1%})")
    result["speedup_over_peers"] = {peer: ours["tokens_per_s_per_device"] / ok[peer]["tokens_per_s_per_device"]
                                    for peer in ("hugging face llama", "hugging face llama, compiled")
                                    if ours and peer in ok}
    for peer, ratio in result["speedup_over_peers"].items():
        print(f"megatron sdpa / {peer}: {ratio:.2f}x tokens/s")
    path = args.out_dir / "gpu_check.json"
    path.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {path}")
    if record_dir:
        record_dir.mkdir(parents=True, exist_ok=True)
        record = record_dir / record_name(name, args.model)
        record.write_text(json.dumps(record_of(result), indent=2) + "\n")
        print(f"wrote {record} (docs/reference/gpu-figures.md: python -m bench.gpu_tables --update)")


def record_of(result: dict) -> dict:
    """What the tracked record keeps: the result without this machine's paths or the profiler's
    operator list (both in <out-dir>)."""
    drop = {"log", "top_operations"}
    return result | {"rows": [{k: v for k, v in row.items() if k not in drop} for row in result["rows"]]}


if __name__ == "__main__":
    main()
