"""Training throughput and MFU of a named model size, through the project's own training loop.

    python -m bench.pretrain [--model tiny] [--attention auto|te|sdpa|unfused] [--steps 30]
                             [--global-batch 8] [--micro-batch 4] [--profile] [--out bench/results/pretrain.json]
    torchrun --nproc-per-node 8 -m bench.pretrain --model 1b --global-batch 256 --micro-batch 8
    srun --ntasks-per-node=1 torchrun --nnodes 4 --nproc-per-node 8 --rdzv-backend c10d \
         --rdzv-endpoint HOST:PORT -m bench.pretrain --model 1b --global-batch 512 --micro-batch 8

Builds a throwaway experiment: a word-level tokenizer (`--vocab`, 32,000 by default, as the
sizes are documented; 4,096 for tiny) and a dataset of random tokens just large enough for the
steps (in a scratch folder rank 0 names to the others; a node that does not see it writes the same
tokens), then runs `pretrain.train.train` and reads its per-step log and `run.json` (what ran: layer
spec, attention and the SDPA kernel, dtype, micro-batch, devices, overlap of communication). Its
step time is read after the device has finished the step (optimizer and, on several GPUs, the
gradient reduce-scatter and parameter all-gather included). Reported: median tokens/s per device
and step time over the steps after the first three (warm-up), peak accelerator memory, and
MFU = FLOPs per token (6 x matmul parameters + causal attention, configs/model.py: Megatron-LM's
convention) x tokens/s per device, against two peaks: the spec sheet's dense bf16 peak
(pretrain/platform.py, or --peak-flops) and a matrix product measured on the same device at the
start (8192^3 in bf16 on a GPU; what the hardware actually sustains, ~790 TFLOP/s on an H200
against 989 on paper); and, for figures
quoted the older way, against the spec sheet with the full score matrix counted (`full attn`).
`--profile` adds where one step's time goes (matmuls, attention, norms, optimizer, communication,
the rest, and the data loader), from the profiler of one extra step after the measured ones.
Goal on H100-class GPUs for the 1b size: at least 40% MFU (causal) of the spec-sheet peak.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

WARMUP_STEPS = 3


def bench_vocab(model: str) -> int:
    return 4096 if model == "tiny" else 32000


def write_tokenizer(folder: Path, vocab_size: int) -> None:
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import Whitespace
    from transformers import PreTrainedTokenizerFast

    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2} | {f"w{i}": i for i in range(3, vocab_size)}
    tokenizer = Tokenizer(WordLevel(vocab, unk_token="<unk>"))
    tokenizer.pre_tokenizer = Whitespace()
    PreTrainedTokenizerFast(tokenizer_object=tokenizer, unk_token="<unk>", bos_token="<s>",
                            eos_token="</s>").save_pretrained(str(folder))


def random_documents(tokens: int, vocab_size: int):
    """The benchmarks' token stream: documents of up to 4,096 random ids, the same for every bench."""
    rng = np.random.default_rng(0)
    while tokens > 0:
        doc = rng.integers(3, vocab_size, size=min(tokens, 4096))
        tokens -= len(doc)
        yield doc


def write_bench_data(config, tokens: int, vocab_size: int) -> None:
    write_tokenizer(config.tokenizer_dir(), vocab_size)
    write_random_dataset(config.dataset_prefix("bench"), tokens, vocab_size)


def write_random_dataset(prefix: Path, tokens: int, vocab_size: int) -> None:
    from megatron.core.datasets.indexed_dataset import IndexedDatasetBuilder

    prefix.parent.mkdir(parents=True, exist_ok=True)
    builder = IndexedDatasetBuilder(f"{prefix}.bin", dtype=np.uint16)
    for doc in random_documents(tokens, vocab_size):
        builder.add_document(doc, [len(doc)])
    builder.finalize(f"{prefix}.idx")


def device_name() -> str:
    return torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"


def matmul_peak(size: int | None = None, repeats: int = 10) -> dict:
    """FLOP/s of a square matrix product on this device, the mean of `repeats` after 3 warm-ups:
    bf16 8192^3 on a GPU, fp32 1024^3 on CPU (the dtype each trains in)."""
    cuda = torch.cuda.is_available()
    dtype = torch.bfloat16 if cuda else torch.float32
    size = size or (8192 if cuda else 1024)
    a, b = (torch.randn(size, size, dtype=dtype, device="cuda" if cuda else "cpu") for _ in range(2))
    for _ in range(3):
        a @ b
    if cuda:
        torch.cuda.synchronize()
    began = time.perf_counter()
    for _ in range(repeats):
        a @ b
    if cuda:
        torch.cuda.synchronize()
    seconds = (time.perf_counter() - began) / repeats
    del a, b
    if cuda:
        torch.cuda.empty_cache()
    return {"flops": 2 * size**3 / seconds, "size": size, "dtype": str(dtype).removeprefix("torch.")}


