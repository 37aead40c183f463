"""The GPU check: on one GPU, the project's 1B training beside the peer a user would otherwise pick,
in one table, sized for a short allocation (under 8 minutes with start-up).

    bash bench/gpu_check.sh [--model 1b] [--steps 15] [--global-batch 32] [--micro-batch 8]
                            [--unfused-micro-batch 4] [--out-dir bench/results/gpu_check]

1. the matrix-product peak of this device (bf16 8192^3; fp32 1024^3 on CPU);
2. `bench.pretrain` with SDPA attention (and one step profiled: where the time goes), again
   without megatron-core's torch.compile fusions (what they buy), with Transformer Engine's layer
   spec where it imports, and with megatron's unfused attention at a micro-batch that fits (for
   the record: what a pip-installed node ran before SDPA);
3. `bench.hf_peer`: Hugging Face LlamaForCausalLM, SDPA and fused AdamW, same shape and tokens.
Each run is its own process (its own memory, and a failure is a row, not the end); the table
gives tokens/s per GPU, step time, MFU against the spec-sheet and the measured peak, peak memory.
Writes `<out-dir>/gpu_check.json` and each run's JSON and log. Needs only torch, transformers,
numpy, megatron-core and pydantic (plus what the training loop's config reads: pyyaml, tokenizers,
tensorboard, tqdm, rich, fsspec, psutil). On CPU it runs the same paths at `--model tiny`.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
import time
from pathlib import Path

NEEDED = ("torch", "transformers", "numpy", "megatron.core", "pydantic", "yaml", "tokenizers", "tensorboard", "tqdm",
          "rich", "fsspec", "psutil")
GOAL_MFU = 0.40  # of the spec-sheet peak, on an H100/H200-class GPU for the 1b size


def run_bench(name: str, module: str, argv: list[str], out_dir: Path, timeout: int) -> dict:
    """One benchmark process; its JSON row, or a row that says why there is none."""
    out, log = out_dir / f"{name}.json", out_dir / f"{name}.log"
    began = time.perf_counter()
    try:
        with log.open("w") as stream:
            done = subprocess.run([sys.executable, "-m", module, *argv, "--out", str(out)], stdout=stream,
                                  stderr=subprocess.STDOUT, timeout=timeout)
        failed = f"exit {done.returncode}" if done.returncode else None
    except subprocess.TimeoutExpired:
        failed = f"timed out after {timeout} s"
    seconds = time.perf_counter() - began
    if failed or not out.is_file():
        tail = [line for line in log.read_text(errors="replace").splitlines() if line.strip()][-1:] or [""]
        return {"run": name, "error": f"{failed or 'no result'}: {tail[0][:160]}", "log": str(log), "seconds": seconds}
    return json.loads(out.read_text()) | {"run": name, "log": str(log), "seconds": seconds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="1b")
    parser.add_argument("--steps", type=int, default=15)
    parser.add_argument("--global-batch", type=int, default=32)
    parser.add_argument("--micro-batch", type=int, nargs="+", default=[8],
                        help="SDPA runs' micro-batches: the first is profiled and is the peer's; others add rows")
    parser.add_argument("--unfused-micro-batch", type=int, default=4, help="the unfused score matrices need more memory")
    parser.add_argument("--timeout", type=int, default=240, help="seconds per run")
    parser.add_argument("--commit", help="the commit measured (default: git's HEAD)")
    parser.add_argument("--out-dir", type=Path, default=Path("bench/results/gpu_check"))
    args = parser.parse_args()
    missing = [name for name in NEEDED if importlib.util.find_spec(name.split(".")[0]) is None]
    if missing:
        raise SystemExit(f"missing on this node: {', '.join(missing)} (pip install them, or carry their wheels)")

    from bench.pretrain import device_name, matmul_peak, table_rows
    from configs.provenance import git_commit
    from pretrain.platform import PEAK_BF16_FLOPS

    args.out_dir.mkdir(parents=True, exist_ok=True)
    name = device_name()
    peak = matmul_peak()
    spec = next((v for k, v in PEAK_BF16_FLOPS.items() if k in name), None)
    shape = ["--model", args.model, "--steps", str(args.steps), "--global-batch", str(args.global_batch),
             "--measured-peak", str(peak["flops"])]
    micro, *more = args.micro_batch
    runs = [("megatron sdpa", "bench.pretrain", [*shape, "--attention", "sdpa", "--micro-batch", str(micro), "--profile"])]
    runs += [(f"megatron sdpa mb{m}", "bench.pretrain", [*shape, "--attention", "sdpa", "--micro-batch", str(m)]) for m in more]
    # what megatron-core's torch.compile fusions buy (on by default on a GPU)
    runs.append(("megatron sdpa no fusions", "bench.pretrain",
                 [*shape, "--attention", "sdpa", "--micro-batch", str(micro), "--no-fusions"]))
    te = importlib.util.find_spec("transformer_engine") is not None
    if te:
        runs.append(("megatron te", "bench.pretrain", [*shape, "--attention", "te", "--micro-batch", str(micro)]))
    runs += [("megatron unfused", "bench.pretrain",
              [*shape, "--attention", "unfused", "--micro-batch", str(args.unfused_micro_batch)]),
             ("hugging face llama", "bench.hf_peer", [*shape, "--micro-batch", str(micro)])]
    rows = []
    for run, module, argv in runs:
        print(f"… {run}", flush=True)
        rows.append(run_bench(run.replace(" ", "_"), module, [*argv, "--name", run] if module == "bench.pretrain" else argv,
                              args.out_dir, args.timeout) | {"run": run})
    if not te:
        rows.append({"run": "megatron te", "error": "Transformer Engine does not import here (README: Transformer Engine)"})

    result = {"device": name, "commit": args.commit or git_commit(), "model": args.model,
              "peak_flops_spec": spec, "peak_flops_measured": peak["flops"], "matmul": peak, "rows": rows}
    print(f"\n{name}: spec-sheet bf16 peak {spec / 1e12:,.0f} TFLOP/s, measured {peak['flops'] / 1e12:,.0f} "
          f"TFLOP/s ({peak['dtype']} {peak['size']}^3); model {args.model}, commit {result['commit'][:12]}"
          if spec else f"\n{name}: measured {peak['dtype']} matmul peak {peak['flops'] / 1e9:,.1f} GFLOP/s; "
          f"model {args.model}, commit {result['commit'][:12]}")
    print("\n".join(table_rows(rows)))
    ours = next((r for r in rows if r["run"] == "megatron sdpa" and not r.get("error")), None)
    peer = next((r for r in rows if r["run"] == "hugging face llama" and not r.get("error")), None)
    if ours and ours.get("profile"):
        print("megatron sdpa, one step in ms: " + ", ".join(
            f"{k.removesuffix('_ms')} {v:,.1f}" for k, v in ours["profile"].items() if v is not None))
    if ours and spec:
        goal = GOAL_MFU * spec / ours["flops_per_token"]
        result["goal"] = {"mfu_spec": GOAL_MFU, "tokens_per_s_per_device": goal, "met": ours["mfu_spec"] >= GOAL_MFU}
        print(f"goal {GOAL_MFU:.0%} MFU of the spec sheet ({goal:,.0f} tokens/s per GPU): "
              f"{'met' if result['goal']['met'] else 'not met'} ({ours['mfu_spec']:.1%})")
    if ours and peer:
        result["speedup_over_peer"] = ours["tokens_per_s_per_device"] / peer["tokens_per_s_per_device"]
        print(f"megatron sdpa / hugging face llama: {result['speedup_over_peer']:.2f}x tokens/s")
    path = args.out_dir / "gpu_check.json"
    path.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
