"""Cut every arm to exactly the same number of training tokens, in memory that does not grow
with the size of a token shard or of the arm.

The tokenisation stage writes, beside each `.bin/.idx` shard, `DocumentKeys`: every document's
record id (`.ids.gz`), and a 64-bit hash of its record id and one of its text (`.keys`), in the
shard's order. `TokenBudget` is a one-task datatrove step run after every arm is tokenised
(end-of-document token appended). Each arm's documents are ordered by a hash of (`dataset.seed`,
record id), then by the text's hash: the draw depends on neither the number of tasks nor the
order of files nor the other arms, and a record that survived in several arms is preferred alike
in all of them (a paired design: arms differ by extraction, not by which records were drawn).
Whole documents are taken in that order until the budget is reached, the last one cut to land
exactly on it, and they are written in that order too, so the dataset's bytes are a function of
the documents and the seed alone, whatever the split of any stage before it. Four passes, each
reading a shard a block at a time (at most `BLOCK_DOCUMENTS` documents and `BLOCK_TOKENS` tokens):

1. a histogram of the draw keys' top 16 bits, weighted by tokens, finds the bin the budget falls
   in (and checks that every arm has the budget before any is cut);
2. the documents of that bin, in order, give the last document and how much of it to keep;
3. the selected documents go, in the order they are read, into the part of
   `<output_root>/datasets/<arm>/<arm>_text_document.bin` their bucket (a run of bins of at most
   `BUCKET_TOKENS` selected tokens, whose place in the file the histogram gives) fills, and their
   keys, lengths and record ids to a spill file per bucket;
4. each bucket is read back, put in order, and written over itself; its lengths and record ids
   follow (`.idx`; `selected_ids.txt.gz`, the training order).

`<output_root>/datasets/manifest.json` records the budget, the tokens of every arm, the
tokenizer's hash and the files written.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np
from datatrove.data import DocumentsPipeline
from datatrove.io import DataFolderLike, get_datafolder
from datatrove.pipeline.base import PipelineStep

from configs.durable import sha256_once, write_atomically
from configs.experiment import ExperimentConfig
from corpus.shims import write_megatron_index
from corpus.stage import record_hash
from corpus.tokens.tokenizer import tokenizer_sha256

SHIFT = 48  # the histogram's bins are the keys' top 64 - SHIFT bits
# what the budget holds at once (corpus/flow/fit.py projects its memory from these): a block of a
# shard while reading it, a bucket of the output while putting it in order
BLOCK_DOCUMENTS = 1 << 18
BLOCK_TOKENS = 1 << 24
BUCKET_TOKENS = 1 << 26
SPILL_BYTES = 64 << 20  # keys and record ids buffered before they are appended to their bucket's spill files
KEYS = np.dtype([("record", "<u8"), ("text", "<u8")])  # a document's entry in a shard's `.keys`
SPILLED = np.dtype([("key", "<u8"), ("text", "<u8"), ("length", "<u4")])  # a selected document's in a bucket's


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
    given, in order): each document's record id, and the hashes of its record id and text, by
    position, beside the shard. The text's hash orders documents of one record id (a reference
    corpus may repeat an id) the same way at every split."""

    type = "🔢 - TOKENIZER"
    name = "🔑 Record ids of the token shard"

    def __init__(self, output_folder: DataFolderLike, save_filename: str):
        super().__init__()
        self.output_folder = get_datafolder(output_folder)
        self.save_filename = save_filename

    def run(self, data: DocumentsPipeline, rank: int = 0, world_size: int = 1) -> DocumentsPipeline:
        prefix = f"{self.save_filename}_{rank:05d}_tokens"  # datatrove's MegatronDocumentTokenizer's name
        keys = []
        with self.output_folder.open(f"{prefix}.ids.gz", "wt", compression="gzip") as ids:
            for doc in data:
                ids.write(f"{doc.id}\n")
                keys.append((record_hash(str(doc.id)), record_hash(doc.text)))
                yield doc
        with self.output_folder.open(f"{prefix}.keys", "wb") as f:
            f.write(np.array(keys, dtype=KEYS).tobytes())


