"""Cut every arm to exactly the same number of training tokens.

`TokenBudget` is a one-task datatrove step run after every arm is tokenised (one `.bin/.idx`
pair per tokenisation task, end-of-document token appended). It checks that every arm has at
least `dataset.tokens_per_arm` tokens, then, per arm, takes whole documents in a seeded random
order until the budget is reached, cuts the last one to land exactly on it, and writes them to
`<output_root>/datasets/<arm>/<arm>_text_document.{bin,idx}` (megatron-core's
IndexedDatasetBuilder). `<output_root>/datasets/manifest.json` records the budget, the tokens of
every arm, the tokenizer's hash and the files written; `selected_ids.txt.gz` beside each dataset
lists the selected documents (WARC record ids) in training order.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
from pathlib import Path

import numpy as np
from datatrove.data import DocumentsPipeline
from datatrove.io import get_datafolder
from datatrove.pipeline.base import PipelineStep

from configs.experiment import ExperimentConfig
from corpus.tokens.tokenizer import tokenizer_sha256


class BudgetError(ValueError):
    """An arm has fewer tokens than the budget."""


def token_shards(config: ExperimentConfig, arm: str) -> list[str]:
    """The tokenisation stage's outputs of an arm (path prefixes), in task order; a task that got
    no documents (more tasks than input files) leaves an empty `.bin`, which is no shard."""
    return sorted(str(p.with_suffix("")) for p in (config.dataset_dir(arm) / "tokens").glob("*.idx")
                  if p.with_suffix(".bin").stat().st_size > 0)


def selected_document_ids(config: ExperimentConfig, arm: str, chosen: np.ndarray) -> list[str]:
    """Record ids of the chosen documents (global indices over the tokenisation shards), in the
    order chosen. The ids come from the files each tokenisation task's JsonlReader read, in
    datatrove's shard assignment, so document k of shard r is line k of those files. Only the
    chosen ids are kept in memory."""
    folder = get_datafolder(str(config.post_dir(arm) / "output"))
    tasks = config.postprocess.resources.tasks
    position = np.full(int(chosen.max()) + 1, -1, dtype=np.int64)
    position[chosen] = np.arange(len(chosen))
    ids: list[str] = [""] * len(chosen)
    index = 0
    for rank in range(tasks):
        for path in folder.get_shard(rank, tasks, glob_pattern="*.jsonl.gz"):
            with folder.open(path, "rt", compression="gzip") as f:
                for line in f:
                    if index < len(position) and position[index] >= 0:
                        ids[position[index]] = json.loads(line)["id"]
                    index += 1
    return ids


def open_shards(config: ExperimentConfig, arm: str) -> list:
    """The tokenisation stage's outputs of an arm as megatron-core IndexedDatasets (memory-mapped)."""
    from megatron.core.datasets.indexed_dataset import IndexedDataset

    return [IndexedDataset(p) for p in token_shards(config, arm)]


def available_tokens(shards: dict[str, list]) -> dict[str, tuple[int, int]]:
    """(tokens, documents) per arm."""
    return {arm: (sum(int(s.sequence_lengths.sum()) for s in arm_shards), sum(len(s) for s in arm_shards))
            for arm, arm_shards in shards.items()}


def check_budget(config: ExperimentConfig, available: dict[str, tuple[int, int]]) -> None:
    budget = config.dataset.tokens_per_arm
    short = {arm: tokens for arm, (tokens, _) in available.items() if tokens < budget}
    if short:
        lines = [f"dataset.tokens_per_arm = {budget:,} but not every arm has that many tokens:"]
        lines += [f"  {arm}: {tokens:,} tokens in {docs:,} documents" for arm, (tokens, docs) in available.items()]
        smallest = min(tokens for tokens, _ in available.values())
        lines.append(f"Add input WARCs, or lower dataset.tokens_per_arm to at most {smallest:,}.")
        raise BudgetError("\n".join(lines))


