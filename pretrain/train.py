"""Train one decoder per (arm, seed) on the arm's token-matched dataset, with megatron-core.

    python -m pretrain.train CONFIG [--rung RUNG] [--arm ARM] [--seed SEED] [--stop-at STEP]
    torchrun --nproc-per-node 8 -m pretrain.train CONFIG --rung RUNG --arm ARM --seed SEED

Without --rung/--arm/--seed it trains every (rung, arm, seed) of the config, one after the other,
smallest rung first. Within a rung everything but the data is the same across arms: model shape,
optimiser, schedule, steps (derived from the rung's tokens, a prefix of the shared token budget),
and for a given seed also the initial weights and the data order (the same order on every rung).
Writes `<output_root>/train/<arm>/<rung>/seed<S>/`: `log.jsonl` and `tensorboard/` (loss, learning rate,
grad norm, tokens/s, MFU per step), `checkpoints/step_*` (every `checkpoint_every` steps and the
last), and `hf/step_*` (each checkpoint exported to Hugging Face Llama for evaluation). A run
resumes from its latest checkpoint; a finished run is skipped. `--stop-at` stops after saving
that step, as a preemption would. Where `<run_dir>/stop-requested` appears (the Slurm job writes it
5 minutes before its time limit), the run saves the step it is in and stops, to be requeued; only
the checkpoints of the schedule are exported for evaluation, the same steps in every run. Each
step is timed until the device has finished it; MFU counts causal attention (configs/model.py).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from contextlib import nullcontext
from pathlib import Path

import torch
import torch.distributed as dist

from configs.base import ConfigError
from configs.durable import write_atomically
from configs.environment import check_output_root
from configs.experiment import ExperimentConfig, load_experiment_or_exit
from configs.model import FLOPS_CONVENTION
from configs.pretrain import TrainingConfig
from configs.provenance import write_provenance
from pretrain.checkpoint import NoLoadableCheckpoint
from pretrain.verify import DatasetMismatch
from slurm import console
from slurm.console import say
from slurm.lock import DriverLocked, driving


def learning_rate(step: int, steps: int, training: TrainingConfig) -> float:
    """Linear warmup to `lr`, then cosine decay to `lr x min_lr_ratio` at the last step."""
    warmup = max(1, round(training.warmup_fraction * steps))
    if step < warmup:
        return training.lr * (step + 1) / warmup
    progress = (step - warmup) / max(1, steps - 1 - warmup)
    floor = training.lr * training.min_lr_ratio
    return floor + (training.lr - floor) * 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))


# touched by the Slurm job's USR1 trap ahead of the time limit (pretrain/submit.py): the loop saves
# a checkpoint at the end of the step it is in, removes the file and stops, and the job requeues
STOP_REQUEST = "stop-requested"
# what a rung's runs must agree on: the kernels that compute every step
KERNEL_KEYS = ("layer_spec", "attention", "sdpa_kernel", "fusions", "dtype")
# refusals whose one line says all (what, which file, what to do): printed without the log's end
KNOWN_REFUSALS = (DatasetMismatch, NoLoadableCheckpoint)


def train(config: ExperimentConfig, arm: str, seed: int, stop_at: int | None = None, progress=None,
          checkpoints: bool = True) -> Path:
    """One (arm, seed) run, from its last complete checkpoint; `progress(step)` after every step.
    `checkpoints=False` saves and exports nothing (a throughput benchmark). Where the run's
    STOP_REQUEST file appears, it saves the step it is in and returns (`unfinished` says so)."""
    from megatron.core.distributed import DistributedDataParallel, DistributedDataParallelConfig

    from pretrain.attention import resolve_attention, sdpa_kernels
    from pretrain.checkpoint import resume, save_checkpoint, unfinished_saves
    from pretrain.data import build_dataset, micro_batches, tokenizer_facts
    from pretrain.export import megatron_weights, write_hf, write_run_info
    from pretrain.model import MEGATRON_FUSIONS, build_model
    from pretrain.platform import build_optimizer, detect, init_distributed, seed_everything
    from pretrain.verify import check_inputs_once

    model_cfg, training = config.pretrain.model, config.pretrain.training
    run_dir = config.run_dir(arm, seed)
    steps, _ = config.training_steps()
    tokens_per_step = config.pretrain.tokens_per_step
    last_step = min(steps, stop_at or steps)

    def exported(step: int) -> bool:  # the evaluation's points: the same steps in every run
        return step % training.checkpoint_every == 0 or step == steps

    # ---- where: devices, process group, seeds
    platform = detect(training.peak_flops, training.cpu_threads)
    init_distributed(platform)
    rank, world = dist.get_rank(), dist.get_world_size()
    if training.global_batch_size % (world * training.micro_batch_size):
        raise SystemExit(f"global_batch_size {training.global_batch_size} is not a multiple of "
                         f"{world} ranks x micro_batch_size {training.micro_batch_size}")
    seed_everything(seed)
    checked = check_inputs_once(config, [arm])  # before anything is built or written
    if rank == 0:
        say(f"[{arm} seed {seed}] {checked}")
    run_dir.mkdir(parents=True, exist_ok=True)
    if rank == 0 and (warning := write_provenance(run_dir, config, "training")):
        say(f"warning: {warning}")

    # ---- model, optimiser, data
    vocab, eos_id, bos_id = tokenizer_facts(config)
    attention = resolve_attention(training.attention, platform.is_cuda)
    fused = platform.is_cuda if training.fusions is None else training.fusions
    # overlap applies where there is communication to hide (several ranks); the parameter
    # all-gather exists with the distributed optimizer only (GPU)
    overlap_grad = training.overlap_grad_reduce and world > 1
    overlap_param = training.overlap_param_gather and overlap_grad and platform.is_cuda
    model = build_model(model_cfg, vocab, platform, attention, fused)
    ddp = DistributedDataParallel(model.config, DistributedDataParallelConfig(
        grad_reduce_in_fp32=True, use_distributed_optimizer=platform.is_cuda, overlap_grad_reduce=overlap_grad,
        overlap_param_gather=overlap_param), model)
    optimizer = build_optimizer(ddp, platform, training.lr, training.weight_decay, training.adam_betas,
                                training.adam_eps, training.clip_grad)
    dataset = build_dataset(config, arm, seed, run_dir / "data_cache")
    flops_per_token = model_cfg.flops_per_token(vocab)
    rung = config.pretrain.rung
    run = {"experiment": config.name, "arm": arm, "rung": rung.name, "seed": seed, "model": model_cfg.model_dump(),
           "tokens": config.pretrain.tokens_at(steps), "training_flops": flops_per_token * config.pretrain.tokens_at(steps),
           "vocab_size": vocab, "bos_id": bos_id, "eos_id": eos_id, "steps": steps,
           "tokenizer_dir": str(config.tokenizer_dir().resolve()),
           "parameters": model_cfg.parameters(vocab), "flops_per_token": flops_per_token,
           "flops_convention": FLOPS_CONVENTION,
           "flops_per_token_full_attention": model_cfg.flops_per_token(vocab, causal=False),
           # what ran, for every speed this run logs
           "device": platform.name, "world_size": world, "dtype": str(platform.dtype).removeprefix("torch."),
           "layer_spec": "transformer_engine" if attention == "te" else "local", "attention": attention,
           "fusions": sorted(MEGATRON_FUSIONS) if fused else [],
           "sdpa_kernel": None,  # read from the first step's SDPA calls
           "overlap_grad_reduce": overlap_grad, "overlap_param_gather": overlap_param,
           "micro_batch_size": training.micro_batch_size, "global_batch_size": training.global_batch_size,
           "peak_flops": platform.peak_flops}
    check_same_kernels(config, run_dir, run)
    if rank == 0:
        write_run_info(run_dir, run)

    def save(step: int) -> None:
        if overlap_param:  # the parameters of the last update are gathered by the next forward: now
            ddp.start_param_sync(force_sync=True)
        save_checkpoint(run_dir, step, model, optimizer, platform)
        if rank == 0 and exported(step):
            write_hf(megatron_weights(model), run, step, run_dir / "hf" / f"step_{step:07d}")

    # ---- resume
    if rank == 0:
        for path in unfinished_saves(run_dir):
            say(f"[{arm} seed {seed}] {path}: left by a killed job, skipped (saved again when training gets there)")
    start, latest = resume(run_dir, model, optimizer, platform, lambda line: say(f"[{arm} seed {seed}] {line}"))
    if latest is not None:
        hf_dir = run_dir / "hf" / f"step_{start:07d}"
        if rank == 0:
            say(f"[{arm} seed {seed}] resumed from {latest} (step {start}/{steps})")
            if exported(start) and not (hf_dir / "xsuite.json").is_file():  # the job died before exporting it
                write_hf(megatron_weights(model), run, start, hf_dir)
    if progress:
        progress(start)
    if start >= last_step:
        return run_dir
    log, tensorboard = None, None
    if rank == 0:
        log_path = run_dir / "log.jsonl"
        kept = [record for record in map(log_record, log_path.read_text().splitlines() if log_path.is_file() else [])
                if record and record["step"] <= start]  # steps after the checkpoint are redone
        write_atomically(log_path, "".join(json.dumps(record) + "\n" for record in kept))
        log = log_path.open("a")
        from torch.utils.tensorboard import SummaryWriter

        tensorboard = SummaryWriter(str(run_dir / "tensorboard"), purge_step=start + 1)

    # ---- the loop
    n_micro = training.global_batch_size // (world * training.micro_batch_size)
    ddp.train()
    for step in range(start, last_step):
        platform.synchronize()  # the step's window starts on an idle device
        began = time.perf_counter()
        ddp.zero_grad_buffer()
        optimizer.zero_grad()
        loss_sum = torch.zeros((), device=platform.device)
        batches = micro_batches(dataset, step, training.global_batch_size, training.micro_batch_size, rank, world)
        for i, batch in enumerate(batches):
            batch = {k: v.to(platform.device) for k, v in batch.items()}
            # gradients are reduced once per step: with overlap, during the last micro-batch's backward
            with ddp.no_sync() if i < n_micro - 1 else nullcontext():
                token_losses = ddp(batch["tokens"], batch["position_ids"], None, labels=batch["labels"])
                mask = batch["loss_mask"].float()
                loss = (token_losses.float() * mask).sum() / mask.sum()
                (loss / n_micro).backward()
            loss_sum += loss.detach() / n_micro
        ddp.finish_grad_sync()
        lr = learning_rate(step, steps, training)
        for group in optimizer.param_groups:
            group["lr"] = lr
        _, grad_norm, _ = optimizer.step()
        # the loss summed over ranks, and whether rank 0 saw a stop request, in one collective
        stop = float(rank == 0 and (run_dir / STOP_REQUEST).exists())
        totals = torch.stack([loss_sum, torch.tensor(stop, device=platform.device)])
        dist.all_reduce(totals)
        platform.synchronize()  # the optimizer's update inside the window (and the all-gather, where not overlapped)
        seconds = time.perf_counter() - began
        done = step + 1
        step_loss, stop = totals[0].item() / world, totals[1].item() > 0
        if done == start + 1 and attention == "sdpa":  # the kernel SDPA ran, now that it has run
            run["sdpa_kernel"] = sdpa_kernels(model)
            check_same_kernels(config, run_dir, run)
            if rank == 0:
                write_run_info(run_dir, run)

        if rank == 0 and (done % training.log_every == 0 or done == last_step or stop):
            tokens_per_s = tokens_per_step / seconds
            peak = platform.peak_flops
            record = {"step": done, "loss": step_loss, "lr": lr, "grad_norm": grad_norm,
                      "tokens": config.pretrain.tokens_at(done), "tokens_per_s": tokens_per_s,
                      "mfu": flops_per_token * tokens_per_s / (world * peak) if peak else None, "seconds": seconds}
            log.write(json.dumps(record) + "\n")
            log.flush()
            for key in ("loss", "lr", "grad_norm", "tokens_per_s", "mfu"):
                if record[key] is not None:
                    tensorboard.add_scalar(f"train/{key}", record[key], done)
        if checkpoints and (exported(done) or done == last_step or (stop and done < last_step)):
            save(done)
            if rank == 0:
                print(f"[{arm} seed {seed}] step {done}/{steps} loss {step_loss:.4f}", flush=True)
        if progress:
            progress(done)
        if stop and done < last_step:
            if rank == 0:
                (run_dir / STOP_REQUEST).unlink(missing_ok=True)
                say(f"[{arm} seed {seed}] stop requested: saved step {done}/{steps}, stopping")
            break
    if rank == 0:
        log.close()
        tensorboard.close()
    return run_dir


def check_same_kernels(config: ExperimentConfig, run_dir: Path, run: dict) -> None:
    """Refuse a run whose kernels (KERNEL_KEYS) differ from those another run of its rung recorded
    in its run.json: the arms of a rung are compared on their data alone. Every rank reads the same
    files and decides alike."""
    mine = {k: run[k] for k in KERNEL_KEYS if run.get(k) is not None}
    for other in sorted((config.output_root / "train").glob(f"*/{run['rung']}/seed*/run.json")):
        if other.parent.resolve() == run_dir.resolve():
            continue
        theirs = json.loads(other.read_text())
        differ = {k: (theirs[k], v) for k, v in mine.items() if theirs.get(k) is not None and theirs[k] != v}
        if differ:
            raise SystemExit(
                f"{config.relative(run_dir)}: would run " + ", ".join(f"{k} {v!r}" for k, (_, v) in differ.items())
                + f" where {config.relative(other.parent)} ran " + ", ".join(f"{k} {t!r}" for k, (t, _) in differ.items())
                + "; every run of a rung must run the same kernels. Pin pretrain.training.attention (and fusions) in "
                "the config, and train every arm on nodes of one kind (same GPU, same Transformer Engine)")


def unfinished(config: ExperimentConfig, arm: str, seed: int, stop_at: int | None = None) -> bool:
    """Whether a run's latest checkpoint is short of its last step (or of `stop_at`)."""
    from pretrain.checkpoint import latest_checkpoint

    latest = latest_checkpoint(config.run_dir(arm, seed))
    saved = int(latest.name.removeprefix("step_")) if latest else 0
    return saved < min(config.training_steps()[0], stop_at or config.training_steps()[0])


