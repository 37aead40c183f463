"""Post-processing as one list of named steps, identical for every arm.

    SHA-256 exact dedup → fastText language id → Gopher quality → Gopher repetition
    → URL blocklist → keyword blocklist → MinHash-LSH near-dedup

Each step's name is the folder of what it removes (`<output_root>/post/<arm>/removed/<name>/`,
every document with its `filter_reason`), its key in the ledger, and how the report finds it.
The stages that run the steps (corpus.postprocess.stages), the ledger's rows
(corpus.accounting.ledger) and the report's columns are built from `POSTPROCESS_STEPS`; a new filter
is one entry here, its options in `configs.postprocess.PostprocessConfig` and, where datatrove has
none, its class (corpus.postprocess.filters). Record-level steps (the URL blocklist) run before
extraction, in every extractor arm's extraction stage (corpus.extractors.prefilters), unless
`postprocess.safety.before_extraction: false`; a reference corpus, never extracted, runs them here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from datatrove.pipeline.dedup import MinhashDedupFilter
from datatrove.pipeline.filters import GopherQualityFilter, GopherRepetitionFilter
from datatrove.pipeline.writers import JsonlWriter

from configs.experiment import ExperimentConfig
from configs.postprocess import PostprocessConfig
from corpus.extractors.prefilters import URL_BLOCKLIST, OfflineURLFilter, url_filter
from corpus.language import default_lid_model
from corpus.postprocess.exact_dedup import Sha256DedupFilter
from corpus.postprocess.filters import KeywordFilter, LocalLanguageFilter
from corpus.shims import default_jsonl_record

EXTRACT_STAGE = "extract"  # record-level steps run there, before the extractor (corpus.extractors.prefilters)
FILTER_STAGE = "filter"  # the stage that runs the document filters one after the other
MINHASH_FILTER_STAGE = "minhash-filter"


@dataclass(frozen=True)
class PostprocessStep:
    name: str  # folder of its removals, ledger key
    title: str  # its row in the ledger and the report
    stage: str  # the datatrove stage (log folder) that runs it
    step_class: type  # the datatrove step whose stats are its row
    build: Callable  # (config, arm, exclusion writer) -> the datatrove step
    enabled: Callable[[PostprocessConfig], bool] = lambda post: True
    # the reason written on its removals when the step records none itself (MinHash)
    reason: str | None = None
    # the step that counts the tokens of what it lets through, where it does not itself (MinHash)
    tokens_class: type | None = None
    # depends on the record (URL), not on the extracted text: may run before extraction
    record_level: bool = False

    def stage_for(self, config: ExperimentConfig, arm: str) -> str:
        """The stage that runs it for `arm`: a record-level step runs in an extractor arm's
        extraction stage unless configured after it; a reference corpus is never extracted."""
        before = self.record_level and config.postprocess.safety.before_extraction and arm in config.extractor_arms
        return EXTRACT_STAGE if before else self.stage

    def removed_writer(self, config: ExperimentConfig, arm: str) -> JsonlWriter:
        adapter = partial(with_reason, self.reason) if self.reason else None
        return JsonlWriter(str(config.removed_dir(arm, self.name)), output_filename="${rank}.jsonl.gz", adapter=adapter)

    def step(self, config: ExperimentConfig, arm: str):
        return self.build(config, arm, self.removed_writer(config, arm))


def with_reason(reason: str, writer: JsonlWriter, document) -> dict:
    """JsonlWriter adapter: the default record, with `filter_reason` in its metadata."""
    record = default_jsonl_record(writer, document)
    record.setdefault("metadata", {})["filter_reason"] = reason
    return record


def _exact_dedup(config, arm, removed):
    return Sha256DedupFilter(str(config.post_dir(arm) / "exact" / "duplicates"), exclusion_writer=removed)


def _language(config, arm, removed):
    lang = config.postprocess.language
    return LocalLanguageFilter(lang.model or default_lid_model(), lang.languages, lang.threshold, backend=lang.backend,
                               exclusion_writer=removed)


def _gopher_quality(config, arm, removed):
    post = config.postprocess
    return GopherQualityFilter(**post.gopher_quality.model_dump(), language=post.word_tokenizer_language,
                               exclusion_writer=removed)


def _gopher_repetition(config, arm, removed):
    post = config.postprocess
    return GopherRepetitionFilter(**post.gopher_repetition.model_dump(), language=post.word_tokenizer_language,
                                  exclusion_writer=removed)


def _url_blocklist(config, arm, removed):
    return url_filter(config, removed)


def _keyword_blocklist(config, arm, removed):
    return KeywordFilter(config.postprocess.safety.keyword_blocklist, exclusion_writer=removed)


def _minhash(config, arm, removed):
    return MinhashDedupFilter(str(config.post_dir(arm) / "minhash" / "remove_ids"), exclusion_writer=removed)


POSTPROCESS_STEPS: tuple[PostprocessStep, ...] = (
    PostprocessStep("exact_dedup", "exact dedup (SHA-256)", FILTER_STAGE, Sha256DedupFilter, _exact_dedup),
    PostprocessStep("language", "language id", FILTER_STAGE, LocalLanguageFilter, _language),
    PostprocessStep("gopher_quality", "Gopher quality", FILTER_STAGE, GopherQualityFilter, _gopher_quality),
    PostprocessStep("gopher_repetition", "Gopher repetition", FILTER_STAGE, GopherRepetitionFilter, _gopher_repetition),
    PostprocessStep(URL_BLOCKLIST, "URL blocklist", FILTER_STAGE, OfflineURLFilter, _url_blocklist, record_level=True),
    PostprocessStep("keyword_blocklist", "keyword blocklist", FILTER_STAGE, KeywordFilter, _keyword_blocklist,
                    enabled=lambda post: post.safety.keyword_blocklist is not None),
    PostprocessStep("minhash", "MinHash dedup", MINHASH_FILTER_STAGE, MinhashDedupFilter, _minhash,
                    reason="near_duplicate", tokens_class=JsonlWriter),
)


def enabled_steps(config: ExperimentConfig, stage: str | None = None, arm: str | None = None) -> list[PostprocessStep]:
    """The steps this config runs, in order; with `stage`, those that stage runs for `arm` (an
    extractor arm when `arm` is None)."""
    arm = arm if arm is not None else next(iter(config.extractor_arms))
    return [s for s in POSTPROCESS_STEPS if s.enabled(config.postprocess) and stage in (None, s.stage_for(config, arm))]


def filter_steps(config: ExperimentConfig, arm: str) -> list:
    """The filter stage's datatrove steps: the same for every arm, only the folders depend on `arm`."""
    return [s.step(config, arm) for s in enabled_steps(config, FILTER_STAGE, arm)]


def output_step() -> PostprocessStep:
    """The last step: what it lets through is the post-processed corpus."""
    return POSTPROCESS_STEPS[-1]
