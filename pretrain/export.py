"""Export a checkpoint to a Hugging Face Llama folder that transformers and lm-eval load.

    python -m pretrain.export CHECKPOINT OUT

CHECKPOINT is a `<run_dir>/checkpoints/step_XXXXXXX` folder; the run's `run.json` beside it says
which model shape and tokenizer it has. OUT gets `model.safetensors`, `config.json`
(LlamaConfig), the experiment's tokenizer, and `xsuite.json` (experiment, arm, rung, seed, step).
The training loop exports every checkpoint it saves to `<run_dir>/hf/step_XXXXXXX` this way.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

from configs.durable import write_atomically
from configs.model import ModelConfig
from pretrain.model import hf_config, hf_state_dict


def write_run_info(run_dir: Path, info: dict) -> None:
    write_atomically(run_dir / "run.json", json.dumps(info, indent=2) + "\n")


def read_run_info(checkpoint: Path) -> dict:
    path = checkpoint.parent.parent / "run.json"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: not found; CHECKPOINT must be <run_dir>/checkpoints/step_XXXXXXX")
    return json.loads(path.read_text())


def write_hf(weights: dict[str, torch.Tensor], run: dict, step: int, out: Path) -> Path:
    from transformers import AutoTokenizer, LlamaForCausalLM

    model_config = ModelConfig.model_validate(run["model"])
    hf = LlamaForCausalLM(hf_config(model_config, run["vocab_size"], run["bos_id"], run["eos_id"]))
    hf.load_state_dict(hf_state_dict(weights, model_config), strict=True)
    out.mkdir(parents=True, exist_ok=True)
    hf.save_pretrained(str(out), safe_serialization=True)
    AutoTokenizer.from_pretrained(run["tokenizer_dir"], local_files_only=True).save_pretrained(str(out))  # nosec B615  # local
    info = {k: run[k] for k in ("experiment", "arm", "rung", "seed")} | {"step": step, "checkpoint": str(out)}
    write_atomically(out / "xsuite.json", json.dumps(info, indent=2) + "\n")  # last: the export is whole
    return out


def megatron_weights(model) -> dict[str, torch.Tensor]:
    return {k: v for k, v in model.state_dict().items() if not k.endswith("_extra_state")}


def export_checkpoint(checkpoint: Path, out: Path) -> Path:
    from pretrain.attention import resolve_attention
    from pretrain.checkpoint import load_model
    from pretrain.model import build_model
    from pretrain.platform import detect, init_distributed

    run = read_run_info(checkpoint)
    platform = detect()
    init_distributed(platform)
    # the local spec's attentions share one state dict; Transformer Engine's layers have their own
    attention = resolve_attention(run.get("attention", "unfused"), platform.is_cuda)
    model = build_model(ModelConfig.model_validate(run["model"]), run["vocab_size"], platform, attention)
    step = load_model(checkpoint, model)
    return write_hf(megatron_weights(model), run, step, out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pretrain.export", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkpoint", type=Path)
    parser.add_argument("out", type=Path)
    args = parser.parse_args(argv)
    print(f"wrote {export_checkpoint(args.checkpoint, args.out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
