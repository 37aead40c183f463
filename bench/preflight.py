"""GPU preflight: can this node run the configured experiment, and how fast? Ten minutes at most.

    python -m bench.preflight CONFIG [--pages N] [--page-file PAGES.jsonl.gz] [--steps 20]
                                     [--gpus-per-node G] [--nodes N]
    sbatch [--nodes=N] [--gpus-per-node=G] slurm/preflight.sh CONFIG    (one GPU, a node, or N nodes)

1. Environment, one pass/fail line each with what to do: CUDA and the GPU, Transformer Engine,
   the vLLM build, every labeler model and tokenizer (local folder or Hugging Face cache), the
   first document of every reference corpus, the evaluation datasets (cached, or generated
   offline).
2. The labeler: the configured Dripper model in vLLM on `--pages` pages (from `--page-file`, the
   shared annotated sets, or generated pages): pages/s per GPU, prompt and answer tokens per page,
   forward passes per answer, fallbacks; with the config's draft (`labeler.draft_model`), the
   speculative labeler on the same pages too: its pages/s, the share of drafted labels the model
   kept (the real acceptance) and the pages whose labels differ from plain decoding's.
3. Training: `--steps` steps of the configured model (a ladder's target rung; the configured
   `pretrain.training.attention`; megatron's distributed optimizer on GPU) on random tokens; a run
   stopped at half way and resumed from its checkpoint must log the losses of the uninterrupted one
   (exactly on CPU, within 1% on a GPU, whose bf16 runs are not bitwise reproducible:
   RESUME_TOLERANCE); the last checkpoint's Hugging Face export must give Megatron's logits; one
   lm-eval task runs on it. Tokens/s per GPU and MFU (causal-attention FLOPs, configs/model.py)
   against the spec sheet and a matrix product measured here, with the layer spec, attention
   kernel, dtype and micro-batch that produced them.
4. Scaling, with `--gpus-per-node G` > 1 or `--nodes N` > 1 (slurm/preflight.sh passes the job's):
   `bench.pretrain` on 1 GPU, on G (torchrun) and on N x G (srun, a torchrun per node), the same
   work per GPU at each size; tokens/s per GPU and their ratio to one GPU's (`scaling`).

Writes `<output_root>/preflight/preflight.json`, which `python -m corpus.flow.plan` reads for the GPU
rates. On a machine without a GPU the same code runs with the tiny model shape and a random
labeler model of the Dripper architecture (corpus.extractors.dripper.random_model): every path is
exercised, the speeds mean nothing, and the plan does not use them.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from configs.experiment import ExperimentConfig, load_experiment_or_exit
from corpus.extractors import DripperArm
from corpus.extractors.dripper.labelers.revision import recorded_labeler

TINY_BATCH = {"global_batch_size": 4, "micro_batch_size": 2}
# the resumed run's losses against the uninterrupted one's, the largest relative difference of a
# step: exact on CPU (deterministic: tested bit for bit); on a GPU, bf16 runs are not bitwise
# reproducible (atomic adds in attention's backward, the order of reductions), and the rounding
# differences grow over steps, so 1% of the loss (a bound chosen, not measured: no GPU has run this
# check yet). On the preflight's random tokens the GPU check cannot fail a broken resume: the loss
# sits at ln(vocab) from the first step, and on CPU (tiny model, these 20 steps) a resume that drops
# Adam's state moves it by at most 0.10% (0.73% on learnable tokens), well inside 1%. So on a GPU
# it shows only that the distributed optimizer's checkpoint saves, loads and trains on; the exact
# CPU check here and tests/test_pretrain.py are where resume is proven.
RESUME_TOLERANCE = {False: 0.0, True: 1e-2}


def check(name: str, ok: bool, detail: str, fix: str = "") -> dict:
    return {"check": name, "ok": ok, "detail": detail, "fix": "" if ok else fix}


def model_available(name_or_path: str, revision: str | None = None) -> tuple[bool, str]:
    """A local folder, or a hub id already in the Hugging Face cache (at `revision`: the commit the
    tasks load; None: the cached main)."""
    if Path(name_or_path).is_dir():
        return (Path(name_or_path) / "config.json").is_file(), f"folder {name_or_path}"
    from huggingface_hub import snapshot_download

    try:
        cached = snapshot_download(name_or_path, revision=revision, local_files_only=True)  # the local cache only
        return True, f"cached at {cached}"
    except Exception as e:  # not in the cache (or no such repo, or not that commit): the message says which
        return False, f"{name_or_path}" + (f" at {revision}" if revision else "") + f": {type(e).__name__}"


def environment(config: ExperimentConfig) -> list[dict]:
    import torch

    checks = []
    cuda = torch.cuda.is_available()
    checks.append(check("CUDA", cuda, torch.cuda.get_device_name(0) if cuda else f"torch {torch.__version__}, no GPU",
                        "run on a GPU node (sbatch slurm/preflight.sh); on CPU only the code paths are checked"))
    checks.append(transformer_engine_check())
    try:
        import vllm

        checks.append(check("vLLM", True, vllm.__version__))
    except ImportError as e:
        checks.append(check("vLLM", False, str(e), "make setup VLLM=gpu"))
    for name, arm in config.arms.items():
        if isinstance(arm, DripperArm) and arm.labeler.kind != "encoder":
            labeler = recorded_labeler(arm.labeler, config.arm_dir(name))  # the commit the arm's tasks load
            ok, detail = model_available(labeler.model, labeler.revision)
            pin = f" --revision {labeler.revision}" if labeler.revision else ""
            checks.append(check(f"labeler model ({name})", ok, detail,
                                f"huggingface-cli download {labeler.model}{pin} (on a node with network)"))
            if getattr(arm.labeler, "drafted", False):
                checks.append(draft_check(name, arm.labeler.draft_model))
    checks += reference_checks(config)
    if config.evaluation:
        if config.evaluation.tasks == "offline":
            checks.append(check("evaluation data", True, "offline: generated in each task's schema"))
        else:
            checks += evaluation_data_checks()
    return checks


def transformer_engine_check() -> dict:
    """Transformer Engine imports, in the range megatron-core declares it supports (its own
    metadata: `transformer-engine>=2.9.0a0,<2.12.0` for 0.16.1)."""
    from importlib.metadata import PackageNotFoundError, requires, version

    from packaging.requirements import Requirement

    supported = next((r.specifier for r in map(Requirement, requires("megatron-core") or [])
                      if r.name == "transformer-engine"), None)
    try:
        import transformer_engine  # noqa: F401

        installed = version("transformer-engine")
    except (ImportError, PackageNotFoundError) as e:
        return check("Transformer Engine", False, str(e),
                     "run in NVIDIA's PyTorch container (docs/explanation/pretraining.md); else the local layer spec runs")
    ok = supported is None or supported.contains(installed, prereleases=True)
    return check("Transformer Engine", ok, f"{installed}; megatron-core {version('megatron-core')} supports {supported}",
                 "take a container whose Transformer Engine megatron-core supports (docs/explanation/pretraining.md)")


def draft_check(arm: str, folder: str) -> dict:
    """The speculative labeler's draft model: a block classifier of mineru-html's blocks."""
    from corpus.extractors.dripper.labelers.config import DRAFT_MODEL_HINT
    from corpus.extractors.dripper.labelers.draft import BlockDraft

    try:
        BlockDraft(folder)
    except Exception as e:  # missing folder, a page model, a stale one: the message says which
        return check(f"draft model ({arm})", False, f"{folder}: {e}"[:300], DRAFT_MODEL_HINT)
    return check(f"draft model ({arm})", True, f"folder {folder}")


def reference_checks(config: ExperimentConfig) -> list[dict]:
    """The first row of every reference corpus: reachable from this node (hub or files), with
    text in `text_field` and, ideally, an id in `id_field`."""
    from corpus.read.reference_steps import first_row

    checks = []
    for name, arm in config.reference_arms.items():
        try:
            row = first_row(arm)
        except Exception as e:  # unreachable hub, no such subset or split: the message says which
            checks.append(check(f"reference corpus ({name})", False, f"{type(e).__name__}: {e}"[:300],
                                "check dataset, subset and split, and that this node reaches the hub (or its cache)"))
            continue
        text = row.get(arm.text_field)
        detail = (f"columns {sorted(row)}; {arm.text_field!r}: {len(text):,} characters" if isinstance(text, str) and text
                  else f"no text in {arm.text_field!r} (columns {sorted(row)})")
        if arm.id_field not in row:
            detail += f"; no {arm.id_field!r}: documents are named <file>/<row>"
        checks.append(check(f"reference corpus ({name})", isinstance(text, str) and bool(text), detail,
                            "set text_field to the corpus's text column (RefinedWeb: content)"))
    return checks


def evaluation_data_checks() -> list[dict]:
    """Every dataset the suite's tasks read, in the Hugging Face datasets cache."""
    import lm_eval
    from huggingface_hub import scan_cache_dir

    from evaluation.tasks.offline import OFFLINE
    from evaluation.tasks.shims import builtin_task_yaml

    try:
        cached = {repo.repo_id for repo in scan_cache_dir().repos if repo.repo_type == "dataset"}
    except Exception:  # no cache folder yet
        cached = set()
    builtin = Path(lm_eval.__file__).parent / "tasks"
    checks = []
    for task, (source, _) in OFFLINE.items():
        path = builtin / source if not Path(source).is_absolute() else Path(source)
        dataset = builtin_task_yaml(path).get("dataset_path")
        checks.append(check(f"evaluation data ({task})", dataset in cached, f"{dataset}",
                            f"download {dataset} into the Hugging Face cache, or set evaluation.tasks: offline"))
    return checks


