"""Post-processing as datatrove stages, seven per arm, the same for every arm (only the folders
differ), built from the one `postprocess` block of the config:

    exact-signatures ─► exact-find (finder_tasks) ─► filter (exact dedup, language, Gopher,
    URL and keyword blocklists) ─► minhash-signatures ─► minhash-buckets ─► minhash-cluster ─►
    minhash-filter (the post-processed documents and their record ids)

An extractor arm starts from its extracted documents; a reference corpus with `postprocess: true`
from what its read stage wrote. The extracted documents' tokens are counted on the way in, so the
ledger follows tokens through every step.
"""

from __future__ import annotations

from datatrove.pipeline.dedup import MinhashDedupBuckets, MinhashDedupCluster, MinhashDedupSignature
from datatrove.pipeline.dedup.minhash import MinhashConfig
from datatrove.pipeline.tokens import TokensCounter

from configs.experiment import ExperimentConfig
from corpus.postprocess.exact_dedup import Sha256DedupSignature, Sha256FindDuplicates
from corpus.postprocess.steps import FILTER_STAGE, MINHASH_FILTER_STAGE, enabled_steps, filter_steps
from corpus.stage import RecordIdWriter, Stage, documents_reader, documents_writer, label

PART = "postprocess"


def postprocessed_arms(config: ExperimentConfig) -> list[str]:
    """Every arm but the reference corpora that join after post-processing."""
    return [arm for arm in config.arms if arm in config.extractor_arms or config.reference_arms[arm].postprocess]


def arm_stages(config: ExperimentConfig, arm: str) -> list[Stage]:
    post, post_dir = config.postprocess, config.post_dir(arm)
    logs, res = post_dir / "logs", post.resources
    upstream = label("extract" if arm in config.extractor_arms else "read", arm)
    minhash = MinhashConfig(n_grams=post.minhash.n_grams, num_buckets=post.minhash.num_buckets,
                            hashes_per_bucket=post.minhash.hashes_per_bucket, seed=post.minhash.seed)
    extracted = config.arm_dir(arm) / "output"
    counter = [TokensCounter(str(config.tokenizer_file()), count_eos_token=True)] if config.tokenizer else []

    def stage(name: str, pipeline: list, needs: list[str], tasks: int | None = None) -> Stage:
        return Stage(name, arm, pipeline, res, logs / name, needs, tasks=tasks, part=PART)

    return [
        stage("exact-signatures", [
            documents_reader(extracted),
            Sha256DedupSignature(str(post_dir / "exact" / "signatures"), post.exact_dedup.finder_tasks),
        ], [upstream]),
        stage("exact-find", [
            Sha256FindDuplicates(str(post_dir / "exact" / "signatures"), str(post_dir / "exact" / "duplicates")),
        ], [label("exact-signatures", arm)], tasks=post.exact_dedup.finder_tasks),
        stage(FILTER_STAGE, [
            documents_reader(extracted), *counter, *filter_steps(config, arm), documents_writer(post_dir / "filtered"),
        ], [label("exact-find", arm)] + (["tokenizer"] if config.tokenizer else [])),
        stage("minhash-signatures", [
            documents_reader(post_dir / "filtered"),
            MinhashDedupSignature(str(post_dir / "minhash" / "signatures"), config=minhash,
                                  language=post.word_tokenizer_language),
        ], [label(FILTER_STAGE, arm)]),
        stage("minhash-buckets", [
            MinhashDedupBuckets(str(post_dir / "minhash" / "signatures"), str(post_dir / "minhash" / "buckets"),
                                config=minhash),
        ], [label("minhash-signatures", arm)], tasks=minhash.num_buckets),
        stage("minhash-cluster", [
            MinhashDedupCluster(str(post_dir / "minhash" / "buckets"), str(post_dir / "minhash" / "remove_ids"),
                                config=minhash),
        ], [label("minhash-buckets", arm)], tasks=1),
        stage(MINHASH_FILTER_STAGE, [
            documents_reader(post_dir / "filtered"),
            *(s.step(config, arm) for s in enabled_steps(config, MINHASH_FILTER_STAGE, arm)),
            documents_writer(post_dir / "output"),
            RecordIdWriter(str(post_dir / "ids")),
        ], [label("minhash-cluster", arm)]),
    ]


def postprocess_stages(config: ExperimentConfig) -> list[Stage]:
    """The seven stages of every arm that is post-processed here."""
    return [stage for arm in postprocessed_arms(config) for stage in arm_stages(config, arm)]


def final_stage(config: ExperimentConfig, arm: str) -> str:
    """The label of the stage that writes the arm's post-processed documents."""
    return label(MINHASH_FILTER_STAGE if arm in postprocessed_arms(config) else "read", arm)
