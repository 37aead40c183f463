"""Memory and time per document of the stages that see a whole arm at once, and what they need at
the paper's shape.

    python -m bench.global_stages [--scale 1.0] [--out bench/results/global_stages.json]

Each stage (exact-find, minhash-buckets, minhash-cluster, budget; the tokenizer per character of
its sample, and per extracted document it draws the sample from) runs alone in a fresh process on
synthetic inputs of its own format at two sizes: the slope of peak resident memory and of CPU time
between them is the stage's cost per document (the interpreter and libraries cancel out). The
budget's size is what it holds at once: its block and bucket sizes are set to it, over 20 token
shards of an extractor arm and one reference shard four times that size. `corpus/flow/fit.py` holds these figures (rounded up) and
projects them: the table's last part is `configs/paper.yaml` at 46,400 input files with the
documents per file and the near-duplicate share a pilot would measure (assumed here: the figures
of the README's "Running at scale").
"""

from __future__ import annotations

import argparse
import gzip
import json
import multiprocessing as mp
import random
import resource
import tempfile
import time
from pathlib import Path

import numpy as np

STAGES = ("exact-find", "minhash-buckets", "minhash-cluster", "budget", "tokenizer", "tokenizer-scan")
SIZES = {"exact-find": (200_000, 1_000_000), "minhash-buckets": (100_000, 500_000),
         "minhash-cluster": (200_000, 1_000_000), "budget": (1 << 20, 1 << 22), "tokenizer": (1_000_000, 4_000_000),
         "tokenizer-scan": (20_000, 100_000)}
# what one unit of the size is, for memory and for time. The budget at size n holds a block of n
# tokens and a bucket of n (2n held) and writes a budget of 6n tokens (three quarters of its 8n:
# 20 shards of n/5 and a reference shard of 4n)
MEMORY_UNIT = {"budget": ("token held", 2), "tokenizer": ("character", 1), "tokenizer-scan": ("extracted document", 1)}
TIME_UNIT = {"budget": ("token", 6), "tokenizer": ("character", 1), "tokenizer-scan": ("extracted document", 1)}


