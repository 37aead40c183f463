"""bench.labeler_torch, the labeler's torch-only estimate (no vLLM), on CPU at the tiny shape: the
same code path as on a GPU (prefill, decode and verification steps in a static KV cache, the
estimate and its roofline bound), the record it writes and the docs' table made from it."""

import json

import pytest

from bench.labeler_torch import estimate, main, prefill_batches, roofline, timing_order, vllm_counts


def test_prefill_batches_stay_within_their_padded_token_budget():
    batches = prefill_batches([10, 300, 20, 40, 35, 1000], 100)
    assert batches == [[1000], [300], [40, 35], [20, 10]]  # longest first; a prompt over the budget alone
    assert all(len(b) * b[0] <= 100 for b in batches if len(b) > 1)


def test_prefill_cut_short_has_timed_a_sample_of_the_lengths_not_the_longest():
    batches = prefill_batches(list(range(100, 4100, 100)), 100)  # 40 batches, one prompt each, longest first
    order = timing_order(batches)
    assert sorted(order) == sorted(batches)
    first = [b[0] for b in order[:10]]  # what a run stopped after a quarter of its batches timed
    assert 1000 < sum(first) / len(first) < 3100 and min(first) < 2000


def test_the_estimate_adds_the_prefill_and_the_steps_a_page_takes_of_a_batch():
    page = {"prompt_tokens": 1000, "answer_tokens": 100, "passes_plain": 101, "passes_drafted": 11}
    e = estimate(page, prefill_tokens_per_s=10_000, decode={"seconds": 0.02, "batch": 10},
                 verify={"seconds": 0.05, "batch": 10})
    assert e["plain_pages_per_s"] == pytest.approx(1 / (0.1 + 100 * 0.002))
    assert e["drafted_pages_per_s"] == pytest.approx(1 / (0.1 + 10 * 0.005))
    assert e["speedup"] == pytest.approx(0.3 / 0.15)


def test_the_roofline_bound_is_the_slower_of_compute_and_memory():
    shape = {"num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 8,
             "hidden_size": 32, "vocab_size": 100}
    page = {"prompt_tokens": 10, "answer_tokens": 4, "passes_plain": 5, "passes_drafted": 3}
    bound = roofline(page, shape, parameters=1000, dtype_bytes=2, batch=4, kv_length=12, draft_tokens=3,
                     flops_peak=1e6, bandwidth=1e6)
    attention, logits, kv = 4 * 2 * 4 * 8, 2 * 32 * 100, 2 * 2 * 2 * 8 * 2
    weights = (1000 + 32 * 100) * 2  # the output layer's rows, not the embedding's: a pass reads B rows of it
    # the prompt's 10 positions causally (10^2 / 2), then 4 decoded ones each at the mean context 10 + 4 / 2
    plain_flops = 2 * 1000 * 14 + logits * 5 + attention * (10**2 / 2 + 4 * 12)
    plain_bytes = 4 * (weights / 4 + kv * 12) + kv * 14
    assert bound["plain"]["flops_per_page"] == pytest.approx(plain_flops)
    assert bound["plain"]["bytes_per_page"] == pytest.approx(plain_bytes)
    assert bound["plain"]["pages_per_s"] == pytest.approx(1e6 / max(plain_flops, plain_bytes))
    # two drafted passes of 3 + 1 positions: 8 computed for a 4-token answer, the rejected ones at the
    # same context (10 + 4 / 2), not a sequence grown to 18
    drafted_flops = 2 * 1000 * 18 + logits * 9 + attention * (10**2 / 2 + 8 * 12)
    assert bound["drafted"]["flops_per_page"] == pytest.approx(drafted_flops)
    assert bound["drafted"]["bytes_per_page"] == pytest.approx(2 * (weights / 4 + kv * 12) + kv * 14)