# what a kernel (GPU) or an operator (CPU) name says it does, first match wins
PROFILE_CATEGORIES = (
    ("communication", ("nccl", "all_reduce", "reduce_scatter", "all_gather")),
    ("optimizer", ("adam", "multi_tensor", "_foreach")),
    ("attention", ("flash", "fmha", "attention", "softmax")),
    ("matmul", ("gemm", "cutlass", "nvjet", "xmma", "cublas", "aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm")),
    ("norm", ("rms_norm", "rmsnorm", "layer_norm", "norm_")),
)


def profile_category(name: str) -> str:
    lowered = name.lower()
    return next((category for category, marks in PROFILE_CATEGORIES if any(m in lowered for m in marks)), "other")


def step_profile(prof, step_seconds: float, cuda: bool) -> dict:
    """Milliseconds of one profiled step by category: the device's kernel time on a GPU (the rest
    of the step is the device waiting for the host: launches, Python, the data loader), the
    operators' own CPU time on CPU."""
    from torch.autograd import DeviceType

    spent: dict[str, float] = {}
    for event in prof.key_averages():
        if cuda:
            if event.device_type != DeviceType.CUDA:
                continue
            us = event.self_device_time_total
        else:
            if not event.key.startswith("aten::") or event.device_type != DeviceType.CPU:
                continue
            us = event.self_cpu_time_total
        category = profile_category(event.key)
        spent[category] = spent.get(category, 0.0) + us / 1000
    busy = sum(spent.values())
    return {"step_ms": step_seconds * 1000, "busy_ms": busy, **{f"{k}_ms": round(v, 3) for k, v in sorted(spent.items())},
            "idle_ms": max(0.0, step_seconds * 1000 - busy) if cuda else None}


def top_operations(prof, cuda: bool, count: int = 20) -> list[dict]:
    """The profiled step's costliest kernels (GPU) or operators (CPU), with their category."""
    from torch.autograd import DeviceType

    rows = [(e.key, e.self_device_time_total if cuda else e.self_cpu_time_total, e.count) for e in prof.key_averages()
            if e.device_type == (DeviceType.CUDA if cuda else DeviceType.CPU)]
    return [{"name": name[:120], "ms": round(us / 1000, 3), "calls": calls, "category": profile_category(name)}
            for name, us, calls in sorted(rows, key=lambda r: -r[1])[:count]]


def throughput(records: list[dict], devices: int, flops_per_token: float, peaks: dict[str, float | None],
               flops_per_token_full: float) -> dict:
    """The median step time of the steps after warm-up, its tokens/s per device, MFU against each
    peak (causal-attention FLOPs, configs/model.py), and against the spec sheet with the full score
    matrix counted (`mfu_spec_full_attention`, for figures quoted that way)."""
    steady = records[WARMUP_STEPS:] or records[-1:]
    step_s = statistics.median(r["seconds"] for r in steady)
    tokens_per_step = steady[0]["tokens_per_s"] * steady[0]["seconds"]
    tokens_per_s = tokens_per_step / step_s / devices
    out = {"steps_measured": len(steady), "tokens_per_s_per_device": tokens_per_s, "step_s": step_s}
    for name, peak in peaks.items():
        out[f"mfu_{name}"] = flops_per_token * tokens_per_s / peak if peak else None
    out["mfu_spec_full_attention"] = flops_per_token_full * tokens_per_s / peaks["spec"] if peaks.get("spec") else None
    return out


COLUMNS = (("run", "{}", 30), ("layer spec", "{}", 18), ("attention", "{}", 16), ("micro", "{}", 6),
           ("tokens/s/GPU", "{:,.0f}", 13), ("step s", "{:.2f}", 8), ("MFU spec", "{:.1%}", 9),
           ("MFU meas.", "{:.1%}", 10), ("full attn", "{:.1%}", 10), ("peak GB", "{:.1f}", 8))


