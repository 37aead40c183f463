"""CoQA prompt and scoring as lm-eval 0.4.13's builtin task, with the SQuAD answer normalisation
and token F1 (the official SQuAD v2 evaluation's `normalize_answer`, `compute_exact`,
`compute_f1`) written here instead of imported from transformers, which no longer ships them."""

import collections
import re
import string
from itertools import zip_longest


def doc_to_text(doc):
    # the story, then every turn but the last as Q/A, then the last question
    text = doc["story"] + "\n\n"
    for q, a in zip_longest(doc["questions"]["input_text"], doc["answers"]["input_text"][:-1]):
        text += f"Q: {q}\n\n" + (f"A: {a}\n\n" if a is not None else "A:")
    return text


def doc_to_target(doc):
    """The last turn's answer and its distinct alternatives."""
    turn = len(doc["questions"]["input_text"])
    answers = [doc["answers"]["input_text"][turn - 1]]
    for alternative in (doc.get("additional_answers") or {}).values():
        answer = alternative["input_text"][turn - 1]
        if answer.lower() not in map(str.lower, answers):
            answers.append(answer)
    return answers


def normalize_answer(s):
    s = s.lower()
    s = "".join(ch for ch in s if ch not in set(string.punctuation))
    s = re.sub(r"\b(a|an|the)\b", " ", s)
    return " ".join(s.split())


def compute_exact(gold, pred):
    return int(normalize_answer(gold) == normalize_answer(pred))


def compute_f1(gold, pred):
    gold_tokens, pred_tokens = normalize_answer(gold).split(), normalize_answer(pred).split()
    if not gold_tokens or not pred_tokens:
        return int(gold_tokens == pred_tokens)
    common = sum((collections.Counter(gold_tokens) & collections.Counter(pred_tokens)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(pred_tokens), common / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def compute_scores(gold_list, pred):
    """With several golds, each is left out in turn and the best match among the rest counts."""
    if len(gold_list) > 1:
        rest = [gold_list[:i] + gold_list[i + 1:] for i in range(len(gold_list))]
        em = sum(max(compute_exact(a, pred) for a in golds) for golds in rest)
        f1 = sum(max(compute_f1(a, pred) for a in golds) for golds in rest)
    else:
        em = max(compute_exact(a, pred) for a in gold_list)
        f1 = max(compute_f1(a, pred) for a in gold_list)
    return {"em": em / max(1, len(gold_list)), "f1": f1 / max(1, len(gold_list))}


def process_results(doc, results):
    return compute_scores(doc_to_target(doc), results[0].strip().split("\n")[0])