def exact_find(work: Path, n: int, write: bool):
    from corpus.postprocess.exact_dedup import SIG_DTYPE, Sha256FindDuplicates

    rng = np.random.default_rng(0)
    for shard in range(64 if write else 0):
        sigs = np.zeros(n // 64, dtype=SIG_DTYPE)
        sigs["hash"] = [rng.bytes(32) for _ in range(len(sigs))]
        sigs["record"] = rng.integers(0, 2**63, len(sigs))
        sigs["doc"] = np.arange(len(sigs))
        sigs[: len(sigs) // 10]["hash"] = sigs[0]["hash"]  # a tenth are copies
        sigs.sort(order=["hash", "record", "doc"])
        (work / "sigs" / "0000").mkdir(parents=True, exist_ok=True)
        (work / "sigs" / "0000" / f"{shard:05d}.sigs").write_bytes(sigs.tobytes())
    return lambda: Sha256FindDuplicates(str(work / "sigs"), str(work / "dups")).run(rank=0, world_size=1)


def minhash_buckets(work: Path, n: int, write: bool):
    from datatrove.pipeline.dedup.minhash import MinhashConfig

    from corpus.postprocess.minhash import MinhashBuckets, _signature_dtype

    config = MinhashConfig()
    rng = np.random.default_rng(0)
    folder = work / "sigs" / "bucket_000"
    folder.mkdir(parents=True, exist_ok=True)
    files = 32
    for shard in range(files if write else 0):
        records = np.zeros(n // files, dtype=_signature_dtype(config))
        for name in records.dtype.names[:-1]:
            records[name] = rng.integers(0, 2**40, len(records))
        records["doc"] = np.arange(len(records))
        records[: len(records) // 10]["h0"] = 7  # some equal bands
        records.sort(order=list(records.dtype.names))
        (folder / f"{shard:05d}.minhash.sig").write_bytes(records.tobytes())
    return lambda: MinhashBuckets(str(work / "sigs"), str(work / "buckets"), config, batch_files=files).run(rank=0)


def minhash_cluster(work: Path, n: int, write: bool):
    from corpus.postprocess.minhash import MinhashClusters

    if not write:
        return lambda: MinhashClusters(str(work / "buckets"), str(work / "remove"), str(work / "read")).run()
    rng = np.random.default_rng(0)
    shards, per_shard = 100, n // 100
    (work / "read").mkdir()
    for shard in range(shards):
        (work / "read" / f"{shard:05d}.records").write_bytes(rng.integers(0, 2**63, per_shard).astype("<u8").tobytes())
    nodes = rng.permutation(shards * per_shard)
    (work / "buckets").mkdir()
    for bucket in range(14):  # clusters of 2-5 documents, chained in every bucket
        sizes = rng.integers(2, 6, len(nodes) // 3)
        ends = np.cumsum(sizes)
        ends = ends[ends <= len(nodes)]
        pairs = []
        for start, end in zip(np.concatenate([[0], ends[:-1]]), ends, strict=True):
            members = nodes[start:end]
            pairs.append(np.stack([members[:-1], members[1:]], axis=1))
        pairs = np.concatenate(pairs)
        quad = np.stack([pairs[:, 0] // per_shard, pairs[:, 0] % per_shard, pairs[:, 1] // per_shard, pairs[:, 1] % per_shard],
                        axis=1).astype("<u4")
        (work / "buckets" / f"{bucket:05d}_00.dups").write_bytes(quad.tobytes())
        nodes = rng.permutation(nodes)
    return None


def budget(work: Path, n: int, write: bool):
    from megatron.core.datasets.indexed_dataset import IndexedDatasetBuilder

    from configs.experiment import ExperimentConfig
    from corpus.tokens import budget as cut
    from corpus.tokens.budget import KEYS, TokenBudget

    config = ExperimentConfig.model_validate({
        "name": "bench", "output_root": str(work / "out"), "inputs": {"sample": {}}, "arms": {"a": {"extractor": "trafilatura"}},
        "tokenizer": {"kind": "sentencepiece"}, "dataset": {"tokens_per_arm": 6 * n}})
    if not write:
        cut.BLOCK_TOKENS = cut.BUCKET_TOKENS = n
        return lambda: TokenBudget(config).run()
    rng = np.random.default_rng(0)
    tokens = config.dataset_dir("a") / "tokens"
    tokens.mkdir(parents=True)
    (config.tokenizer_dir()).mkdir(parents=True)
    (config.tokenizer_dir() / "tokenizer.json").write_text("{}")
    for rank, size in enumerate([n // 5] * 20 + [4 * n]):  # an extractor arm's shards, then a reference shard
        prefix = tokens / f"a_{rank:05d}_tokens"
        lengths = rng.integers(20, 600, int(size / 309.5) + 1)
        builder = IndexedDatasetBuilder(f"{prefix}.bin", dtype=np.uint16)
        for length in lengths:
            builder.add_document(np.ones(length, dtype=np.uint16), [int(length)])
        builder.finalize(f"{prefix}.idx")
        keys = np.zeros(len(lengths), dtype=KEYS)
        keys["record"], keys["text"] = rng.integers(0, 2**63, len(lengths)), rng.integers(0, 2**63, len(lengths))
        (tokens / f"a_{rank:05d}_tokens.keys").write_bytes(keys.tobytes())
        with gzip.open(tokens / f"a_{rank:05d}_tokens.ids.gz", "wt") as f:
            f.write("".join(f"<urn:uuid:{rank:08d}-{i:027d}>\n" for i in range(len(lengths))))
    return None


def tokenizer_scan(work: Path, n: int, write: bool):
    from corpus.sample.text import Prose
    from corpus.tokens.tokenizer import arm_documents, first_by_key

    if not write:
        return lambda: first_by_key(arm_documents(work / "output", 0, lambda doc: True), 200_000)
    rng = random.Random(0)
    paragraphs = [Prose(rng).paragraph() for _ in range(300)]
    (work / "output").mkdir()
    for shard in range(10):  # documents of ~3 paragraphs, as an extraction task writes them
        with gzip.open(work / "output" / f"{shard:05d}.jsonl.gz", "wt") as f:
            for i in range(n // 10):
                text = "\n\n".join(rng.sample(paragraphs, 3))
                f.write(json.dumps({"id": f"<urn:uuid:{shard}-{i}>", "text": text, "metadata": {}}) + "\n")
    return None


def tokenizer(work: Path, chars: int, write: bool):
    from configs.tokens import TokenizerConfig
    from corpus.sample.text import Prose
    from corpus.tokens.tokenizer import take_chars, train_sentencepiece

    rng = random.Random(0)
    texts = []
    while sum(map(len, texts)) < chars:
        texts.append("\n\n".join(Prose(rng).paragraph() for _ in range(5)))
    texts = take_chars(texts, chars)  # the stage holds its sample: built in the measured process
    return lambda: train_sentencepiece(texts, TokenizerConfig(kind="sentencepiece", vocab_size=32000), work / "tok")


BUILD = {"exact-find": exact_find, "minhash-buckets": minhash_buckets, "minhash-cluster": minhash_cluster,
         "budget": budget, "tokenizer": tokenizer, "tokenizer-scan": tokenizer_scan}


def write_inputs(stage: str, work: Path, n: int) -> None:
    BUILD[stage](work, n, write=True)


def measure(stage: str, work: Path, n: int, queue) -> None:
    """In a fresh process: the inputs were written by another, so its peak memory is the stage's."""
    from datatrove.utils.logging import logger

    logger.remove()
    run = BUILD[stage](work, n, write=False)
    before = resource.getrusage(resource.RUSAGE_SELF)
    start = time.perf_counter()
    run()
    after = resource.getrusage(resource.RUSAGE_SELF)
    queue.put({"n": n, "seconds": time.perf_counter() - start, "cpu_seconds": after.ru_utime - before.ru_utime,
               "peak_rss_mb": after.ru_maxrss / 1024, "rss_before_mb": before.ru_maxrss / 1024})


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.global_stages", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", type=float, default=1.0, help="multiply the sizes (smaller: quicker, noisier)")
    parser.add_argument("--stages", nargs="+", choices=STAGES, default=list(STAGES))
    parser.add_argument("--out", type=Path, default=Path("bench/results/global_stages.json"))
    args = parser.parse_args()
    ctx = mp.get_context("spawn")
    results = {}
    print(f"{'stage':18s} {'memory':>31s} {'CPU time':>21s} (sizes)")
    for stage in args.stages:
        runs = []
        for n in (int(size * args.scale) for size in SIZES[stage]):
            with tempfile.TemporaryDirectory() as tmp:
                writer = ctx.Process(target=write_inputs, args=(stage, Path(tmp), n))
                writer.start()
                writer.join()
                queue = ctx.Queue()
                proc = ctx.Process(target=measure, args=(stage, Path(tmp), n, queue))
                proc.start()
                runs.append(queue.get())
                proc.join()
        (a, b), dn = runs, runs[1]["n"] - runs[0]["n"]
        # the stage's own memory: its peak above what the process held when it started
        grown = [(r["peak_rss_mb"] - r["rss_before_mb"]) * 2**20 for r in runs]
        memory_unit, per_memory = MEMORY_UNIT.get(stage, ("document", 1))
        time_unit, per_time = TIME_UNIT.get(stage, ("document", 1))
        results[stage] = {"memory_unit": memory_unit, "time_unit": time_unit, "runs": runs,
                          "bytes_per_unit": (grown[1] - grown[0]) / (dn * per_memory),
                          "cpu_seconds_per_unit": (b["cpu_seconds"] - a["cpu_seconds"]) / (dn * per_time)}
        r = results[stage]
        print(f"{stage:18s} {r['bytes_per_unit']:9.1f} B/{memory_unit:19s} "
              f"{1e6 * r['cpu_seconds_per_unit']:8.3f} µs/{time_unit:9s} ({a['n']:,} → {b['n']:,})")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
