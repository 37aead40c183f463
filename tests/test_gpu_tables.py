"""The GPU tables of docs/reference/gpu-figures.md are made from the tracked records in bench/measured/
(bench/gpu_check.sh's and bench.labeler_torch's), and a GPU table with no record behind it is found."""

from bench.gpu_tables import BEGIN, END, HISTORY, PAGE, generated, table, unbacked_tables


def test_the_pages_gpu_tables_are_the_records():
    text = PAGE.read_text()
    assert text.count(BEGIN) == 1 and text.count(END) == 1
    assert generated() in text, "docs/reference/gpu-figures.md: run python -m bench.gpu_tables --update"


def test_every_gpu_table_of_the_page_is_made_from_a_record():
    assert unbacked_tables(PAGE.read_text()) == []


def test_a_gpu_table_without_a_record_or_a_history_mark_is_found():
    header, rule = "| run | tokens/s per GPU |", "|---|---:|"
    text = "\n".join(["intro", header, rule, "", HISTORY, "measured long ago", "", header, rule, "",
                      BEGIN, header, rule, END, "", header, rule, "| a row: 5 tokens/s per GPU |", "| next |"])
    assert unbacked_tables(text) == [2, 16]


def test_without_records_the_page_says_both_figures_are_still_to_be_measured(tmp_path):
    text = generated(tmp_path)
    assert "Still to be measured" in text and "training figures are to be re-measured" in text
    assert "the labeler's GPU rate is not known here" in text and "labeler_pages-cpu.json` yet" in text
    assert "| hunyuan-0.5b | not yet measured |" in text and "| qwen3-0.6b | not yet measured |" in text


def test_a_record_measured_on_a_dirty_tree_says_so_in_its_table():
    from bench.gpu_tables import short_commit

    assert short_commit("0123456789abcdef") == "0123456"
    assert short_commit("0123456789abcdef-dirty") == "0123456-dirty (uncommitted changes)"
    record = {"versions": {"torch": "2.10.0"}, "rows": [], "device": "cpu", "command": "bash bench/gpu_check.sh",
              "commit": "0123456789abcdef-dirty", "date": "2026-01-01", "file": "bench/measured/x.json", "model": "tiny",
              "global_batch": 4, "steps": 4, "matmul": {"size": 1024, "dtype": "float32"}, "peak_flops_measured": 1e11}
    assert "commit 0123456-dirty (uncommitted changes), 2026-01-01" in table(record)


def test_a_labeler_step_that_fell_back_to_eager_is_named_not_called_compiled():
    from bench.gpu_tables import steps_compiled

    compiled, fallback = {"compiled": True, "compile_error": None}, {"compiled": False, "compile_error": "OOM: graph"}
    archs = [{"arch": "a", "decode": compiled, "verify": compiled}, {"arch": "b", "decode": compiled, "verify": fallback},
             {"arch": "c", "error": "not run"}]
    assert steps_compiled(archs[:1]) == "under torch.compile with CUDA graphs"
    assert steps_compiled(archs) == "under torch.compile with CUDA graphs (but b's verify step ran eager (OOM: graph))"
    assert steps_compiled([{"arch": "a", "decode": fallback | {"compile_error": None}, "verify": fallback}]) == "eager"
    assert steps_compiled(archs[2:]) == "-"