def table_rows(rows: list[dict]) -> list[str]:
    """One line a benchmark row (bench.pretrain's and bench.hf_peer's JSON), a failed one with its
    reason. MFU columns: causal-attention FLOPs against the spec sheet and the measured peak, then
    the full score matrix counted against the spec sheet."""
    def cell(fmt: str, value) -> str:
        return "-" if value is None else fmt.format(value)

    lines = ["".join(f"{name:>{width}}" if i > 3 else f"{name:<{width}}" for i, (name, _, width) in enumerate(COLUMNS))]
    for row in rows:
        if row.get("error"):
            lines.append(f"{row['run']:<30}{row['error']}")
            continue
        attention = row["attention"] + (f" ({row['sdpa_kernel']})" if row.get("sdpa_kernel") else "")
        values = (row["run"], row["layer_spec"], attention, row["micro_batch"], row["tokens_per_s_per_device"],
                  row["step_s"], row["mfu_spec"], row["mfu_measured"], row["mfu_spec_full_attention"],
                  row["peak_memory_gb"])
        lines.append("".join(f"{cell(fmt, v):>{width}}" if i > 3 else f"{cell(fmt, v):<{width}}"
                             for i, ((_, fmt, width), v) in enumerate(zip(COLUMNS, values, strict=True))))
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.pretrain", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="tiny", help="a size of configs/models/, or a shape as JSON")
    parser.add_argument("--attention", default="auto", choices=("auto", "te", "sdpa", "unfused"))
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--global-batch", type=int, default=8)
    parser.add_argument("--micro-batch", type=int, default=4)
    parser.add_argument("--vocab", type=int, help="default: 4,096 for tiny, 32,000 otherwise")
    parser.add_argument("--peak-flops", type=float, help="spec-sheet peak per device where the GPU is not in the table")
    parser.add_argument("--measured-peak", type=float, help="a matrix-product peak measured already (skips measuring)")
    parser.add_argument("--no-fusions", action="store_true", help="without megatron-core's torch.compile fusions")
    parser.add_argument("--no-overlap", action="store_true",
                        help="reduce gradients after the backward pass (overlap is on by default with several ranks)")
    parser.add_argument("--profile", action="store_true", help="profile one extra step: where the time goes")
    parser.add_argument("--name", help="the row's name in the table (default: megatron <attention>)")
    parser.add_argument("--out", type=Path, default=Path("bench/results/pretrain.json"))
    args = parser.parse_args()

    import torch.distributed as dist

    from configs.experiment import ExperimentConfig
    from pretrain.platform import detect, init_distributed
    from pretrain.train import train

    init_distributed(detect())  # under torchrun: every rank meets here, before anything is shared
    rank = dist.get_rank()
    measured = {"flops": args.measured_peak} if args.measured_peak else matmul_peak()
    vocab = args.vocab or bench_vocab(args.model)
    model = json.loads(args.model) if args.model.startswith("{") else args.model
    # profiled: one step after the measured ones, and one more so that it is not the last (whose
    # log line is written before the run's end)
    steps = args.steps + (2 if args.profile else 0)
    root, made_here = shared_work_dir()
    config = ExperimentConfig.model_validate({
        "name": "bench", "output_root": str(root), "inputs": {"sample": {}},
        "arms": {"bench": {"extractor": "trafilatura"}},
        "tokenizer": {"kind": "pretrained", "name_or_path": str(root / "tokenizer")},
        "dataset": {"tokens_per_arm": 1},  # set below, once the sequence length is known
        "pretrain": {"model": model, "seeds": [0], "training": {
            "global_batch_size": args.global_batch, "micro_batch_size": args.micro_batch, "attention": args.attention,
            "fusions": False if args.no_fusions else None, "checkpoint_every": 10**9,
            "overlap_grad_reduce": not args.no_overlap, "overlap_param_gather": not args.no_overlap,
            "peak_flops": args.peak_flops, "warmup_fraction": 0.0}},
    })
    tokens = steps * args.global_batch * config.pretrain.model.seq_length + 1
    config = config.model_copy(update={"dataset": config.dataset.model_copy(update={"tokens_per_arm": tokens})})
    if rank == 0:
        write_bench_data(config, tokens, vocab)
    dist.barrier()
    if made_here and rank != 0:  # a node that does not see rank 0's folder: the same tokens again
        write_bench_data(config, tokens, vocab)
    dist.barrier()
    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()
    profiler = step_profiler() if args.profile else None

    def progress(done: int) -> None:  # after each step: profile step args.steps + 1
        if profiler and done == args.steps:
            profiler.start()
        elif profiler and done == args.steps + 1:
            profiler.stop()

    run_dir = train(config, "bench", seed=0, progress=progress, checkpoints=False)
    dist.barrier()  # every rank done with the folder
    if rank == 0:
        report(args, config, run_dir, measured, profiler)
    if rank == 0 or made_here:
        shutil.rmtree(root, ignore_errors=True)
    dist.destroy_process_group()


