"""One driver per output root: the process that plans and runs or submits stages holds
`<output_root>/driver.lock`, which names it (host, pid, Slurm job id, start time, command).

A second driver is refused with the holder's name. A lock whose holder is gone (its pid is not
alive on its host, or its Slurm job has ended) is taken over, with a message. The jobs a
submission queued do not take it: they run under their submission's claim (`CLAIM_ENV`, set in
every job script slurm.jobs writes; datatrove's stage arrays run no driver at all), and a driver
started while they are queued or running is refused by the submission guard
(corpus.flow.submit.check_nothing_queued).

The primitive is a hard link: the holder's record is written to a file of its own, then
`link()`ed to `driver.lock`. Creating a link is atomic on local filesystems, NFS (v2 to v4) and
Lustre, and fails for the second process; a lost reply on NFS is resolved by the link count of
the record (2: the link was made). `flock`/`fcntl` locks were not chosen: Lustre honours them
across nodes only when mounted with `-o flock` (many sites mount `localflock`, node-local), NFS
needs a working lock daemon, and such a lock ends with its process, while a submission's claim
must outlive the short job that submits it.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path

LOCK_FILE = "driver.lock"
CLAIM_ENV = "XSUITE_SUBMITTED_BY"  # in the jobs a submission queued: the driver that queued them
# squeue states of a job that no longer runs nor waits to (squeue --jobs shows an ended job for
# slurmctld's MinJobAge, 300 s by default, before it answers "Invalid job id")
ENDED = {"COMPLETED", "COMPLETING", "CANCELLED", "FAILED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "BOOT_FAIL",
         "DEADLINE", "OUT_OF_MEMORY"}


class DriverLocked(RuntimeError):
    """Another driver holds the output root."""


def holder_record(root: Path) -> dict:
    return {"host": socket.gethostname(), "pid": os.getpid(), "job_id": os.environ.get("SLURM_JOB_ID"),
            "restart_count": restart_count(), "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "command": " ".join(sys.argv)[:300], "root": str(root)}


def describe(holder: dict) -> str:
    job = f", Slurm job {holder['job_id']}" if holder.get("job_id") else ""
    return f"pid {holder.get('pid')} on {holder.get('host')}{job}, since {holder.get('started')} ({holder.get('command')})"


def restart_count() -> str:
    """How many times Slurm requeued this job (0 outside a requeued job)."""
    return os.environ.get("SLURM_RESTART_COUNT") or "0"


def gone(holder: dict) -> str | None:
    """Why the holder is gone (None while it may still run, or when this machine cannot tell)."""
    same_job = bool(holder.get("job_id")) and holder["job_id"] == os.environ.get("SLURM_JOB_ID")
    # a second driver in the same allocation (salloc, two srun steps) is the same job, not a requeue
    if same_job and str(holder.get("restart_count") or "0") != restart_count():
        return f"it is this Slurm job ({holder['job_id']}) before it was requeued"
    if holder.get("job_id") and not same_job:
        try:
            out = subprocess.run(["squeue", "--noheader", "--format=%T", "--jobs", str(holder["job_id"])],
                                 capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            return None
        state = out.stdout.strip().split("\n")[0].strip() if out.returncode == 0 else ""
        if out.returncode == 0 and (not state or state in ENDED):
            return f"Slurm job {holder['job_id']} has ended" + (f" ({state})" if state else "")
        if "Invalid job id" in out.stderr:
            return f"Slurm job {holder['job_id']} is unknown to Slurm"
        return None
    if holder.get("host") != socket.gethostname():
        return None
    try:
        os.kill(int(holder["pid"]), 0)
    except ProcessLookupError:
        return f"pid {holder['pid']} is not running on {holder['host']}"
    except (PermissionError, ValueError, TypeError):
        return None
    return None


def try_link(record: Path, lock: Path) -> bool:
    """Whether `lock` is now a link to `record` (this driver's). On NFS a link() whose reply was
    lost is sent again and fails, EEXIST included, though the first one made the link: the
    record's link count tells (open(2), O_EXCL on NFS)."""
    try:
        os.link(record, lock)
        return True
    except OSError as e:
        if record.stat().st_nlink == 2:
            return True
        if isinstance(e, FileExistsError):
            return False
        raise DriverLocked(f"refused: cannot take {lock} ({e}); the output root needs a filesystem with hard "
                           "links (local, NFS, Lustre, GPFS) that this user can write") from None


def take_over(lock: Path, stale: str, record: Path) -> bool:
    """Remove `lock` if it still holds `stale` (the record of a holder found gone); whether it did.
    Under a guard (a link of this driver's record): without it, a second taker that found the same
    stale holder would move aside the lock the first had taken meanwhile, and both would run."""
    guard = lock.with_name(f".{LOCK_FILE}.takeover")
    if not try_link(record, guard):
        return False  # another taker is at it (for milliseconds)
    try:
        if lock.read_text() != stale:
            return False  # taken or released since it was read
        lock.unlink()
        return True
    except FileNotFoundError:
        return False
    finally:
        guard.unlink(missing_ok=True)


def acquire(root: Path, say) -> dict:
    """Take the root's lock or raise DriverLocked naming its holder; a stale lock is taken over
    (`say` gets the message). Returns this driver's record."""
    root.mkdir(parents=True, exist_ok=True)
    lock, mine = root / LOCK_FILE, holder_record(root)
    record = root / f".{LOCK_FILE}.{mine['host']}.{mine['pid']}"
    record.write_text(json.dumps(mine) + "\n")
    try:
        for _ in range(5):  # a lock released or taken over by another between our tries
            if try_link(record, lock):
                return mine
            try:
                text = lock.read_text()
            except FileNotFoundError:
                continue  # released meanwhile
            try:
                holder = json.loads(text)
            except ValueError:
                holder = {}
            if (reason := gone(holder)) is None:
                raise DriverLocked(
                    f"refused: {root} is driven by {describe(holder)}; wait for it to finish, or stop it. If it is gone "
                    f"and this machine cannot tell (another host, no Slurm job), remove {lock}")
            if take_over(lock, text, record):
                say(f"took over {lock}: its holder ({describe(holder)}) is gone: {reason}")
            else:
                time.sleep(0.2)  # another taker is at it: see what it leaves
        guard = lock.with_name(f".{LOCK_FILE}.takeover")
        left = f"; if no driver is starting, remove {guard}" if guard.exists() else ""
        raise DriverLocked(f"refused: {lock} changed hands while this driver tried to take it; run again{left}")
    finally:
        record.unlink(missing_ok=True)


def release(root: Path, mine: dict) -> None:
    """Remove the lock if it is still this driver's."""
    lock = root / LOCK_FILE
    try:
        holder = json.loads(lock.read_text())
    except (OSError, ValueError):
        return
    if (holder.get("host"), holder.get("pid")) == (mine["host"], mine["pid"]):
        lock.unlink(missing_ok=True)


@contextmanager
def driving(root: Path, say):
    """This process drives `root` for the block's duration; a job a submission queued (CLAIM_ENV
    set) runs under that submission's claim and takes nothing."""
    if os.environ.get(CLAIM_ENV):
        yield
        return
    mine = acquire(root, say)
    try:
        with released_on_termination():
            yield
    finally:
        release(root, mine)


@contextmanager
def released_on_termination():
    """SIGTERM (scancel, Slurm's time limit, torchrun stopping its workers) and SIGHUP (a closed
    login session) end the driver through its `finally`s, so its lock goes with it: left behind
    on a login node, a driver started from another one could not tell it stale."""
    if threading.current_thread() is not threading.main_thread():
        yield  # signal handlers belong to the main thread
        return
    driver = os.getpid()

    def end(signum, frame):
        if os.getpid() != driver:  # a forked worker: die as it would have
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        raise SystemExit(128 + signum)

    before = {signum: signal.signal(signum, end) for signum in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler)