# ---------------------------------------------------------------- the labeler


def preflight_pages(count: int, page_file: Path | None, real_pages: bool) -> list[str]:
    """HTML of `count` pages: a page file, the shared annotated sets (where `real_pages`), or
    generated pages (short enough for the CPU run's small random model)."""
    from corpus.sample.annotated import SHARED_PAGE_SETS, load_pages

    if page_file:
        files = [page_file]
    else:
        files = sorted(SHARED_PAGE_SETS.glob("*/pages.jsonl.gz")) if real_pages else []
    html = [p.html for f in files for p in load_pages(f, count)][:count]
    if len(html) < count:
        from corpus.sample import generate_pages

        html += [p.html for p in generate_pages(count - len(html), seed=7)]
    return html


def measure_labeler(labeler_config, pages: list[str]) -> dict:
    """The labeler as the Dripper step runs it, on `pages`: plain greedy decoding, and where the
    config drafts (`labeler.draft`), the speculative labeler on the same pages beside it, with the
    share of drafted labels the model kept (its true acceptance, with real weights) and the pages
    whose labels differ from plain decoding's (0 but for a bf16 tie to the last bit)."""
    from corpus.extractors.dripper.labelers import BlockPage
    from corpus.extractors.dripper.step import simplify_page

    blocks = []
    for html in pages:
        try:
            simplified, _, ids = simplify_page(html)
        except Exception:  # counted as a fallback, as the arm does
            continue
        if ids:
            blocks.append(BlockPage(simplified, ids))
    plain_config = labeler_config.model_copy(update={"draft": "none"}) if labeler_config.drafted else labeler_config
    result, plain = _labeler_run(plain_config, blocks)
    result |= {"pages": len(pages), "model": labeler_config.model, "engine_kwargs": labeler_config.engine_kwargs,
               "fallbacks": result["fallbacks"] | {"not_simplified": len(pages) - len(blocks)}}
    if labeler_config.drafted:
        try:
            drafted, results = _labeler_run(labeler_config, blocks)
        except Exception as e:  # no draft model here, a page model, a stale one: the check fails, the rest goes on
            result["drafted"] = {"error": f"{type(e).__name__}: {e}"[:300]}
            return result
        kept = [(r.draft, r.labels) for r in results if r.draft is not None]
        drafted["draft_tokens"] = labeler_config.draft_tokens
        drafted["draft_agreement"] = (sum(d[i] == labels[i] for d, labels in kept for i in d)
                                      / max(sum(len(d) for d, _ in kept), 1))
        drafted["pages_differing_from_plain"] = sum((a.labels, a.error) != (b.labels, b.error)
                                                    for a, b in zip(plain, results, strict=True))
        result["drafted"] = drafted
    return result


