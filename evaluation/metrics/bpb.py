"""`bpb`: bits per byte of the gold continuation, -log2 P(gold | context) over the continuation's
UTF-8 bytes as lm-eval scored it (target delimiter included): every multiple-choice and cloze
task, and LAMBADA's target word. Lower is better."""

from __future__ import annotations

from evaluation.metrics.family import Family, benchmark_family
from evaluation.metrics.gold import bits_per_byte, choices
from evaluation.tasks.suite import Suite

NAME = "bpb"


def family(suite: Suite, clean_tasks) -> Family:
    return benchmark_family(NAME, "Bits per byte of the gold answer; lower is better", True, 1, suite,
                            lambda b: NAME if NAME in b.continuous else None)


def values(sample: dict, config: dict) -> dict[str, float]:
    kind = config.get("output_type")
    if kind == "loglikelihood":
        (loglikelihood, _), = sample["filtered_resps"]
        return {NAME: bits_per_byte(loglikelihood, sample["arguments"][0][1])}
    if kind == "multiple_choice" and (scored := choices(sample, config)):
        lls, gold = scored
        return {NAME: bits_per_byte(lls[gold], sample["arguments"][gold][1])}
    return {}
