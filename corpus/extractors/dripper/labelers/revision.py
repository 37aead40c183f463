"""The commit of a vLLM labeler's hub model, fixed at first use: a hub id is a moving name, so the
driver resolves the commit it names once, before any task starts (`pin_revision`), and records it in
the arm's folder, `extract/<arm>/labeler-revision.json`; every task loads the recorded commit
(`pinned_labeler`: the model, its tokenizer and the speculative draft's tokenizer, through vLLM's
`revision` and `tokenizer_revision`). On a rerun the record wins: the hub is not asked again, and a
config whose `labeler.model` or `labeler.revision` differs from the record is refused, since the
arm's documents so far were labeled by the recorded weights. A local model folder needs no commit."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from configs.base import ConfigError
from configs.durable import write_atomically
from corpus.extractors.dripper.labelers.config import LabelerConfig

REVISION_RECORD = "labeler-revision.json"


def loads_from_hub(labeler: LabelerConfig) -> bool:
    """A labeler whose weights this suite downloads: vLLM in-process, its model a hub id (not a path)."""
    return (labeler.kind == "vllm" and not labeler.model.startswith(("/", "./", "../"))
            and not Path(labeler.model).exists())


def hub_commit(model: str) -> str:
    """The commit the hub's main branch of `model` points at now (network: the driver only)."""
    from huggingface_hub import HfApi

    return HfApi().model_info(model).sha


def pin_revision(arm_dir: Path, labeler: LabelerConfig, resolve: Callable[[str], str] | None = None) -> str | None:
    """The commit every task of the arm loads, recorded in `arm_dir` at the first run: the config's
    `labeler.revision`, else the hub's current one; later runs read the record. None for a labeler
    that loads nothing from the hub. `resolve`: how the hub is asked (default `hub_commit`)."""
    if not loads_from_hub(labeler):
        return None
    path = Path(arm_dir) / REVISION_RECORD
    if path.is_file():
        recorded = json.loads(path.read_text())
        if recorded["model"] != labeler.model or labeler.revision not in (None, recorded["revision"]):
            asked = f"{labeler.model}" + (f" at {labeler.revision}" if labeler.revision else "")
            raise ConfigError(f"{path} records {recorded['model']} at commit {recorded['revision']}, which labeled this "
                              f"arm's documents so far; the config asks for {asked} (labeler.model, labeler.revision). "
                              f"To keep the recorded weights, set labeler.model: {recorded['model']} and labeler.revision: "
                              f"{recorded['revision']} (or null); "
                              f"to label with others, remove {arm_dir} and extract the arm again")
        return recorded["revision"]
    if labeler.revision:
        revision, source = labeler.revision, "labeler.revision"
    else:
        import httpx2  # huggingface_hub's HTTP client

        try:
            revision, source = (resolve or hub_commit)(labeler.model), "the hub's main branch at first use"
        # huggingface_hub's HTTP-status and offline errors are OSErrors; an unreachable hub is httpx2's, not one
        except (OSError, httpx2.TransportError) as e:
            raise ConfigError(f"labeler.model {labeler.model}: the hub's current commit could not be read ({e}); run "
                              "the driver where the hub is reachable, or pin labeler.revision to a commit") from e
    Path(arm_dir).mkdir(parents=True, exist_ok=True)
    write_atomically(path, json.dumps({"model": labeler.model, "revision": revision, "from": source}, indent=2) + "\n")
    return revision


def pinned_labeler(labeler: LabelerConfig, arm_dir: Path | None) -> LabelerConfig:
    """The labeler a task builds: a hub model at the commit recorded in `arm_dir` (`pin_revision`);
    without `arm_dir` (a benchmark, a test) the config as it is."""
    if arm_dir is None or not loads_from_hub(labeler):
        return labeler
    if not (recorded := recorded_commit(arm_dir)):
        raise ConfigError(f"{Path(arm_dir) / REVISION_RECORD} is missing: the driver (python -m corpus.flow, "
                          "slurm/extract.sh) records the labeler's commit before the arm's tasks start; run the arm through it")
    return labeler.model_copy(update={"revision": recorded[labeler.model]})


def recorded_labeler(labeler: LabelerConfig, arm_dir: Path) -> LabelerConfig:
    """The labeler outside the arm's tasks (its extraction-quality score, the preflight): at the
    commit `arm_dir` records for its hub model, the weights that labeled the arm's documents; the
    config as it is where nothing is recorded yet or the config names its own commit."""
    if not loads_from_hub(labeler) or labeler.revision or labeler.model not in (recorded := recorded_commit(arm_dir)):
        return labeler
    return labeler.model_copy(update={"revision": recorded[labeler.model]})


def recorded_commit(arm_dir: Path) -> dict[str, str]:
    """{hub model: commit} as the arm's folder records it; {} where it records none."""
    path = Path(arm_dir) / REVISION_RECORD
    if not path.is_file():
        return {}
    recorded = json.loads(path.read_text())
    return {recorded["model"]: recorded["revision"]}
