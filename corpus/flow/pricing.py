"""The plan's pricing (steps 2 and 3 of corpus/flow/plan.py): the rates, each naming its source (the pilot, a
preflight file or the config's `plan:` defaults), and the CPU-hours, GPU-hours, wall time and storage of
extraction, post-processing, training and evaluation at the configured inputs."""

from __future__ import annotations

from configs.experiment import ExperimentConfig
from configs.model import ModelConfig
from corpus.extractors import DripperArm

# bytes per parameter of a training checkpoint: bf16 weights, fp32 main copy, Adam's two moments
CHECKPOINT_BYTES_PER_PARAMETER = 2 + 4 + 8


def gpu_preflight(preflight: dict | None) -> dict | None:
    """A preflight whose speeds are GPU rates: one that ran on a GPU."""
    return preflight if preflight and preflight.get("gpu") else None


def labeler_rates(config: ExperimentConfig, arm: str, pilot: dict, preflight: dict | None) -> dict:
    """A Dripper arm's labeler: prompt tokens a page (the pilot's own, another piloted Dripper arm's
    on the same pages, or the paper's) and, for an LLM, prompt tokens per GPU-second (a GPU
    preflight's, or the paper's)."""
    out = {}
    piloted = [a for a in [arm, *pilot["arms"]] if a in pilot["arms"] and isinstance(config.arms[a], DripperArm)
               and sum(f["sent_to_labeler"] for f in pilot["arms"][a]["files"])]
    if piloted:
        files = pilot["arms"][piloted[0]]["files"]
        sent = sum(f["sent_to_labeler"] for f in files)
        source = f"pilot ({config.arms[piloted[0]].labeler.token_source})" + ("" if piloted[0] == arm else f", as {piloted[0]}")
        out["labeler_prompt_tokens_per_page"] = (sum(f["prompt_tokens"] for f in files) / sent, source)
        out["labeler_answer_tokens_per_page"] = (sum(f["answer_tokens"] for f in files) / sent, source)
    else:
        out["labeler_prompt_tokens_per_page"] = (config.plan.labeler_prompt_tokens_per_page,
                                                 "config (plan.labeler_prompt_tokens_per_page)")
    labeler = config.arms[arm].labeler
    if labeler.kind != "encoder":
        lab = (preflight or {}).get("labeler", {})
        drafted = getattr(labeler, "drafted", False)
        run, how = (lab["drafted"], "with its draft") if drafted and lab.get("drafted") else (
            lab, "plain decoding; the draft's rate not measured, so not in it" if drafted else "plain decoding")
        if run.get("pages_per_s_per_gpu") and lab.get("prompt_tokens_per_page"):
            out["labeler_prompt_tokens_per_gpu_s"] = (run["pages_per_s_per_gpu"] * lab["prompt_tokens_per_page"],
                                                      f"measured: preflight on {preflight['gpu']}, {lab.get('model')}, {how}")
        else:
            rate = config.plan.labeler_prompt_tokens_per_gpu_s
            paper = rate == type(config.plan).model_fields["labeler_prompt_tokens_per_gpu_s"].default
            out["labeler_prompt_tokens_per_gpu_s"] = (rate, "assumed: plan.labeler_prompt_tokens_per_gpu_s"
                                                      + (", the paper's A100 rate" if paper else "")
                                                      + ("; the draft's speed-up not in it" if drafted else ""))
    return out


def labeler_pages(measured: dict, piloted: bool) -> tuple[float, float]:
    """Pages a file sends the labeler, with the language pre-filter and without it. An arm not
    piloted here (no GPU) labels every page past the guard and the record-level filters."""
    files = measured["files"]
    sent = mean_per_file(files, "sent_to_labeler") if piloted else \
        mean_per_file(files, "records") - mean_per_file(files, "not_extracted")
    return sent, sent + mean_per_file(files, "prefiltered")


