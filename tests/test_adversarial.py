"""Hostile pages and records: every in-process scan of page or record bytes is linear (checked against
the regexes they replace, by property-based tests on generated inputs), the reader's framing gives back
whatever records it is given, and the bombs and oversized headers of the pathological corpus
(bench.adversarial) are refused or cut, each with its reason, the records after them still read.
What each case costs is measured by `python -m bench.adversarial`, not here."""

import gzip
import io
import re

import pytest
from datatrove.data import Document
from hypothesis import example, given, settings
from hypothesis import strategies as st

from bench.adversarial import pathological_records
from corpus.extractors.block_classifier.blocks import page_blocks
from corpus.extractors.dripper.step import DripperPage
from corpus.extractors.prefilters import RecordGuard
from corpus.extractors.spans import cut_spans
from corpus.read.framing import Source, header_fields, whole_records
from corpus.read.warc import PAYLOAD_MAX, AccountedWarcReader

FEW = settings(max_examples=60, deadline=None)


@FEW
@given(st.text(alphabet="<?>!-a ", max_size=60))
def test_cutting_spans_is_what_the_regex_it_replaced_did(text):
    assert cut_spans(text, "<?", ">") == re.sub(r"<\?[^>]*>", "", text)


@FEW
@given(st.lists(st.tuples(st.from_regex(rb"[A-Za-z0-9-]{1,8}", fullmatch=True), st.binary(max_size=12).filter(
    lambda v: b"\n" not in v and b"\r" not in v)), max_size=6), st.sampled_from([b"\r\n", b"\n"]))
def test_header_fields_are_what_the_regex_they_replaced_found(fields, newline):
    head = newline.join(name + b": " + value for name, value in fields) + newline
    regex = re.compile(rb"^([A-Za-z0-9-]+):[ \t]*(.*?)[ \t]*\r?$", re.MULTILINE)
    assert header_fields(head) == {name.lower(): value for name, value in regex.findall(head)}


def warc_records(payloads: list[bytes]) -> list[bytes]:
    return [b"WARC/1.0\r\nWARC-Type: resource\r\nContent-Length: %d\r\n\r\n" % len(p) + p + b"\r\n\r\n" for p in payloads]


@FEW
@given(st.lists(st.binary(max_size=200), min_size=1, max_size=5), st.booleans())
def test_framing_gives_back_every_record_it_is_given(payloads, gzipped):
    records = warc_records(payloads)
    encoded = [gzip.compress(r) if gzipped else r for r in records]
    data = b"".join(encoded)
    frames = list(whole_records(Source(io.BytesIO(data), 0, len(data)), gzipped))
    # a gzip member holds its record's closing blank lines; uncompressed, they are read as the gap after it
    assert [frame[2] for frame in frames] == (records if gzipped else [r[:-4] for r in records])
    assert [frame[0] for frame in frames] == [sum(map(len, encoded[:i])) for i in range(len(encoded))]


@FEW
@given(st.lists(st.sampled_from(["<p>", "</p>", "<div>", "</div>", "<?", ">", "<!--", "-->", "<", "word ", "\x00", "é"]),
                max_size=40))
@example(["é", "<?", "<p>", "word "])  # a `<?…>` joining two words: failed the earlier, word-set property
def test_the_block_splitter_takes_any_markup_and_keeps_only_the_page_s_text_in_order(pieces):
    """Every block's characters are the page's, in the page's order (a subsequence, whitespace aside):
    nothing invented or moved. Not "only the page's words": a comment or a `<?…>` between two words
    joins them, as the HTML parser does (`é<?<p>word` reads `éword`)."""
    html = "".join(pieces)
    blocks = page_blocks(f"<html><body>{html}</body></html>")
    page = iter(re.sub(r"\s+", "", html))
    for block in blocks:  # one pass over the page: the blocks come in document order too
        assert all(c in page for c in re.sub(r"\s+", "", block.text))


def test_a_page_nested_past_the_parse_limit_is_refused_not_parsed():
    deep = f"<html><body>{'<div>' * 100_000}x</body></html>"
    with pytest.raises(ValueError, match="nested 100,000 deep"):
        page_blocks(deep)
    page = DripperPage(Document(text=deep, id="deep"))
    page.simplify()
    assert page.error == "too_deep"  # to Dripper's sandboxed fallback, not simplified in the task's process


def test_bombs_and_oversized_headers_are_refused_with_their_reason_and_the_next_record_read(tmp_path):
    cases = pathological_records(tmp_path, bomb_bytes=2 * PAYLOAD_MAX)
    read = {}
    for case, name in cases.items():
        reader = AccountedWarcReader(str(tmp_path), on_corrupt="skip")
        read[case] = (list(reader.read_file(name)), reader.files[name])
    for case in ("gzip bomb", "1 MB header line"):
        docs, entry = read[case]
        assert [d["reason"] for d in entry["damage"]] == ["too_large"], case
        assert [d.metadata["url"] for d in docs] == ["http://ok.example/"], case
    docs, entry = read["Content-Encoding bomb"]
    assert not entry["damage"] and [d.metadata["url"] for d in docs] == ["http://bomb.example/", "http://ok.example/"]
    bomb = docs[0]
    assert bomb.metadata["payload_truncated"] and bomb.metadata["payload_bytes"] == PAYLOAD_MAX + 1 and not bomb.text
    assert RecordGuard(5_000_000, 0.01).filter(bomb) == (False, "too_large")
