"""Checks of the machine an entry point runs on, made before any work starts, so that a run
fails in its first second with the reason rather than hours in with a traceback."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from configs.base import ConfigError

MIN_FREE_BYTES = 1 << 30  # below this the first large write fails (a WARC shard, a checkpoint)


def check_output_root(root: Path, min_free: int = MIN_FREE_BYTES) -> None:
    """The output root can be created and written, and has room."""
    try:
        root.mkdir(parents=True, exist_ok=True)
        probe = root / f".write-test-{os.getpid()}"
        probe.write_bytes(b"\0" * 4096)
        probe.unlink()
    except OSError as e:
        raise ConfigError(f"output_root {root}: cannot write there ({e.strerror or e}); "
                          "choose another output_root or make it writable") from e
    free = shutil.disk_usage(root).free
    if free < min_free:
        raise ConfigError(f"output_root {root}: {free / 2**20:,.0f} MiB free, at least {min_free / 2**30:.0f} GiB "
                          "needed; free space there or choose another output_root")
