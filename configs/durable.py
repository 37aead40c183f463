"""Files that a kill, a full disk or a second reader never see half-written, and digests checked
once per file version.

- `write_atomically`: a temporary file beside the target, fsync, rename (atomic on POSIX local
  filesystems, NFS and Lustre alike), then the folder fsynced: a reader sees the old file or the
  new one, never a cut one.
- `sha256_once`: a file's SHA-256, hashed again only when its version changed. The version is
  its (size, mtime in ns, inode); a stamp in `logs/` beside the file records the digest of that version, so
  a 63B-token `.bin` is read once, not before every run.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path

from configs.environment import current_umask

STAMP_SUFFIX = ".sha256-stamp"


def write_atomically(path: Path, data: str | bytes) -> None:
    """Write `path` whole or not at all (a concurrent writer's copy wins whole, too)."""
    path = Path(path)
    descriptor, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)  # O_EXCL: never another's
    try:
        with os.fdopen(descriptor, "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o666 & ~current_umask())  # mkstemp's 0600, widened to what the umask gives any new file
        os.replace(tmp, path)
    finally:
        Path(tmp).unlink(missing_ok=True)
    folder = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(folder)  # the rename itself survives a crash of the node
    finally:
        os.close(folder)


def file_version(path: Path) -> list[int]:
    """What changes when a file is rewritten or edited in place: size, mtime (ns) and inode."""
    st = Path(path).stat()
    return [st.st_size, st.st_mtime_ns, st.st_ino]


def file_sha256(path: Path) -> str:
    """The SHA-256 of a whole file."""
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def stamp_path(path: Path) -> Path:
    """Beside the file, under `logs/` (bookkeeping: the outputs stay the same bytes in every run)."""
    return Path(path).parent / "logs" / "sha256-stamps" / (Path(path).name + STAMP_SUFFIX)


def sha256_once(path: Path) -> tuple[str, bool]:
    """(the file's SHA-256, whether it was hashed now): from the stamp when the file's version is
    the one stamped, else hashed and stamped. An edit in place that keeps size and mtime and
    inode (a deliberate `touch -d`) is not seen: the stamp trusts the filesystem's metadata."""
    path = Path(path)
    stamp = stamp_path(path)
    version = file_version(path)
    try:
        recorded = json.loads(stamp.read_text())
        if recorded["version"] == version:
            return recorded["sha256"], False
    except (OSError, ValueError, KeyError, TypeError):
        pass  # no stamp, or a damaged one: hash
    digest = file_sha256(path)
    if file_version(path) == version:  # not stamped if the file changed while it was read
        try:
            stamp.parent.mkdir(parents=True, exist_ok=True)
            write_atomically(stamp, json.dumps({"version": version, "sha256": digest}) + "\n")
        except OSError:
            pass  # a folder this user cannot write (another team's datasets): checked all the same, hashed each time
    return digest, True
