"""Both dedups over many shards and tasks, step by step, against a brute-force answer on the same
documents: copies in the first, a middle and the last shard; more finder tasks and buckets than
one; MinHash's bucket merge in several batches. Of every group of copies, the copy whose record
hash is lowest is kept: the same record in every arm and with any number of tasks."""

import random

import pytest
from datatrove.data import Document
from datatrove.pipeline.dedup import MinhashDedupFilter, MinhashDedupSignature
from datatrove.pipeline.dedup.minhash import MinhashConfig

from corpus.postprocess.exact_dedup import (
    Sha256DedupFilter,
    Sha256DedupSignature,
    Sha256FindDuplicates,
    normalised_text,
)
from corpus.postprocess.minhash import MinhashBuckets, MinhashClusters, SnapshotTags, snapshot_tag
from corpus.postprocess.positions import DocumentsRead, PositionsChanged
from corpus.sample.text import Prose
from corpus.stage import record_hash

SHARDS = 8
SNAPSHOTS = ["crawl-data/CC-MAIN-2024-10/segments/1/warc/a.warc.gz", "crawl-data/CC-MAIN-2024-18/segments/1/warc/b.warc.gz"]


def corpus(seed: int = 0, per_shard: int = 40) -> list[list[Document]]:
    """SHARDS shards of articles; ~20% are exact copies (up to case and layout) and ~10% near
    copies (a sentence added) of articles anywhere, the first, middle and last shards included."""
    rng = random.Random(seed)
    prose = Prose(rng)
    originals, shards = [], [[] for _ in range(SHARDS)]
    for shard in range(SHARDS):
        for position in range(per_shard):
            roll = rng.random()
            if originals and roll < 0.2:
                text = rng.choice(originals).upper().replace("\n\n", "\n \n")
            elif originals and roll < 0.3:
                text = rng.choice(originals) + "\n\n" + prose.sentence()
            else:
                text = "\n\n".join(prose.paragraph((4, 6)) for _ in range(3))
                originals.append(text)
            shards[shard].append(Document(text=text, id=f"{shard}-{position}",
                                          metadata={"warc_file": SNAPSHOTS[(shard + position) % 2]}))
    for shard in (0, SHARDS // 2, SHARDS - 1):  # a copy of the corpus's first article in these shards
        shards[shard].insert(3, Document(text=originals[0].lower(), id=f"{shard}-copy", metadata={"warc_file": SNAPSHOTS[0]}))
    return shards


def kept_ids(shards, step_for_shard) -> set[str]:
    return {doc.id for rank, docs in enumerate(shards) for doc in step_for_shard(rank).run(iter(docs), rank, len(shards))}


def test_exact_dedup_keeps_one_copy_of_every_text_whatever_shard_its_copies_are_in(tmp_path):
    shards = corpus()
    first: dict[str, str] = {}  # brute force: of equal texts, the lowest record hash
    for docs in shards:
        for doc in docs:
            text = normalised_text(doc.text)
            if text not in first or record_hash(doc.id) < record_hash(first[text]):
                first[text] = doc.id
    finder_tasks = 3
    for rank, docs in enumerate(shards):
        Sha256DedupSignature(str(tmp_path / "sigs"), finder_tasks).run(iter(docs), rank, SHARDS)
    for task in range(finder_tasks):
        Sha256FindDuplicates(str(tmp_path / "sigs"), str(tmp_path / "dups")).run(rank=task, world_size=finder_tasks)
    kept = kept_ids(shards, lambda rank: Sha256DedupFilter(str(tmp_path / "dups")))
    assert kept == set(first.values())
    assert len(kept) < sum(map(len, shards)) - 60  # the corpus has copies in every shard


def minhash_kept(shards, folder, config: MinhashConfig, by_snapshot: bool, batch_files: int) -> set[str]:
    for rank, docs in enumerate(shards):
        read = DocumentsRead(str(folder / "read"), check=False).run(iter(docs), rank)
        tagged = SnapshotTags(str(folder / "tags")).run(read, rank) if by_snapshot else read
        MinhashDedupSignature(str(folder / "sigs"), config=config).run(tagged, rank, SHARDS)
    for bucket in range(config.num_buckets):
        MinhashBuckets(str(folder / "sigs"), str(folder / "buckets"), config,
                       tags_folder=str(folder / "tags") if by_snapshot else None, batch_files=batch_files).run(rank=bucket)
    MinhashClusters(str(folder / "buckets"), str(folder / "remove"), records_folder=str(folder / "read")).run()
    return kept_ids(shards, lambda rank: MinhashDedupFilter(str(folder / "remove")))


def brute_force_minhash(shards, config: MinhashConfig, by_snapshot: bool) -> set[str]:
    """Documents equal in any bucket's hashes (and snapshot) are one cluster; its document of the
    lowest record hash is kept."""
    signer = MinhashDedupSignature("unused", config=config)
    parent: dict[tuple[int, int], tuple[int, int]] = {}
    rank = {(shard, position): (record_hash(doc.id), shard, position)
            for shard, docs in enumerate(shards) for position, doc in enumerate(docs)}

    def root(x):
        while parent.setdefault(x, x) != x:
            x = parent[x]
        return x

    seen: dict = {}
    for shard, docs in enumerate(shards):
        for position, doc in enumerate(docs):
            shingles = signer.get_shingles(doc.text)
            if not shingles.size:
                continue
            tag = snapshot_tag(doc.metadata["warc_file"]) if by_snapshot else 0
            for bucket, hashes in enumerate(signer.get_signature(shingles)):
                key = (bucket, tag, tuple(hashes))
                if key in seen:
                    a, b = sorted((root(seen[key]), root((shard, position))), key=rank.get)
                    if a != b:
                        parent[b] = a
                else:
                    seen[key] = (shard, position)
    return {doc.id for shard, docs in enumerate(shards) for position, doc in enumerate(docs)
            if root((shard, position)) == (shard, position)}


@pytest.mark.parametrize("by_snapshot", [False, True])
def test_minhash_keeps_one_document_per_cluster_whatever_the_batches(tmp_path, by_snapshot):
    shards = corpus(seed=1, per_shard=25)
    config = MinhashConfig(num_buckets=4, hashes_per_bucket=4)
    expected = brute_force_minhash(shards, config, by_snapshot)
    assert minhash_kept(shards, tmp_path / "one", config, by_snapshot, batch_files=SHARDS) == expected
    assert minhash_kept(shards, tmp_path / "batches", config, by_snapshot, batch_files=3) == expected
    assert len(expected) < sum(map(len, shards)) - 30


def test_a_filter_fails_when_its_documents_are_not_those_of_its_signatures(tmp_path):
    docs = corpus(per_shard=10)[0]
    list(DocumentsRead(str(tmp_path), check=False).run(iter(docs), rank=0))
    assert len(list(DocumentsRead(str(tmp_path), check=True).run(iter(docs), rank=0))) == len(docs)
    n = len(docs)
    with pytest.raises(PositionsChanged, match=rf"task 0 read {n - 1} documents where its dedup signatures were computed "
                                               rf"from {n}"):
        list(DocumentsRead(str(tmp_path), check=True).run(iter(docs[1:]), rank=0))
    with pytest.raises(PositionsChanged, match="but not those"):
        list(DocumentsRead(str(tmp_path), check=True).run(iter(docs[1:] + docs[:1]), rank=0))
