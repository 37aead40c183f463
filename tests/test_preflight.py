"""The GPU preflight end to end on CPU (tiny model, random labeler model): every path runs, the
JSON is written, and the planner takes GPU rates from a preflight that ran on a GPU only."""

import json

import pytest
import yaml

from bench.preflight import main as preflight_main
from configs.experiment import load_experiment
from corpus.flow.pricing import rates


def config_file(tmp_path):
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump({
        "name": "pf", "output_root": str(tmp_path / "out"), "inputs": {"sample": {"pages": 5}},
        "arms": {"trafilatura": {"extractor": "trafilatura"}, "dripper": {"extractor": "dripper", "labeler": {"kind": "vllm"}}},
        "tokenizer": {"kind": "sentencepiece"}, "dataset": {"tokens_per_arm": 100_000},
        "pretrain": {"model": "tiny", "training": {"global_batch_size": 8, "micro_batch_size": 4, "checkpoint_every": 100}},
        "evaluation": {"tasks": "offline"}}))
    return path


@pytest.mark.slow
def test_preflight_runs_every_path_on_cpu_and_the_plan_reads_its_json(tmp_path):
    path = config_file(tmp_path)
    # the configured Dripper model is not in this machine's cache: reported, and the exit says so
    assert preflight_main([str(path), "--pages", "6", "--steps", "6", "--gpus-per-node", "2"]) == 1
    report = json.loads((tmp_path / "out" / "preflight" / "preflight.json").read_text())
    failed = {c["check"] for c in report["checks"] if not c["ok"]}
    assert "scaling" not in failed
    assert failed <= {"CUDA", "Transformer Engine", "labeler model (dripper)"} and "labeler model (dripper)" in failed
    assert report["device"] == "cpu" and report["gpu"] is None
    assert report["labeler"]["labelled"] > 0 and report["labeler"]["prompt_tokens_per_page"] > 0
    training = report["training"]
    assert training["resume_max_loss_difference"] == training["resume_tolerance"] == 0.0  # CPU: bit for bit
    assert training["export_max_logit_difference"] < 1e-4
    assert training["tokens_per_s_per_gpu"] > 0 and training["lm_eval"]["acc_norm"] is not None
    assert (training["layer_spec"], training["attention"], training["sdpa_kernel"], training["dtype"]) == (
        "local", "sdpa", "flash", "float32")
    assert training["micro_batch_size"] == 2 and training["peak_flops_measured"] > 0 and training["mfu_measured_peak"] > 0
    # scaling: bench.pretrain on 1 rank and, under torchrun, on 2 gloo ranks, the same work per rank
    scaling = report["scaling"]
    assert [(r["gpus"], r["nodes"], r["global_batch"]) for r in scaling["runs"]] == [(1, 1, 2), (2, 1, 4)]
    assert all(r["tokens_per_s_per_device"] > 0 and r["efficiency"] > 0 for r in scaling["runs"])
    assert [r["overlap_grad_reduce"] for r in scaling["runs"]] == [False, True]
    assert scaling["micro_batch"] == 2 and scaling["micro_batches_per_gpu"] == 1

    config = load_experiment(path)
    on_cpu = rates(config, {"arms": {}}, report, vocab_size=2000)
    assert on_cpu["arms"]["dripper"]["labeler_prompt_tokens_per_gpu_s"][1].startswith("assumed")
    assert on_cpu["training_tokens_per_gpu_s"]["tiny"][1].startswith("config")
    on_gpu = rates(config, {"arms": {}}, report | {"gpu": "NVIDIA H200", "device": "cuda"}, vocab_size=2000)
    lab = report["labeler"]
    assert on_gpu["arms"]["dripper"]["labeler_prompt_tokens_per_gpu_s"] == (
        lab["pages_per_s_per_gpu"] * lab["prompt_tokens_per_page"], f"measured: preflight on NVIDIA H200, {lab['model']}, "
        "plain decoding")
    assert on_gpu["training_tokens_per_gpu_s"]["tiny"] == (  # the widest scaling run's rate: communication included
        scaling["runs"][-1]["tokens_per_s_per_device"],
        "preflight on NVIDIA H200 (layer_spec local, attention sdpa, sdpa_kernel flash, micro_batch_size 2), "
        "2 GPUs on 1 node(s)")
    one_gpu = rates(config, {"arms": {}}, report | {"gpu": "NVIDIA H200", "scaling": {"runs": []}}, vocab_size=2000)
    assert one_gpu["training_tokens_per_gpu_s"]["tiny"][0] == training["tokens_per_s_per_gpu"]
    # a ladder's other rungs at the preflight's MFU: tokens/s scaled by FLOPs per token
    raw = yaml.safe_load(path.read_text())
    raw["pretrain"] = {"training": raw["pretrain"]["training"],
                       "ladder": [{"model": "nano", "seeds": [1]}, {"model": "tiny", "seeds": [1]}]}
    path.write_text(yaml.safe_dump(raw))
    ladder = rates(load_experiment(path), {"arms": {}}, report | {"gpu": "NVIDIA H200", "device": "cuda"}, vocab_size=2000)
    nano, _ = ladder["training_tokens_per_gpu_s"]["nano"]
    from configs.model import ModelConfig, named_model

    ratio = (ModelConfig.model_validate(named_model("tiny")).flops_per_token(2000)
             / ModelConfig.model_validate(named_model("nano")).flops_per_token(2000))
    assert nano == pytest.approx(scaling["runs"][-1]["tokens_per_s_per_device"] * ratio)


