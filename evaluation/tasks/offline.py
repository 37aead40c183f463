"""Offline versions of the suite's tasks: small generated data in each task's own schema.

    python -m evaluation.tasks.offline --out DIR [--items 40] [--seed 0]

For every task of the suite, DIR gets `<task>.jsonl` per split and a `<task>.yaml` that
`include`s the real task (lm-eval's builtin YAML, or the project's in evaluation/tasks/lm_eval_tasks)
and only points it at the local files (`dataset_path: json`). The task keeps its name, prompt,
choices and metrics, so with DIR on lm-eval's include_path the same task names run offline, and
results, logs and reports are identical in form to a real run. The data is generated English-like
nonsense with a known answer, short enough for a 128-token context: it exercises every prompt
and metric; its scores mean nothing.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

import yaml

from configs.durable import write_atomically
from corpus.sample.text import NAMES, Prose
from evaluation.tasks.shims import builtin_task_yaml
from evaluation.tasks.suite import TASKS_DIR, load_suite


def _choices(prose: Prose, n: int) -> list[str]:
    return [f"the {prose.rng.choice(prose.nouns)} {prose.rng.choice(['of', 'near', 'for'])} the {prose.rng.choice(prose.nouns)}"
            for _ in range(n)]


def _question(prose: Prose) -> str:
    return prose.sentence().rstrip(".").replace("the ", "which ", 1) + "?"


def _lettered(prose: Prose, n: int, key: str = "text") -> dict:
    labels = "ABCDE"[:n]
    gold = prose.rng.randrange(n)
    return {"choices": {key: _choices(prose, n), "label": list(labels)}, "answerKey": labels[gold]}


def arc(prose, i):
    return {"id": f"arc-{i}", "question": _question(prose), **_lettered(prose, 4)}


def commonsense_qa(prose, i):
    return {"id": f"csqa-{i}", "question": _question(prose), "question_concept": prose.rng.choice(prose.nouns),
            **_lettered(prose, 5)}


def openbookqa(prose, i):
    return {"id": f"obqa-{i}", "question_stem": _question(prose), **_lettered(prose, 4)}


def boolq(prose, i):
    return {"idx": i, "passage": prose.paragraph((1, 3)), "question": _question(prose).rstrip("?").lower(),
            "label": prose.rng.randrange(2)}


def sciq(prose, i):
    a, b, c, d = _choices(prose, 4)
    return {"question": _question(prose), "distractor1": a, "distractor2": b, "distractor3": c,
            "correct_answer": d, "support": prose.paragraph((1, 2))}


def hellaswag(prose, i):
    return {"ind": i, "activity_label": prose.short_title(), "ctx_a": prose.sentence(), "ctx_b": "then the",
            "ctx": prose.sentence(), "endings": [prose.sentence() for _ in range(4)], "source_id": f"gen-{i}",
            "split": "val", "split_type": "indomain", "label": str(prose.rng.randrange(4))}


def winogrande(prose, i):
    a, b = prose.rng.sample(NAMES, 2)
    return {"sentence": f"{a} asked {b} about the {prose.rng.choice(prose.nouns)} because _ knew the answer.",
            "option1": a, "option2": b, "answer": str(prose.rng.randint(1, 2))}


def piqa(prose, i):
    return {"goal": _question(prose), "sol1": prose.sentence(), "sol2": prose.sentence(),
            "label": prose.rng.randrange(2)}


def social_iqa(prose, i):
    return {"context": prose.sentence(), "question": _question(prose), "answerA": prose.sentence(),
            "answerB": prose.sentence(), "answerC": prose.sentence(), "label": str(prose.rng.randint(1, 3))}


def copa(prose, i):
    return {"idx": i, "premise": prose.sentence(), "choice1": prose.sentence(), "choice2": prose.sentence(),
            "question": prose.rng.choice(["cause", "effect"]), "label": prose.rng.randrange(2)}


def coqa(prose, i):
    turns = prose.rng.randint(1, 3)
    return {"source": "generated", "story": prose.paragraph((2, 3)),
            "questions": {"input_text": [_question(prose) for _ in range(turns)]},
            "answers": {"input_text": [prose.rng.choice(prose.nouns) for _ in range(turns)]}}


def lambada(prose, i):
    return {"text": prose.paragraph((1, 3)).rstrip(".")}


def mmlu(prose, i):
    return {"question": _question(prose), "subject": prose.topic, "choices": _choices(prose, 4),
            "answer": prose.rng.randrange(4)}


# task -> (the YAML to include, relative to lm-eval's tasks folder or absolute; doc generator)
OFFLINE = {
    "mmlu": ("mmlu/default/_default_template_yaml", mmlu),
    "mmlu_continuation": ("mmlu/continuation/_continuation_template_yaml", mmlu),
    "arc_easy": ("arc/arc_easy.yaml", arc),
    "arc_challenge": ("arc/arc_challenge.yaml", arc),
    "boolq": ("super_glue/boolq/default.yaml", boolq),
    "commonsense_qa": ("commonsense_qa/default.yaml", commonsense_qa),
    "commonsense_qa_cloze": (str(TASKS_DIR / "commonsense_qa_cloze.yaml"), commonsense_qa),
    "sciq": ("sciq/sciq.yaml", sciq),
    "hellaswag": ("hellaswag/hellaswag.yaml", hellaswag),
    "winogrande": ("winogrande/default.yaml", winogrande),
    "piqa": ("piqa/piqa.yaml", piqa),
    "social_iqa": ("siqa/siqa.yaml", social_iqa),
    "copa": ("super_glue/copa/default.yaml", copa),
    "coqa": (str(TASKS_DIR / "coqa" / "coqa.yaml"), coqa),
    "openbookqa": ("openbookqa/openbookqa.yaml", openbookqa),
    "lambada_openai": ("lambada/lambada_openai.yaml", lambada),
}
SPLITS = ("training_split", "validation_split", "test_split", "fewshot_split")


def included_yaml(task: str) -> Path:
    """The YAML a local version of `task` includes: lm-eval's builtin one or the project's."""
    import lm_eval

    source = OFFLINE[task][0]
    return Path(source) if Path(source).is_absolute() else Path(lm_eval.__file__).parent / "tasks" / source


def task_splits(task: str) -> list[str]:
    """The dataset splits `task` names (training, validation, test, few-shot), each once."""
    base = builtin_task_yaml(included_yaml(task))
    return list(dict.fromkeys(base[k] for k in SPLITS if base.get(k)))


def write_local_task(out: Path, task: str, include: Path, splits: dict[str, list[dict]]) -> None:
    """`<task>.<split>.jsonl` per split and `<task>.yaml`, which includes `include` (keeping its
    name, prompt, choices and metrics) and reads those files instead of its dataset."""
    data_files = {}
    for split, docs in splits.items():
        path = out / f"{task}.{split}.jsonl"
        write_atomically(path, "".join(json.dumps(doc) + "\n" for doc in docs))
        data_files[split] = str(path.resolve())
    config = {"include": str(include), "task": task, "dataset_path": "json", "dataset_name": None,
              "dataset_kwargs": {"data_files": data_files}}
    write_atomically(out / f"{task}.yaml", yaml.safe_dump(config, sort_keys=False))


def write_offline_tasks(out: Path, items: int = 40, seed: int = 0) -> Path:
    """Write data and YAMLs for every task of the suite; returns `out` (an lm-eval include_path)."""
    out.mkdir(parents=True, exist_ok=True)
    missing = set(load_suite().all_tasks()) - set(OFFLINE)
    if missing:
        raise ValueError(f"no offline generator for {sorted(missing)}")
    for task in load_suite().all_tasks():
        make_doc = OFFLINE[task][1]
        splits = {}
        for split in task_splits(task):
            rng = random.Random(f"{seed}:{task}:{split}")
            splits[split] = [make_doc(Prose(rng), i) for i in range(items)]
        write_local_task(out, task, included_yaml(task), splits)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m evaluation.tasks.offline", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--items", type=int, default=40, help="documents per split")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    print(f"wrote {write_offline_tasks(args.out, args.items, args.seed)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
