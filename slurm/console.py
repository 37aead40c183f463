"""What a run prints: for every stage one progress bar (on a terminal) and one closing line; all
that libraries say (datatrove's stats, lm-eval, vLLM, megatron, transformers) goes to the stage's
log file under `<output_root>/logs/`, named in the closing line and in any error.

`-v` on any entry point, or `XSUITE_VERBOSE=1` (inherited by every child process and Slurm job),
leaves library output on the console instead. Output is redirected at the file-descriptor level,
so it also catches C extensions and the worker processes a stage starts.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

VERBOSE_ENV = "XSUITE_VERBOSE"
ERROR_TAIL_LINES = 20

# the console as it was when the process started: bars and closing lines go here while fds 1 and
# 2 point at a log file
TERMINAL = os.fdopen(os.dup(sys.stderr.fileno()), "w", buffering=1)


def verbose() -> bool:
    return os.environ.get(VERBOSE_ENV, "").lower() in ("1", "true", "yes")


def add_verbose_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-v", "--verbose", action="store_true",
                        help=f"library output on the console instead of <output_root>/logs/ (or {VERBOSE_ENV}=1)")


def apply_verbose_flag(args: argparse.Namespace) -> None:
    if args.verbose:
        os.environ[VERBOSE_ENV] = "1"  # child processes inherit it


def say(line: str) -> None:
    """One line on the console, whatever the redirection (after what is waiting on stdout, so the
    order holds when both go to one file)."""
    sys.stdout.flush()
    print(line, file=TERMINAL, flush=True)


@contextmanager
def redirected(log: Path) -> Iterator[None]:
    """stdout and stderr of this process (and of the processes it starts) appended to `log`,
    unless verbose."""
    if verbose():
        yield
        return
    log.parent.mkdir(parents=True, exist_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with open(log, "ab") as f:
        os.dup2(f.fileno(), 1)
        os.dup2(f.fileno(), 2)
    try:
        yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        os.close(saved[0])
        os.close(saved[1])


def progress_bar(title: str, unit: str, total: int | None = None):
    """A tqdm bar on the console, drawn only when it is a terminal (no carriage-return noise in
    Slurm or CI logs); the caller closes it."""
    from tqdm import tqdm

    return tqdm(total=total, desc=title, unit=f" {unit}", file=TERMINAL, leave=False, dynamic_ncols=True,
                disable=not TERMINAL.isatty())


def log_tail(log: Path, lines: int = ERROR_TAIL_LINES) -> str:
    if not log.is_file():
        return ""
    with open(log, errors="replace") as f:
        return "".join(deque(f, maxlen=lines))


@contextmanager
def stage(title: str, log: Path, unit: str, total: int | None = None, explained: tuple[type[Exception], ...] = ()) -> Iterator:
    """Run a stage's body with library output in `log` and a progress bar on the console. On an
    error the console gets the error, the end of the log and its path, and the error goes on.
    `explained`: errors whose one-line message says all a person needs (what, where, what to do):
    printed without the log's end."""
    bar = progress_bar(title, unit, total)
    try:
        with redirected(log):
            yield bar
    except BaseException as e:
        bar.close()
        if not verbose() and not isinstance(e, KeyboardInterrupt):
            tail = "" if isinstance(e, explained) else log_tail(log)
            say(f"✗ {title} failed: {type(e).__name__}: {e}\n  log: {log}" + (f"\n  last lines:\n{tail}" if tail else ""))
        raise
    bar.close()


def closing_line(title: str, counts: str, outputs: Path | str, log: Path | None = None) -> None:
    say(f"✓ {title}: {counts} → {outputs}" + (f"  (log {log})" if log and not verbose() else ""))