@dataclass
class Block:
    """Consecutive documents of a shard: the first one's position and token offset, and per
    document its draw key, text hash and tokens."""

    start: int
    token_start: int
    keys: np.ndarray
    texts: np.ndarray
    lengths: np.ndarray


@dataclass
class Shard:
    """One tokenisation task's output: `<prefix>.{bin,idx}` and the record ids beside them."""

    prefix: str

    def open(self):
        from megatron.core.datasets.indexed_dataset import IndexedDataset

        return IndexedDataset(self.prefix)

    @cached_property
    def dtype(self) -> np.dtype:
        return np.dtype(self.open().index.dtype)

    def blocks(self, seed: int) -> Iterator[Block]:
        """The shard's documents a block at a time (the index is memory-mapped: only a block's
        lengths are read; the dataset is held: megatron unmaps the index when it goes)."""
        dataset = self.open()
        lengths_of = dataset.sequence_lengths
        keys_path = f"{self.prefix}.keys"
        if Path(keys_path).stat().st_size != len(lengths_of) * KEYS.itemsize:
            raise BudgetError(f"{keys_path}: not {KEYS.itemsize} bytes for each of the shard's {len(lengths_of):,} documents "
                              "(written by an older version of the tokenisation stage?): remove the arm's tokens/ and "
                              "logs/tokenize/ folders and run the flow again")
        start = token_start = 0
        while start < len(lengths_of):
            lengths = lengths_of[start:start + BLOCK_DOCUMENTS].astype(np.int64)
            count = max(1, int(np.searchsorted(np.cumsum(lengths), BLOCK_TOKENS, side="right")))
            lengths = lengths[:count]
            keys = np.fromfile(keys_path, dtype=KEYS, count=count, offset=start * KEYS.itemsize)
            yield Block(start, token_start, draw_keys(keys["record"], seed), keys["text"], lengths)
            start += count
            token_start += int(lengths.sum())

    def tokens(self, block: Block) -> np.ndarray:
        """The tokens of a block's documents, end to end (read, not mapped: a mapped shard counts
        in the task's memory as it is read)."""
        with open(f"{self.prefix}.bin", "rb") as f:
            f.seek(block.token_start * self.dtype.itemsize)
            return np.frombuffer(f.read(int(block.lengths.sum()) * self.dtype.itemsize), dtype=self.dtype)

    def ids(self) -> Iterator[str]:
        with gzip.open(f"{self.prefix}.ids.gz", "rt", encoding="utf-8") as f:
            for line in f:
                yield line.rstrip("\n")


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
        for block in shard.blocks(seed):
            top = (block.keys >> np.uint64(SHIFT)).astype(np.int64)
            tokens += np.bincount(top, weights=block.lengths, minlength=bins).astype(np.int64)
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
    """Where the budget falls, in the order (draw key, text hash): every document before
    (`key`, `text`) is taken, and `equal` of those at it (copies of one document: the same record
    id and text), the last of which keeps `last_tokens` of its `last_length` tokens."""

    key: int
    text: int
    equal: int
    last_tokens: int
    last_length: int
    documents: int
    bin: int
    tokens_before_bin: int


def find_cut(shards: list[Shard], hist: Histogram, budget: int, seed: int) -> Cut:
    """Pass 2: the documents of the bin the budget falls in, in order."""
    cumulative = np.cumsum(hist.tokens)
    b = int(np.searchsorted(cumulative, budget))  # first bin where the running total reaches the budget
    before = int(cumulative[b - 1]) if b else 0
    keys, texts, lengths = [], [], []
    for shard in shards:
        for block in shard.blocks(seed):
            inside = (block.keys >> np.uint64(SHIFT)) == np.uint64(b)
            keys.append(block.keys[inside])
            texts.append(block.texts[inside])
            lengths.append(block.lengths[inside])
    keys, texts, lengths = np.concatenate(keys), np.concatenate(texts), np.concatenate(lengths)
    order = np.lexsort((texts, keys))
    keys, texts, lengths = keys[order], texts[order], lengths[order]
    running = before + np.cumsum(lengths)
    j = int(np.searchsorted(running, budget))
    same = (keys[: j + 1] == keys[j]) & (texts[: j + 1] == texts[j])
    kept_before = int(running[j - 1]) if j else before
    return Cut(key=int(keys[j]), text=int(texts[j]), equal=int(same.sum()), last_tokens=budget - kept_before,
               last_length=int(lengths[j]), documents=int(hist.documents[:b].sum()) + j + 1, bin=b, tokens_before_bin=before)


