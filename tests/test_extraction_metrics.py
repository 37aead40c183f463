import math

import pytest

from evaluation.extraction.metrics import jieba_tokens, rouge_n_f1, snippet_scores, token_f1

SENTENCE = "the quick brown fox jumps over the lazy dog near the old river bank"


def test_identical_texts_score_one():
    assert rouge_n_f1(SENTENCE, SENTENCE) == 1.0
    assert token_f1(SENTENCE, SENTENCE) == 1.0


def test_disjoint_texts_score_zero():
    other = "completely different words appear in this unrelated sentence about cooking pasta"
    assert rouge_n_f1(SENTENCE, other) == 0.0
    assert token_f1(SENTENCE, other) == 0.0


def test_empty_and_short_texts():
    assert rouge_n_f1("", "") == 1.0 and rouge_n_f1(" \n", "") == 1.0
    assert rouge_n_f1("", SENTENCE) == 0.0 and rouge_n_f1(SENTENCE, "") == 0.0
    assert rouge_n_f1("two words", "two words") == 0.0  # 3 tokens: no 5-gram, as in WebMainBench
    assert token_f1("", "") == 1.0 and token_f1(SENTENCE, "") == 0.0


def test_partial_overlap_by_hand():
    # jieba keeps the spaces: 14 words -> 27 tokens -> 23 five-grams in the gold. The prediction
    # is the first 9 words -> 17 tokens -> 13 five-grams, all in the gold:
    # precision 13/13, recall 13/23, F1 = 2 * 13 / (13 + 23).
    pred = " ".join(SENTENCE.split()[:9])
    assert len(jieba_tokens(SENTENCE)) == 27 and len(jieba_tokens(pred)) == 17
    assert rouge_n_f1(pred, SENTENCE) == pytest.approx(26 / 36)
    # bag of words: 9 predicted words, all among the gold's 14: P = 1, R = 9/14
    assert token_f1(pred, SENTENCE) == pytest.approx(2 * (9 / 14) / (1 + 9 / 14))


def test_repeated_ngrams_are_clipped():
    gold = "a b c d e f"  # 11 tokens with spaces -> 7 five-grams
    pred = gold + " " + gold  # 23 tokens -> 19 five-grams; each gold 5-gram counts once
    assert rouge_n_f1(pred, gold) == pytest.approx(2 * 7 / (19 + 7))


def test_chinese_text_is_segmented_by_jieba():
    gold = "我们研究城市经济发展的历史和文化"
    toks = jieba_tokens(gold)
    assert 3 < len(toks) < len(gold)  # words, not characters, not one token
    assert rouge_n_f1(gold, gold) == 1.0
    half = "".join(toks[:8])
    assert jieba_tokens(half) == toks[:8]
    # 4 prediction 5-grams, all shared; the gold has len(toks) - 4
    assert rouge_n_f1(half, gold) == pytest.approx(2 * 4 / (4 + len(toks) - 4))


def test_snippet_recall_and_leakage():
    page = "Headline\n\nThe  first paragraph of the story.\nShare on Facebook"
    score = snippet_scores(page, ["the first paragraph", "missing sentence"], ["Share on Facebook", "Cookie settings"])
    assert score.recall == 0.5 and score.leakage == 0.5
    assert math.isnan(snippet_scores(page, [], []).recall)