def test_the_vllm_counts_are_the_plain_and_drafted_rows_of_a_cpu_run(tmp_path):
    rows = [{"run": "plain", "labelled": 4, "seconds": 2.0, "answer_tokens_per_s": 100.0, "answer_passes_per_page": 51.0},
            {"run": "draft: 80% agreement", "answer_passes_per_page": 9.0, "draft_agreement": 0.8},
            {"run": "draft: classifier's agreement", "answer_passes_per_page": 7.5, "draft_agreement": 0.75,
             "draft_tokens": 64, "pages_differing_from_plain": 0}]
    result = tmp_path / "labeler_gpu.json"
    result.write_text(json.dumps({"environment": {"command": "python -m bench.labeler_gpu --arch tiny", "commit": "abc",
                                                  "vllm": "0.32.0"}, "args": {"context": "8192"},
                                  "architectures": [{"arch": "tiny", "pages": 6, "rows": rows}]}))
    counts = vllm_counts(result)
    assert counts["answer_tokens_per_page"] == 50.0 and counts["pages_labelled"] == 4 and counts["pages_sent"] == 6
    assert (counts["passes_per_answer_plain"], counts["passes_per_answer_drafted"]) == (51.0, 7.5)
    assert counts["draft_agreement"] == 0.75 and counts["draft_tokens"] == 64


@pytest.mark.slow
def test_the_tiny_measurement_writes_a_record_the_docs_table_renders(tmp_path, labeler_pages_file):
    from bench.gpu_tables import labeler_table, records

    measured = tmp_path / "measured"
    main(["measure", "--arch", "tiny", "--pages-file", str(labeler_pages_file), "--context", "256", "--batch", "2",
          "--dtype", "float32", "--repeats", "2", "--prefill-seconds", "1", "--commit", "0123456789abcdef",
          "--record-dir", str(measured), "--out", str(tmp_path / "scratch.json")])
    (record,) = records(measured, "labeler_torch")
    assert record["file"] == "bench/measured/labeler_torch-cpu.json" and record["estimate"] == "torch-only (no vLLM)"
    assert record["commit"] == "0123456789abcdef" and record["command"].startswith("python -m bench.labeler_torch measure")
    assert record["versions"]["torch"] and record["counts"] == json.loads(labeler_pages_file.read_text())["counts"]
    (tiny,) = record["architectures"]
    assert tiny["pages"] == 4 and tiny["pages_over_context"] == 1  # 5,000 tokens + the answer > 256
    assert tiny["page"]["prompt_tokens"] == pytest.approx((24 + 40 + 64 + 96) / 4)
    assert tiny["prefill"]["tokens"] > 0 and tiny["prefill"]["tokens_per_s"] > 0
    assert (tiny["decode"]["positions"], tiny["verify"]["positions"]) == (1, 9)  # the draft's 8 tokens + 1
    assert tiny["decode"]["batch"] == 2 and tiny["decode"]["kv_length"] == round(56 + 15)
    assert not tiny["decode"]["compiled"]  # CUDA graphs only on a GPU
    assert tiny["kv_bytes_per_token"] == 2 * 2 * 2 * 32 * 4
    e, r = tiny["estimate"], tiny["roofline"]
    assert e["plain_pages_per_s"] > 0 and e["drafted_pages_per_s"] > 0
    assert r["plain"]["pages_per_s"] > e["plain_pages_per_s"]  # the bound is never below the estimate
    text = labeler_table(record)
    assert "**a torch-only estimate (no vLLM)**" in text and "commit 0123456" in text
    assert "| tiny | " in text and "(9 positions)" in text and "| hunyuan-0.5b | not yet measured |" in text


def test_a_measurement_past_its_budget_keeps_a_record_saying_what_was_not_run(tmp_path, labeler_pages_file):
    main(["measure", "--arch", "tiny", "qwen3-0.6b", "--pages-file", str(labeler_pages_file), "--batch", "2", "--budget", "0",
          "--commit", "0123456789abcdef", "--record-dir", str(tmp_path), "--out", str(tmp_path / "scratch.json")])
    record = json.loads((tmp_path / "labeler_torch-cpu.json").read_text())
    assert [a["error"] for a in record["architectures"]] == ["not run: the --budget of 0.0 s was spent "
                                                             "(an architecture takes 30 s here)"] * 2