def log_record(line: str) -> dict | None:
    """A line of log.jsonl; None for the torn last line of a killed job."""
    try:
        return json.loads(line)
    except ValueError:
        return None


def selected_runs(config: ExperimentConfig, config_path: str, arm: str | None, seed: int | None,
                  rung: str | None = None) -> list[tuple[str, str, int]]:
    """The (rung, arm, seed) runs a command line names: all of them by default, rung by rung."""
    if config.pretrain is None:
        raise SystemExit(f"{config_path}: no pretrain section")
    if rung is not None and rung not in config.rungs():
        raise SystemExit(f"--rung {rung!r} is not a rung of {config_path} ({config.rungs()})")
    if arm is not None and arm not in config.trained_arms():
        raise SystemExit(f"--arm {arm!r} is not a trained arm of {config_path} ({config.trained_arms()})")
    rungs = [config.for_rung(r) for r in config.rungs() if rung in (None, r)]
    if seed is not None and not any(seed in c.pretrain.seeds for c in rungs):
        raise SystemExit(f"--seed {seed} is not a seed of {config_path}'s rungs "
                         f"({ {c.pretrain.rung.name: c.pretrain.seeds for c in rungs} })")
    return [(c.pretrain.rung.name, a, s) for c in rungs for a, s in c.runs() if arm in (None, a) and seed in (None, s)]


