"""Wall time of the offline suite on CPU for the tiny model: what evaluation adds to the demo.

    python -m bench.evaluate [--items 40] [--checkpoint HF_DIR] [--out bench/results/evaluate.json]

The model: `--checkpoint` (e.g. the demo's `out/local/train/trafilatura/seed1/hf/step_0000234`),
or else an untrained Llama of `configs/models/tiny.yaml`'s shape with a SentencePiece tokenizer
trained here (the timing depends on the shape, not the weights). Each task runs in its own
lm-eval call (so each gets its own time), after one TaskManager build, as evaluation.evaluate
does; the total is one checkpoint's evaluation in the demo (which has 3 per run).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import tempfile
import time
from pathlib import Path


def untrained_tiny(folder: Path) -> Path:
    from transformers import AutoTokenizer, LlamaForCausalLM

    from configs.pretrain import PretrainConfig
    from configs.tokens import TokenizerConfig
    from corpus.sample.text import Prose
    from corpus.tokens.tokenizer import train_sentencepiece
    from pretrain.model import hf_config

    rng = random.Random(0)
    train_sentencepiece([Prose(rng).paragraph() for _ in range(3000)], TokenizerConfig(kind="sentencepiece", vocab_size=4096),
                        folder)
    tokenizer = AutoTokenizer.from_pretrained(str(folder))
    model_config = PretrainConfig.model_validate({"model": "tiny", "training": {
        "global_batch_size": 1, "micro_batch_size": 1, "checkpoint_every": 1}}).model
    model = LlamaForCausalLM(hf_config(model_config, len(tokenizer), tokenizer.bos_token_id, tokenizer.eos_token_id))
    model.save_pretrained(str(folder))
    return folder


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.evaluate", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=40, help="documents per task (the demo's offline_items)")
    parser.add_argument("--checkpoint", type=Path)
    parser.add_argument("--max-gen-toks", type=int, default=32)
    parser.add_argument("--out", type=Path, default=Path("bench/results/evaluate.json"))
    args = parser.parse_args()

    from evaluation.evaluate import OFFLINE_ENV

    os.environ.update(OFFLINE_ENV)
    import lm_eval
    from lm_eval.tasks import TaskManager

    from evaluation.tasks.offline import write_offline_tasks
    from evaluation.tasks.suite import TASKS_DIR, load_suite

    with tempfile.TemporaryDirectory() as tmp:
        checkpoint = args.checkpoint or untrained_tiny(Path(tmp) / "model")
        start = time.perf_counter()
        manager = TaskManager(include_path=[str(TASKS_DIR), str(write_offline_tasks(Path(tmp) / "tasks", args.items))])
        setup = time.perf_counter() - start
        rows = []
        for task in load_suite().all_tasks():
            began = time.perf_counter()
            lm_eval.simple_evaluate(model="hf", model_args=f"pretrained={checkpoint},dtype=float32", tasks=[task],
                                    task_manager=manager, batch_size=16, device="cpu", log_samples=True,
                                    gen_kwargs=f"max_gen_toks={args.max_gen_toks}")
            rows.append({"task": task, "seconds": time.perf_counter() - began})
    total = setup + sum(r["seconds"] for r in rows)
    print(f"\n{'task':<24}{'seconds':>9}")
    print(f"{'(task index, data)':<24}{setup:>9.1f}")
    for r in rows:
        print(f"{r['task']:<24}{r['seconds']:>9.1f}")
    print(f"{'total':<24}{total:>9.1f}   ({args.items} documents per task, {os.cpu_count()} cores)")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"items_per_task": args.items, "checkpoint": str(args.checkpoint or "untrained tiny"),
                                    "setup_seconds": setup, "tasks": rows, "total_seconds": total}, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