def training_tokens_per_gpu_s(config: ExperimentConfig, vocab_size: int, preflight: dict | None) -> dict:
    """Per rung, training tokens/s per GPU and where it comes from: a GPU preflight's measured rate
    (on the most GPUs its scaling ran on, else one; for its model; another rung's at the same MFU,
    scaled by FLOPs per token), else the config's MFU."""
    out, p = {}, config.plan
    for rung in config.pretrain.ladder:
        flops = rung.model.flops_per_token(vocab_size)
        if preflight and preflight.get("training", {}).get("tokens_per_s_per_gpu"):
            t = preflight["training"]
            ran = ", ".join(f"{key} {t[key]}" for key in ("layer_spec", "attention", "sdpa_kernel", "micro_batch_size")
                            if t.get(key))
            measured = ModelConfig.model_validate(t["model"]).flops_per_token(vocab_size)
            source = f"preflight on {preflight['gpu']}" + (f" ({ran})" if ran else "")
            rate = t["tokens_per_s_per_gpu"]
            # the most GPUs the preflight's scaling ran on: communication included, as in the jobs
            if widest := [r for r in preflight.get("scaling", {}).get("runs", []) if "error" not in r][-1:]:
                rate = widest[0]["tokens_per_s_per_device"]
                source += f", {widest[0]['gpus']} GPUs on {widest[0]['nodes']} node(s)"
            if measured == flops:
                out[rung.name] = (rate, source)
            else:
                out[rung.name] = (rate * measured / flops, source + ", scaled from its model by FLOPs per token at the same MFU")
        else:
            out[rung.name] = (p.training_mfu * p.gpu_peak_flops / flops,
                              f"config: MFU {p.training_mfu:.0%} of {p.gpu_peak_flops:.3g} FLOP/s at {flops:.3g} "
                              "FLOPs/token (causal attention)")
    return out


def rates(config: ExperimentConfig, pilot: dict, preflight: dict | None, vocab_size: int) -> dict:
    # the rates are those of these releases: named beside them
    out: dict = {"arms": {}, "extractor_versions": {name: arm.versions() for name, arm in config.extractor_arms.items()}}
    preflight = gpu_preflight(preflight)
    for name, arm in config.extractor_arms.items():
        measured = pilot["arms"].get(name)
        entry = {}
        if measured:
            records = sum(f["records"] for f in measured["files"])
            docs_in = sum(f["stages"][0]["documents_out"] for f in measured["files"])
            source = f"pilot ({pilot['pages']} pages)"
            entry["extraction_pages_per_core_s"] = (records / measured["cpu_seconds"]["extraction"], source)
            entry["postprocess_docs_per_core_s"] = (docs_in / max(measured["cpu_seconds"]["postprocess"], 1e-9), source)
        if isinstance(arm, DripperArm):
            entry |= labeler_rates(config, name, pilot, preflight)
        out["arms"][name] = entry
    if config.pretrain:
        out["training_tokens_per_gpu_s"] = training_tokens_per_gpu_s(config, vocab_size, preflight)
    if config.evaluation:
        hours = preflight.get("evaluation", {}).get("gpu_hours_per_checkpoint") if preflight else None
        out["evaluation_gpu_hours_per_checkpoint"] = (
            (hours, f"preflight on {preflight['gpu']}") if hours else
            (config.plan.evaluation_gpu_hours_per_checkpoint, "config (plan.evaluation_gpu_hours_per_checkpoint)"))
    return out


def checkpoints_per_run(config: ExperimentConfig) -> int:
    """Checkpoints one run of the config's one rung (ExperimentConfig.for_rung) saves and exports."""
    steps = config.training_steps()[0]
    every = config.pretrain.training.checkpoint_every
    return steps // every + (1 if steps % every else 0)


def mean_per_file(files: list[dict], key: str) -> float:
    return sum(f[key] for f in files) / len(files)


def labeler_gpu_seconds(pages: float, rates_of_arm: dict) -> float:
    """GPU-seconds for `pages`: pages x prompt tokens a page / prompt tokens per GPU-second."""
    return pages * rates_of_arm["labeler_prompt_tokens_per_page"][0] / rates_of_arm["labeler_prompt_tokens_per_gpu_s"][0]


def labeler_lines(config: ExperimentConfig, pilot: dict, r: dict, input_files: int) -> dict:
    """Per Dripper arm: the pages a file sends its labeler with the language pre-filter and
    without it, the tokens of a page, and (an LLM) the GPU-hours of each."""
    smallest = min(pilot["arms"], key=lambda a: sum(f["tokens"] for f in pilot["arms"][a]["files"]))
    out = {}
    for name, arm in config.extractor_arms.items():
        if not isinstance(arm, DripperArm):
            continue
        rates_of_arm = r["arms"][name]
        pages, without = labeler_pages(pilot["arms"].get(name) or pilot["arms"][smallest], name in pilot["arms"])
        line = {"pages_per_file": pages, "pages_per_file_without_prefilter": without,
                "prompt_tokens_per_page": rates_of_arm["labeler_prompt_tokens_per_page"],
                "answer_tokens_per_page": rates_of_arm.get("labeler_answer_tokens_per_page")}
        if "labeler_prompt_tokens_per_gpu_s" in rates_of_arm:
            line["prompt_tokens_per_gpu_s"] = rates_of_arm["labeler_prompt_tokens_per_gpu_s"]
            line["gpu_hours"] = input_files * labeler_gpu_seconds(pages, rates_of_arm) / 3600
            line["gpu_hours_without_prefilter"] = input_files * labeler_gpu_seconds(without, rates_of_arm) / 3600
        out[name] = line
    return out


