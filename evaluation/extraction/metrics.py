"""Extraction-quality metrics, WebMainBench protocol.

Prediction and gold are Markdown (HTML goes through `corpus.markdown.html2text_markdown`, body
width 0, links and images ignored). ROUGE-N F1 with N=5 over `jieba.lcut` tokens, as WebMainBench
computes it (whitespace tokens included, n-gram counts clipped): both texts blank = 1.0; a side
with no n-gram (blank, or shorter than N tokens) scores 0.0. Also a bag-of-words token F1 over
lower-cased non-blank tokens (the older CleanEval-style figure) and, for partial gold, snippet
recall and leakage.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache

_SPACE = re.compile(r"\s+")


@lru_cache(maxsize=8192)  # every arm is scored against the same gold texts
def jieba_tokens(text: str) -> tuple[str, ...]:
    import jieba

    return tuple(jieba.lcut(text))


def words(text: str) -> list[str]:
    return [t.lower() for t in jieba_tokens(text) if t.strip()]


def _f1(overlap: int, n_pred: int, n_gold: int) -> float:
    if overlap == 0:
        return 0.0
    precision, recall = overlap / n_pred, overlap / n_gold
    return 2 * precision * recall / (precision + recall)


def ngrams(tokens: tuple[str, ...], n: int) -> Counter:
    return Counter(tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1))


def rouge_n_f1(prediction: str, gold: str, n: int = 5) -> float:
    if not prediction.strip() and not gold.strip():
        return 1.0
    pred, ref = ngrams(jieba_tokens(prediction), n), ngrams(jieba_tokens(gold), n)
    if not pred or not ref:
        return 0.0
    return _f1(sum((pred & ref).values()), sum(pred.values()), sum(ref.values()))


def token_f1(prediction: str, gold: str) -> float:
    pred, ref = Counter(words(prediction)), Counter(words(gold))
    if not pred and not ref:
        return 1.0
    if not pred or not ref:
        return 0.0
    return _f1(sum((pred & ref).values()), sum(pred.values()), sum(ref.values()))


@dataclass(frozen=True)
class SnippetScore:
    recall: float  # share of `with` snippets found in the prediction
    leakage: float  # share of `without` snippets found in the prediction


def _normalise(text: str) -> str:
    return _SPACE.sub(" ", text).strip().lower()


def snippet_scores(prediction: str, with_snippets: list[str], without_snippets: list[str]) -> SnippetScore:
    pred = _normalise(prediction)

    def share(snippets: list[str]) -> float:
        snippets = [s for s in (_normalise(x) for x in snippets) if s]
        return sum(s in pred for s in snippets) / len(snippets) if snippets else float("nan")

    return SnippetScore(recall=share(with_snippets), leakage=share(without_snippets))
