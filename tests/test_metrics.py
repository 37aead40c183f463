"""Continuous scores from a hand-made samples file in lm-eval 0.4.13's log format equal a hand
computation: bits per byte of the gold continuation, the probability on the gold choice, LAMBADA's
target and clean text's bits per byte."""

import json
import math

import numpy as np
import pytest

from configs.experiment import ExperimentConfig
from conftest import pretrain_experiment, write_eval_run
from evaluation.metrics.clean_text import clean_text_values
from evaluation.metrics.documents import read_task_documents

MC = {"output_type": "multiple_choice", "target_delimiter": " "}
CONTEXT = "Question: which?\nAnswer:"


def choices(lls: list[float], continuations: list[str], contexts: list[str] | None = None) -> dict:
    """The logged fields of a multiple-choice document: its requests and their log-likelihoods."""
    return {"arguments": [[c, x] for c, x in zip(contexts or [CONTEXT] * len(lls), continuations, strict=True)],
            "resps": [[[ll, False]] for ll in lls], "filtered_resps": [[ll, False] for ll in lls]}


SAMPLES = {
    # ARC-like: the target is the gold index
    "arc_easy": [{"target": 1, **choices([-10.0, -12.0, -9.5], [" the a", " the b", " the cc"]), "acc": 0.0,
                  "acc_norm": 0.0}],
    # COPA-like: the target is the gold choice's text; the continuation is the delimiter + it
    "copa": [{"target": " so it rained.", **choices([-20.0, -18.0], ["  so it rained.", "  so it shone."]), "acc": 0.0}],
    # WinoGrande: the choices are contexts sharing the target continuation; acc 0: the gold is not the argmax
    "winogrande": [{"target": "knew it.", **choices([-7.0, -5.0], [" knew it.", " knew it."], ["Ann asked Bo because Ann",
                                                                                                "Ann asked Bo because Bo"]),
                    "acc": 0.0}],
    "lambada_openai": [{"target": " word", "arguments": [["The last", " word"]], "resps": [[[-4.0, False]]],
                        "filtered_resps": [[-4.0, False]], "acc": 0.0}],
    "clean_text_web_plain": [{"target": "x" * 2000, "bits_per_byte": [-1000.0, 2000]},
                             {"target": "y" * 500, "bits_per_byte": [-100.0, 500]}],
}
CONFIGS = {"arc_easy": MC, "copa": MC, "winogrande": MC, "lambada_openai": {"output_type": "loglikelihood"},
           "clean_text_web_plain": {"output_type": "loglikelihood_rolling"}}


@pytest.fixture
def logged(tmp_path):
    config = ExperimentConfig.model_validate(pretrain_experiment(tmp_path))
    folder = write_eval_run(config, "a", 1, 5, SAMPLES, configs=CONFIGS)
    result = json.loads((folder / "results.json").read_text())
    return {task: read_task_documents(result, folder, task).values[(task, 0)] for task in SAMPLES} | {
        "clean": read_task_documents(result, folder, "clean_text_web_plain")}


def softmax_at(lls, i):
    return math.exp(lls[i]) / sum(math.exp(x) for x in lls)


def test_multiple_choice_bits_per_byte_and_probability_on_gold(logged):
    arc = logged["arc_easy"]
    assert arc["bpb"] == pytest.approx(12.0 / math.log(2) / len(" the b"))  # the gold continuation, 6 bytes
    assert arc["p_gold"] == pytest.approx(softmax_at([-10.0, -12.0, -9.5], 1))
    assert arc["acc"] == 0.0 and arc["acc_norm"] == 0.0  # lm-eval's own metrics, as logged
    copa = logged["copa"]
    assert copa["bpb"] == pytest.approx(20.0 / math.log(2) / len("  so it rained."))
    assert copa["p_gold"] == pytest.approx(softmax_at([-20.0, -18.0], 0))


def test_winogrande_gold_is_the_choice_lm_eval_scored_wrong_or_right(logged):
    wino = logged["winogrande"]  # argmax is choice 1 and acc is 0: the gold is choice 0
    assert wino["p_gold"] == pytest.approx(softmax_at([-7.0, -5.0], 0))
    assert wino["bpb"] == pytest.approx(7.0 / math.log(2) / len(" knew it."))


def test_lambada_target_and_clean_text_bits_per_byte(logged):
    assert logged["lambada_openai"]["bpb"] == pytest.approx(4.0 / math.log(2) / 5)
    assert "p_gold" not in logged["lambada_openai"]
    clean = logged["clean"].values
    bits = np.array([clean[("clean_text_web_plain", i)]["bits"] for i in (0, 1)])
    nbytes = np.array([clean[("clean_text_web_plain", i)]["bytes"] for i in (0, 1)])
    assert list(bits) == pytest.approx([1000 / math.log(2), 100 / math.log(2)]) and list(nbytes) == [2000, 500]
    # per-document values whose mean is lm-eval's bits per byte: sum of bits over sum of bytes
    assert clean_text_values(bits, nbytes).mean() == pytest.approx(1100 / math.log(2) / 2500)
