"""Extraction-quality metrics, WebMainBench protocol.

Prediction and gold are Markdown (HTML goes through `corpus.markdown.html2text_markdown`, body
width 0, links and images ignored). ROUGE-N F1 with N=5 over jieba tokens (whitespace tokens
dropped): both texts empty = 1.0, one empty = 0.0. A text shorter than N tokens has no n-grams;
then the score is 1.0 if the token sequences are equal, else 0.0. Also a bag-of-words token F1
(the older CleanEval-style figure) and, for partial gold, snippet recall and leakage.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

_SPACE = re.compile(r"\s+")


def tokens(text: str) -> list[str]:
    import jieba

    return [t for t in jieba.lcut(text) if t.strip()]


def _f1(overlap: int, n_pred: int, n_gold: int) -> float:
    if overlap == 0:
        return 0.0
    precision, recall = overlap / n_pred, overlap / n_gold
    return 2 * precision * recall / (precision + recall)


def rouge_n_f1(prediction: str, gold: str, n: int = 5) -> float:
    pred, ref = tokens(prediction), tokens(gold)
    if not pred and not ref:
        return 1.0
    if not pred or not ref:
        return 0.0
    pred_ngrams = Counter(tuple(pred[i : i + n]) for i in range(len(pred) - n + 1))
    ref_ngrams = Counter(tuple(ref[i : i + n]) for i in range(len(ref) - n + 1))
    if not pred_ngrams or not ref_ngrams:
        return float(pred == ref)
    overlap = sum((pred_ngrams & ref_ngrams).values())
    return _f1(overlap, sum(pred_ngrams.values()), sum(ref_ngrams.values()))


def token_f1(prediction: str, gold: str) -> float:
    pred, ref = Counter(t.lower() for t in tokens(prediction)), Counter(t.lower() for t in tokens(gold))
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
