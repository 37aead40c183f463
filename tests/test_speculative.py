"""The speculative Dripper labeler: the block classifier drafts each label, vLLM verifies, and the
labels are plain greedy decoding's, page by page."""

import random

import pytest

from conftest import TEST_KV_CACHE_BYTES
from corpus.extractors.dripper.labelers import MAIN, OTHER, BlockPage, get_labeler, release_labelers
from corpus.extractors.dripper.labelers.config import VllmLabelerConfig
from corpus.extractors.dripper.labelers.draft import BlockDraft
from corpus.extractors.dripper.labelers.speculative import CLOSE, OPEN, answer_passes, rest_of_answer
from corpus.extractors.dripper.labels import example_from_marked_html
from corpus.extractors.dripper.step import simplify_page
from corpus.sample import generate_pages
from corpus.sample.annotated import SHARED_PAGE_SETS, load_pages


def answer(ids, labels) -> str:
    return OPEN + "".join(f"{i}{labels[i]}" for i in ids) + CLOSE


def test_rest_of_answer_keeps_what_the_model_wrote_and_drafts_the_rest():
    """Against the rule written out: at every prefix of the model's answer, a block whose label the
    model has begun keeps the model's label, every later block takes the draft's."""
    rng = random.Random(0)
    for _ in range(30):
        ids = list(range(1, rng.randint(1, 25)))
        model = {i: rng.choice([MAIN, OTHER]) for i in ids}
        draft = {i: rng.choice([MAIN, OTHER]) for i in ids}
        full = answer(ids, model)
        label_starts = {}
        pos = len(OPEN)
        for i in ids:
            pos += len(str(i))
            label_starts[i] = pos
            pos += len(model[i])
        for cut in range(len(full) + 1):
            prefix = full[:cut]
            expected = answer(ids, {i: model[i] if cut > label_starts[i] else draft[i] for i in ids})
            assert prefix + rest_of_answer(prefix, ids, draft) == expected, (prefix, ids)


def test_rest_of_answer_takes_the_regex_whitespace_and_refuses_what_the_regex_would():
    ids, draft = [1, 2, 10], {1: MAIN, 2: OTHER, 10: MAIN}
    assert rest_of_answer("<answer>\n 1o", ids, draft) == "ther2other10main</answer>"
    assert rest_of_answer("<answer>1main2other1", ids, draft) == "0main</answer>"
    assert rest_of_answer("<answer>1main2other10main \n</", ids, draft) == "answer>"
    assert rest_of_answer("<answer>2main", ids, draft) is None  # not the first id
    assert rest_of_answer("<answer>1mx", ids, draft) is None
    assert rest_of_answer("", ids, draft) == answer(ids, draft)


def test_answer_passes_count_the_prefill_the_verify_steps_and_the_undrafted_tokens():
    from types import SimpleNamespace

    def steps(**accepted):  # vLLM's per-request histogram: verify steps by accepted draft tokens
        histogram = [0] * 65
        for j, n in accepted.items():
            histogram[int(j.removeprefix("a"))] = n
        return SimpleNamespace(histogram=histogram)

    assert answer_passes(14, None) == 14  # plain decoding: a pass a token
    assert answer_passes(14, steps(a6=2)) == 3  # prefill, two steps of 7 tokens (the last past the end token)
    assert answer_passes(40, steps(a6=1, a37=1)) == 3  # truncated at max_tokens mid-step: never below the steps
    assert answer_passes(20, steps(a0=3, a4=1)) == 1 + 4 + (20 - 1 - 3 - 5)  # and a pass for each token without a draft


def test_draft_tokens_stop_at_what_vllm_verifies(random_model):
    with pytest.raises(ValueError, match="128"):
        VllmLabelerConfig(kind="vllm", model=str(random_model), draft_tokens=129)


def draft_training_pages(count: int, seed: int):
    return [example_from_marked_html(f"p{i}", "generated", p.marked_html) for i, p in enumerate(generate_pages(count, seed))]


@pytest.fixture(scope="module")
def draft_model(tmp_path_factory):
    """A draft model on generated pages of another seed than the pages it drafts."""
    from corpus.extractors.block_classifier.model import train
    from corpus.extractors.dripper.draft_training import draft_examples

    # 30 pages and 30 trees (a tenth of 60 x 60's CPU time) still agree with the marks on 99% of
    # another seed's blocks, and disagree with the random labeler's answers on many
    model = train(draft_examples(draft_training_pages(30, seed=3)), "gbdt", trees=30, unit="items")
    return model.save(tmp_path_factory.mktemp("draft"))


@pytest.mark.slow
def test_the_draft_labels_every_block_and_agrees_with_the_marks(draft_model):
    examples = draft_training_pages(20, seed=4)
    draft = BlockDraft(draft_model)
    agreed = blocks = 0
    for e in examples:
        labels = draft.labels(BlockPage(e.simplified_html, tuple(e.item_ids)))
        assert set(labels) == set(e.item_ids)
        agreed += sum(labels[i] == e.labels[i] for i in e.item_ids)
        blocks += len(e.item_ids)
    assert agreed / blocks > 0.8  # generated pages are easy: the point is that blocks line up with their labels