def select_documents(lengths: np.ndarray, budget: int, seed: int) -> tuple[np.ndarray, int]:
    """Indices of whole documents in a seeded random order until `budget` tokens, and how many
    tokens of the last one to keep (it is cut to land exactly on the budget)."""
    order = np.random.default_rng(seed).permutation(len(lengths))
    cumulative = np.cumsum(lengths[order])
    last = int(np.searchsorted(cumulative, budget))  # first position where the sum reaches the budget
    before = int(cumulative[last - 1]) if last else 0
    return order[: last + 1], budget - before


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 24), b""):
            digest.update(block)
    return digest.hexdigest()


class TokenBudget(PipelineStep):
    type = "🔢 - TOKENIZER"
    name = "⚖️ equal token budget"

    def __init__(self, config: ExperimentConfig):
        super().__init__()
        self.config = config

    def cut_arm(self, arm: str, shards: list) -> dict:
        from megatron.core.datasets.indexed_dataset import IndexedDatasetBuilder

        starts = np.cumsum([0] + [len(shard) for shard in shards])  # global index of each shard's first document
        lengths = np.concatenate([s.sequence_lengths for s in shards]).astype(np.int64)
        chosen, last_tokens = select_documents(lengths, self.config.dataset.tokens_per_arm, self.config.dataset.seed)
        ids = selected_document_ids(self.config, arm, chosen)

        prefix = self.config.dataset_prefix(arm)
        prefix.parent.mkdir(parents=True, exist_ok=True)
        builder = IndexedDatasetBuilder(f"{prefix}.bin", dtype=shards[0].index.dtype)
        with gzip.GzipFile(prefix.parent / "selected_ids.txt.gz", "wb", mtime=0) as raw, io.TextIOWrapper(raw) as id_file:
            for n, i in enumerate(chosen):
                s = int(np.searchsorted(starts, i, side="right")) - 1
                tokens = shards[s][int(i - starts[s])]
                if n == len(chosen) - 1:
                    tokens = tokens[:last_tokens]
                builder.add_document(tokens, [len(tokens)])
                id_file.write(ids[n] + "\n")
        builder.finalize(f"{prefix}.idx")
        self.stat_update(f"documents_{arm}", value=len(chosen))
        return {
            "available_tokens": int(lengths.sum()),
            "available_documents": len(lengths),
            "tokens": self.config.dataset.tokens_per_arm,
            "documents": len(chosen),
            "last_document_kept_tokens": int(last_tokens),
            "last_document_tokens": int(lengths[chosen[-1]]),
            "path_prefix": self.config.relative(prefix),
            "bin_sha256": file_sha256(Path(f"{prefix}.bin")),
            "idx_sha256": file_sha256(Path(f"{prefix}.idx")),
            "source_shards": [self.config.relative(p) for p in token_shards(self.config, arm)],
        }

    def run(self, data: DocumentsPipeline = None, rank: int = 0, world_size: int = 1):
        with self.track_time():
            shards = {arm: open_shards(self.config, arm) for arm in self.config.arms}
            check_budget(self.config, available_tokens(shards))
            arms = {arm: self.cut_arm(arm, shards[arm]) for arm in self.config.arms}
        manifest = {
            "tokens_per_arm": self.config.dataset.tokens_per_arm,
            "seed": self.config.dataset.seed,
            "tokenizer": {"path": self.config.relative(self.config.tokenizer_dir()),
                          "sha256": tokenizer_sha256(self.config.tokenizer_dir()),
                          "eos_token": self.config.tokenizer.eos_token},
            "arms": arms,
        }
        manifest_path(self.config).write_text(json.dumps(manifest, indent=2) + "\n")


def manifest_path(config: ExperimentConfig) -> Path:
    return config.output_root / "datasets" / "manifest.json"


def budget_is_stale(config: ExperimentConfig) -> bool:
    """The datasets on disk were cut for other arms (one added, say a reference row), another
    budget or another seed: the budget stage must run again even though it completed."""
    path = manifest_path(config)
    if config.dataset is None or not path.is_file():
        return False
    manifest = json.loads(path.read_text())
    return (set(manifest["arms"]) != set(config.arms) or manifest["tokens_per_arm"] != config.dataset.tokens_per_arm
            or manifest["seed"] != config.dataset.seed)
