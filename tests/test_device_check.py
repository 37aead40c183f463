"""bench/device_check.sh, the one prepared script a lent GPU machine runs (torch and transformers only):
the packages it carries fit 64 MiB and never shadow the image's own; on CPU at the tiny shapes it
runs the training bench and the labeler's torch-only estimate, writes both records, prints the
tables, and a part that fails leaves the other's record."""

import json
import subprocess
from pathlib import Path

import pytest

from bench.device_check import build_site, carried, installed_files, pythonpath

REPO = Path(__file__).resolve().parents[1]


def test_the_carried_packages_fit_64_mib_and_leave_the_images_own_out():
    dists = carried()
    assert {"megatron-core", "pydantic", "pydantic-core", "psutil", "tensorboard", "protobuf", "rich"} <= set(dists)
    assert not {"torch", "transformers", "numpy", "tokenizers", "grpcio", "pillow", "tensorboard-data-server"} & set(dists)
    total = sum(f.stat().st_size for dist in dists.values() for f in installed_files(dist))
    assert total < 64 * 2**20


def test_over_the_limit_nothing_is_carried(tmp_path, capsys):
    assert build_site(tmp_path / "site", limit_mib=1) == 1
    assert not (tmp_path / "site").exists()
    listed = capsys.readouterr().out
    assert "megatron-core" in listed and "total" in listed and "this Python only" in listed


def test_the_pythonpath_names_only_the_carried_packages_this_python_lacks(tmp_path):
    for folder in ("absent/not_installed_anywhere_xyz", "present/json", "namespace/xml/not_in_the_namespace_xyz",
                   "no_parent/absent_namespace_xyz/module_xyz"):
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "__init__.py").write_text("")
    (tmp_path / "present" / "json-1.0.dist-info").mkdir()
    entries = pythonpath(tmp_path).split(":")
    # xml is this Python's, but not the module inside it: the copy goes on the path; a namespace this
    # Python lacks altogether (protobuf's `google` on a bare GPU image) too, not a crash
    assert entries == [str((tmp_path / "absent").resolve()), str((tmp_path / "namespace").resolve()),
                       str((tmp_path / "no_parent").resolve())]


def check(tmp_path: Path, pages: Path, labeler_args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", "bench/device_check.sh", "--commit", "0123456789abcdef", "--record-dir", str(tmp_path / "measured"),
         "--out-dir", str(tmp_path / "scratch"), "--train-budget", "0", "--labeler-budget", "600", "--margin", "600",
         "--train-args", "--model tiny --steps 4 --global-batch 4 --micro-batch 2",
         "--labeler-args", f"--pages-file {pages} {labeler_args}"],
        cwd=REPO, capture_output=True, text=True, timeout=1500)


@pytest.mark.slow
def test_the_device_check_writes_both_records_and_prints_their_tables(tmp_path, labeler_pages_file):
    done = check(tmp_path, labeler_pages_file,
                 "--arch tiny --batch 2 --dtype float32 --context 256 --repeats 2 --prefill-seconds 1")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    training = json.loads((tmp_path / "measured" / "gpu_check-cpu-tiny.json").read_text())
    labeler = json.loads((tmp_path / "measured" / "labeler_torch-cpu.json").read_text())
    assert training["commit"] == labeler["commit"] == "0123456789abcdef"
    assert training["rows"][0]["error"].startswith("not run: the check's --budget of 0 s was spent")
    assert labeler["architectures"][0]["estimate"]["plain_pages_per_s"] > 0
    tables = done.stdout[done.stdout.index("### Training speed"):]
    assert "| megatron sdpa | — | — | — | not run" in tables
    assert "**a torch-only estimate (no vLLM)**" in tables and "| tiny | " in tables


@pytest.mark.slow
def test_a_part_that_fails_leaves_the_others_record(tmp_path, labeler_pages_file):
    # the labeler part fails (its input is missing); the training's record is still written
    done = check(tmp_path, labeler_pages_file, "--arch tiny --pages-file /no/such/pages.json")
    assert done.returncode == 1
    assert "labeler part failed" in done.stdout
    assert (tmp_path / "measured" / "gpu_check-cpu-tiny.json").is_file()
    assert "### Training speed" in done.stdout
