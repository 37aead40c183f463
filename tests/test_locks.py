"""The installs are locked: `make setup` (VLLM=cpu or gpu) installs its lock with --require-hashes
--no-deps, every pin of both locks carries a sha256, and every requirement the install asks for is
pinned there within pyproject.toml's range. No network: the files are read, nothing is installed."""

import re
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent
BUILDS = ("cpu", "gpu")
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)")


def lock_entries(build: str) -> list[list[str]]:
    """The lock's requirements, each as its lines (a pin and its `--hash=` continuation lines)."""
    entries: list[list[str]] = []
    for line in (ROOT / "requirements" / f"{build}.lock").read_text().splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if line.startswith((" ", "\t")):
            entries[-1].append(line.strip())
        else:
            entries.append([line.strip()])
    return entries


def setup_recipe() -> str:
    """The Makefile's virtualenv recipe (`$(STAMP):` up to the next blank line)."""
    makefile = (ROOT / "Makefile").read_text()
    return re.search(r"^\$\(STAMP\):.*?\n\n", makefile, re.S | re.M).group(0)


@pytest.mark.parametrize("build", BUILDS)
def test_every_pin_of_the_lock_carries_a_sha256(build):
    entries = lock_entries(build)
    assert len(entries) > 100
    for entry in entries:
        assert PIN.match(entry[0]), f"{build}.lock: {entry[0]!r} is not an exact pin"
        hashes = [line for line in entry[1:] if not line.startswith("#")]
        assert hashes and all(re.fullmatch(r"--hash=sha256:[0-9a-f]{64}( \\)?", h) for h in hashes), \
            f"{build}.lock: {entry[0]} has no sha256"


@pytest.mark.parametrize("build", BUILDS)
def test_every_requirement_the_install_asks_for_is_pinned_in_its_range(build):
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = re.search(r'-e "\.\[([^\]]+)\]"', setup_recipe()).group(1).replace("$(VLLM)", build).split(",")
    pins = {canonicalize_name(m[1]): m[2].split(" ")[0] for entry in lock_entries(build) if (m := PIN.match(entry[0]))}
    for line in project["dependencies"] + [r for extra in extras for r in project["optional-dependencies"][extra]]:
        requirement = Requirement(line)
        pinned = pins.get(canonicalize_name(requirement.name))
        assert pinned is not None, f"{build}.lock pins no {requirement.name}: regenerate it with make lock-{build}"
        assert requirement.specifier.contains(pinned, prereleases=True), \
            f"{build}.lock pins {requirement.name}=={pinned}, outside pyproject.toml's {requirement}"


def test_the_setup_installs_only_the_lock_and_the_project_without_dependencies():
    installs = [line.strip() for line in setup_recipe().splitlines() if "pip install" in line]
    locked = [line for line in installs if "-r requirements/$(VLLM).lock" in line]
    assert len(locked) == 1 and "--require-hashes" in locked[0] and "--no-deps" in locked[0]
    for line in installs:  # anything else installed is pip itself, or the project with --no-deps
        assert line in locked or '"pip>=' in line or '--no-deps --no-build-isolation -e ".[' in line, \
            f"unlocked install: {line}"


@pytest.mark.parametrize("build", BUILDS)
def test_the_project_is_built_by_the_locks_build_backend(build):
    """pip's build isolation would fetch the build backend (setuptools) unpinned and unhashed:
    the project is built with the lock's, which must meet pyproject.toml's build-system range."""
    assert '--no-deps --no-build-isolation -e ".[' in setup_recipe()
    pins = {canonicalize_name(m[1]): m[2] for entry in lock_entries(build) if (m := PIN.match(entry[0]))}
    for line in tomllib.loads((ROOT / "pyproject.toml").read_text())["build-system"]["requires"]:
        requirement = Requirement(line)
        pinned = pins.get(canonicalize_name(requirement.name))
        assert pinned is not None and requirement.specifier.contains(pinned), \
            f"{build}.lock: the build backend {requirement} is not pinned ({pinned})"
