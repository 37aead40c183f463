"""What no extractor sees, the same for every arm: the steps of every extraction stage between the
reader and the extractor.

- `RecordGuard` drops records that are not extractable HTML, each with its reason: not_html,
  empty, too_large, undecodable.
- The record-level filters depend on the record alone (its URL), not on extracted text, so they
  run here by default (`postprocess.safety.before_extraction`): no extractor (no GPU) spends time
  on a page they remove. They are post-processing steps (corpus.postprocess.steps names them and
  their ledger rows); their removals go where post-processing's go, `post/<arm>/removed/<step>/`.
- `LanguagePrefilter` drops a record whose whole page is confidently in none of the languages
  post-processing keeps (`postprocess.language.prefilter_threshold`, far below the post-extraction
  threshold): its main content would be removed by the language filter after extraction anyway,
  so no extractor is paid for it. It reads the same model and languages as that filter.

`passes_record_filters` is the same decision as a predicate, for samples drawn from extracted
documents (the tokenizer's), so that those do not depend on where the filters ran.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from datatrove.data import Document
from datatrove.pipeline.filters import URLFilter
from datatrove.pipeline.filters.base_filter import BaseFilter

from configs.experiment import ExperimentConfig
from corpus.language import LocalFastTextLID, default_lid_model
from corpus.read.warc import HTML_TYPES, AccountedWarcReader
from corpus.shims import load_bundled_url_lists
from corpus.stage import documents_writer

URL_BLOCKLIST = "url_blocklist"  # the post-processing step's name: its removals' folder and ledger row
LANGUAGE_PREFILTER = "language_prefilter"  # its drop reason and removals' folder


class RecordGuard(BaseFilter):
    """Drops records that are not extractable HTML, each with its reason (same for every arm)."""

    name = "🛡 Record guard"

    def __init__(self, max_html_bytes: int, max_control_char_ratio: float, exclusion_writer=None):
        super().__init__(exclusion_writer)
        self.max_html_bytes = max_html_bytes
        self.max_control_char_ratio = max_control_char_ratio

    def filter(self, doc: Document) -> bool | tuple[bool, str]:
        meta = doc.metadata
        if meta["mime"] not in HTML_TYPES:
            return False, "not_html"
        if meta["payload_bytes"] == 0:
            return False, "empty"
        if meta.get("payload_truncated") or meta["payload_bytes"] > self.max_html_bytes:
            return False, "too_large"
        if not meta["decoded"] or control_char_ratio(doc.text) > self.max_control_char_ratio:
            return False, "undecodable"
        if not doc.text.strip():
            return False, "empty"
        return True


def control_char_ratio(text: str, sample: int = 20_000) -> float:
    head = text[:sample]
    bad = sum(1 for ch in head if ord(ch) < 32 and ch not in "\t\n\r\f" or 0x7F <= ord(ch) < 0xA0 or ch == "\ufffd")
    return bad / max(1, len(head))


def record_guard(config: ExperimentConfig) -> RecordGuard:
    return RecordGuard(config.extraction.max_html_bytes, config.extraction.max_control_char_ratio)


def extractable_records(config: ExperimentConfig, warc: Path):
    """The records of one WARC file past the config's record guard, as documents of page HTML
    (what labelers are trained and distilled on)."""
    guard = record_guard(config)
    return (doc for doc in AccountedWarcReader(str(warc.parent)).read_file(warc.name) if guard.filter(doc) is True)


class OfflineURLFilter(URLFilter):
    """datatrove's URLFilter (bundled block lists) with tldextract's bundled public-suffix snapshot
    instead of a fetch of the live list, and the block lists and the suffix trie built once a
    process, not once a filter."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.tldextractor = offline_tld_extractor()

    def __getstate__(self):  # the extractor is the process's own: a pickled step takes none with it
        return self.__dict__ | {"tldextractor": None}

    def __setstate__(self, state):
        self.__dict__.update(state)
        self.tldextractor = offline_tld_extractor()

    def download_data(self):
        load_bundled_url_lists(self)


@cache
def offline_tld_extractor():
    """tldextract on its bundled public-suffix snapshot (no fetch of the live list), one a process:
    it builds its suffix trie (150,000 rules, a second or more of CPU) at its first URL, so one
    for each filter would build it again for every arm and task a process runs."""
    from tldextract import TLDExtract

    return TLDExtract(suffix_list_urls=())


def url_filter(config: ExperimentConfig, exclusion_writer=None) -> OfflineURLFilter:
    safety = config.postprocess.safety
    return OfflineURLFilter(use_integrated_lists=safety.url_blocklists, extra_domains=safety.banned_domains,
                            exclusion_writer=exclusion_writer)


def whole_page_text(html: str) -> str:
    """The text of the whole page, boilerplate included: what the pre-filter judges a page's
    language by (resiliparse, ~0.3 ms a page)."""
    from resiliparse.extract.html2text import extract_plain_text

    return extract_plain_text(html, main_content=False)


class LanguagePrefilter(BaseFilter):
    """Drops a record when no configured language reaches `threshold` on the whole page's text."""

    name = "🌍 Language pre-filter (whole page)"

    def __init__(self, model_path, languages: list[str], threshold: float, exclusion_writer=None):
        super().__init__(exclusion_writer)
        self.lid = LocalFastTextLID(model_path, languages)
        self.threshold = threshold

    def probability(self, html: str) -> float:
        """P(any configured language) of the whole page."""
        _, scores = self.lid.predict(Document(text=whole_page_text(html), id=""))
        return sum(scores.values())

    def filter(self, doc: Document) -> bool | tuple[bool, str]:
        return self.probability(doc.text) >= self.threshold or (False, LANGUAGE_PREFILTER)


def language_prefilter(config: ExperimentConfig, exclusion_writer=None) -> LanguagePrefilter | None:
    lang = config.postprocess.language
    if lang.prefilter_threshold is None:
        return None
    return LanguagePrefilter(lang.model or default_lid_model(), lang.languages, lang.prefilter_threshold, exclusion_writer)


def prefilter_steps(config: ExperimentConfig, arm: str) -> list:
    """The record guard, the record-level filters that run before extraction, and the language
    pre-filter (after them: the cheapest judge first)."""
    steps = [record_guard(config)]
    if config.postprocess.safety.before_extraction:
        steps.append(url_filter(config, documents_writer(config.removed_dir(arm, URL_BLOCKLIST))))
    if (language := language_prefilter(config, documents_writer(config.removed_dir(arm, LANGUAGE_PREFILTER)))) is not None:
        steps.append(language)
    return steps


def passes_record_filters(config: ExperimentConfig):
    """A predicate over documents: True where every record-level filter keeps it."""
    urls = url_filter(config)
    return lambda doc: urls.filter(doc) is True
