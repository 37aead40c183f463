"""Training throughput and MFU of a named model size, through the project's own training loop.

    python -m bench.pretrain [--model tiny] [--steps 30] [--global-batch 8] [--micro-batch 4]
                             [--peak-flops F] [--out bench/results/pretrain.json]
    torchrun --nproc-per-node 8 -m bench.pretrain --model 1b --global-batch 256 --micro-batch 8

Builds a throwaway experiment: a word-level tokenizer of the size the model is documented with
(tiny: 4,096; 1b: 32,000) and a dataset of random tokens just large enough for the steps, then
runs `pretrain.train.train` and reads its per-step log. Reported: median tokens/s and MFU over
the steps after the first three (warm-up), peak accelerator memory. MFU = FLOPs per token
(6 x matmul parameters + attention, see configs/models/) x tokens/s / (devices x peak FLOP/s);
the peak comes from the GPU's name (H100/H200/A100 ...) or from --peak-flops (needed on CPU).
Goal on H100-class GPUs for the 1b size: at least 40% MFU.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
from pathlib import Path

import numpy as np
import torch

VOCAB = {"tiny": 4096, "1b": 32000}


def write_tokenizer(folder: Path, vocab_size: int) -> None:
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import Whitespace
    from transformers import PreTrainedTokenizerFast

    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2} | {f"w{i}": i for i in range(3, vocab_size)}
    tokenizer = Tokenizer(WordLevel(vocab, unk_token="<unk>"))
    tokenizer.pre_tokenizer = Whitespace()
    PreTrainedTokenizerFast(tokenizer_object=tokenizer, unk_token="<unk>", bos_token="<s>",
                            eos_token="</s>").save_pretrained(str(folder))


def write_random_dataset(prefix: Path, tokens: int, vocab_size: int) -> None:
    from megatron.core.datasets.indexed_dataset import IndexedDatasetBuilder

    prefix.parent.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    builder = IndexedDatasetBuilder(f"{prefix}.bin", dtype=np.uint16)
    while tokens > 0:
        doc = rng.integers(3, vocab_size, size=min(tokens, 4096))
        builder.add_document(doc, [len(doc)])
        tokens -= len(doc)
    builder.finalize(f"{prefix}.idx")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="tiny", choices=sorted(VOCAB))
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--global-batch", type=int, default=8)
    parser.add_argument("--micro-batch", type=int, default=4)
    parser.add_argument("--peak-flops", type=float, help="per device; needed for MFU on CPU")
    parser.add_argument("--out", type=Path, default=Path("bench/results/pretrain.json"))
    args = parser.parse_args()

    import torch.distributed as dist

    from configs.experiment import ExperimentConfig
    from pretrain.train import train

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        config = ExperimentConfig.model_validate({
            "name": "bench", "output_root": str(root), "inputs": {"sample": {}},
            "arms": {"bench": {"extractor": "trafilatura"}},
            "tokenizer": {"kind": "pretrained", "name_or_path": str(root / "tokenizer")},
            "dataset": {"tokens_per_arm": 1},  # set below, once the sequence length is known
            "pretrain": {"model": args.model, "seeds": [0], "training": {
                "global_batch_size": args.global_batch, "micro_batch_size": args.micro_batch,
                "checkpoint_every": 10**9, "peak_flops": args.peak_flops}},
        })
        tokens = args.steps * args.global_batch * config.pretrain.model.seq_length + 1
        config = config.model_copy(update={"dataset": config.dataset.model_copy(update={"tokens_per_arm": tokens})})
        if int(os.environ.get("RANK", 0)) == 0:
            write_tokenizer(config.tokenizer_dir(), VOCAB[args.model])
            write_random_dataset(config.dataset_prefix("bench"), tokens, VOCAB[args.model])
        if dist.is_initialized():
            dist.barrier()
        run_dir = train(config, "bench", seed=0)
        if dist.get_rank() != 0:
            return
        records = [json.loads(line) for line in (run_dir / "log.jsonl").read_text().splitlines()][3:]
        run = json.loads((run_dir / "run.json").read_text())
    device = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"
    mfus = [r["mfu"] for r in records if r["mfu"] is not None]
    result = {
        "model": args.model, "device": device, "devices": dist.get_world_size(),
        "parameters": run["parameters"]["total"], "flops_per_token": run["flops_per_token"],
        "seq_length": config.pretrain.model.seq_length, "global_batch": args.global_batch,
        "micro_batch": args.micro_batch, "steps_measured": len(records),
        "tokens_per_s": statistics.median(r["tokens_per_s"] for r in records),
        "mfu": statistics.median(mfus) if mfus else None,
        "peak_memory_gb": torch.cuda.max_memory_allocated() / 2**30 if torch.cuda.is_available() else None,
        "torch_threads": torch.get_num_threads(),
    }
    print(f"{'model':<6}{'device':<28}{'params':>14}{'tokens/s':>12}{'MFU':>8}{'peak GB':>9}")
    mfu = f"{result['mfu']:.1%}" if result["mfu"] is not None else "-"
    mem = f"{result['peak_memory_gb']:.1f}" if result["peak_memory_gb"] is not None else "-"
    print(f"{args.model:<6}{device + ' x' + str(result['devices']):<28}{result['parameters']:>14,}"
          f"{result['tokens_per_s']:>12,.0f}{mfu:>8}{mem:>9}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
