"""Cut every arm to exactly the same number of training tokens, one token shard at a time.

The tokenisation stage writes, beside each `.bin/.idx` shard, `DocumentKeys`: every document's
record id (`.ids.gz`) and a 64-bit hash of it (`.keys`), in the shard's order. `TokenBudget` is a
one-task datatrove step run after every arm is tokenised (end-of-document token appended). Each
arm's documents are ordered by a hash of (`dataset.seed`, record id): the draw depends on neither
the number of tasks nor the order of files nor the other arms, and a record that survived in
several arms is preferred alike in all of them (a paired design: arms differ by extraction, not
by which records were drawn). Whole documents are taken in that order until the budget is
reached, the last one cut to land exactly on it, in three passes over the shards with one shard
in memory at a time:

1. a histogram of the keys' top 16 bits, weighted by tokens, finds the bin the budget falls in
   (and checks that every arm has the budget before any is cut);
2. the documents of that bin, sorted by key, give the last document and how much of it to keep;
3. the selected documents, in shard order, are copied to
   `<output_root>/datasets/<arm>/<arm>_text_document.{bin,idx}` and their record ids to
   `selected_ids.txt.gz` beside it (training order; Megatron's GPTDataset shuffles its samples).

`<output_root>/datasets/manifest.json` records the budget, the tokens of every arm, the
tokenizer's hash and the files written.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from datatrove.data import DocumentsPipeline
from datatrove.io import DataFolderLike, get_datafolder
from datatrove.pipeline.base import PipelineStep

from configs.experiment import ExperimentConfig
from corpus.shims import write_megatron_index
from corpus.stage import record_hash
from corpus.tokens.tokenizer import tokenizer_sha256

SHIFT = 48  # the histogram's bins are the keys' top 64 - SHIFT bits


class BudgetError(ValueError):
    """An arm has fewer tokens than the budget."""


def draw_keys(hashes: np.ndarray, seed: int) -> np.ndarray:
    """The order of the seeded draw: splitmix64 of each record's hash mixed with the seed."""
    with np.errstate(over="ignore"):
        z = hashes.astype(np.uint64) ^ _splitmix64(np.array([seed], dtype=np.uint64))[0]
        return _splitmix64(z)


def _splitmix64(x: np.ndarray) -> np.ndarray:
    z = x + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


class DocumentKeys(PipelineStep):
    """In the tokenisation stage, right before the tokenizer (which writes every document it is
    given, in order): each document's record id and its 64-bit hash, by position, beside the shard."""

    type = "🔢 - TOKENIZER"
    name = "🔑 Record ids of the token shard"

    def __init__(self, output_folder: DataFolderLike, save_filename: str):
        super().__init__()
        self.output_folder = get_datafolder(output_folder)
        self.save_filename = save_filename

    def run(self, data: DocumentsPipeline, rank: int = 0, world_size: int = 1) -> DocumentsPipeline:
        prefix = f"{self.save_filename}_{rank:05d}_tokens"  # datatrove's MegatronDocumentTokenizer's name
        hashes = []
        with self.output_folder.open(f"{prefix}.ids.gz", "wt", compression="gzip") as ids:
            for doc in data:
                ids.write(f"{doc.id}\n")
                hashes.append(record_hash(str(doc.id)))
                yield doc
        with self.output_folder.open(f"{prefix}.keys", "wb") as f:
            f.write(np.array(hashes, dtype="<u8").tobytes())


@dataclass
class Shard:
    """One tokenisation task's output: `<prefix>.{bin,idx}` and the record ids beside them."""

    prefix: str

    def open(self):
        from megatron.core.datasets.indexed_dataset import IndexedDataset

        return IndexedDataset(self.prefix)

    def lengths(self) -> np.ndarray:
        """Tokens of each document (a copy: megatron unmaps the index when its dataset goes)."""
        dataset = self.open()
        return dataset.sequence_lengths.astype(np.int64)

    def dtype(self):
        return self.open().index.dtype

    def keys(self, seed: int) -> np.ndarray:
        return draw_keys(np.fromfile(f"{self.prefix}.keys", dtype="<u8"), seed)

    def ids(self) -> list[str]:
        with gzip.open(f"{self.prefix}.ids.gz", "rt", encoding="utf-8") as f:
            return f.read().splitlines()


def token_shards(config: ExperimentConfig, arm: str) -> list[Shard]:
    """The tokenisation stage's outputs of an arm, in task order; a task that got no documents
    (more tasks than input files) leaves an empty `.bin`, which is no shard."""
    return [Shard(str(p.with_suffix(""))) for p in sorted((config.dataset_dir(arm) / "tokens").glob("*.idx"))
            if p.with_suffix(".bin").stat().st_size > 0]


@dataclass
class Histogram:
    """Pass 1 over an arm: tokens and documents per bin of the draw keys' top bits."""

    tokens: np.ndarray
    documents: np.ndarray

    @property
    def total_tokens(self) -> int:
        return int(self.tokens.sum())

    @property
    def total_documents(self) -> int:
        return int(self.documents.sum())


def histogram(shards: list[Shard], seed: int) -> Histogram:
    bins = 1 << (64 - SHIFT)
    tokens, documents = np.zeros(bins, dtype=np.int64), np.zeros(bins, dtype=np.int64)
    for shard in shards:
        lengths = shard.lengths()
        top = (shard.keys(seed) >> np.uint64(SHIFT)).astype(np.int64)
        tokens += np.bincount(top, weights=lengths, minlength=bins).astype(np.int64)
        documents += np.bincount(top, minlength=bins)
    return Histogram(tokens, documents)


