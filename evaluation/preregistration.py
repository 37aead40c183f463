"""The primary decision's pre-registration record: what `evaluation.primary` fixes (pair, score,
sides, deciding rung, alpha, whether pilots informed it) and when it was fixed, from git: the last
commit of the config (or a file it includes) that changed a line of the section, against when the
deciding rung's runs of the pair were first evaluated. A primary not committed, or committed after
its deciding runs existed, is reported as exploratory."""

from __future__ import annotations

import datetime
import subprocess
from pathlib import Path

import yaml

from configs.experiment import ExperimentConfig
from evaluation.runs import load_runs
from evaluation.statistics.intervals import LEVEL

# the lines a change of the primary decision touches (a flow mapping on one line, or a block of keys)
SECTION_LINES = r"primary|pair:|score:|sides:|deciding_rung:|pilot_informed:"


def config_files(path: Path) -> list[Path]:
    """The config and every file it includes (`include:`), the first the one given."""
    files = [path]
    while isinstance(raw := yaml.safe_load(files[-1].read_text()), dict) and "include" in raw:
        files.append((files[-1].parent / str(raw["include"])).resolve())
    return files


def _git(directory: Path, *args: str) -> str | None:
    """git's output in `directory`, None where it is no repository or git fails."""
    try:
        done = subprocess.run(["git", "-C", str(directory), *args], capture_output=True, text=True, check=False)
    except FileNotFoundError:
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def section_commit(path: Path) -> dict:
    """The last commit that changed a line of the primary section in the config's files: `commit`,
    `date` (ISO, the committer's), or `why` not (no git repository, not committed, changed since)."""
    files = [str(f.resolve()) for f in config_files(path)]
    directory = Path(files[0]).parent
    if _git(directory, "rev-parse", "--git-dir") is None:
        return {"commit": None, "date": None, "why": f"{path} is not in a git repository"}
    if _git(directory, "diff", "HEAD", "--name-only", "-G", SECTION_LINES, "--", *files):
        return {"commit": None, "date": None, "why": f"{path}: the primary section has uncommitted changes"}
    last = _git(directory, "log", "-1", "--format=%H %cI", "-G", SECTION_LINES, "--", *files)
    if not last:
        return {"commit": None, "date": None, "why": f"{path}: the primary section is not committed"}
    commit, date = last.split()
    return {"commit": commit, "date": date, "why": None}


def first_evaluated(config: ExperimentConfig, arms: list[str]) -> str | None:
    """When the first deciding run of the pair was evaluated (ISO, UTC): lm-eval's `date` in its
    results.json, else the file's modification time; None before any exists."""
    times = [float(run.result.get("date") or (run.folder / "results.json").stat().st_mtime)
             for run in load_runs(config) if run.arm in arms]
    return datetime.datetime.fromtimestamp(min(times), datetime.UTC).isoformat(timespec="seconds") if times else None


def preregistration(config: ExperimentConfig) -> dict | None:
    """The record of `evaluation.primary` and its status: `confirmatory` (committed before its
    deciding runs existed), `pilot-informed` (so, and stated as chosen after pilots), or
    `exploratory` (not recorded in git, or changed after its deciding runs existed), with `why`."""
    primary = config.evaluation.primary if config.evaluation else None
    if primary is None:
        return None
    deciding = config.deciding_rung()
    record = {"pair": list(primary.pair), "score": primary.score, "sides": primary.sides, "deciding_rung": deciding,
              "alpha": 1 - LEVEL, "pilot_informed": primary.pilot_informed}
    source = config.source()
    fixed = section_commit(source) if source else {"commit": None, "date": None, "why": "built in code, not from a file"}
    first = first_evaluated(config.whole().for_rung(deciding) if deciding else config, list(primary.pair))
    before = None if fixed["date"] is None else first is None or \
        datetime.datetime.fromisoformat(fixed["date"]) < datetime.datetime.fromisoformat(first)
    record |= {"config": str(source) if source else None, "commit": fixed["commit"], "date": fixed["date"],
               "first_deciding_run": first, "fixed_before_runs": before}
    if fixed["why"]:
        return record | {"status": "exploratory", "why": f"not recorded: {fixed['why']}"}
    if not before:
        return record | {"status": "exploratory", "why": f"evaluation.primary was last changed on {fixed['date']}, after "
                                                         f"its deciding runs existed (first evaluated {first})"}
    return record | {"status": "pilot-informed" if primary.pilot_informed else "confirmatory", "why": None}
