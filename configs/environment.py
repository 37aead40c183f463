"""Checks of the machine an entry point runs on, made before any work starts, so that a run
fails in its first second with the reason rather than hours in with a traceback."""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from pathlib import Path

from configs.base import ConfigError

MIN_FREE_BYTES = 1 << 30  # below this the first large write fails (a WARC shard, a checkpoint)


def current_umask() -> int:
    mask = os.umask(0)  # the only way to read it is to set it
    os.umask(mask)
    return mask


def restrict_umask() -> None:
    """At most group-writable, whatever the shell's umask: the output root holds what later jobs run
    (the pickled pipelines, the continuation job's config, lm-eval task folders)."""
    os.umask(current_umask() | stat.S_IWOTH)


def refuse_world_writable(path: Path, what: str) -> None:
    """A folder the suite loads code or models from must not be writable by every user (SECURITY.md)."""
    mode = path.stat().st_mode
    if mode & stat.S_IWOTH:
        raise ConfigError(f"{what} {path} is writable by every user (mode {stat.filemode(mode)}): anyone on the machine "
                          f"could change what the suite loads and runs from it. Run chmod o-w {path}, or choose "
                          "another folder (SECURITY.md)")


def check_output_root(root: Path, min_free: int = MIN_FREE_BYTES) -> None:
    """The output root can be created and written, is not writable by every user, and has room; files
    are created from here on with a umask that leaves them at most group-writable."""
    restrict_umask()
    try:
        root.mkdir(parents=True, exist_ok=True)
        descriptor, probe = tempfile.mkstemp(prefix=".write-test-", dir=root)  # O_EXCL: never another's file
        with os.fdopen(descriptor, "wb") as f:
            f.write(b"\0" * 4096)
        os.unlink(probe)
    except OSError as e:
        raise ConfigError(f"output_root {root}: cannot write there ({e.strerror or e}); "
                          "choose another output_root or make it writable") from e
    refuse_world_writable(root, "output_root")
    free = shutil.disk_usage(root).free
    if free < min_free:
        raise ConfigError(f"output_root {root}: {free / 2**20:,.0f} MiB free, at least {min_free / 2**30:.0f} GiB "
                          "needed; free space there or choose another output_root")