def check_budget(config: ExperimentConfig, available: dict[str, tuple[int, int]]) -> None:
    budget = config.dataset.tokens_per_arm
    short = {arm: tokens for arm, (tokens, _) in available.items() if tokens < budget}
    if short:
        lines = [f"dataset.tokens_per_arm = {budget:,} but not every arm has that many tokens:"]
        lines += [f"  {arm}: {tokens:,} tokens in {docs:,} documents" for arm, (tokens, docs) in available.items()]
        smallest = min(tokens for tokens, _ in available.values())
        lines.append(f"Add input WARCs, or lower dataset.tokens_per_arm to at most {smallest:,}.")
        raise BudgetError("\n".join(lines))


@dataclass
class Cut:
    """Where the budget falls: every document with a draw key below `key` is taken, and of those
    with key `key`, the ones at `last` (shard, position) and before it; the last keeps
    `last_tokens` of its `last_length` tokens."""

    key: int
    last: tuple[int, int]
    last_tokens: int
    last_length: int
    documents: int


def find_cut(shards: list[Shard], hist: Histogram, budget: int, seed: int) -> Cut:
    """Pass 2: the documents of the bin the budget falls in, sorted by (key, shard, position)."""
    cumulative = np.cumsum(hist.tokens)
    b = int(np.searchsorted(cumulative, budget))  # first bin where the running total reaches the budget
    before = int(cumulative[b - 1]) if b else 0
    keys, lengths, where = [], [], []
    for s, shard in enumerate(shards):
        shard_keys = shard.keys(seed)
        inside = np.flatnonzero((shard_keys >> np.uint64(SHIFT)) == np.uint64(b))
        keys.append(shard_keys[inside])
        lengths.append(shard.lengths()[inside])
        where.append(np.stack([np.full(len(inside), s), inside], axis=1))
    keys, lengths, where = np.concatenate(keys), np.concatenate(lengths), np.concatenate(where)
    order = np.lexsort((where[:, 1], where[:, 0], keys))
    running = before + np.cumsum(lengths[order])
    j = int(np.searchsorted(running, budget))
    last = order[j]
    kept_before = int(running[j - 1]) if j else before
    return Cut(key=int(keys[last]), last=(int(where[last, 0]), int(where[last, 1])), last_tokens=budget - kept_before,
               last_length=int(lengths[last]), documents=int(hist.documents[:b].sum()) + j + 1)


def selected(shard_keys: np.ndarray, s: int, cut: Cut) -> np.ndarray:
    """Positions of a shard's documents that the cut takes."""
    key = np.uint64(cut.key)
    take = shard_keys < key
    ties = np.flatnonzero(shard_keys == key)
    take[ties[[(s, int(p)) <= cut.last for p in ties]]] = True
    return np.flatnonzero(take)


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

    def cut_arm(self, arm: str, shards: list[Shard], hist: Histogram) -> dict:
        """Passes 2 and 3 for one arm."""
        budget, seed = self.config.dataset.tokens_per_arm, self.config.dataset.seed
        cut = find_cut(shards, hist, budget, seed)
        prefix = self.config.dataset_prefix(arm)
        prefix.parent.mkdir(parents=True, exist_ok=True)
        lengths_file = Path(f"{prefix}.lengths")
        dtype = None
        with open(f"{prefix}.bin", "wb") as bin_file, open(lengths_file, "wb") as lengths_out, \
                gzip.GzipFile(prefix.parent / "selected_ids.txt.gz", "wb", mtime=0) as raw, io.TextIOWrapper(raw) as ids_out:
            for s, shard in enumerate(shards):
                dtype = shard.dtype()
                take = selected(shard.keys(seed), s, cut)
                if not len(take):
                    continue
                lengths = shard.lengths()
                chosen = np.zeros(len(lengths), dtype=bool)
                chosen[take] = True
                keep = np.repeat(chosen, lengths)  # the selected documents' tokens (a shard's documents lie in order)
                out_lengths = lengths[take]
                if cut.last[0] == s:  # the last document: only its first tokens
                    p = cut.last[1]
                    start = int(lengths[:p].sum())
                    keep[start + cut.last_tokens:start + lengths[p]] = False
                    out_lengths[np.searchsorted(take, p)] = cut.last_tokens
                tokens = np.memmap(f"{shard.prefix}.bin", dtype=dtype, mode="r")
                bin_file.write(np.asarray(tokens[keep]).tobytes())
                lengths_out.write(out_lengths.astype(np.int32).tobytes())
                names = shard.ids()
                ids_out.write("".join(f"{names[p]}\n" for p in take))
                del tokens
        write_megatron_index(f"{prefix}.idx", dtype, lengths_file, cut.documents)
        lengths_file.unlink()
        self.stat_update(f"documents_{arm}", value=cut.documents)
        return {
            "available_tokens": hist.total_tokens,
            "available_documents": hist.total_documents,
            "tokens": budget,
            "documents": cut.documents,
            "last_document_kept_tokens": cut.last_tokens,
            "last_document_tokens": cut.last_length,
            "path_prefix": self.config.relative(prefix),
            "bin_sha256": file_sha256(Path(f"{prefix}.bin")),
            "idx_sha256": file_sha256(Path(f"{prefix}.idx")),
            "source_shards": [self.config.relative(shard.prefix) for shard in shards],
        }

    def run(self, data: DocumentsPipeline = None, rank: int = 0, world_size: int = 1):
        with self.track_time():
            shards = {arm: token_shards(self.config, arm) for arm in self.config.arms}
            hists = {arm: histogram(arm_shards, self.config.dataset.seed) for arm, arm_shards in shards.items()}
            check_budget(self.config, {arm: (h.total_tokens, h.total_documents) for arm, h in hists.items()})
            arms = {arm: self.cut_arm(arm, shards[arm], hists[arm]) for arm in self.config.arms}
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
