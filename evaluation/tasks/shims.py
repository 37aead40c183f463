"""Every reach into lm-eval's private API, in one place, with the version that needs it.
Check these first when upgrading lm-eval."""

from __future__ import annotations

from pathlib import Path

# ---------------------------------------------------------------- lm-eval 0.4.13


def builtin_task_yaml(path: Path) -> dict:
    """A task YAML as written, its `!function` tags left unresolved. lm-eval 0.4.13 reads task
    files with `lm_eval.tasks._yaml_loader.load_yaml` and exposes no public reader."""
    from lm_eval.tasks._yaml_loader import load_yaml

    return load_yaml(path, resolve_func=False)
