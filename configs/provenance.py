"""What made an output folder: `provenance.json` beside its outputs, with the git commit, the
config's hash, the seeds, the package versions and the release each extractor arm runs.

The same run in another output folder writes the same file (the output root is left out of the
hash, and there is no timestamp), so provenance never breaks a byte-for-byte comparison of two
runs. A folder first made by another commit, config or package set keeps a note of that, and the
console says so: its outputs are then a mix.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import sysconfig
from functools import cache
from importlib import metadata
from pathlib import Path

from configs.durable import write_atomically
from configs.experiment import ExperimentConfig

REPO = Path(__file__).resolve().parents[1]
FILE = "provenance.json"
# the packages whose version changes what the suite writes or measures
PACKAGES = ("datatrove", "trafilatura", "selectolax", "lightgbm", "mineru-html", "vllm", "sentencepiece", "tokenizers",
            "transformers", "torch", "megatron-core", "lm-eval", "numpy")


@cache
def git_commit() -> str:
    """HEAD, with `-dirty` when tracked files differ from it; `unknown` outside a git checkout."""
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True, check=True).stdout.strip()

    try:
        head = git("rev-parse", "HEAD")
        return head + ("-dirty" if git("status", "--porcelain", "--untracked-files=no") else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


@cache
def package_versions() -> dict[str, str]:
    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return versions


@cache
def package_set_sha256() -> str:
    """Of every distribution installed in the environment and its version: two environments with
    the same hash are the same package set. Only the environment's site-packages are read: some
    imports (setuptools' vendored packages) add folders to sys.path as a process runs."""
    paths = sorted({sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]})
    dists = sorted({f"{d.metadata['Name'].lower()}=={d.version}" for d in metadata.distributions(path=paths)
                    if d.metadata["Name"]})
    return hashlib.sha256("\n".join(dists).encode()).hexdigest()


# how input files are read, which changes how no record becomes a document (a file that cannot be read
# whole is named in the ledger; a damaged record is passed over or fails its task): switching them on a
# resumed run mixes nothing
READING_ONLY = {"on_corrupt": True, "retries": True, "read_timeout_s": True, "verify_digests": True,
                "unknown_size": True}


# the parts of the config a folder's outputs are not made from, by the stage that writes it: the
# experiment's name, the stages downstream, the seeds and arms trained beside a run. Configs that
# share an output root (a variant that `include:`s another) may differ there without mixing anything.
BESIDE_A_RUN = {"arms": True, "ladder": {"__all__": {"seeds": True}}}
NOT_MADE_FROM = {
    "corpus": {"name": True, "pretrain": True, "evaluation": True, "plan": True},
    "training": {"name": True, "evaluation": True, "plan": True, "pretrain": BESIDE_A_RUN},
    # the report's own keys (the primary decision, stated seed SDs) make no evaluation output
    "evaluation": {"name": True, "plan": True, "pretrain": BESIDE_A_RUN, "evaluation": {"primary": True, "seed_sd": True}},
}


def config_sha256(config: ExperimentConfig, stage: str | None = None) -> str:
    """Of the validated config, defaults included, the output root and READING_ONLY left out (with
    `stage`, also what that stage's outputs are not made from: NOT_MADE_FROM): paths under the
    output root (the gold arm's default, the sample's gold.jsonl) count relative to it."""
    root = config.output_root.parts

    def rooted(value):
        if isinstance(value, dict):
            return {k: rooted(v) for k, v in value.items()}
        if isinstance(value, list):
            return [rooted(v) for v in value]
        if isinstance(value, str) and root and Path(value).parts[:len(root)] == root:
            return str(Path("<output_root>", *Path(value).parts[len(root):]))
        return value

    exclude = {"output_root": True, "inputs": READING_ONLY} | NOT_MADE_FROM.get(stage, {})
    dump = rooted(config.model_dump(mode="json", exclude=exclude))
    return hashlib.sha256(json.dumps(dump, sort_keys=True).encode()).hexdigest()


def seeds(config: ExperimentConfig) -> dict[str, object]:
    """Every `seed`/`seeds` field of the config, by its dotted key."""
    found: dict[str, object] = {}

    def walk(value, key: str) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                if k in ("seed", "seeds") and v is not None:
                    found[f"{key}.{k}".lstrip(".")] = v
                else:
                    walk(v, f"{key}.{k}")

    walk(config.model_dump(mode="json"), "")
    return found


def extractor_versions(config: ExperimentConfig) -> dict[str, dict[str, str]]:
    """Per extractor arm, the release of every package that decides what it extracts: a pinned
    Trafilatura release runs in an environment of its own, outside this one's package set."""
    return {name: arm.versions() for name, arm in config.extractor_arms.items()}


def provenance(config: ExperimentConfig, stage: str) -> dict:
    # the whole config's hash, a rung's run's too: every output of one experiment names one config
    return {"git_commit": git_commit(), "config": config.name, "config_sha256": config_sha256(config.whole()),
            "stage": stage, "made_from_sha256": config_sha256(config, stage),
            "seeds": seeds(config), "python": sys.version.split()[0], "packages": package_versions(),
            "package_set_sha256": package_set_sha256(), "extractors": extractor_versions(config)}


def differences(old: dict, new: dict) -> list[str]:
    """What differs between two makers of one folder: the commit, the part of the config its outputs
    are made from (the whole config for a folder recorded before stages were told apart), the packages."""
    config = "made_from_sha256" if "made_from_sha256" in old else "config_sha256"
    return [key for key in ("git_commit", config, "package_set_sha256") if old.get(key) != new.get(key)]


def write_provenance(folder: Path, config: ExperimentConfig, stage: str) -> str | None:
    """Record what makes `folder`'s outputs (`stage`: corpus, training or evaluation); returns a
    warning when the folder was begun by another commit, package set or config, in the part its
    outputs are made from (the first maker stays recorded under `begun_by`)."""
    folder.mkdir(parents=True, exist_ok=True)
    path, new = folder / FILE, provenance(config, stage)
    old = json.loads(path.read_text()) if path.is_file() else {}
    previous = {k: v for k, v in old.items() if k != "begun_by"}
    warning = None
    if "begun_by" in old:
        new["begun_by"] = old["begun_by"]
    if previous and (changed := differences(previous, new)):
        new.setdefault("begun_by", previous)
        words = {"git_commit": "commit", "package_set_sha256": "package set"}
        changed = [words.get(key, f"config ({stage} part)") for key in changed]
        warning = f"{folder}: begun with another {', '.join(changed)}; its outputs may mix both (see {path})"
    write_atomically(path, json.dumps(new, indent=2, sort_keys=True) + "\n")
    return warning


def read_provenance(folder: Path) -> dict | None:
    path = folder / FILE
    return json.loads(path.read_text()) if path.is_file() else None