def missing_inputs(config: ExperimentConfig, runs: list[tuple[str, str, int]]) -> list[str]:
    """What the corpus flow should have left for these runs and did not."""
    missing = [] if config.tokenizer_file().is_file() else [f"{config.tokenizer_file()}: no tokenizer"]
    for arm in dict.fromkeys(arm for _, arm, _ in runs):
        files = (Path(f"{config.dataset_prefix(arm)}{suffix}") for suffix in (".bin", ".idx"))
        missing += [f"{p}: no dataset for arm {arm!r}" for p in files if not p.is_file()]
    return missing


def missing_inputs_refusal(config_path: str, missing: list[str]) -> str:
    return (f"{config_path}: nothing trained; missing:\n  " + "\n  ".join(missing)
            + "\nrun the corpus flow first: bash slurm/extract.sh " + config_path)


def run_summary(config: ExperimentConfig, arm: str, seed: int) -> str:
    """Steps, tokens and final loss (mean of the last 10 logged steps) of a run."""
    log = config.run_dir(arm, seed) / "log.jsonl"
    records = [r for r in map(log_record, log.read_text().splitlines() if log.is_file() else []) if r]
    if not records:
        return "no step logged"
    final = sum(r["loss"] for r in records[-10:]) / len(records[-10:])
    return f"{records[-1]['step']} steps, {records[-1]['tokens']:,} tokens, final loss {final:.4f}"


