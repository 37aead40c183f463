"""bench/gpu_check.sh, the script a short GPU allocation runs, on CPU at the tiny shape: every run
is a row that says what ran (layer spec, attention kernel, micro-batch), the peers train on the same
shape, one step's time is split by category, and the record it writes makes a docs table."""

import json
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_the_gpu_check_runs_every_row_on_cpu_and_records_them(tmp_path):
    done = subprocess.run(["bash", "bench/gpu_check.sh", "--model", "tiny", "--steps", "4", "--global-batch", "4",
                           "--micro-batch", "2", "4", "--unfused-micro-batch", "2", "--timeout", "540", "--budget", "5000",
                           "--commit", "0123456789abcdef", "--record-dir", str(tmp_path / "measured"),
                           "--out-dir", str(tmp_path / "scratch")],
                          cwd=REPO, capture_output=True, text=True, timeout=3000)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    result = json.loads((tmp_path / "scratch" / "gpu_check.json").read_text())
    rows = {row["run"]: row for row in result["rows"]}
    failed = {run: row["error"] for run, row in rows.items() if row.get("error") and run != "megatron te"}
    assert not failed, failed
    assert set(rows) == {"megatron sdpa", "megatron sdpa mb4", "megatron sdpa no fusions", "megatron unfused",
                         "hugging face llama", "hugging face llama, compiled", "megatron te"}
    assert rows["megatron sdpa no fusions"]["fusions"] == rows["megatron sdpa"]["fusions"] == []  # off on CPU
    assert rows["megatron te"]["error"].startswith("Transformer Engine does not import here")
    sdpa, unfused, peer = rows["megatron sdpa"], rows["megatron unfused"], rows["hugging face llama"]
    assert (sdpa["layer_spec"], sdpa["attention"], sdpa["sdpa_kernel"], sdpa["micro_batch"]) == ("local", "sdpa", "flash", 2)
    assert rows["megatron sdpa mb4"]["micro_batch"] == 4
    assert (unfused["attention"], unfused["sdpa_kernel"]) == ("unfused", None)
    assert peer["layer_spec"] == "transformers" and peer["parameters"] == sdpa["parameters"]
    assert rows["hugging face llama, compiled"]["compiled"] and not peer["compiled"]
    for row in (sdpa, unfused, peer, rows["hugging face llama, compiled"]):
        assert row["tokens_per_s_per_device"] > 0 and row["steps_measured"] == 1
        assert row["flops_per_token"] < row["flops_per_token_full_attention"]  # causal: half the score matrix
        assert row["mfu_measured"] == pytest.approx(row["flops_per_token"] * row["tokens_per_s_per_device"]
                                                    / result["peak_flops_measured"])
    assert sdpa["profile"]["matmul_ms"] > 0 and sdpa["profile"]["data_ms"] > 0 and sdpa["top_operations"]
    table = done.stdout[done.stdout.index("run "):]
    assert "sdpa (flash)" in table and "megatron sdpa / hugging face llama, compiled" in done.stdout

    # the tracked record: what ran where, and the docs table made from it
    from bench.gpu_tables import HEADER, records, table

    (record,) = records(tmp_path / "measured")
    assert record["file"] == "bench/measured/gpu_check-cpu-tiny.json" and record["commit"] == "0123456789abcdef"
    assert record["command"].startswith("bash bench/gpu_check.sh --model tiny") and record["versions"]["megatron-core"]
    assert all("log" not in row and "top_operations" not in row for row in record["rows"])
    text = table(record)
    assert HEADER in text and "| megatron sdpa | local | sdpa (flash) | 2 |" in text and "commit 0123456" in text
    assert "| megatron te | — | — | — | Transformer Engine does not import here" in text


def test_a_check_past_its_budget_says_which_rows_it_did_not_run(tmp_path):
    from bench.gpu_check import main

    main(["--model", "tiny", "--budget", "0", "--out-dir", str(tmp_path)])  # CPU: no record unless asked
    rows = json.loads((tmp_path / "gpu_check.json").read_text())["rows"]
    assert [r["run"] for r in rows][:3] == ["megatron sdpa", "hugging face llama", "hugging face llama, compiled"]
    assert all(r["error"].startswith(("not run: the check's --budget of 0 s was spent", "Transformer Engine"))
               for r in rows)
    assert not list(tmp_path.glob("gpu_check-*.json"))


def test_a_row_whose_process_fails_or_overruns_is_a_row_that_says_so(tmp_path):
    """bench.gpu_check's row processes (a bare fork server, as on a GPU): a failing module's exit and
    its last log line, and a run past its timeout killed."""
    from bench.gpu_check import row_processes, run_bench

    processes = row_processes(cuda=True)
    failed = run_bench("missing", "no_such_module_xyz", [], tmp_path, 60, processes)
    assert failed["error"].startswith("exit 1: ") and "no_such_module_xyz" in failed["error"]
    assert "no_such_module_xyz" in (tmp_path / "missing.log").read_text()
    (tmp_path / "sleeps.py").write_text("import time\ntime.sleep(60)\n")
    slow = run_bench("slow", "cProfile", [str(tmp_path / "sleeps.py")], tmp_path, 1, processes)  # a module taking any args
    assert slow["error"].startswith("timed out after 1 s") and slow["seconds"] < 30