def buckets(hist: Histogram, cut: Cut, budget: int) -> tuple[np.ndarray, np.ndarray]:
    """Runs of bins of at most BUCKET_TOKENS selected tokens (a bin more, alone): each bin's
    bucket, and where each bucket starts in the output, in tokens (the last entry: the budget)."""
    selected = hist.tokens[: cut.bin + 1].copy()
    selected[cut.bin] = budget - cut.tokens_before_bin
    of_bin = np.full(len(hist.tokens), -1, dtype=np.int64)
    starts, held = [0], 0
    for b, tokens in enumerate(selected.tolist()):
        if held and held + tokens > BUCKET_TOKENS:
            starts.append(starts[-1] + held)
            held = 0
        of_bin[b] = len(starts) - 1
        held += tokens
    return of_bin, np.array([*starts, budget], dtype=np.int64)


class Spill:
    """Per bucket, the keys and lengths (SPILLED) and the record ids of its documents, in the order
    they were read, buffered in memory up to SPILL_BYTES, then appended to `<bucket>.keys` and
    `<bucket>.ids` under `folder`."""

    def __init__(self, folder: Path):
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        self.folder, self.buffers, self.held = folder, {}, 0

    def add(self, bucket: int, spilled: np.ndarray, ids: list[str]) -> None:
        keys, names = self.buffers.setdefault(bucket, ([], []))
        keys.append(spilled.tobytes())
        names.append("".join(f"{name}\n" for name in ids).encode())
        self.held += len(keys[-1]) + len(names[-1])
        if self.held > SPILL_BYTES:
            self.flush()

    def flush(self) -> None:
        for bucket, (keys, names) in self.buffers.items():
            with open(self.folder / f"{bucket:06d}.keys", "ab") as f:
                f.write(b"".join(keys))
            with open(self.folder / f"{bucket:06d}.ids", "ab") as f:
                f.write(b"".join(names))
        self.buffers, self.held = {}, 0

    def read(self, bucket: int) -> tuple[np.ndarray, list[str]]:
        keys, ids = self.folder / f"{bucket:06d}.keys", self.folder / f"{bucket:06d}.ids"
        if not keys.is_file():
            return np.zeros(0, dtype=SPILLED), []
        return np.fromfile(keys, dtype=SPILLED), ids.read_text(encoding="utf-8").splitlines()


def scatter(shards: list[Shard], seed: int, cut: Cut, of_bin: np.ndarray, starts: np.ndarray, out: int,
            spill: Spill) -> None:
    """Pass 3: every selected document's tokens to the next free place of its bucket in `out` (a
    file descriptor), its keys and record id to the bucket's spill files."""
    key, text = np.uint64(cut.key), np.uint64(cut.text)
    cursor = starts[:-1].copy()
    equal_seen = 0
    for shard in shards:
        itemsize = shard.dtype.itemsize
        ids = shard.ids()
        for block in shard.blocks(seed):
            names = [next(ids) for _ in range(len(block.lengths))]
            take = (block.keys < key) | ((block.keys == key) & (block.texts < text))
            lengths = block.lengths.copy()
            for p in np.flatnonzero((block.keys == key) & (block.texts == text)):
                equal_seen += 1
                take[p] = equal_seen <= cut.equal
                if equal_seen == cut.equal:  # copies of one document: which one is cut makes no difference
                    lengths[p] = cut.last_tokens
            chosen = np.flatnonzero(take)
            if not len(chosen):
                continue
            tokens = shard.tokens(block)
            offsets = np.concatenate([[0], np.cumsum(block.lengths)[:-1]])
            bucket_of = of_bin[(block.keys[chosen] >> np.uint64(SHIFT)).astype(np.int64)]
            by_bucket = np.argsort(bucket_of, kind="stable")
            bounds = np.flatnonzero(np.diff(bucket_of[by_bucket])) + 1
            for run in np.split(chosen[by_bucket], bounds):
                bucket = int(of_bin[int(block.keys[run[0]] >> np.uint64(SHIFT))])
                data = np.concatenate([tokens[offsets[p]:offsets[p] + lengths[p]] for p in run]).tobytes()
                os.pwrite(out, data, int(cursor[bucket]) * itemsize)
                cursor[bucket] += len(data) // itemsize
                spilled = np.empty(len(run), dtype=SPILLED)
                spilled["key"], spilled["text"], spilled["length"] = block.keys[run], block.texts[run], lengths[run]
                spill.add(bucket, spilled, [names[p] for p in run])
    spill.flush()
    if not np.array_equal(cursor, starts[1:]):
        raise RuntimeError("the token shards changed while the budget read them: run the budget again")


