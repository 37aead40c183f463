from collections import Counter

from corpus.extractors.prefilters import RecordGuard
from corpus.read.warc import AccountedWarcReader
from corpus.sample import read_gold, write_sample
from corpus.sample.pages import TEMPLATES


def test_same_seed_same_bytes(tmp_path):
    a, _ = write_sample(tmp_path / "a", 16, seed=7)
    b, _ = write_sample(tmp_path / "b", 16, seed=7)
    c, _ = write_sample(tmp_path / "c", 16, seed=8)
    assert a.read_bytes() == b.read_bytes()
    assert a.read_bytes() != c.read_bytes()


def test_every_template_and_bad_record_kind_is_present(sample_dir):
    gold = read_gold(sample_dir / "gold.jsonl")
    templates = Counter(r["template"] for r in gold if r["template"])
    assert set(templates) == set(TEMPLATES) | {"spam"}
    notes = " ".join(r["note"] for r in gold)
    for kind in ("exact mirror", "near-duplicate", "keyword-stuffed spam", "blocklisted domain"):
        assert kind in notes  # what post-processing must remove
    expects = Counter(r["expect"] for r in gold)
    assert expects["not_html"] == 2 and expects["empty"] == 1
    assert expects["too_large"] == 1 and expects["undecodable"] == 1


def test_gold_main_content_is_in_the_page_and_boilerplate_is_not_gold(sample_dir):
    for r in read_gold(sample_dir / "gold.jsonl"):
        if r["page_html"] is None:
            continue
        for block in r["gold_html"].split("\n"):
            assert block in r["page_html"] or r["note"]  # the cp1252 page carries one re-encoded block
        assert "Accept" not in r["gold_text"] and "Share on" not in r["gold_text"]


def test_reader_and_guard_account_for_every_record(sample_dir):
    gold = {r["id"]: r for r in read_gold(sample_dir / "gold.jsonl")}
    reader = AccountedWarcReader(str(sample_dir))
    guard = RecordGuard(max_html_bytes=5_000_000, max_control_char_ratio=0.05)
    seen = {}
    for doc in reader.read_file("sample.warc.gz"):
        result = guard.filter(doc)
        seen[doc.id] = "extract" if result is True else result[1]
        assert doc.metadata["warc_file"] == "sample.warc.gz" and doc.metadata["warc_offset"] >= 0
    assert seen == {i: r["expect"] for i, r in gold.items()}


def test_declared_and_undeclared_legacy_charsets_decode(sample_dir):
    docs = {d.metadata["url"]: d for d in AccountedWarcReader(str(sample_dir)).read_file("sample.warc.gz")}
    cp1252 = docs["https://dailyherald.example/legacy/cp1252.html"]
    assert cp1252.metadata["charset"] == "cp1252" and "crème brûlée at €4" in cp1252.text
    gbk = docs["https://xinwen.example/legacy/gbk.html"]
    gold = {r["url"]: r for r in read_gold(sample_dir / "gold.jsonl")}
    assert gold[gbk.metadata["url"]]["title"] in gbk.text


def test_offsets_point_at_the_records(sample_dir):
    from warcio.archiveiterator import ArchiveIterator

    docs = list(AccountedWarcReader(str(sample_dir)).read_file("sample.warc.gz"))
    with open(sample_dir / "sample.warc.gz", "rb") as f:
        for doc in docs[:5]:
            f.seek(doc.metadata["warc_offset"])
            record = next(iter(ArchiveIterator(f)))
            assert record.rec_headers.get_header("WARC-Record-ID") == doc.id
