import math

import pytest

from evaluation.extraction_metrics import rouge_n_f1, snippet_scores, token_f1, tokens

SENTENCE = "the quick brown fox jumps over the lazy dog near the old river bank"


def test_identical_texts_score_one():
    assert rouge_n_f1(SENTENCE, SENTENCE) == 1.0
    assert token_f1(SENTENCE, SENTENCE) == 1.0


def test_disjoint_texts_score_zero():
    other = "completely different words appear in this unrelated sentence about cooking pasta"
    assert rouge_n_f1(SENTENCE, other) == 0.0
    assert token_f1(SENTENCE, other) == 0.0


def test_empty_texts():
    assert rouge_n_f1("", "") == 1.0
    assert rouge_n_f1("", SENTENCE) == 0.0 and rouge_n_f1(SENTENCE, "") == 0.0
    assert token_f1("", "") == 1.0 and token_f1(SENTENCE, "") == 0.0


def test_partial_overlap_by_hand():
    # 14 tokens -> 10 five-grams in the gold; the prediction is its first 9 tokens -> 5 five-grams,
    # all shared: precision 5/5, recall 5/10, F1 = 2 * 1 * 0.5 / 1.5 = 2/3.
    gold = SENTENCE
    pred = " ".join(SENTENCE.split()[:9])
    assert len(tokens(gold)) == 14
    assert rouge_n_f1(pred, gold) == pytest.approx(2 / 3)
    # bag of words: prediction 9 tokens all in gold (14): P = 1, R = 9/14
    assert token_f1(pred, gold) == pytest.approx(2 * (9 / 14) / (1 + 9 / 14))


def test_chinese_text_is_segmented_by_jieba():
    gold = "我们研究城市经济发展的历史和文化"
    toks = tokens(gold)
    assert 3 < len(toks) < len(gold)  # words, not characters or one token
    assert rouge_n_f1(gold, gold) == 1.0
    half = "".join(toks[: len(toks) // 2 + 3])
    grams_pred, grams_gold = len(tokens(half)) - 4, len(toks) - 4
    expected = 2 * grams_pred / (grams_pred + grams_gold)  # every prediction 5-gram is shared
    assert rouge_n_f1(half, gold) == pytest.approx(expected)


def test_snippet_recall_and_leakage():
    page = "Headline\n\nThe  first paragraph of the story.\nShare on Facebook"
    score = snippet_scores(page, ["the first paragraph", "missing sentence"], ["Share on Facebook", "Cookie settings"])
    assert score.recall == 0.5 and score.leakage == 0.5
    assert math.isnan(snippet_scores(page, [], []).recall)