def main(argv: list[str] | None = None) -> int:

    parser = argparse.ArgumentParser(prog="python -m pretrain.train", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("config")
    parser.add_argument("--arm", help="default: every trained arm")
    parser.add_argument("--seed", type=int, help="default: every seed of the rung")
    parser.add_argument("--rung", help="default: every rung of pretrain.ladder, smallest first")
    parser.add_argument("--stop-at", type=int, help="stop after saving this step (as a preemption would)")
    console.add_verbose_flag(parser)
    args = parser.parse_args(argv)
    console.apply_verbose_flag(args)
    config = load_experiment_or_exit(args.config)
    runs = selected_runs(config, args.config, args.arm, args.seed, args.rung)
    try:
        check_output_root(config.output_root)
    except ConfigError as e:
        raise SystemExit(f"{args.config}: {e}") from None
    if missing := missing_inputs(config, runs):
        raise SystemExit(missing_inputs_refusal(args.config, missing))
    rank = int(os.environ.get("RANK", 0))
    try:  # rank 0 drives (torchrun stops the other ranks when it exits refused)
        with driving(config.output_root, say) if rank == 0 else nullcontext():
            train_runs(config, runs, args.stop_at, rank)
    except DriverLocked as e:
        print(f"{args.config}: {e}", file=sys.stderr)
        return 2
    except KNOWN_REFUSALS as e:  # on the console already (console.stage), unless verbose
        if console.verbose() and rank == 0:
            print(e, file=sys.stderr)
        return 2
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
    return 0


def train_runs(config: ExperimentConfig, runs: list[tuple[str, str, int]], stop_at: int | None, rank: int) -> None:
    """The runs one after the other; stops after a run stopped on request (to be requeued)."""
    for rung, arm, seed in runs:
        one = config.for_rung(rung)
        title = f"train {arm} {rung} seed {seed}"
        log = config.output_root / "logs" / f"train-{arm}-{rung}-seed{seed}{f'-rank{rank}' if rank else ''}.log"
        if rank:  # the console is rank 0's
            with console.redirected(log):
                train(one, arm, seed, stop_at)
        else:
            with console.stage(title, log, "steps", one.training_steps()[0], explained=KNOWN_REFUSALS) as bar:
                train(one, arm, seed, stop_at, progress=lambda step: bar.update(step - bar.n))
            console.closing_line(title, run_summary(one, arm, seed), one.run_dir(arm, seed), log)
        # stopped on request, to be requeued: so are the runs after it (rank 0 reads, every rank follows)
        stopped = [unfinished(one, arm, seed, stop_at) if rank == 0 else None]
        dist.broadcast_object_list(stopped, src=0)
        if stopped[0]:
            break


if __name__ == "__main__":
    sys.exit(main())
