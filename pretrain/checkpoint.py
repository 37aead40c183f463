"""Checkpoints with megatron-core dist_checkpointing: model, optimizer, data position and RNG.

Layout: `<run_dir>/checkpoints/step_0000100/` (torch_dist format, any number of ranks can load
it) and `<run_dir>/checkpoints/latest` (the last complete step, replaced atomically after every
rank saved). A job killed while saving leaves a step folder without megatron's `metadata.json`
(written last): resume skips it, starts from the newest complete checkpoint, and the step is saved
again from scratch.
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


def is_complete(path: Path) -> bool:
    """dist_checkpointing writes `metadata.json` after every rank's shards (then a barrier)."""
    try:
        return "sharded_backend" in json.loads((path / "metadata.json").read_text())
    except (OSError, ValueError):
        return False


def latest_checkpoint(run_dir: Path) -> Path | None:
    """The newest complete checkpoint not after the `latest` marker (any complete one when the
    marker is missing); None to start from scratch."""
    marker = run_dir / "checkpoints" / "latest"
    try:
        newest = int(marker.read_text())
    except (OSError, ValueError):
        newest = None
    steps = sorted((int(p.name.removeprefix("step_")) for p in (run_dir / "checkpoints").glob("step_*")), reverse=True)
    return next((checkpoint_dir(run_dir, s) for s in steps
                 if (newest is None or s <= newest) and is_complete(checkpoint_dir(run_dir, s))), None)


def incomplete_checkpoints(run_dir: Path, latest: Path | None) -> list[Path]:
    """Step folders a killed save left behind: newer than `latest`, the checkpoint resumed from."""
    return [p for p in sorted((run_dir / "checkpoints").glob("step_*"))
            if latest is None or p.name > latest.name]


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


def load_model(path: Path, model) -> int:
    """Only the weights (for export); returns the checkpoint's step."""
    from megatron.core import dist_checkpointing

    state = dist_checkpointing.load({"model": model.sharded_state_dict()}, str(path))
    model.load_state_dict(state["model"])
    return int(state["step"])
