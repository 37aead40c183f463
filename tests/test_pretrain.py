"""Pretraining with megatron-core on CPU: loss goes down, resume is exact, export matches Megatron.

The corpus is built here: a SentencePiece tokenizer and two identical token-budget datasets
(arms `a` and `b`) written with megatron-core's IndexedDatasetBuilder, as the budget stage does.
"""

import json

import numpy as np
import pytest
import torch

from configs.base import ConfigError
from configs.experiment import ExperimentConfig, load_experiment
from conftest import PRETRAIN_MODEL, PRETRAIN_TOKENS, build_pretrain_corpus, pretrain_experiment


def experiment(root, **training) -> ExperimentConfig:
    return ExperimentConfig.model_validate(pretrain_experiment(root, training))


@pytest.fixture(scope="module")
def corpus_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("pretrain")
    build_pretrain_corpus(root)
    return root


@pytest.fixture(scope="module")
def whole_run(corpus_root):
    """Arm a, seed 1, trained whole once on the module's corpus: the run the interrupted ones must equal."""
    from pretrain.train import train

    return train(experiment(corpus_root), "a", seed=1)


def copy_corpus(corpus_root, root) -> None:
    """The module's tokenizer and datasets (what build_pretrain_corpus writes) into another output root."""
    import shutil

    for folder in ("tokenizer", "datasets"):
        shutil.copytree(corpus_root / folder, root / folder)


def losses(run_dir) -> list[float]:
    return [json.loads(line)["loss"] for line in (run_dir / "log.jsonl").read_text().splitlines()]


def test_steps_follow_the_token_budget(corpus_root):
    config = experiment(corpus_root)
    steps, samples = config.training_steps()
    assert samples == steps * 4 and samples * 32 < PRETRAIN_TOKENS and (samples + 4) * 32 >= PRETRAIN_TOKENS - 1
    with pytest.raises(ValueError, match="not one global batch"):
        experiment(corpus_root, global_batch_size=512, micro_batch_size=2).training_steps()


def test_training_lowers_the_loss_and_resume_continues_exactly(corpus_root, whole_run):
    from pretrain.train import train

    config = experiment(corpus_root)
    steps, _ = config.training_steps()
    whole = whole_run
    cut = train(config, "b", seed=1, stop_at=10)  # arm b holds the same data: the same run, interrupted
    assert len(losses(cut)) == 10
    train(config, "b", seed=1)  # resumes from step 10
    assert len(losses(whole)) == steps
    assert losses(cut) == losses(whole)  # bit-identical continuation
    first, last = np.mean(losses(whole)[:3]), np.mean(losses(whole)[-3:])
    assert last < first - 0.5
    record = json.loads((whole / "log.jsonl").read_text().splitlines()[-1])
    assert record["tokens"] == steps * 4 * 32 and record["grad_norm"] > 0 and record["tokens_per_s"] > 0
    exported = sorted(p.name for p in (whole / "hf").iterdir())
    assert exported == [f"step_{s:07d}" for s in (10, 20, 30) if s <= steps] + ([f"step_{steps:07d}"] if steps % 10 else [])


