"""Checkpoints with megatron-core dist_checkpointing: model, optimizer, data position and RNG.

Layout: `<run_dir>/checkpoints/step_0000100/` (torch_dist format, any number of ranks can load
it) and `<run_dir>/checkpoints/latest` (the last complete step, replaced atomically after every
rank saved). A checkpoint is complete when megatron's `metadata.json` (written after every rank's
shards) and our `shards.json` (every file and its size, written after that) are there and every
file has its recorded size. Resume takes the newest complete checkpoint that loads, and says which
newer ones it skipped and why (a save cut by a kill, a shard cut short, a load that failed); a
skipped step is saved again from scratch when training gets there.
The data position is the step (samples are drawn by step, see pretrain/data.py); the RNG states
are rank 0's (dropout is off, so they matter only to code that draws random numbers later).
"""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist

from configs.durable import write_atomically
from pretrain.platform import Platform


def checkpoint_dir(run_dir: Path, step: int) -> Path:
    return run_dir / "checkpoints" / f"step_{step:07d}"


SHARDS_RECORD = "shards.json"  # every file of a checkpoint and its size, written after every rank saved


def incomplete_reason(path: Path) -> str | None:
    """Why a checkpoint folder is not complete (None if it is): megatron's `metadata.json`
    (written after every rank's shards) and every file our record lists, at its recorded size. A
    folder saved before shards were recorded is complete on its metadata alone (loading it is
    the test: `resume`)."""
    try:
        if "sharded_backend" not in json.loads((path / "metadata.json").read_text()):
            return "metadata.json names no backend"
    except (OSError, ValueError):
        return "no readable metadata.json (the save was cut)"
    try:
        recorded = json.loads((path / SHARDS_RECORD).read_text())["files"]
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError) as e:
        return f"{SHARDS_RECORD} unreadable ({e})"
    for name, size in recorded.items():
        file = path / name
        if not file.is_file():
            return f"{name} missing"
        if file.stat().st_size != size:
            return f"{name}: {file.stat().st_size:,} bytes, {size:,} recorded"
    return None


def is_complete(path: Path) -> bool:
    return incomplete_reason(path) is None


def record_shards(path: Path) -> None:
    """Every file of a saved checkpoint with its size: a shard cut short later (a disk fault, a
    partial copy) is found before loading it."""
    files = {p.relative_to(path).as_posix(): p.stat().st_size for p in sorted(path.rglob("*"))
             if p.is_file() and p.name != SHARDS_RECORD}
    write_atomically(path / SHARDS_RECORD, json.dumps({"files": files}, indent=1) + "\n")


def saved_steps(run_dir: Path) -> list[Path]:
    """The step folders not after the `latest` marker (all, when it is missing), newest first."""
    marker = run_dir / "checkpoints" / "latest"
    try:
        newest = int(marker.read_text())
    except (OSError, ValueError):
        newest = None
    steps = sorted((int(p.name.removeprefix("step_")) for p in (run_dir / "checkpoints").glob("step_*")), reverse=True)
    return [checkpoint_dir(run_dir, s) for s in steps if newest is None or s <= newest]


def latest_checkpoint(run_dir: Path) -> Path | None:
    """The newest complete checkpoint not after the `latest` marker (any complete one when the
    marker is missing); None to start from scratch."""
    return next((p for p in saved_steps(run_dir) if is_complete(p)), None)


def unfinished_saves(run_dir: Path) -> list[Path]:
    """Step folders a killed save left behind: newer than the `latest` marker."""
    marked = set(saved_steps(run_dir))
    return [p for p in sorted((run_dir / "checkpoints").glob("step_*")) if p not in marked]


def _rng_state() -> dict:
    state = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        from megatron.core import tensor_parallel

        state["cuda"] = torch.cuda.get_rng_state()
        state["megatron"] = tensor_parallel.get_cuda_rng_tracker().get_states()
    # rank 0's, on every rank: dist_checkpointing expects the common (unsharded) state to agree
    holder = [state]
    dist.broadcast_object_list(holder, src=0)
    return holder[0]


def _set_rng_state(state: dict) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        from megatron.core import tensor_parallel

        torch.cuda.set_rng_state(state["cuda"])
        tensor_parallel.get_cuda_rng_tracker().set_states(state["megatron"])


def _state(model, optimizer, platform: Platform, loading: bool) -> dict:
    state = {"model": model.sharded_state_dict()}
    if platform.is_cuda:  # megatron's distributed optimizer: each data-parallel rank saves its shard
        state["optimizer"] = optimizer.sharded_state_dict(
            state["model"], is_loading=loading, metadata={"distrib_optim_sharding_type": "dp_reshardable"})
    else:  # torch AdamW, identical on every rank: saved once, as common state
        state["optimizer"] = optimizer.state_dict()
    return state


def save_checkpoint(run_dir: Path, step: int, model, optimizer, platform: Platform) -> Path:
    from megatron.core import dist_checkpointing

    path = checkpoint_dir(run_dir, step)
    if dist.get_rank() == 0 and path.exists():  # half-written by a killed job: start it afresh
        shutil.rmtree(path)
    dist.barrier()
    path.mkdir(parents=True, exist_ok=True)
    state = _state(model, optimizer, platform, loading=False) | {"step": step, "rng": _rng_state()}
    dist_checkpointing.save(state, str(path))
    dist.barrier()
    if dist.get_rank() == 0:
        record_shards(path)
        write_atomically(run_dir / "checkpoints" / "latest", str(step))  # never a torn marker
    return path


def load_checkpoint(path: Path, model, optimizer, platform: Platform) -> int:
    """Restore model, optimizer and RNG; returns the step the checkpoint was saved after."""
    from megatron.core import dist_checkpointing

    state = dist_checkpointing.load(_state(model, optimizer, platform, loading=True), str(path))
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    _set_rng_state(state["rng"])
    return int(state["step"])


class NoLoadableCheckpoint(RuntimeError):
    """Every complete checkpoint of a run failed to load (the model may hold part of one)."""


def resume(run_dir: Path, model, optimizer, platform: Platform, say) -> tuple[int, Path | None]:
    """Load the newest checkpoint that is complete and loads; returns (its step, its folder), or
    (0, None) when there is none. `say` (rank 0's console) gets every newer one skipped and why.
    Every rank decides alike: completeness is read from the shared filesystem, and a load counts
    only when it succeeded on every rank."""
    rank0 = dist.get_rank() == 0
    failed = []
    for path in saved_steps(run_dir):
        reason = incomplete_reason(path)
        if reason is None:
            try:
                step, error = load_checkpoint(path, model, optimizer, platform), None
            except Exception as e:  # megatron's readers raise anything on a damaged shard
                step, error = None, f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
            loaded = torch.tensor(float(error is None), device=platform.device)
            dist.all_reduce(loaded, op=dist.ReduceOp.MIN)
            if loaded.item():
                return step, path
            reason = f"does not load ({error or 'on another rank'})"
            failed.append(path)
        if rank0:
            say(f"{path}: skipped, {reason}; resuming from an older checkpoint (this step is saved again)")
    if failed:
        raise NoLoadableCheckpoint(f"{run_dir / 'checkpoints'}: no complete checkpoint loads; to train from scratch, "
                                   f"remove them: rm -r {' '.join(str(p) for p in failed)}")
    return 0, None


def load_model(path: Path, model) -> int:
    """Only the weights (for export); returns the checkpoint's step."""
    from megatron.core import dist_checkpointing

    state = dist_checkpointing.load({"model": model.sharded_state_dict()}, str(path))
    model.load_state_dict(state["model"])
    return int(state["step"])