def gather(spill: Spill, starts: np.ndarray, dtype: np.dtype, out: int, lengths_out, ids_out) -> None:
    """Pass 4: each bucket of `out` read back, its documents put in order (draw key, text hash; of
    copies of one document, the one cut short last) and written over it; lengths and record ids
    in the same order."""
    for bucket in range(len(starts) - 1):
        spilled, ids = spill.read(bucket)
        start, size = int(starts[bucket]), int(starts[bucket + 1] - starts[bucket])
        region = np.frombuffer(os.pread(out, size * dtype.itemsize, start * dtype.itemsize), dtype=dtype)
        lengths = spilled["length"].astype(np.int64)
        offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]])
        order = np.lexsort((-lengths, spilled["text"], spilled["key"]))
        data = np.concatenate([region[offsets[p]:offsets[p] + lengths[p]] for p in order]) if len(order) else region
        os.pwrite(out, data.tobytes(), start * dtype.itemsize)
        lengths_out.write(lengths[order].astype(np.int32).tobytes())
        ids_out.write("".join(f"{ids[p]}\n" for p in order))


class TokenBudget(PipelineStep):
    type = "🔢 - TOKENIZER"
    name = "⚖️ equal token budget"

    def __init__(self, config: ExperimentConfig):
        super().__init__()
        self.config = config

    def cut_arm(self, arm: str, shards: list[Shard], hist: Histogram) -> dict:
        """Passes 2 to 4 for one arm."""
        budget, seed = self.config.dataset.tokens_per_arm, self.config.dataset.seed
        cut = find_cut(shards, hist, budget, seed)
        of_bin, starts = buckets(hist, cut, budget)
        prefix = self.config.dataset_prefix(arm)
        prefix.parent.mkdir(parents=True, exist_ok=True)
        dtype = shards[0].dtype
        lengths_file = Path(f"{prefix}.lengths")
        spill = Spill(prefix.parent / "budget-spill")
        out = os.open(f"{prefix}.bin", os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.ftruncate(out, budget * dtype.itemsize)
            scatter(shards, seed, cut, of_bin, starts, out, spill)
            with open(lengths_file, "wb") as lengths_out, gzip.GzipFile(prefix.parent / "selected_ids.txt.gz", "wb", mtime=0) \
                    as raw, io.TextIOWrapper(raw, encoding="utf-8") as ids_out:
                gather(spill, starts, dtype, out, lengths_out, ids_out)
        finally:
            os.close(out)
        shutil.rmtree(spill.folder)
        write_megatron_index(f"{prefix}.idx", dtype.type, lengths_file, cut.documents)
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
            # hashed once here and stamped: training's check of them reads the stamps
            "bin_sha256": sha256_once(Path(f"{prefix}.bin"))[0],
            "idx_sha256": sha256_once(Path(f"{prefix}.idx"))[0],
            "source": self.config.relative(self.config.dataset_dir(arm) / "tokens"),
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
        write_atomically(manifest_path(self.config), json.dumps(manifest, indent=2) + "\n")


def manifest_path(config: ExperimentConfig) -> Path:
    return config.datasets_manifest()


def budget_is_stale(config: ExperimentConfig) -> bool:
    """The datasets on disk were cut for other arms (one added, say a reference row), another
    budget or another seed: the budget stage must run again even though it completed."""
    path = manifest_path(config)
    if config.dataset is None or not path.is_file():
        return False
    manifest = json.loads(path.read_text())
    return (set(manifest["arms"]) != set(config.arms) or manifest["tokens_per_arm"] != config.dataset.tokens_per_arm
            or manifest["seed"] != config.dataset.seed)
