"""The training data of one arm: megatron-core's GPTDataset over the arm's budget-cut `.bin/.idx`.

No repetition within the budget: the number of steps is derived from it, so every sample is
drawn from a single epoch. `random_seed` (the run's seed) fixes GPTDataset's shuffle; sample `i`
of step `s` is `s * global_batch + i`, so the data position is just the step.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from configs.experiment import ExperimentConfig


@dataclass
class DatasetTokenizer:
    """What GPTDataset asks of a tokenizer: ids of the end-of-document and padding tokens."""

    vocab_size: int
    eod: int
    pad: int = -1  # GPTDataset pads with this only past the end of the data (never, in one epoch)
    unique_identifiers: dict = field(default_factory=dict)


def tokenizer_facts(config: ExperimentConfig) -> tuple[int, int, int | None]:
    """(vocab size, end-of-document id, beginning-of-sequence id) of the experiment's tokenizer."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(config.tokenizer_file()))
    special = json.loads((config.tokenizer_dir() / "tokenizer_config.json").read_text()) if (
        config.tokenizer_dir() / "tokenizer_config.json").is_file() else {}
    bos = special.get("bos_token")
    bos = bos.get("content") if isinstance(bos, dict) else bos
    return (tokenizer.get_vocab_size(), tokenizer.token_to_id(config.tokenizer.eos_token),
            tokenizer.token_to_id(bos) if bos else None)


def build_dataset(config: ExperimentConfig, arm: str, seed: int, cache: Path):
    from megatron.core.datasets.blended_megatron_dataset_builder import BlendedMegatronDatasetBuilder
    from megatron.core.datasets.gpt_dataset import GPTDataset, GPTDatasetConfig

    prefix = config.dataset_prefix(arm)
    if not Path(f"{prefix}.idx").is_file():
        raise FileNotFoundError(f"{prefix}.idx: no dataset for arm {arm!r}; run slurm/extract.sh first")
    vocab, eod, _ = tokenizer_facts(config)
    _, samples = config.training_steps()
    dataset_config = GPTDatasetConfig(
        random_seed=seed, sequence_length=config.pretrain.model.seq_length, blend=([str(prefix)], None),
        split="1,0,0", path_to_cache=str(cache), tokenizer=DatasetTokenizer(vocab, eod),
        reset_position_ids=False, reset_attention_mask=False, eod_mask_loss=False, create_attention_mask=False,
    )
    train, _, _ = BlendedMegatronDatasetBuilder(GPTDataset, [samples, 0, 0], lambda: True, dataset_config).build()
    return train


def micro_batches(dataset, step: int, global_batch: int, micro_batch: int, rank: int, world: int):
    """This rank's micro batches of a step: its contiguous share of the step's samples."""
    per_rank = global_batch // world
    first = step * global_batch + rank * per_rank
    for start in range(first, first + per_rank, micro_batch):
        samples = [dataset[i] for i in range(start, start + micro_batch)]
        yield {k: torch.from_numpy(np.stack([np.asarray(s[k]) for s in samples]))
               for k in ("tokens", "labels", "loss_mask", "position_ids")}