def test_an_architecture_is_not_started_when_the_time_left_is_less_than_the_last_one_took(tmp_path, labeler_pages_file,
                                                                                         monkeypatch):
    from types import SimpleNamespace

    import bench.labeler_torch as labeler_torch

    clock = [0.0]

    def measured(arch, *args):  # each architecture takes 60 s of the 100 s budget (its compiles)
        clock[0] += 60
        return {"arch": arch}

    monkeypatch.setattr(labeler_torch, "time", SimpleNamespace(perf_counter=lambda: clock[0]))
    monkeypatch.setattr(labeler_torch, "peaks_of_device", lambda: {"device": "cpu", "flops": 1.0, "bandwidth": 1.0})
    monkeypatch.setattr(labeler_torch, "measure_architecture", measured)
    monkeypatch.setattr(labeler_torch, "print_result", lambda result: None)
    main(["measure", "--arch", "tiny", "qwen3-0.6b", "--pages-file", str(labeler_pages_file), "--batch", "2",
          "--budget", "100", "--commit", "0123456789abcdef", "--record-dir", str(tmp_path), "--out", str(tmp_path / "s.json")])
    tiny, qwen = json.loads((tmp_path / "labeler_torch-cpu.json").read_text())["architectures"]
    assert tiny == {"arch": "tiny"}  # 40 s were left, not the 60 s the first took: not started, and it says so
    assert qwen["error"] == "not run: the --budget of 100.0 s was spent (an architecture takes 60 s here)"


@pytest.mark.slow
def test_the_pages_step_measures_real_prompts_beside_the_vllm_counts(tmp_path):
    from corpus.sample.annotated import SHARED_PAGE_SETS

    if not SHARED_PAGE_SETS.is_dir():
        pytest.skip("needs the shared annotated page sets (../shared/data/extraction)")
    rows = [{"run": "plain", "labelled": 2, "seconds": 1.0, "answer_tokens_per_s": 60.0, "answer_passes_per_page": 31.0},
            {"run": "draft: classifier's agreement", "answer_passes_per_page": 4.0, "draft_agreement": 0.8,
             "draft_tokens": 64, "pages_differing_from_plain": 0}]
    counts = tmp_path / "labeler_gpu.json"
    counts.write_text(json.dumps({"environment": {"command": "python -m bench.labeler_gpu --arch tiny", "commit": "abc",
                                                  "vllm": "0.32.0"}, "args": {"context": "8192"},
                                  "architectures": [{"arch": "tiny", "pages": 2, "rows": rows}]}))
    out = tmp_path / "labeler_pages-cpu.json"
    main(["pages", "--counts", str(counts), "--pages", "4", "--max-pages-per-set", "2", "--out", str(out)])
    pages = json.loads(out.read_text())
    assert pages["pages"] == len(pages["prompt_tokens"]) == 4 and min(pages["prompt_tokens"]) > 100
    assert pages["counts"]["answer_tokens_per_page"] == 30.0 and pages["command"].startswith("python -m bench.labeler_torch")


def test_a_step_that_does_not_compile_is_timed_eager_and_says_why(monkeypatch):
    import torch

    from bench.labeler_gpu import ARCHITECTURES
    from bench.labeler_torch import build_model, step_seconds

    def broken(model, **kwargs):
        def step(**inputs):
            raise RuntimeError("no graph here")
        return step

    monkeypatch.setattr(torch, "compile", broken)
    step = step_seconds(build_model(ARCHITECTURES["tiny"], torch.float32), batch=1, kv_length=8, positions=3,
                        compiled=True, repeats=3)  # more steps than the cache holds unless each rewinds it
    assert not step["compiled"] and step["compile_error"] == "RuntimeError: no graph here"
    assert step["seconds"] > 0 and step["positions"] == 3
