"""Real items of the benchmarks ../shared/data/lm-eval holds (MosaicML eval-gauntlet copies, see
its README), converted to each task's own schema and scored by a tiny random model through the
suite's task configs (lm-eval's builtin YAMLs or the project's, pointed at local files as the
offline tasks are): the continuous metrics find the real gold choice on real schemas. Skipped
where ../shared is absent."""

import json
import math
import os
from pathlib import Path

import pytest

from evaluation.evaluate import OFFLINE_ENV
from evaluation.metrics import document_values
from evaluation.metrics.gold import gold_index
from evaluation.tasks.offline import included_yaml, task_splits, write_local_task
from evaluation.tasks.suite import TASKS_DIR

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data" / "lm-eval"
ITEMS = 8
LETTERS = "ABCDE"

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not SHARED.is_dir(), reason=f"no {SHARED}")]


def lettered(choices: list[str], gold: int) -> dict:
    return {"choices": {"text": choices, "label": list(LETTERS[: len(choices)])}, "answerKey": LETTERS[gold]}


def arc(row):
    return {"id": "x", "question": row["query"].removeprefix("Question: "), **lettered(row["choices"], row["gold"])}


def commonsense_qa(row):
    """The query holds the question and the lettered answers ("Question: ...\\nChoices:\\nA. ...\\nAnswer:")."""
    question, listing = row["query"].removeprefix("Question: ").split("\nChoices:\n")
    answers = [line[3:] for line in listing.removesuffix("\nAnswer:").splitlines()]
    return {"id": "x", "question": question, "question_concept": "", **lettered(answers, row["gold"])}


def winogrande(row):
    """Two contexts ending in either option, sharing the continuation after the blank."""
    common = os.path.commonprefix(row["context_options"])
    prefix = common[: common.rfind(" ") + 1]
    option1, option2 = (c[len(prefix):] for c in row["context_options"])
    return {"sentence": f"{prefix}_ {row['continuation']}", "option1": option1, "option2": option2,
            "answer": str(row["gold"] + 1)}


# task -> (file, its rows as the task's documents, the gold index in the file; None: no choices). Not
# here: CommonsenseQA's letter form and Social IQa (the copies keep 4 of 5 and 2 of 3 answers).
REAL = {
    "arc_easy": ("arc/arc_easy_test.mosaic.jsonl", arc, "gold"),
    "arc_challenge": ("arc/arc_challenge_test.mosaic.jsonl", arc, "gold"),
    "commonsense_qa_cloze": ("commonsense_qa/dev.mosaic.jsonl", commonsense_qa, "gold"),
    "copa": ("copa/copa-dev.jsonl", lambda r: {"idx": r["id"], **{k: r[k] for k in ("premise", "choice1", "choice2",
                                                                                  "question", "label")}}, "label"),
    "openbookqa": ("openbookqa/test.mosaic.jsonl", lambda r: {"id": "x", "question_stem": r["query"],
                                                              **lettered(r["choices"], r["gold"])}, "gold"),
    "piqa": ("piqa/dev.mosaic.jsonl", lambda r: {"goal": r["query"].removeprefix("Question: ").strip(),
                                                 "sol1": r["choices"][0], "sol2": r["choices"][1], "label": r["gold"]},
             "gold"),
    "winogrande": ("winogrande/dev.mosaic.jsonl", winogrande, "gold"),
    "lambada_openai": ("lambada/lambada_openai_test.mosaic.jsonl",
                       lambda r: {"text": f"{r['context']} {r['continuation']}"}, None),
}


def test_continuous_metrics_find_the_real_gold_on_real_items(tmp_path, tiny_lm, monkeypatch):
    import lm_eval
    from lm_eval.tasks import TaskManager

    for key, value in OFFLINE_ENV.items():
        monkeypatch.setenv(key, value)
    golds = {}
    for task, (path, convert, gold) in REAL.items():
        rows = [json.loads(line) for line in (SHARED / path).read_text().splitlines()[:ITEMS]]
        golds[task] = [r[gold] if gold else None for r in rows]
        docs = [convert(r) for r in rows]
        write_local_task(tmp_path, task, included_yaml(task), {split: docs for split in task_splits(task)})
    # every task is a local file including its builtin YAML by path: no index of lm-eval's own needed
    run = lm_eval.simple_evaluate(model="hf", model_args=f"pretrained={tiny_lm},dtype=float32", tasks=list(REAL),
                                  task_manager=TaskManager(include_path=[str(TASKS_DIR), str(tmp_path)], include_defaults=False),
                                  batch_size=8,
                                  device="cpu", log_samples=True)
    for task in REAL:
        config = run["configs"][task]
        samples = [json.loads(json.dumps(s, default=str)) for s in run["samples"][task]]  # as evaluation.evaluate logs them
        assert len(samples) == ITEMS, task
        for sample in samples:
            values = document_values(sample, config)
            assert math.isfinite(values["bpb"]) and values["bpb"] > 0, (task, values)
            if config["output_type"] == "multiple_choice":
                assert gold_index(sample, config["target_delimiter"]) == golds[task][sample["doc_id"]], task
                assert 0 <= values["p_gold"] <= 1
            else:  # LAMBADA: the last word, after a space
                (loglikelihood, _), = sample["filtered_resps"]
                assert sample["arguments"][0][1] == sample["target"] and sample["target"].startswith(" ")
                assert values["bpb"] == pytest.approx(-loglikelihood / math.log(2) / len(sample["target"].encode()))
