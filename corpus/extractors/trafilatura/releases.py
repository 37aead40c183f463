"""Which Trafilatura release runs, and where: the installed one, or a pinned one in a virtualenv of
its own (`make trafilatura-release TRAFILATURA=<version>`)."""

from __future__ import annotations

import re
from functools import cache
from importlib import metadata
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
# the releases whose API the step maps the options onto (checked on 1.11.0 and 2.3.1)
SUPPORTED = ((1, 11, 0), (3, 0, 0))


@cache
def installed_release() -> str:
    return metadata.version("trafilatura")


def release_environment(version: str) -> Path:
    """Where a release other than the installed one lives: a virtualenv of its own."""
    return REPO / f".venv-trafilatura-{version}"


def release_tuple(version: str) -> tuple[int, int, int]:
    major, minor, patch = (int(part) for part in re.match(r"(\d+)\.(\d+)\.(\d+)", version).groups())
    return major, minor, patch


def unsupported(release: str) -> str | None:
    """Why the step cannot map the options onto `release`; None when it can."""
    if not SUPPORTED[0] <= release_tuple(release) < SUPPORTED[1]:
        return f"trafilatura {release}: the step maps its options onto releases 1.11.0 to 2.x only"
    return None
