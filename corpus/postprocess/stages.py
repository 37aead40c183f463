"""Post-processing as datatrove stages, seven per arm, the same for every arm (only the folders
differ), built from the one `postprocess` block of the config:

    exact-signatures ─► exact-find (finder_tasks) ─► filter (exact dedup, language, Gopher,
    URL and keyword blocklists) ─► minhash-signatures ─► minhash-buckets (one task per bucket) ─►
    minhash-cluster (one task) ─► minhash-filter (the post-processed documents and their record ids)

An extractor arm starts from its extracted documents; a reference corpus with `postprocess: true`
from what its read stage wrote. The extracted documents' tokens are counted on the way in, so the
ledger follows tokens through every step. The stages that see every document of the arm at once
(exact-find, minhash-buckets, minhash-cluster) have resources of their own in the config; both
dedups check that their filter reads what their signatures were computed from
(corpus.postprocess.positions).
"""

from __future__ import annotations

from datatrove.pipeline.dedup import MinhashDedupSignature
from datatrove.pipeline.dedup.minhash import MinhashConfig
from datatrove.pipeline.tokens import TokensCounter

from configs.base import Resources, TaskResources
from configs.experiment import ExperimentConfig
from corpus.postprocess.exact_dedup import Sha256DedupSignature, Sha256FindDuplicates
from corpus.postprocess.minhash import MinhashBuckets, MinhashClusters, SnapshotTags
from corpus.postprocess.positions import DocumentsRead
from corpus.postprocess.steps import FILTER_STAGE, MINHASH_FILTER_STAGE, enabled_steps, filter_steps
from corpus.stage import RecordIdWriter, Stage, documents_reader, documents_writer, label

PART = "postprocess"


def global_resources(task: TaskResources, tasks: int) -> Resources:
    """A stage that sees every document of the arm: its tasks all run at once, each where `task` says."""
    return Resources(tasks=tasks, workers=tasks, **task.model_dump())


def postprocessed_arms(config: ExperimentConfig) -> list[str]:
    """Every arm but the reference corpora that join after post-processing."""
    return [arm for arm in config.arms if arm in config.extractor_arms or config.reference_arms[arm].postprocess]


def arm_stages(config: ExperimentConfig, arm: str) -> list[Stage]:
    post, post_dir = config.postprocess, config.post_dir(arm)
    logs, res = post_dir / "logs", config.document_resources(arm)  # a reference arm: a task per file it read
    upstream = label("extract" if arm in config.extractor_arms else "read", arm)
    minhash = MinhashConfig(n_grams=post.minhash.n_grams, num_buckets=post.minhash.num_buckets,
                            hashes_per_bucket=post.minhash.hashes_per_bucket, seed=post.minhash.seed)
    extracted, exact, near = config.arm_dir(arm) / "output", post_dir / "exact", post_dir / "minhash"
    counter = [TokensCounter(str(config.tokenizer_file()), count_eos_token=True)] if config.tokenizer else []
    by_snapshot = post.minhash.scope == "snapshot"

    def stage(name: str, pipeline: list, needs: list[str], outputs: list, resources: Resources = res,
              partitions: dict[str, int] | None = None) -> Stage:
        return Stage(name, arm, pipeline, resources, logs / name, needs, outputs=outputs, part=PART, partitions=partitions or {})

    def removed(stage_name: str) -> list:
        return [config.removed_dir(arm, s.name) for s in enabled_steps(config, stage_name, arm)]

    return [
        stage("exact-signatures", [
            documents_reader(extracted), DocumentsRead(str(exact / "read"), check=False),
            Sha256DedupSignature(str(exact / "signatures"), post.exact_dedup.finder_tasks),
        ], [upstream], [exact / "read", exact / "signatures"],
            partitions={"postprocess.exact_dedup.finder_tasks": post.exact_dedup.finder_tasks}),
        stage("exact-find", [
            Sha256FindDuplicates(str(exact / "signatures"), str(exact / "duplicates")),
        ], [label("exact-signatures", arm)], [exact / "duplicates"],
            global_resources(post.exact_dedup.find_resources, post.exact_dedup.finder_tasks)),
        stage(FILTER_STAGE, [
            documents_reader(extracted), DocumentsRead(str(exact / "read"), check=True),
            *counter, *filter_steps(config, arm), documents_writer(post_dir / "filtered"),
        ], [label("exact-find", arm)] + (["tokenizer"] if config.tokenizer else []),
            [post_dir / "filtered", *removed(FILTER_STAGE)]),
        stage("minhash-signatures", [
            documents_reader(post_dir / "filtered"), DocumentsRead(str(near / "read"), check=False),
            *([SnapshotTags(str(near / "tags"))] if by_snapshot else []),
            MinhashDedupSignature(str(near / "signatures"), config=minhash, language=post.word_tokenizer_language),
        ], [label(FILTER_STAGE, arm)], [near / "read", near / "tags", near / "signatures"],
            partitions={"postprocess.minhash.num_buckets": minhash.num_buckets}),
        stage("minhash-buckets", [
            MinhashBuckets(str(near / "signatures"), str(near / "buckets"), minhash,
                           tags_folder=str(near / "tags") if by_snapshot else None, batch_files=post.minhash.batch_files),
        ], [label("minhash-signatures", arm)], [near / "buckets"],
            global_resources(post.minhash.buckets_resources, minhash.num_buckets)),
        stage("minhash-cluster", [
            MinhashClusters(str(near / "buckets"), str(near / "remove_ids"), records_folder=str(near / "read")),
        ], [label("minhash-buckets", arm)], [near / "remove_ids"], global_resources(post.minhash.cluster_resources, 1)),
        stage(MINHASH_FILTER_STAGE, [
            documents_reader(post_dir / "filtered"), DocumentsRead(str(near / "read"), check=True),
            *(s.step(config, arm) for s in enabled_steps(config, MINHASH_FILTER_STAGE, arm)),
            documents_writer(post_dir / "output"),
            RecordIdWriter(str(post_dir / "ids")),
        ], [label("minhash-cluster", arm)], [post_dir / "output", post_dir / "ids", *removed(MINHASH_FILTER_STAGE)]),
    ]


def postprocess_stages(config: ExperimentConfig) -> list[Stage]:
    """The seven stages of every arm that is post-processed here."""
    return [stage for arm in postprocessed_arms(config) for stage in arm_stages(config, arm)]


def final_stage(config: ExperimentConfig, arm: str) -> str:
    """The label of the stage that writes the arm's post-processed documents."""
    return label(MINHASH_FILTER_STAGE if arm in postprocessed_arms(config) else "read", arm)