def engine_core_in_process() -> None:
    """On CPU (code paths only), vLLM's engine core in the labeler's process: its default starts
    two more processes that import vLLM and torch again (~17 s of CPU, most of the check's engine
    start). The labeling path is the same; on a GPU the engine runs as the Dripper step runs it."""
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"


def _labeler_run(labeler_config, blocks: list) -> tuple[dict, list]:
    from corpus.extractors.dripper.labelers import build_labeler
    from corpus.shims import shut_down_engine

    started = time.perf_counter()
    labeler = build_labeler(labeler_config)
    engine_seconds = time.perf_counter() - started
    started = time.perf_counter()
    results = labeler.label(blocks)
    seconds = time.perf_counter() - started
    work = [labeler.work(b, r) for b, r in zip(blocks, results, strict=True)]  # what the Dripper step counts
    prompt = [p for p, _ in work]
    answers = [a for (_, a), r in zip(work, results, strict=True) if r.ok]
    passes = [r.answer_passes for r in results if r.ok and r.answer_passes is not None]
    shut_down_engine(labeler)
    errors: dict[str, int] = {}
    for r in results:
        if not r.ok:
            errors[r.error] = errors.get(r.error, 0) + 1
    return {"sent": len(blocks), "labelled": sum(r.ok for r in results), "seconds": seconds,
            "engine_start_seconds": engine_seconds, "pages_per_s_per_gpu": len(blocks) / seconds if seconds else None,
            "prompt_tokens_per_page": statistics.fmean(prompt) if prompt else None,
            "answer_tokens_per_page": statistics.fmean(answers) if answers else None,
            "answer_passes_per_page": statistics.fmean(passes) if passes else None, "fallbacks": errors}, results