def costs(config: ExperimentConfig, pilot: dict, r: dict, input_files: int, vocab_size: int) -> dict:
    """CPU-hours, GPU-hours, wall hours and bytes of every stage for `input_files` inputs."""
    out: dict = {"stages": [], "totals": {}}

    def add(stage, arm, cpu_h=0.0, gpu_h=0.0, wall_h=0.0, storage=0, note=""):
        out["stages"].append({"stage": stage, "arm": arm, "cpu_hours": cpu_h, "gpu_hours": gpu_h,
                              "wall_hours": wall_h, "bytes": storage, "note": note})

    smallest = min(pilot["arms"], key=lambda a: sum(f["tokens"] for f in pilot["arms"][a]["files"]))
    for name, arm in config.extractor_arms.items():
        measured = pilot["arms"].get(name) or pilot["arms"][smallest]
        n = len(measured["files"])

        res = arm.resources
        cpu_h = gpu_h = 0.0
        notes = []
        if name in pilot["arms"]:
            cpu_h = input_files * measured["cpu_seconds"]["extraction"] / n / 3600
            if digest_s := measured.get("digest_seconds"):
                share = digest_s / measured["cpu_seconds"]["extraction"]
                notes.append(f"{input_files * digest_s / n / 3600:.3g} CPU-h of it ({share:.1%}) checking WARC digests "
                             "(inputs.verify_digests)")
        if "labeler_prompt_tokens_per_gpu_s" in r["arms"][name]:
            pages, _ = labeler_pages(measured, name in pilot["arms"])
            gpu_h = input_files * labeler_gpu_seconds(pages, r["arms"][name]) / 3600
        wall = max(cpu_h / max(res.workers * res.cpus_per_task, 1),
                   gpu_h / max(res.workers * max(res.gpus_per_task, 1), 1))
        if name not in pilot["arms"]:
            notes.append(f"not piloted: sizes as {smallest}, every page past the guard labelled")
        add("extraction", name, cpu_h, gpu_h, wall, input_files * measured["bytes"]["extracted"] // n, "; ".join(notes))
        post_cpu = input_files * measured["cpu_seconds"]["postprocess"] / n / 3600
        post_res = config.postprocess.resources
        post_bytes = sum(measured["bytes"][k] for k in ("intermediate", "removed", "post_processed"))
        add("post-processing", name, post_cpu, 0.0, post_cpu / max(post_res.workers * post_res.cpus_per_task, 1),
            input_files * post_bytes // n)
    for name, arm in config.reference_arms.items():
        add("reference read", name, note=f"reads up to {arm.margin:g} x the budget in tokens from its corpus "
                                         "(not piloted; bound by the network or disk, not projected)")
    if config.dataset:
        token_bytes = 2 if vocab_size < 65_536 else 4
        for name in config.arms:
            add("datasets", name, storage=config.dataset.tokens_per_arm * token_bytes)
    if config.pretrain:
        out["rungs"] = {}
        for rung in config.pretrain.ladder:
            one = config.for_rung(rung.name)
            runs = len(one.runs())
            tokens_s, _ = r["training_tokens_per_gpu_s"][rung.name]
            gpu_h = one.rung_tokens(rung) / tokens_s / 3600
            s = rung.slurm
            ckpt = rung.model.parameters(vocab_size)["total"] * CHECKPOINT_BYTES_PER_PARAMETER
            checkpoints = runs * checkpoints_per_run(one)
            add("training", f"{rung.name}: {runs} runs", 0.0, runs * gpu_h, gpu_h / (s.nodes * s.gpus_per_node),
                checkpoints * ckpt, "wall time is one run's; the runs are independent jobs")
            evaluation = 0.0
            if config.evaluation:
                hours, _ = r["evaluation_gpu_hours_per_checkpoint"]
                evaluation = checkpoints * hours * config.evaluation.slurm.gpus
                add("evaluation", f"{rung.name}: {checkpoints} checkpoints", 0.0, evaluation,
                    evaluation / min(config.evaluation.slurm.parallel, checkpoints) / config.evaluation.slurm.gpus)
            out["rungs"][rung.name] = {
                "model": rung.model.model_dump(), "parameters": rung.model.parameters(vocab_size)["total"],
                "tokens": one.rung_tokens(rung), "seeds": len(rung.seeds), "runs": runs,
                "training_flops_per_run": rung.model.flops_per_token(vocab_size) * one.rung_tokens(rung),
                "training_gpu_hours": runs * gpu_h, "evaluation_gpu_hours": evaluation,
                "gpu_hours_per_run": gpu_h}
    out["totals"] = {k: sum(s[k] for s in out["stages"]) for k in ("cpu_hours", "gpu_hours", "bytes")}
    return out