def shared_work_dir() -> tuple[Path, bool]:
    """A scratch folder every rank names alike: rank 0 makes it and tells the others. On a node
    that does not see it (a node-local /tmp), the node's first rank makes the same path: the second
    value says this process made one."""
    import torch.distributed as dist

    holder = [tempfile.mkdtemp(prefix="bench-pretrain-") if dist.get_rank() == 0 else None]
    dist.broadcast_object_list(holder, src=0)
    root = Path(holder[0])
    if dist.get_rank() != 0 and int(os.environ.get("LOCAL_RANK", 0)) == 0 and not root.is_dir():
        root.mkdir(parents=True)
        return root, True
    return root, dist.get_rank() == 0


def report(args, config, run_dir: Path, measured: dict, profiler) -> None:
    """Rank 0: the row (table and JSON) from the run's log and run.json."""
    records = [json.loads(line) for line in (run_dir / "log.jsonl").read_text().splitlines()]
    run = json.loads((run_dir / "run.json").read_text())
    data_ms = data_loading_ms(config) if args.profile else None
    peaks = {"spec": run["peak_flops"], "measured": measured["flops"]}
    measured_records = records[:args.steps]
    result = {
        "run": args.name or f"megatron {run['attention']}", "model": args.model, "device": run["device"],
        "devices": run["world_size"], "nodes": int(os.environ.get("GROUP_WORLD_SIZE", 1)),
        "layer_spec": run["layer_spec"], "attention": run["attention"],
        "sdpa_kernel": run["sdpa_kernel"], "fusions": run["fusions"], "dtype": run["dtype"],
        "overlap_grad_reduce": run["overlap_grad_reduce"], "overlap_param_gather": run["overlap_param_gather"],
        "parameters": run["parameters"]["total"], "flops_per_token": run["flops_per_token"],
        "flops_convention": run["flops_convention"], "flops_per_token_full_attention": run["flops_per_token_full_attention"],
        "seq_length": config.pretrain.model.seq_length,
        "global_batch": args.global_batch, "micro_batch": args.micro_batch, "optimizer": optimizer_name(run),
        **throughput(measured_records, run["world_size"], run["flops_per_token"], peaks,
                     run["flops_per_token_full_attention"]),
        "peak_memory_gb": torch.cuda.max_memory_allocated() / 2**30 if torch.cuda.is_available() else None,
        "peak_flops_spec": peaks["spec"], "peak_flops_measured": peaks["measured"],
        "torch": torch.__version__, "torch_threads": torch.get_num_threads(),
    }
    if profiler:
        result["profile"] = step_profile(profiler, records[args.steps]["seconds"], torch.cuda.is_available()) | {
            "data_ms": data_ms}
        result["top_operations"] = top_operations(profiler, torch.cuda.is_available())
    print("\n".join(table_rows([result])))
    if profiler:
        print("one step, ms: " + ", ".join(f"{k.removesuffix('_ms')} {v:,.1f}" for k, v in result["profile"].items()
                                           if v is not None))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}")


def optimizer_name(run: dict) -> str:
    if run["device"] == "cpu":
        return "torch AdamW"
    from megatron.core import optimizer

    # megatron-core takes Transformer Engine's or Apex's fused Adam, else torch's (foreach) AdamW
    return "torch AdamW (foreach)" if optimizer.USING_PYTORCH_OPTIMIZER else "fused Adam (TE/Apex)"


def step_profiler():
    from torch.profiler import ProfilerActivity, profile

    return profile(activities=[ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else []))


def data_loading_ms(config) -> float:
    """Host milliseconds to read one step's micro-batches from the dataset (the loader's share)."""
    from pretrain.data import build_dataset, micro_batches

    dataset = build_dataset(config, "bench", 0, config.run_dir("bench", 0) / "data_cache")
    training = config.pretrain.training
    began = time.perf_counter()
    for _ in micro_batches(dataset, 0, training.global_batch_size, training.micro_batch_size, 0, 1):
        pass
    return (time.perf_counter() - began) * 1000


if __name__ == "__main__":
    main()
