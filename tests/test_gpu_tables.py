"""The README's GPU tables are made from the tracked records of bench/gpu_check.sh (bench/measured/),
and a GPU table with no record behind it is marked as history."""

from pathlib import Path

from bench.gpu_tables import BEGIN, END, HISTORY, block, records, table, unbacked_tables

README = Path(__file__).resolve().parents[1] / "README.md"


def test_the_readme_gpu_tables_are_the_records():
    text = README.read_text()
    assert text.count(BEGIN) == 1 and text.count(END) == 1
    assert block(records()) in text, "README.md: run python -m bench.gpu_tables --update README.md"


def test_every_other_gpu_table_of_the_readme_is_marked_as_history():
    assert unbacked_tables(README.read_text()) == []
    assert HISTORY in README.read_text()  # the H200 figures of a7d67ad, kept as what was seen then


def test_a_gpu_table_without_a_record_or_a_history_mark_is_found():
    header, rule = "| run | tokens/s per GPU |", "|---|---:|"
    text = "\n".join(["intro", header, rule, "", HISTORY, "measured long ago", "", header, rule, "",
                      BEGIN, header, rule, END, "", header, rule, "| a row: 5 tokens/s per GPU |", "| next |"])
    assert unbacked_tables(text) == [2, 16]


def test_a_record_measured_on_a_dirty_tree_says_so_in_its_table():
    from bench.gpu_tables import short_commit

    assert short_commit("0123456789abcdef") == "0123456"
    assert short_commit("0123456789abcdef-dirty") == "0123456-dirty (uncommitted changes)"
    record = {"versions": {"torch": "2.10.0"}, "rows": [], "device": "cpu", "command": "bash bench/gpu_check.sh",
              "commit": "0123456789abcdef-dirty", "date": "2026-01-01", "file": "bench/measured/x.json", "model": "tiny",
              "global_batch": 4, "steps": 4, "matmul": {"size": 1024, "dtype": "float32"}, "peak_flops_measured": 1e11}
    assert "commit 0123456-dirty (uncommitted changes), 2026-01-01" in table(record)
