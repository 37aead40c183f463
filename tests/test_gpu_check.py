"""bench/gpu_check.sh, the script a short GPU allocation runs, on CPU at the tiny shape: every run
is a row that says what ran (layer spec, attention kernel, micro-batch), the peer trains on the same
shape, and one step's time is split by category."""

import json
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_the_gpu_check_runs_every_row_on_cpu(tmp_path):
    done = subprocess.run(["bash", "bench/gpu_check.sh", "--model", "tiny", "--steps", "4", "--global-batch", "4",
                           "--micro-batch", "2", "4", "--unfused-micro-batch", "2", "--timeout", "540",
                           "--out-dir", str(tmp_path)],
                          cwd=REPO, capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    result = json.loads((tmp_path / "gpu_check.json").read_text())
    rows = {row["run"]: row for row in result["rows"]}
    failed = {run: row["error"] for run, row in rows.items() if row.get("error") and run != "megatron te"}
    assert not failed, failed
    assert set(rows) == {"megatron sdpa", "megatron sdpa mb4", "megatron sdpa no fusions", "megatron unfused",
                         "hugging face llama", "megatron te"}
    assert rows["megatron sdpa no fusions"]["fusions"] == rows["megatron sdpa"]["fusions"] == []  # off on CPU
    assert rows["megatron te"]["error"].startswith("Transformer Engine does not import here")
    sdpa, unfused, peer = rows["megatron sdpa"], rows["megatron unfused"], rows["hugging face llama"]
    assert (sdpa["layer_spec"], sdpa["attention"], sdpa["sdpa_kernel"], sdpa["micro_batch"]) == ("local", "sdpa", "flash", 2)
    assert rows["megatron sdpa mb4"]["micro_batch"] == 4
    assert (unfused["attention"], unfused["sdpa_kernel"]) == ("unfused", None)
    assert peer["layer_spec"] == "transformers" and peer["parameters"] == sdpa["parameters"]
    for row in (sdpa, unfused, peer):
        assert row["tokens_per_s_per_device"] > 0 and row["steps_measured"] == 1
        assert row["mfu_measured"] == pytest.approx(row["flops_per_token"] * row["tokens_per_s_per_device"]
                                                    / result["peak_flops_measured"])
    assert sdpa["profile"]["matmul_ms"] > 0 and sdpa["profile"]["data_ms"] > 0 and sdpa["top_operations"]
    table = done.stdout[done.stdout.index("run "):]
    assert "sdpa (flash)" in table and "megatron sdpa / hugging face llama" in done.stdout