@pytest.mark.slow
def test_the_draft_is_on_where_a_draft_model_is(draft_model, random_model, tmp_path):
    from corpus.extractors.block_classifier.model import BlockModel

    plain = VllmLabelerConfig(kind="vllm", model=str(random_model))
    assert plain.draft == "none" and not plain.drafted
    drafted = VllmLabelerConfig(kind="vllm", model=str(random_model), draft_model=str(draft_model))
    assert drafted.drafted
    assert not VllmLabelerConfig(kind="vllm", model=str(random_model), draft_model=str(draft_model), draft="none").drafted
    with pytest.raises(ValueError, match="draft_model"):
        VllmLabelerConfig(kind="vllm", model=str(random_model), draft="block_classifier")
    with pytest.raises(ValueError, match="keep one"):
        VllmLabelerConfig(kind="vllm", model=str(random_model), draft_model=str(draft_model),
                          engine_kwargs={"speculative_config": {"method": "ngram"}})
    page_model = BlockModel.load(draft_model)
    page_model.unit = "page"
    with pytest.raises(ValueError, match="not of mineru-html's"):
        BlockDraft(page_model.save(tmp_path / "page-model"))


def labeler_pages(generated: int, real: int):
    """Generated pages, and real annotated pages where the shared sets are here (short ones: the
    tiny model's context)."""
    htmls = [p.html for p in generate_pages(generated, seed=11)]
    files = sorted(SHARED_PAGE_SETS.glob("*/pages.jsonl.gz"))
    for path in files:
        htmls += [p.html for p in load_pages(path, 40) if len(p.html) < 20_000][:-(-real // len(files))]
    pages = []
    for html in htmls:
        try:
            simplified, _, ids = simplify_page(html)
        except Exception:
            continue
        if ids:
            pages.append(BlockPage(simplified, ids))
    return pages


def label_plain_and_drafted(common: dict, draft_model: str, pages: list[BlockPage]):
    """In the vLLM host: the pages' labels by plain greedy decoding, by the drafted engine, and by
    the drafted engine given plain decoding's labels as its draft (each engine shut down after)."""
    try:
        plain = get_labeler(VllmLabelerConfig(**common)).label(pages)
    finally:
        release_labelers()
    try:
        labeler = get_labeler(VllmLabelerConfig(**common, draft_model=draft_model))
        drafted = labeler.label(pages)
        perfect = labeler.label(pages, drafts=[r.labels for r in plain])
    finally:
        release_labelers()
    return plain, drafted, perfect


@pytest.mark.slow
def test_speculative_labels_equal_plain_greedy_decoding_page_by_page(random_model, draft_model, vllm_host):
    """The same tiny steered model in vLLM (greedy, mineru-html's regex), without and with the block
    classifier's draft, on generated pages and real annotated ones: identical labels on every
    page; with the draft the answers take fewer forward passes, and a draft equal to the answer
    takes the fewest."""
    # 20 generated pages, and 20 real ones where the shared sets are: a draft token vLLM verified
    # wrongly changes the labels of whatever page it falls on, and these pages' answers hold hundreds
    # of drafted labels (800 with the shared sets), some wrong (`kept` below), enough to catch it
    pages = labeler_pages(20, real=20)
    # float32: the test is of the algorithm; a GPU's bf16 near-ties are counted by bench.labeler_gpu
    common = {"kind": "vllm", "model": str(random_model), "max_context_tokens": 4096, "max_output_tokens": 1024,
              "engine_kwargs": {"kv_cache_memory_bytes": TEST_KV_CACHE_BYTES}, "draft_tokens": 16, "dtype": "float32"}
    plain, drafted, perfect = vllm_host.submit(label_plain_and_drafted, common, str(draft_model), pages).result()
    assert sum(r.ok for r in plain) >= 0.9 * len(pages)
    for i, (a, b, c) in enumerate(zip(plain, drafted, perfect, strict=True)):
        assert (a.labels, a.error) == (b.labels, b.error) == (c.labels, c.error), f"page {i}"
    ok = [i for i, r in enumerate(plain) if r.ok]
    mains = sum(v == MAIN for i in ok for v in plain[i].labels.values())
    assert 0 < mains < sum(len(plain[i].labels) for i in ok)  # the steered model's labels depend on the page
    passes = [sum(rs[i].answer_passes for i in ok) for rs in (plain, drafted, perfect)]
    assert passes[0] > passes[1] > passes[2], passes
    assert all(r.answer_passes >= 1 for rs in (plain, drafted, perfect) for r in rs if r.ok)
    kept = sum(sum(drafted[i].draft[b] == drafted[i].labels[b] for b in drafted[i].labels) for i in ok)
    assert 0 < kept < sum(len(drafted[i].labels) for i in ok)  # the draft is tested where it is wrong too


def test_the_ledger_row_divides_each_count_by_the_pages_it_was_counted_on():
    from corpus.accounting.summary import labeler_text

    work = {"sent_to_labeler": 10, "answered_pages": 8, "answered_tokens": 800, "answer_passes": 120, "drafted_pages": 8,
            "draft_blocks": 200, "draft_blocks_agreed": 180}
    assert labeler_text(work) == ("10 pages; 8 answered in 15.0 forward passes a page for 100 answer tokens; "
                                  "draft kept for 90.0% of 200 blocks")
    assert labeler_text(work | {"answered_pages": 0, "draft_blocks": 0}) == "10 pages"  # the CPU encoder labeler