def test_transformer_engine_outside_megatron_core_s_range_fails_its_check(monkeypatch):
    """megatron-core 0.16.1 declares transformer-engine >=2.9.0a0,<2.12.0: a container's 2.10 build
    passes, an older one is named with what to do."""
    import importlib.metadata
    import sys
    import types

    from bench.preflight import transformer_engine_check

    monkeypatch.setitem(sys.modules, "transformer_engine", types.ModuleType("transformer_engine"))
    real = importlib.metadata.version
    for installed, ok in (("2.10.0+769ed778", True), ("2.1.0", False)):
        monkeypatch.setattr(importlib.metadata, "version",
                            lambda name, v=installed: v if name == "transformer-engine" else real(name))
        result = transformer_engine_check()
        assert result["ok"] is ok and result["detail"].startswith(f"{installed}; megatron-core 0.16.1 supports")
        assert ok or "container whose Transformer Engine megatron-core supports" in result["fix"]


def test_the_scaling_run_over_nodes_gives_each_node_s_torchrun_the_job_s_cpus(tmp_path, monkeypatch):
    """bench.preflight's srun across the job's nodes: one torchrun a node, rendezvous on the first
    node, and the job's CPUs per task passed on (srun stopped inheriting them in Slurm 22.05)."""
    import os

    from bench.preflight import scaling_launch

    (tmp_path / "scontrol").write_text('#!/usr/bin/env bash\necho gpu-001; echo gpu-002\n')
    (tmp_path / "scontrol").chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    monkeypatch.setenv("SLURM_JOB_ID", "20007")
    monkeypatch.setenv("SLURM_JOB_NODELIST", "gpu-[001-002]")
    monkeypatch.setenv("SLURM_CPUS_PER_TASK", "16")
    launch = scaling_launch(8, 2)
    assert launch[:2] == ["srun", "--overlap"] and "--nodes=2" in launch and "--ntasks-per-node=1" in launch
    assert "--cpus-per-task=16" in launch and "--nproc-per-node=8" in launch and "--rdzv-endpoint=gpu-001:20007" in launch
    monkeypatch.delenv("SLURM_CPUS_PER_TASK")
    assert not any(arg.startswith("--cpus-per-task") for arg in scaling_launch(8, 2))
