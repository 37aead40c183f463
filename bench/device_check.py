"""The device check's carried packages: what the GPU check's training needs beyond a bare GPU image's
torch and transformers, copied from this environment's installed distributions, listed with sizes.

    python -m bench.device_check --wheels [--site bench/results/device_site] [--limit-mib 64]
    python -m bench.device_check --pythonpath bench/results/device_site      (on the GPU machine)

`--wheels` resolves the requirements of the training's packages (megatron-core, pydantic, pyyaml,
tokenizers, tqdm, rich, fsspec, psutil, tensorboard: bench.gpu_check.NEEDED beside torch,
transformers and numpy) through the installed distributions' metadata; leaves out torch,
transformers, numpy and what they require (the image's own; but pydantic and rich, which typer
pulls in here, the image lacks) and tensorboard's server (grpcio, tensorboard-data-server,
werkzeug, markdown, pillow: the training loop's summary writer needs none of them); copies each
remaining distribution's files into `<site>/<distribution>/`; prints each with its version, size
and wheel tag (a tag other than `py3-none-any` or `abi3` runs only on this Python, 3.11 here) and
the total. It refuses (exit 1) over `--limit-mib` (the 64 MiB a device call may carry).

`--pythonpath` prints, for the machine it runs on, the PYTHONPATH of the carried distributions
whose top-level modules do not import there: the image's own packages are never shadowed.
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import shutil
import sys
from pathlib import Path

ROOTS = ("megatron-core", "pydantic", "pyyaml", "tokenizers", "tqdm", "rich", "fsspec", "psutil", "tensorboard")
IMAGE = ("torch", "transformers", "numpy", "packaging", "setuptools")  # with their requirements: the image's own
# ... except these, which this environment's transformers pulls in (through typer) and the GPU image lacks
IMAGE_LACKS = ("pydantic", "rich")
SERVER_ONLY = ("grpcio", "tensorboard-data-server", "werkzeug", "markdown", "pillow")
SITE = Path("bench/results/device_site")  # git-ignored: carried with the working tree, not tracked
LIMIT_MIB = 64


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirements_closure(roots: tuple[str, ...], stop: set[str] = frozenset()) -> dict:
    """The installed distributions `roots` need, their requirements' too (no extras), except `stop`."""
    from importlib.metadata import PackageNotFoundError, distribution

    from packaging.requirements import Requirement

    found, todo = {}, list(roots)
    while todo:
        name = canonical(todo.pop())
        if name in found or name in stop:
            continue
        try:
            dist = distribution(name)
        except PackageNotFoundError:
            raise SystemExit(f"{name} is not installed in this environment: install the project (make setup) "
                             "before building the carried packages") from None
        found[name] = dist
        for line in dist.requires or []:
            requirement = Requirement(line)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                todo.append(requirement.name)
    return found


def carried() -> dict:
    """The distributions the device check carries, by canonical name."""
    image = set(requirements_closure(IMAGE)) - set(requirements_closure(IMAGE_LACKS))
    return requirements_closure(ROOTS, stop=image | {canonical(n) for n in SERVER_ONLY})


def wheel_tag(dist) -> str:
    tags = [line.split(":", 1)[1].strip() for line in (dist.read_text("WHEEL") or "").splitlines() if line.startswith("Tag:")]
    return tags[0] if tags else "unknown"


def portable(tag: str) -> bool:
    return tag.endswith("none-any") or "-abi3-" in tag


def installed_files(dist) -> list[Path]:
    """The distribution's files under site-packages (its RECORD), without compiled caches."""
    return [Path(dist.locate_file(f)) for f in dist.files or []
            if "__pycache__" not in f.parts and not str(f).startswith("..") and Path(dist.locate_file(f)).is_file()]


def build_site(site: Path, limit_mib: float) -> int:
    dists = carried()
    rows, total = [], 0
    for name, dist in sorted(dists.items()):
        files = installed_files(dist)
        size = sum(f.stat().st_size for f in files)
        total += size
        rows.append((name, dist.version, size, wheel_tag(dist), files, Path(dist.locate_file(""))))
    print(f"{'distribution':28} {'version':12} {'MiB':>7}  wheel tag")
    for name, version, size, tag, _, _ in rows:
        note = "" if portable(tag) else f"  (this Python only: {sys.version_info.major}.{sys.version_info.minor})"
        print(f"{name:28} {version:12} {size / 2**20:7.2f}  {tag}{note}")
    print(f"{'total':28} {'':12} {total / 2**20:7.2f}  of {limit_mib:g} MiB")
    if total > limit_mib * 2**20:
        print(f"over the {limit_mib:g} MiB a device call carries: carry fewer packages", file=sys.stderr)
        return 1
    shutil.rmtree(site, ignore_errors=True)
    for name, _, _, _, files, root in rows:
        for f in files:
            target = site / name / f.relative_to(root)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(f, target)
    print(f"wrote {site}/<distribution>/ (carry {site} with the working tree)")
    return 0


def top_level(folder: Path, prefix: str = "") -> list[str]:
    """A copied distribution's importable names (packages and modules, not its metadata); inside a
    namespace folder (no __init__.py: protobuf's `google`) the names one level down, since the
    image may have other packages in the same namespace."""
    names = []
    for p in sorted(folder.iterdir()):
        if p.name.endswith((".dist-info", ".data", ".pth")) or p.name == "__pycache__":
            continue
        if p.is_dir() and not (p / "__init__.py").is_file():
            names += top_level(p, f"{prefix}{p.name}.")
        elif p.is_dir() or p.suffix in (".py", ".so"):
            names.append(prefix + (p.stem if p.suffix == ".py" else p.name.split(".")[0]))
    return names


def importable(name: str) -> bool:
    """Whether this Python imports `name`; a dotted name whose parent namespace is absent (protobuf's
    `google.protobuf` on an image without any `google` package) is not, where find_spec would raise."""
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:
        return False


def pythonpath(site: Path) -> str:
    """The carried distributions this Python lacks, as PYTHONPATH entries."""
    missing = [folder for folder in sorted(site.iterdir()) if folder.is_dir()
               and not all(importable(name) for name in top_level(folder))]
    return ":".join(str(folder.resolve()) for folder in missing)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.device_check", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--wheels", action="store_true", help="copy the carried distributions into --site, list them")
    what.add_argument("--pythonpath", type=Path, metavar="SITE", help="print the PYTHONPATH of SITE's distributions missing here")
    parser.add_argument("--site", type=Path, default=SITE)
    parser.add_argument("--limit-mib", type=float, default=LIMIT_MIB)
    args = parser.parse_args(argv)
    if args.pythonpath:
        print(pythonpath(args.pythonpath))
        return 0
    return build_site(args.site, args.limit_mib)


if __name__ == "__main__":
    sys.exit(main())
