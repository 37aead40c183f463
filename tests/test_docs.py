"""The documentation is part of the product: the site builds strictly, the README stays a front door,
no commit hash sits in prose, and every command the docs name exists and answers `--help` as typed."""

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("configs", "corpus", "pretrain", "evaluation", "slurm", "bench")
# pages a command of the project writes: their figures and hashes come from records (CONTRIBUTING.md)
GENERATED_PAGES = {"reference/configuration.md", "reference/gpu-figures.md"}
# run by the suite's own code, not by a user (the worker of a pinned Trafilatura release)
INTERNAL_ENTRY_POINTS = {"corpus.extractors.trafilatura.worker"}


def documentation() -> dict[str, str]:
    pages = {"README.md": ROOT / "README.md", "CONTRIBUTING.md": ROOT / "CONTRIBUTING.md"}
    pages |= {str(p.relative_to(ROOT / "docs")): p for p in sorted((ROOT / "docs").rglob("*.md"))
              if not p.name.startswith("_")}
    return {name: path.read_text(encoding="utf-8") for name, path in pages.items()}


def documented_modules() -> set[str]:
    pattern = re.compile(rf"python -m ((?:{'|'.join(PACKAGES)})(?:\.\w+)*)")
    return {m for text in documentation().values() for m in pattern.findall(text)}


def entry_points() -> set[str]:
    """Every module of the project a user can run with `python -m`."""
    found = set()
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            if path.name == "__main__.py":
                found.add(module.removesuffix(".__main__"))
            elif re.search(r'^if __name__ == "__main__":', path.read_text(encoding="utf-8"), re.MULTILINE):
                found.add(module)
    return found - INTERNAL_ENTRY_POINTS


def test_the_site_builds_strictly(tmp_path):
    """A broken link, a moved anchor or a page missing from the nav fails the build."""
    # not --quiet: it hides the warnings that --strict counts, and the build passes whatever they say
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(ROOT / "mkdocs.yml"),
                           "-d", str(tmp_path / "site")], capture_output=True, text=True, cwd=ROOT,
                          env=os.environ | {"NO_MKDOCS_2_WARNING": "1"})
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_readme_is_a_front_door():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 300, "README.md is the front door: at most 300 lines; reference goes to docs/"
    assert len(text.encode()) <= 25_000, "README.md is the front door: at most 25 KB; reference goes to docs/"


def test_no_commit_hash_in_prose():
    """History goes to CHANGELOG.md; a figure names its command and record, not a commit."""
    # a commit as git abbreviates it (7-12 hex digits) or whole (40); a digest quoted in a message is longer
    hexword = re.compile(r"(?<![\w/.+-])(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])(?:[0-9a-f]{7,12}|[0-9a-f]{40})(?![\w/.-])")
    found = [f"{name}: {m}" for name, text in documentation().items() if name not in GENERATED_PAGES
             for m in hexword.findall(text)]
    assert not found, f"commit hashes in documentation prose: {found}"


def test_every_documented_command_exists():
    missing = []
    for module in sorted(documented_modules()):
        if importlib.util.find_spec(module) is None:
            missing.append(f"python -m {module}")
    targets = set(re.findall(r"^([\w-]+):", (ROOT / "Makefile").read_text(encoding="utf-8"), re.MULTILINE))
    for name, text in documentation().items():
        missing += [f"{name}: make {t}" for t in re.findall(r"`make ([\w-]+)", text) if t not in targets]
        missing += [f"{name}: {s}" for s in re.findall(r"\b((?:slurm|bench)/[\w-]+\.sh)\b", text) if not (ROOT / s).is_file()]
    assert not missing, f"documented but missing: {missing}"


def test_every_entry_point_is_documented():
    reference = "".join((ROOT / "docs" / "reference" / page).read_text(encoding="utf-8")
                        for page in ("commands.md", "benchmarks.md"))
    undocumented = sorted(m for m in entry_points() if f"python -m {m}" not in reference)
    assert not undocumented, f"entry points missing from docs/reference/commands.md or benchmarks.md: {undocumented}"


def answer_helps(out_dir: str, modules: list[str]) -> None:
    """`python -m MODULE --help` for each of `modules`, in a process of its own forked from this one
    (stdout and stderr to `out_dir/MODULE.out|.err`, the exit status to `.rc`). This process first
    imports every module once, then forgets the project's modules: each command imports the
    project afresh as `python -m` does, and only the libraries under it (torch, transformers,
    datatrove, lm-eval: most of a start) are imported once, not once a command."""
    import importlib
    import runpy
    import traceback

    for module in modules:
        try:
            importlib.import_module(module)
        except Exception:  # a module that cannot be imported fails in its own process, with its traceback
            pass
    for name in [name for name in sys.modules if name.split(".")[0] in PACKAGES]:
        del sys.modules[name]
    for module in modules:
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            for fd, suffix in ((1, "out"), (2, "err")):
                os.dup2(os.open(f"{out_dir}/{module}.{suffix}", os.O_WRONLY | os.O_CREAT | os.O_TRUNC), fd)
            code = 1
            try:
                sys.argv = [module, "--help"]
                runpy.run_module(module, run_name="__main__", alter_sys=True)
                code = 0
            except SystemExit as e:  # as the interpreter exits on it: None is 0, a message is printed, then 1
                if e.code is None or isinstance(e.code, int):
                    code = e.code or 0
                else:
                    print(e.code, file=sys.stderr)
            except BaseException:  # the traceback `python -m` prints, and its exit status (1)
                traceback.print_exc()
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        Path(out_dir, f"{module}.rc").write_text(str(os.waitstatus_to_exitcode(status)))


def help_failure(out_dir: Path, module: str) -> str | None:
    """None when MODULE's `--help` exited 0 naming itself as typed, with a line of what it does."""
    code, out, err = (out_dir / f"{module}.rc").read_text(), (out_dir / f"{module}.out").read_text(), \
        (out_dir / f"{module}.err").read_text()
    lines = out.strip().splitlines()
    if code != "0" or not lines:
        return f"{module}: exit {code}: {(err or out).strip()[-300:]}"
    if not lines[0].startswith(f"usage: python -m {module}"):
        return f"{module}: usage line {lines[0]!r}"
    if len([line for line in lines if line.strip()]) < 3:
        return f"{module}: no description in --help"
    return None


@pytest.mark.slow
def test_every_documented_command_answers_help(tmp_path):
    modules = sorted(documented_modules() | entry_points())
    done = subprocess.run([sys.executable, "-c", "import sys; from test_docs import answer_helps; "
                           "answer_helps(sys.argv[1], sys.argv[2:])", str(tmp_path), *modules],
                          capture_output=True, text=True, cwd=ROOT, timeout=600,
                          env=os.environ | {"PYTHONPATH": os.pathsep.join([str(ROOT / "tests"), str(ROOT)])})
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    failures = [f for f in (help_failure(tmp_path, module) for module in modules) if f]
    assert not failures, "\n".join(failures)