def labeler_under_test(config: ExperimentConfig, out: Path, cuda: bool):
    """The configured GPU labeler; on CPU a random model of the same architecture in vLLM."""
    name, arm = next(((n, a) for n, a in config.arms.items() if isinstance(a, DripperArm) and a.labeler.kind == "vllm"),
                     (None, None))
    if arm is None:
        return None
    if cuda:
        return recorded_labeler(arm.labeler, config.arm_dir(name))
    from corpus.extractors.dripper.labelers.config import VllmLabelerConfig
    from corpus.extractors.dripper.random_model import build_random_model

    model = build_random_model(out / "random-labeler", seed=0, max_positions=4096)
    draft = arm.labeler.draft_model if arm.labeler.drafted and Path(arm.labeler.draft_model).is_dir() else None
    return VllmLabelerConfig(kind="vllm", model=str(model), max_context_tokens=2048, max_output_tokens=1024,
                             gpu_memory_utilization=0.05, draft_model=draft, draft_tokens=arm.labeler.draft_tokens)


# ---------------------------------------------------------------- training, export, lm-eval


def scratch_experiment(config: ExperimentConfig, out: Path, steps: int, cuda: bool) -> ExperimentConfig:
    """Two arms on the same random tokens (one run whole, one stopped and resumed), the configured
    model and batch on a GPU, the tiny ones on CPU; a tokenizer trained on generated prose."""
    from configs.model import named_model

    pretrain = config.pretrain
    model = pretrain.model.model_dump() if cuda else named_model("tiny")
    training = pretrain.training.model_dump() | ({} if cuda else TINY_BATCH) | {
        "checkpoint_every": steps // 2, "log_every": 1, "warmup_fraction": 0.1}
    tokens = steps * training["global_batch_size"] * model["seq_length"] + 1
    return ExperimentConfig.model_validate({
        "name": f"{config.name}-preflight", "output_root": str(out), "inputs": {"sample": {}},
        "arms": {"whole": {"extractor": "trafilatura"}, "resumed": {"extractor": "trafilatura"}},
        "tokenizer": {"kind": "sentencepiece", "vocab_size": 2000, "sample_chars_per_arm": 100_000},
        "dataset": {"tokens_per_arm": tokens},
        "evaluation": config.evaluation.model_dump() if config.evaluation else {"tasks": "offline"},
        "pretrain": {"model": model, "training": training, "seeds": [1], "slurm": pretrain.slurm.model_dump()}})


def build_scratch_data(config: ExperimentConfig) -> None:
    import random

    import numpy as np
    from megatron.core.datasets.indexed_dataset import IndexedDatasetBuilder
    from tokenizers import Tokenizer

    from corpus.sample.text import Prose
    from corpus.tokens.tokenizer import train_sentencepiece
    from pretrain.verify import record_datasets

    rng = random.Random(0)
    train_sentencepiece(["\n\n".join(Prose(rng).paragraph() for _ in range(3)) for _ in range(200)],
                        config.tokenizer, config.tokenizer_dir())
    vocab = Tokenizer.from_file(str(config.tokenizer_file())).get_vocab_size()
    tokens = np.random.default_rng(0).integers(3, vocab, size=config.dataset.tokens_per_arm)
    for arm in config.arms:
        prefix = config.dataset_prefix(arm)
        prefix.parent.mkdir(parents=True, exist_ok=True)
        builder = IndexedDatasetBuilder(f"{prefix}.bin", dtype=np.uint16)
        for doc in np.array_split(tokens, max(1, len(tokens) // 4096)):
            builder.add_document(doc, [len(doc)])
        builder.finalize(f"{prefix}.idx")
    record_datasets(config, list(config.arms))


def losses(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "log.jsonl").read_text().splitlines()]


def logit_difference(checkpoint: Path, export: Path, config: ExperimentConfig) -> float:
    import torch
    from transformers import LlamaForCausalLM

    from pretrain.checkpoint import load_model
    from pretrain.export import read_run_info
    from pretrain.model import build_model
    from pretrain.platform import detect

    run = read_run_info(checkpoint)
    platform = detect()
    model = build_model(config.pretrain.model, run["vocab_size"], platform, run["attention"])
    load_model(checkpoint, model)
    model.eval()
    hf = LlamaForCausalLM.from_pretrained(str(export), dtype=platform.dtype).to(platform.device).eval()  # nosec B615  # the local export
    seq = min(64, config.pretrain.model.seq_length)
    tokens = torch.randint(0, run["vocab_size"], (2, seq), generator=torch.Generator().manual_seed(0)).to(platform.device)
    with torch.no_grad():
        ours = model(tokens, torch.arange(seq, device=platform.device).expand(2, -1), None).float()
        theirs = hf(tokens).logits.float()
    return (ours - theirs).abs().max().item()


def one_lm_eval_task(config: ExperimentConfig, export: Path, limit: int) -> dict:
    import lm_eval
    import torch

    from evaluation.evaluate import task_manager

    cuda = torch.cuda.is_available()
    started = time.perf_counter()
    run = lm_eval.simple_evaluate(model="hf", model_args=f"pretrained={export},dtype={'bfloat16' if cuda else 'float32'}",
                                  tasks=["arc_easy"], task_manager=task_manager(config), limit=limit,
                                  device="cuda" if cuda else "cpu", batch_size=8)
    seconds = time.perf_counter() - started
    return {"task": "arc_easy", "documents": limit, "seconds": seconds,
            "acc_norm": run["results"]["arc_easy"].get("acc_norm,none")}


def measure_training(config: ExperimentConfig, out: Path, steps: int, cuda: bool) -> tuple[dict, list[dict]]:
    from bench.pretrain import matmul_peak
    from pretrain.checkpoint import latest_checkpoint
    from pretrain.train import train

    scratch = scratch_experiment(config, out / "training", steps, cuda)
    build_scratch_data(scratch)
    whole = train(scratch, "whole", 1)
    resumed = train(scratch, "resumed", 1, stop_at=steps // 2)
    train(scratch, "resumed", 1)
    logged, again = losses(whole), losses(resumed)
    resume_diff = max((abs(a["loss"] - b["loss"]) / abs(a["loss"]) for a, b in zip(logged, again, strict=True)),
                      default=0.0) if len(logged) == len(again) else float("inf")
    checkpoint = latest_checkpoint(whole)
    export = whole / "hf" / checkpoint.name
    diff = logit_difference(checkpoint, export, scratch)
    tolerance = 5e-2 if cuda else 1e-4  # bf16 on GPU
    steady = logged[min(3, len(logged) - 1):]  # the first steps include compilation and warm-up
    tokens_per_s = statistics.median(r["tokens_per_s"] for r in steady)
    mfus = [r["mfu"] for r in steady if r["mfu"] is not None]
    lm_eval_run = one_lm_eval_task(scratch, export, limit=20)
    run = json.loads((whole / "run.json").read_text())
    peak = matmul_peak()
    result = {"model": scratch.pretrain.model.model_dump(), "steps": steps,
              "tokens_per_step": scratch.pretrain.tokens_per_step, "distributed_optimizer": cuda,
              # what ran: the speeds below are this layer spec's, this kernel's, at this micro-batch
              **{k: run[k] for k in ("device", "layer_spec", "attention", "sdpa_kernel", "dtype", "micro_batch_size")},
              "tokens_per_s_per_gpu": tokens_per_s, "mfu": statistics.median(mfus) if mfus else None,
              "peak_flops_spec": run["peak_flops"], "peak_flops_measured": peak["flops"],
              "mfu_measured_peak": scratch.pretrain.model.flops_per_token(run["vocab_size"]) * tokens_per_s / peak["flops"],
              "resume_max_loss_difference": resume_diff, "resume_tolerance": RESUME_TOLERANCE[cuda],
              "export_max_logit_difference": diff, "lm_eval": lm_eval_run}
    checks = [check("resume from checkpoint", resume_diff <= RESUME_TOLERANCE[cuda],
                    f"{len(logged)} steps, stopped at {steps // 2} and resumed: largest loss difference "
                    f"{resume_diff:.2e} of the loss (tolerance {RESUME_TOLERANCE[cuda]:g})",
                    "the resumed losses differ from the uninterrupted run: see pretrain/checkpoint.py"),
              check("export logit parity", diff < tolerance, f"max |Δlogit| {diff:.2e} (tolerance {tolerance:g})",
                    "the Hugging Face mapping (pretrain/model.py) does not match this layer spec"),
              check("lm-eval on the export", lm_eval_run["acc_norm"] is not None,
                    f"arc_easy, {lm_eval_run['documents']} documents in {lm_eval_run['seconds']:.1f} s",
                    "see the lm-eval error above")]
    return result, checks


def scaling_launch(gpus_per_node: int, nodes: int) -> list[str]:
    """The command that starts `bench.pretrain` on `nodes` x `gpus_per_node` processes: plain
    Python on one, torchrun on one node's, srun with a torchrun per node on several (inside the
    Slurm allocation the preflight runs in, beside its own step)."""
    if nodes == 1:
        return [sys.executable, "-m"] if gpus_per_node == 1 else [
            sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={gpus_per_node}", "-m"]
    if "SLURM_JOB_ID" not in os.environ:
        raise SystemExit(f"--nodes {nodes}: run inside a Slurm allocation of {nodes} nodes "
                         "(sbatch --nodes=N --gpus-per-node=G slurm/preflight.sh CONFIG)")
    head = subprocess.run(["scontrol", "show", "hostnames", os.environ["SLURM_JOB_NODELIST"]], capture_output=True,
                          text=True, check=True).stdout.split()[0]
    port = 20000 + int(os.environ["SLURM_JOB_ID"]) % 20000
    # the job's CPUs per node for each node's torchrun: srun does not inherit sbatch's --cpus-per-task
    # since Slurm 22.05 (one core for 8 ranks would measure the host, not the GPUs)
    cpus = [f"--cpus-per-task={os.environ['SLURM_CPUS_PER_TASK']}"] if os.environ.get("SLURM_CPUS_PER_TASK") else []
    return ["srun", "--overlap", f"--nodes={nodes}", "--ntasks-per-node=1", *cpus, "--kill-on-bad-exit=1",
            sys.executable, "-m", "torch.distributed.run", f"--nnodes={nodes}", f"--nproc-per-node={gpus_per_node}",
            f"--rdzv-id={os.environ['SLURM_JOB_ID']}", "--rdzv-backend=c10d", f"--rdzv-endpoint={head}:{port}", "-m"]


def measure_scaling(config: ExperimentConfig, out: Path, gpus_per_node: int, nodes: int, steps: int, cuda: bool,
                    measured_peak: float) -> tuple[dict, list[dict]]:
    """Training tokens/s per GPU on 1 GPU, one node's `gpus_per_node` and all `nodes` of them
    (bench.pretrain, the configured model, attention and micro-batch; the tiny ones on CPU). Every
    size does the same work per GPU and step, the configured global batch's at the largest size
    (micro-batches per GPU: global batch / (micro-batch x GPUs)), so tokens/s per GPU compare
    directly: what is lost from one size to the next is communication that overlap did not hide."""
    training = config.pretrain.training.model_dump() | ({} if cuda else TINY_BATCH)
    micro = training["micro_batch_size"]
    sizes = sorted({(1, 1), (gpus_per_node, 1), (gpus_per_node, nodes)}, key=lambda s: s[0] * s[1])
    accumulation = max(1, training["global_batch_size"] // (micro * sizes[-1][0] * sizes[-1][1]))
    model = json.dumps(config.pretrain.model.model_dump()) if cuda else "tiny"
    runs = []
    for per_node, count in sizes:
        gpus = per_node * count
        path = out / "scaling" / f"gpus{gpus}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        argv = ["bench.pretrain", "--model", model, "--steps", str(steps),
                "--global-batch", str(micro * accumulation * gpus), "--micro-batch", str(micro),
                "--attention", training["attention"], "--measured-peak", str(measured_peak), "--out", str(path)]
        argv += ["--no-fusions"] if training["fusions"] is False else []
        log = path.with_suffix(".log")
        with log.open("w") as stream:
            done = subprocess.run([*scaling_launch(per_node, count), *argv], stdout=stream, stderr=subprocess.STDOUT)
        if done.returncode or not path.is_file():
            tail = [line for line in log.read_text(errors="replace").splitlines() if line.strip()][-1:] or [""]
            runs.append({"gpus": gpus, "nodes": count, "error": f"exit {done.returncode}: {tail[0][:200]}", "log": str(log)})
            continue
        row = json.loads(path.read_text())
        runs.append({"gpus": gpus, "nodes": count, **{k: row[k] for k in (
            "tokens_per_s_per_device", "step_s", "mfu_spec", "mfu_measured", "overlap_grad_reduce",
            "overlap_param_gather", "global_batch")}})
    one = runs[0].get("tokens_per_s_per_device")
    for run in runs:
        if one and "tokens_per_s_per_device" in run:
            run["efficiency"] = run["tokens_per_s_per_device"] / one
    failed = [r for r in runs if "error" in r]
    detail = "; ".join(f"{r['gpus']} GPU{'s' if r['gpus'] > 1 else ''}: " + (
        f"{r['tokens_per_s_per_device']:,.0f} tokens/s per GPU ({r['efficiency']:.0%} of one)" if "error" not in r
        else r["error"]) for r in runs)
    scaling = {"model": json.loads(model) if cuda else model, "micro_batch": micro,
               "micro_batches_per_gpu": accumulation, "steps": steps, "runs": runs}
    return scaling, [check("scaling", not failed, detail, f"see {failed[0]['log']}" if failed else "")]


def evaluation_hours_per_checkpoint(lm_eval_run: dict) -> float:
    """All 13 benchmarks at the measured seconds per document (a rough rate: tasks differ)."""
    from evaluation.tasks.suite import load_suite

    documents = sum(sum(b.items) * (2 if b.cloze else 1) for b in load_suite().benchmarks)
    return documents * lm_eval_run["seconds"] / lm_eval_run["documents"] / 3600


# ---------------------------------------------------------------- the command


def preflight(config: ExperimentConfig, pages: int, page_file: Path | None, steps: int, gpus_per_node: int = 1,
              nodes: int = 1) -> dict:
    import gc

    import torch

    out = config.output_root / "preflight"
    out.mkdir(parents=True, exist_ok=True)
    cuda = torch.cuda.is_available()
    started = time.perf_counter()
    report = {"device": "cuda" if cuda else "cpu", "gpu": torch.cuda.get_device_name(0) if cuda else None,
              "checks": environment(config)}
    labeler_config = labeler_under_test(config, out, cuda)
    if labeler_config is not None:
        # in its own process, so that the vLLM engine has let go of the GPU before training starts
        with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"),
                                 initializer=None if cuda else engine_core_in_process) as pool:
            report["labeler"] = pool.submit(measure_labeler, labeler_config, preflight_pages(pages, page_file, cuda)).result()
        lab = report["labeler"]
        report["checks"].append(check("labeler", lab["labelled"] > 0,
                                      f"{lab['labelled']} of {lab['sent']} pages labelled, "
                                      f"{lab['pages_per_s_per_gpu'] or 0:.2f} pages/s",
                                      "see the labeler error above"))
        if "drafted" in lab:
            d = lab["drafted"]
            report["checks"].append(check("labeler with its draft", "error" not in d and d["pages_differing_from_plain"] == 0,
                                          d.get("error") or f"{d['pages_per_s_per_gpu'] or 0:.2f} pages/s, "
                                          f"{d['draft_agreement']:.1%} of drafted labels kept, "
                                          f"{d['pages_differing_from_plain']} pages differ from plain decoding",
                                          "see the error; pages that differ are bf16 ties (docs/explanation/extractors.md)"))
    if config.pretrain:
        target = config.for_rung(config.pretrain.target.name)  # a ladder's target rung: the plan scales the others
        report["training"], checks = measure_training(target, out, steps, cuda)
        report["checks"] += checks
        report["evaluation"] = {"gpu_hours_per_checkpoint": evaluation_hours_per_checkpoint(report["training"]["lm_eval"])}
        if gpus_per_node * nodes > 1:
            if cuda:  # the training above holds memory in this process's cache: the runs below need the GPUs
                gc.collect()
                torch.cuda.empty_cache()
            report["scaling"], checks = measure_scaling(target, out, gpus_per_node, nodes, steps, cuda,
                                                        report["training"]["peak_flops_measured"])
            report["checks"] += checks
    report["seconds"] = time.perf_counter() - started
    # CUDA and Transformer Engine are reported, not required: the CPU run checks the code paths
    report["ok"] = all(c["ok"] for c in report["checks"] if c["check"] not in ("CUDA", "Transformer Engine"))
    (out / "preflight.json").write_text(json.dumps(report, indent=2) + "\n")
    return report


def print_report(report: dict, path: Path) -> None:
    for c in report["checks"]:
        print(f"{'PASS' if c['ok'] else 'FAIL'}  {c['check']}: {c['detail']}" + (f"\n      → {c['fix']}" if c["fix"] else ""))
    if "labeler" in report:
        lab = report["labeler"]
        print(f"labeler: {lab['pages_per_s_per_gpu'] or 0:.2f} pages/s per GPU, {lab['prompt_tokens_per_page'] or 0:,.0f} prompt "
              f"and {lab['answer_tokens_per_page'] or 0:,.0f} answer tokens per page, fallbacks {lab['fallbacks']}")
        if "drafted" in lab and "error" not in lab["drafted"]:
            d = lab["drafted"]
            print(f"labeler with its draft: {d['pages_per_s_per_gpu'] or 0:.2f} pages/s per GPU, "
                  f"{d['answer_passes_per_page'] or 0:.1f} forward passes an answer "
                  f"(plain: {lab['answer_passes_per_page'] or 0:.1f}), "
                  f"{d['draft_agreement']:.1%} of drafted labels kept, {d['pages_differing_from_plain']} pages differ from plain")
    if "training" in report:
        t = report["training"]
        mfu = f", MFU {t['mfu']:.1%} of the spec sheet (causal-attention FLOPs)" if t["mfu"] else ""
        kernel = t["attention"] + (f" ({t['sdpa_kernel']})" if t["sdpa_kernel"] else "")
        print(f"training: {t['tokens_per_s_per_gpu']:,.0f} tokens/s per GPU{mfu}, {t['mfu_measured_peak']:.1%} of the "
              f"measured matmul peak ({t['peak_flops_measured'] / 1e12:,.2f} TFLOP/s); {t['layer_spec']} layer spec, "
              f"attention {kernel}, {t['dtype']}, micro-batch {t['micro_batch_size']}, "
              f"distributed optimizer: {t['distributed_optimizer']}")
    if "scaling" in report:
        print("scaling: " + "; ".join(f"{r['gpus']} GPU(s) on {r['nodes']} node(s): " + (
            f"{r['tokens_per_s_per_device']:,.0f} tokens/s per GPU, {r['efficiency']:.0%} of one" if "error" not in r
            else r["error"]) for r in report["scaling"]["runs"]))
    where = report["gpu"] or "CPU: code paths only, speeds not used by the plan"
    print(f"{where}; {report['seconds']:.0f} s; wrote {path}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.preflight", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("config")
    parser.add_argument("--pages", type=int, default=200, help="pages the labeler labels")
    parser.add_argument("--page-file", type=Path, help="labelled page JSONL (default: the shared sets, else generated)")
    parser.add_argument("--steps", type=int, default=20, help="training steps (even; resumed at half)")
    parser.add_argument("--gpus-per-node", type=int, default=1,
                        help="GPUs of this node to measure scaling on (slurm/preflight.sh: the job's)")
    parser.add_argument("--nodes", type=int, default=1, help="nodes of this Slurm job to measure scaling on")
    args = parser.parse_args(argv)
    config = load_experiment_or_exit(args.config)
    report = preflight(config, args.pages, args.page_file, args.steps, args.gpus_per_node, args.nodes)
    print_report(report, config.output_root / "preflight" / "preflight.json")
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