def test_export_matches_megatron_logits(corpus_root, whole_run, tmp_path):
    from transformers import LlamaForCausalLM

    from pretrain.checkpoint import latest_checkpoint, load_model
    from pretrain.export import export_checkpoint, read_run_info
    from pretrain.model import build_model
    from pretrain.platform import detect

    config = experiment(corpus_root)
    run_dir = whole_run
    checkpoint = latest_checkpoint(run_dir)
    out = export_checkpoint(checkpoint, tmp_path / "hf")
    run = read_run_info(checkpoint)
    model = build_model(config.pretrain.model, run["vocab_size"], detect(), run["attention"])
    load_model(checkpoint, model)
    model.eval()
    hf = LlamaForCausalLM.from_pretrained(str(out)).eval()
    tokens = torch.randint(0, run["vocab_size"], (2, 32), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        megatron_logits = model(tokens, torch.arange(32).expand(2, -1), None)
        hf_logits = hf(tokens).logits
    assert (megatron_logits - hf_logits).abs().max().item() < 1e-4
    assert json.loads((out / "xsuite.json").read_text())["step"] == run["steps"]


def test_sdpa_attention_gives_the_unfused_outputs_and_gradients():
    """The same weights through both local-spec attentions: logits and every parameter's gradient
    agree to fp32 rounding; the core attention alone agrees in bf16 too."""
    from configs.model import ModelConfig
    from pretrain.model import build_model
    from pretrain.platform import detect, init_distributed, seed_everything

    platform = detect()
    init_distributed(platform)
    shape = ModelConfig.model_validate(PRETRAIN_MODEL)
    runs = {}
    for attention in ("unfused", "sdpa"):
        seed_everything(0)
        model = build_model(shape, 600, platform, attention)
        tokens = torch.randint(0, 600, (2, 32), generator=torch.Generator().manual_seed(1))
        logits = model(tokens, torch.arange(32).expand(2, -1), None)
        logits.float().logsumexp(-1).mean().backward()
        runs[attention] = logits.detach(), {n: p.grad for n, p in model.named_parameters()}
    (unfused, unfused_grads), (sdpa, sdpa_grads) = runs["unfused"], runs["sdpa"]
    assert sdpa_grads.keys() == unfused_grads.keys()
    assert (sdpa - unfused).abs().max() < 1e-5
    for name, grad in unfused_grads.items():
        assert torch.allclose(sdpa_grads[name], grad, rtol=1e-4, atol=1e-6), name

    from megatron.core.transformer.dot_product_attention import DotProductAttention
    from megatron.core.transformer.enums import AttnMaskType

    from pretrain.attention import SdpaAttention
    from pretrain.model import transformer_config

    config = transformer_config(shape, platform, fused=False)
    config.bf16, config.params_dtype = True, torch.bfloat16
    q, k, v = (torch.randn(32, 2, heads, 8, dtype=torch.bfloat16) for heads in (4, 2, 2))  # GQA: 2 groups
    outputs = [cls(config, 1, AttnMaskType.causal, "self")(q, k, v, None) for cls in (DotProductAttention, SdpaAttention)]
    assert outputs[0].shape == outputs[1].shape == (32, 2, 32)
    assert (outputs[0].float() - outputs[1].float()).abs().max() < 2e-2  # bf16: 8 bits of mantissa


@pytest.mark.slow
def test_the_gpu_fusions_give_the_unfused_model():
    """megatron-core's torch.compile fusions (on by default on a GPU) compiled here for the CPU:
    the same weights give the same loss and gradients as the op-by-op model the CPU runs train
    (to bf16 rounding: the fused cross-entropy hands back its gradient in bf16, as a GPU's logits are)."""
    from configs.model import ModelConfig
    from pretrain.model import build_model
    from pretrain.platform import detect, init_distributed, seed_everything

    platform = detect()
    init_distributed(platform)
    shape = ModelConfig.model_validate(PRETRAIN_MODEL)
    tokens = torch.randint(0, 600, (2, 32), generator=torch.Generator().manual_seed(1))
    runs = {}
    for fused in (False, True):
        seed_everything(0)
        model = build_model(shape, 600, platform, "sdpa", fused=fused)
        assert model.config.bias_activation_fusion == fused
        loss = model(tokens, torch.arange(32).expand(2, -1), None, labels=tokens.roll(-1, 1)).mean()
        loss.backward()
        runs[fused] = loss.detach(), {n: p.grad for n, p in model.named_parameters()}
    assert torch.allclose(runs[True][0], runs[False][0], atol=1e-6)
    for name, grad in runs[False][1].items():
        assert (runs[True][1][name] - grad).abs().max() <= 2**-8 * grad.abs().max(), name


@pytest.mark.slow
def test_a_checkpoint_of_one_attention_continues_with_the_other(corpus_root, whole_run):
    """Both local-spec attentions share one state dict: a run stopped under `unfused` resumes under
    `sdpa` and follows the run that never switched to fp32 rounding. Beside a run of its rung that
    ran other kernels, a run refuses to start."""
    from pretrain.train import train

    def rung(name: str, attention: str) -> ExperimentConfig:  # a rung of its own: its runs are these alone
        raw = pretrain_experiment(corpus_root, {"attention": attention})
        raw["pretrain"] = {"training": raw["pretrain"]["training"],
                           "ladder": [{"name": name, "model": PRETRAIN_MODEL, "seeds": [1]}]}
        return ExperimentConfig.model_validate(raw)

    switched = train(rung("switch", "unfused"), "b", seed=1, stop_at=10)
    assert json.loads((switched / "run.json").read_text())["attention"] == "unfused"
    train(rung("switch", "sdpa"), "b", seed=1)
    whole = whole_run  # the module's run of the same model, seed and data under sdpa, never switched
    assert json.loads((whole / "run.json").read_text())["attention"] == "sdpa"
    run = json.loads((switched / "run.json").read_text())
    assert run["attention"] == "sdpa" and run["layer_spec"] == "local" and run["sdpa_kernel"] == "flash"
    assert run["dtype"] == "float32" and run["device"] == "cpu" and run["micro_batch_size"] == 2
    assert np.allclose(losses(switched), losses(whole), atol=1e-4)
    with pytest.raises(SystemExit, match=r"would run attention 'unfused' where train/b/switch/seed1 ran attention "
                                         r"'sdpa'; every run of a rung must run the same kernels"):
        train(rung("switch", "unfused"), "a", seed=4)


def test_transformer_engine_is_refused_where_it_cannot_run():
    from pretrain.attention import resolve_attention

    assert resolve_attention("auto", cuda=False) == "sdpa" and resolve_attention("unfused", cuda=False) == "unfused"
    with pytest.raises(SystemExit, match="te needs Transformer Engine on a CUDA node"):
        resolve_attention("te", cuda=False)


def test_every_rung_of_a_ladder_trains_on_a_prefix_of_the_same_order(corpus_root, tmp_path):
    """Rungs differ in model and tokens only: for a seed, a smaller rung's samples are the first
    ones of the larger rung's, in the same order (GPTDataset shuffles one epoch of the whole budget)."""
    from pretrain.data import build_dataset

    raw = pretrain_experiment(corpus_root)
    small = PRETRAIN_MODEL | {"hidden_size": 16, "ffn_hidden_size": 32}
    raw["pretrain"] = {"training": raw["pretrain"]["training"], "ladder": [
        {"name": "s", "model": small, "tokens": 1500, "seeds": [1]}, {"name": "l", "model": PRETRAIN_MODEL, "seeds": [1]}]}
    config = ExperimentConfig.model_validate(raw)
    datasets = {r: build_dataset(config.for_rung(r), "a", 1, tmp_path / r) for r in ("s", "l")}
    samples = {r: config.for_rung(r).training_steps()[1] for r in ("s", "l")}  # what each rung trains on
    assert 0 < samples["s"] < samples["l"]
    first = [datasets["s"][i]["tokens"].tolist() for i in range(samples["s"])]
    assert first == [datasets["l"][i]["tokens"].tolist() for i in range(samples["s"])]
    other_seed = build_dataset(config.for_rung("l"), "a", 2, tmp_path / "seed2")
    assert [other_seed[i]["tokens"].tolist() for i in range(len(first))] != first


def test_bad_model_shapes_fail_at_load(tmp_path):
    path = tmp_path / "bad.yaml"
    raw = {"name": "x", "output_root": str(tmp_path), "inputs": {"sample": {}},
           "arms": {"a": {"extractor": "trafilatura"}}, "tokenizer": {"kind": "sentencepiece"},
           "dataset": {"tokens_per_arm": 1000},
           "pretrain": {"model": {**PRETRAIN_MODEL, "hidden_size": 30}, "training": {
               "global_batch_size": 4, "micro_batch_size": 2, "checkpoint_every": 1}}}
    path.write_text(json.dumps(raw))
    with pytest.raises(ConfigError, match="hidden_size 30 is not divisible by num_attention_heads 4"):
        load_experiment(path)
    raw["pretrain"]["model"] = "no-such-size"
    path.write_text(json.dumps(raw))
    with pytest.raises(ConfigError, match="no model size 'no-such-size'"):
        load_experiment(path)


def test_missing_dataset_fails_clearly(tmp_path):
    from pretrain.data import build_dataset

    with pytest.raises(FileNotFoundError, match="no dataset for arm 'a'; run slurm/extract.sh first"):
        build_dataset(experiment(tmp_path), "a", 1, tmp_path / "cache")


# pretrain.train under torchrun: megatron DDP's gradient buckets made small enough that the tiny
# test model has several (its default is 40M parameters a bucket: one bucket here), and arm a
# trained without overlap (arm b, the same data, with it)
SMALL_BUCKETS = """
import functools, sys

import megatron.core.distributed as distributed

distributed.DistributedDataParallelConfig = functools.partial(distributed.DistributedDataParallelConfig, bucket_size=3000)
import pretrain.train

train = pretrain.train.train


def arm_a_without_overlap(config, arm, *args, **kwargs):
    if arm == "a":
        training = config.pretrain.training.model_copy(update={"overlap_grad_reduce": False, "overlap_param_gather": False})
        config = config.model_copy(update={"pretrain": config.pretrain.model_copy(update={"training": training})})
    return train(config, arm, *args, **kwargs)


pretrain.train.train = arm_a_without_overlap
if __name__ == "__main__":
    sys.exit(pretrain.train.main(sys.argv[1:]))
"""


@pytest.mark.slow
def test_two_data_parallel_ranks_train_like_one_with_and_without_overlap(corpus_root, whole_run, tmp_path):
    """torchrun with 2 CPU ranks (gloo, megatron DDP): each rank takes half of every global
    batch, gradients are averaged, and the loss curve is the single-process one. Overlapping the
    gradient all-reduce with the backward pass (several buckets, each reduced once per step after
    its last micro-batch) gives the very losses of reducing after the backward pass."""
    import subprocess
    import sys
    from pathlib import Path

    # ten steps and the checkpoint at step 10: a gradient averaged wrongly, or a bucket reduced
    # twice or never, shows in the loss of the next step, and the save is where the ranks' state dicts meet
    copy_corpus(corpus_root, tmp_path)  # runs of their own, on the data of the module's single-process run
    path = tmp_path / "exp.yaml"
    path.write_text(json.dumps(pretrain_experiment(tmp_path)))
    (tmp_path / "small_buckets.py").write_text(SMALL_BUCKETS)
    torchrun = Path(sys.executable).with_name("torchrun")
    done = subprocess.run([str(torchrun), "--standalone", "--nproc-per-node", "2", str(tmp_path / "small_buckets.py"),
                           str(path), "--seed", "1", "--stop-at", "10"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "common state dict differs" not in done.stderr
    config = experiment(tmp_path)
    synced, overlapped = (config.run_dir(arm, 1) for arm in ("a", "b"))
    single = whole_run
    assert json.loads((overlapped / "run.json").read_text())["overlap_grad_reduce"] is True
    assert json.loads((synced / "run.json").read_text())["overlap_grad_reduce"] is False
    assert json.loads((single / "run.json").read_text())["overlap_grad_reduce"] is False  # one rank: nothing to hide
    assert len(losses(overlapped)) == 10 and losses(overlapped) == losses(synced)
    assert np.allclose(losses(overlapped), losses(single)[:10], atol=1e-5)


def test_the_step_time_covers_the_device_s_work(corpus_root, monkeypatch):
    """The logged step time is read after the device has finished the step (optimizer included):
    a device that takes 0.2 s to catch up shows in every step's seconds."""
    import time

    from pretrain.platform import Platform
    from pretrain.train import train

    monkeypatch.setattr(Platform, "synchronize", lambda self: time.sleep(0.2))
    run_dir = train(experiment(corpus_root, checkpoint_every=1000), "a", seed=5, stop_at=3, checkpoints=False)
    seconds = [json.loads(line)["seconds"] for line in (run_dir / "log.jsonl").read_text().splitlines()]
    assert len(seconds) == 3 and min(seconds) >= 0.2


# what the job script calls of Slurm, here: srun runs its command (options dropped), scontrol
# names this machine and writes down what else it was asked
FAKE_SLURM = {"srun": '#!/usr/bin/env bash\nwhile [[ "$1" == --* ]]; do shift; done\nexec "$@"\n',
              "scontrol": '#!/usr/bin/env bash\necho "$@" >> "$FAKE_SCONTROL_LOG"\n'
                          'if [ "$1" = show ]; then echo localhost; fi\n'}


@pytest.mark.slow
def test_the_time_limit_signal_saves_a_checkpoint_before_the_job_requeues(corpus_root, whole_run, tmp_path):
    """The training job script (pretrain.submit), run by bash with a fake srun and scontrol: USR1
    (Slurm's 5-minute warning) makes the loop save the step it is in, off the checkpoint schedule
    and without an export for evaluation, and stop; then the job requeues itself. The requeued run
    resumes from that step with the losses of an uninterrupted run."""
    import os
    import random
    import signal
    import stat
    import subprocess
    import sys
    import time

    from pretrain.checkpoint import latest_checkpoint
    from pretrain.submit import training_job
    from pretrain.train import STOP_REQUEST, train
    from slurm.jobs import write_job

    copy_corpus(corpus_root, tmp_path)  # arm b's run of its own, on the data of the module's whole run of arm a
    raw = pretrain_experiment(tmp_path, executor={"env_command": f"source {sys.prefix}/bin/activate"})
    raw["pretrain"]["slurm"] = {"gpus_per_node": 1}
    config = ExperimentConfig.model_validate(raw)
    (tmp_path / "exp.json").write_text(json.dumps(raw))
    whole = whole_run
    script = write_job(training_job(config, str(tmp_path / "exp.json"), "b", 1), config, tmp_path / "train.sbatch")
    (tmp_path / "bin").mkdir()
    for name, text in FAKE_SLURM.items():
        (tmp_path / "bin" / name).write_text(text)
        (tmp_path / "bin" / name).chmod(stat.S_IRWXU)
    job_id = str(random.randrange(1000, 20000))  # the script's rendezvous port: 20000 + id % 20000
    env = os.environ | {"PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}", "SLURM_JOB_ID": job_id, "SLURM_NNODES": "1",
                        "SLURM_JOB_NODELIST": "localhost", "FAKE_SCONTROL_LOG": str(tmp_path / "scontrol.log")}
    run_dir = config.run_dir("b", 1)
    with open(tmp_path / "job.out", "w") as out:
        job = subprocess.Popen(["bash", str(script)], env=env, stdout=out, stderr=subprocess.STDOUT)
        deadline = time.time() + 300
        while not (run_dir / "run.json").is_file() and job.poll() is None and time.time() < deadline:
            time.sleep(0.1)
        job.send_signal(signal.SIGUSR1)
        assert job.wait(timeout=300) == 0, (tmp_path / "job.out").read_text()[-3000:]
    assert f"requeue {job_id}" in (tmp_path / "scontrol.log").read_text().splitlines()
    assert "time limit near: saving a checkpoint, then requeueing" in (tmp_path / "job.out").read_text()
    steps, _ = config.training_steps()
    saved = int(latest_checkpoint(run_dir).name.removeprefix("step_"))
    assert 0 < saved < steps and not (run_dir / STOP_REQUEST).exists()
    assert sorted(p.name for p in (run_dir / "hf").glob("step_*")) == [f"step_{s:07d}" for s in range(10, saved + 1, 10)]

    train(config, "b", seed=1)  # the requeued job
    assert losses(run_dir) == losses(whole)


# SIGKILL to the training process at one of two moments: between checkpoints (mid step 15), or
# while the step-20 checkpoint is being written (a shard on disk, megatron's metadata.json not)
KILLED_TRAINING = """
import os, signal, sys
from pathlib import Path

import megatron.core.dist_checkpointing as dist_checkpointing
import pretrain.train


def killed_at_15_or_while_saving_20(moment):
    if moment == "between-checkpoints":
        learning_rate = pretrain.train.learning_rate

        def killed_at_15(step, *args):
            if step == 15:
                os.killpg(0, signal.SIGKILL)
            return learning_rate(step, *args)

        pretrain.train.learning_rate = killed_at_15
    else:
        save = dist_checkpointing.save

        def killed_while_saving_20(state, path, *args, **kwargs):
            if str(path).endswith("step_0000020"):
                (Path(path) / "__0_0.distcp").write_bytes(b"half a shard")
                os.killpg(0, signal.SIGKILL)
            return save(state, path, *args, **kwargs)

        dist_checkpointing.save = killed_while_saving_20


if __name__ == "__main__":  # megatron's checkpoint writer starts processes that import this file
    killed_at_15_or_while_saving_20(sys.argv[2])
    pretrain.train.main([sys.argv[1], "--arm", "b", "--seed", "1"])
"""


@pytest.mark.slow
@pytest.mark.parametrize("moment", ["between-checkpoints", "while-saving"])
def test_a_killed_run_resumes_from_its_last_complete_checkpoint_with_the_same_losses(tmp_path, moment, corpus_root,
                                                                                     whole_run):
    import os
    import signal
    import subprocess
    import sys
    from pathlib import Path

    from pretrain.checkpoint import is_complete
    from pretrain.train import train

    copy_corpus(corpus_root, tmp_path)  # arm b's run of its own, on the data of the module's whole run of arm a
    config = experiment(tmp_path)
    whole = whole_run
    (tmp_path / "exp.json").write_text(json.dumps(pretrain_experiment(tmp_path)))
    (tmp_path / "killed.py").write_text(KILLED_TRAINING)
    repo = Path(__file__).resolve().parents[1]
    env = os.environ | {"PYTHONPATH": str(repo)}
    # its own session, killed whole: megatron's checkpoint writer spawns a Manager process that would
    # outlive its killed parent (on a cluster Slurm ends the job's cgroup)
    killed = subprocess.run([sys.executable, str(tmp_path / "killed.py"), str(tmp_path / "exp.json"), moment], cwd=repo,
                            capture_output=True, text=True, timeout=600, env=env, start_new_session=True)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    run_dir = config.run_dir("b", 1)
    assert (run_dir / "checkpoints" / "latest").read_text() == "10"
    if moment == "while-saving":
        assert not is_complete(run_dir / "checkpoints" / "step_0000020")

    train(config, "b", seed=1)
    assert losses(run_dir) == losses(whole)
    assert is_complete(run_dir / "checkpoints" / "step_0000020")
    assert sorted(p.name for p in (run_dir / "hf").iterdir()) == sorted(p.name for p in (whole / "hf").iterdir())
