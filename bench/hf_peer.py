"""The peer a user would otherwise pick: Hugging Face `LlamaForCausalLM` of the same shape, trained
the plain way on the same random tokens as bench.pretrain, for tokens/s and MFU side by side.

    python -m bench.hf_peer [--model tiny] [--steps 30] [--global-batch 8] [--micro-batch 4] [--compile]
                            [--out bench/results/hf_peer.json]

The model is `pretrain.model.hf_config` of the named size (what our checkpoints export to), with
SDPA attention, fp32 weights under bf16 autocast on a GPU (what `Trainer(bf16=True)` does; fp32 on
CPU), torch's fused AdamW with the project's hyper-parameters, gradient accumulation over the
micro-batches and clipping at 1.0. One device. `--compile` wraps the model in `torch.compile`
(default mode; the first steps compile, inside the warm-up the median leaves out). Same table and
JSON fields as bench.pretrain, the same FLOPs per token (causal attention), and the step timed
until the device has finished it. What differs from megatron-core beside the code: the peer keeps
fp32 weights and fp32 gradients and casts each weight to bf16 for each matmul of each
micro-batch (autocast), where megatron keeps bf16 weights (fp32 copies in the distributed
optimizer only) and accumulates gradients in an fp32 buffer; the peer's loss upcasts the logits to
fp32, megatron's fused cross-entropy works on the bf16 logits; the peer's Adam is torch's fused one
over every parameter, megatron's the distributed optimizer's (torch's foreach AdamW without
Transformer Engine or Apex).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch

from bench.pretrain import WARMUP_STEPS, bench_vocab, device_name, matmul_peak, random_documents, table_rows, throughput


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.hf_peer", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="tiny", help="a size of configs/models/")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--global-batch", type=int, default=8)
    parser.add_argument("--micro-batch", type=int, default=4)
    parser.add_argument("--vocab", type=int, help="default: 4,096 for tiny, 32,000 otherwise")
    parser.add_argument("--peak-flops", type=float, help="spec-sheet peak where the GPU is not in the table")
    parser.add_argument("--measured-peak", type=float, help="a matrix-product peak measured already (skips measuring)")
    parser.add_argument("--compile", action="store_true", help="the model wrapped in torch.compile")
    parser.add_argument("--name", help="the row's name in the table (default: hugging face llama[, compiled])")
    parser.add_argument("--out", type=Path, default=Path("bench/results/hf_peer.json"))
    args = parser.parse_args()
    if args.global_batch % args.micro_batch:
        raise SystemExit(f"--global-batch {args.global_batch} is not a multiple of --micro-batch {args.micro_batch}")

    from transformers import LlamaForCausalLM

    from configs.model import FLOPS_CONVENTION, ModelConfig, named_model
    from configs.pretrain import TrainingConfig
    from pretrain.model import hf_config
    from pretrain.platform import spec_peak_flops

    cuda = torch.cuda.is_available()
    device = torch.device("cuda" if cuda else "cpu")
    measured = {"flops": args.measured_peak} if args.measured_peak else matmul_peak()
    vocab = args.vocab or bench_vocab(args.model)
    shape = ModelConfig.model_validate(named_model(args.model))
    defaults = TrainingConfig(global_batch_size=args.global_batch, micro_batch_size=args.micro_batch, checkpoint_every=1)
    seq = shape.seq_length

    torch.manual_seed(0)
    config = hf_config(shape, vocab, 1, 2)
    config._attn_implementation = "sdpa"
    model = LlamaForCausalLM(config).to(device).train()
    forward = torch.compile(model) if args.compile else model
    optimizer = torch.optim.AdamW(model.parameters(), lr=defaults.lr, betas=defaults.adam_betas, eps=defaults.adam_eps,
                                  weight_decay=defaults.weight_decay, fused=True)
    stream = np.concatenate(list(random_documents(args.steps * args.global_batch * (seq + 1), vocab)))
    samples = torch.from_numpy(stream.astype(np.int64)).view(-1, seq + 1)
    flops_per_token = shape.flops_per_token(vocab)
    if cuda:
        torch.cuda.reset_peak_memory_stats()

    records = []
    for step in range(args.steps):
        began = time.perf_counter()
        batch = samples[step * args.global_batch:(step + 1) * args.global_batch]
        for micro in batch.split(args.micro_batch):
            micro = micro.to(device, non_blocking=True)
            inputs, targets = micro[:, :-1].contiguous(), micro[:, 1:].contiguous()  # as Megatron's samples
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=cuda):
                loss = forward(input_ids=inputs, labels=targets, shift_labels=targets).loss
            (loss / (args.global_batch // args.micro_batch)).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), defaults.clip_grad)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if cuda:
            torch.cuda.synchronize()  # the optimizer's step inside the window
        seconds = time.perf_counter() - began
        records.append({"tokens_per_s": args.global_batch * seq / seconds, "seconds": seconds})

    name = device_name()
    spec = args.peak_flops or spec_peak_flops(name)
    result = {
        "run": args.name or ("hugging face llama, compiled" if args.compile else "hugging face llama"),
        "model": args.model, "device": name, "devices": 1,
        "layer_spec": "transformers", "attention": config._attn_implementation, "sdpa_kernel": None,
        "dtype": "bfloat16 autocast" if cuda else "float32", "parameters": sum(p.numel() for p in model.parameters()),
        "flops_per_token": flops_per_token, "seq_length": seq, "global_batch": args.global_batch,
        "micro_batch": args.micro_batch, "optimizer": "torch AdamW (fused)", "compiled": args.compile,
        "master_weights": "fp32 weights and gradients, bf16 autocast" if cuda else "fp32",
        "flops_convention": FLOPS_CONVENTION,
        "flops_per_token_full_attention": shape.flops_per_token(vocab, causal=False),
        **throughput(records, 1, flops_per_token, {"spec": spec, "measured": measured["flops"]},
                     shape.flops_per_token(vocab, causal=False)),
        "peak_memory_gb": torch.cuda.max_memory_allocated() / 2**30 if cuda else None,
        "peak_flops_spec": spec, "peak_flops_measured": measured["flops"], "warmup_steps": WARMUP_STEPS,
        "torch": torch.__version__,
    }
    print("\n".join(table_rows([result])))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
