"""Score every exported checkpoint with lm-eval on the suite (evaluation/tasks/suite.yaml).

    python -m evaluation.evaluate CONFIG [--rung RUNG]   every checkpoint not yet evaluated, here
    python -m evaluation.evaluate CONFIG --submit        the same as a Slurm job array (GPU nodes)
    python -m evaluation.evaluate CONFIG --checkpoint DIR  one checkpoint (what each array task runs)

Checkpoints are the Hugging Face folders training exports (`<output_root>/train/<arm>/<rung>/
seed<S>/hf/step_*`), of every rung of the ladder unless --rung names one. Each gets
`<output_root>/eval/<arm>/<rung>/seed<S>/step_*/`: `results.json` (lm-eval's results, group
structure, task configs and versions, with arm, rung, seed and step)
and `samples_<task>.jsonl` (the per-document logs of `--log_samples`, from which the report reads
every per-document score and the continuous metrics). The clean-text tasks of
`evaluation.clean_text` (evaluation/tasks/clean_text.py) run in the same call as the suite's zero-shot
tasks. A checkpoint whose `results.json` parses and names it is done and skipped on a re-run; a cut or
empty one is evaluated again, with a message.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shlex
import sys
from pathlib import Path

from configs.base import ConfigError
from configs.durable import write_atomically
from configs.environment import check_output_root
from configs.experiment import ExperimentConfig, load_experiment_or_exit
from configs.provenance import write_provenance
from evaluation.tasks.clean_text import clean_text_tasks, write_clean_text_tasks
from evaluation.tasks.suite import TASKS_DIR, load_suite
from pretrain.verify import DatasetMismatch, check_inputs
from slurm import console
from slurm.jobs import BatchJob, sbatch, write_job

OFFLINE_ENV = {"HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


def exported_checkpoints(config: ExperimentConfig, rung: str | None = None) -> list[Path]:
    """Every exported checkpoint of every (rung, arm, seed) (or of `rung`'s), in that order by step."""
    found = []
    for one in (config.for_rung(r) for r in config.rungs() if rung in (None, r)):
        for arm, seed in one.runs():
            found += sorted(p.parent for p in (one.run_dir(arm, seed) / "hf").glob("step_*/xsuite.json"))
    return found


def checkpoint_info(checkpoint: Path) -> dict:
    """Experiment, arm, rung, seed and step of an exported checkpoint (written by pretrain.export)."""
    return json.loads((checkpoint / "xsuite.json").read_text())


def result_dir(config: ExperimentConfig, info: dict) -> Path:
    return config.for_rung(info["rung"]).eval_dir(info["arm"], info["seed"]) / f"step_{info['step']:07d}"


class DamagedResult(ValueError):
    """A results.json that does not parse or does not name its checkpoint."""


def read_result(path: Path, checkpoint: Path, expected: dict) -> dict:
    """A checkpoint's results.json, whole: it parses and names the `expected` arm, seed and step. A
    cut or empty file (a full disk, a job killed mid-write before writes were atomic, a hand edit)
    is DamagedResult, naming the command that redoes it (`checkpoint`: the export it scores)."""
    redo = f"python -m evaluation.evaluate CONFIG --checkpoint {checkpoint}"
    try:
        result = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise DamagedResult(f"{path}: damaged ({type(e).__name__}: {e}); redo it: {redo}") from None
    named = {key: result.get(key) for key in expected} if isinstance(result, dict) else None
    if named != {key: expected[key] for key in expected}:
        raise DamagedResult(f"{path}: names checkpoint {named}, not {expected}; redo it: {redo}")
    return result


def evaluated(config: ExperimentConfig, checkpoint: Path) -> bool:
    """Done: its results.json parses and names it; a damaged one is redone, with a message."""
    path = result_dir(config, checkpoint_info(checkpoint)) / "results.json"
    if not path.is_file():
        return False
    try:
        read_result(path, checkpoint, {key: checkpoint_info(checkpoint)[key] for key in ("arm", "seed", "step")})
    except DamagedResult as e:
        console.say(f"evaluated again: {str(e).split('; redo it')[0]}")
        return False
    return True


def pending(config: ExperimentConfig, rung: str | None = None) -> list[Path]:
    return [c for c in exported_checkpoints(config, rung) if not evaluated(config, c)]


class ExpectedOverrides(logging.Filter):
    """lm-eval warns for every task of an include_path that replaces one of its own: ours do so on
    purpose (coqa, and offline every task keeps its name), so those lines say nothing."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "overrides existing task" not in str(record.msg)


def task_manager(config: ExperimentConfig):
    """lm-eval's TaskManager with the project's tasks (and, offline, the generated ones) on its
    include_path. Indexing takes seconds: build it once per process."""
    from lm_eval.tasks import TaskManager

    from evaluation.tasks.offline import write_offline_tasks

    logging.getLogger("lm_eval.tasks._index").addFilter(ExpectedOverrides())
    paths = [str(TASKS_DIR)]
    if config.evaluation.tasks == "offline":
        os.environ.update(OFFLINE_ENV)
        folder = config.output_root / "eval" / "offline_tasks"
        paths.append(str(write_offline_tasks(folder, config.evaluation.offline_items)))
    if config.evaluation.clean_text.sets:
        paths.append(str(write_clean_text_tasks(config.output_root / "eval" / "clean_text", config.evaluation.clean_text)))
    # offline, every task is a file here that includes its builtin YAML by path: lm-eval's index of
    # its own 14,000 YAMLs (seconds of CPU a process) would find nothing more
    return TaskManager(include_path=paths, include_defaults=config.evaluation.tasks != "offline")


def evaluated_tasks(config: ExperimentConfig, shots: int) -> list[str]:
    """The tasks of one lm-eval call: the suite's with `shots` (both forms), and with zero shots the
    clean-text tasks."""
    suite = load_suite()
    clean = [t.task for t in clean_text_tasks(config.evaluation.clean_text)] if shots == 0 else []
    return [t for b in suite.benchmarks if b.shots == shots for t in b.tasks + (b.cloze or [])] + clean


def evaluate_checkpoint(config: ExperimentConfig, checkpoint: Path, manager, progress=None) -> Path:
    """Every benchmark of the suite on one checkpoint; `progress(n)` after each n tasks."""
    import lm_eval
    import torch

    options, suite = config.evaluation, load_suite()
    info = checkpoint_info(checkpoint)
    out = result_dir(config, info)
    out.mkdir(parents=True, exist_ok=True)
    cuda = torch.cuda.is_available()
    if not cuda:
        torch.set_num_threads(options.cpu_threads)
    results: dict = {"results": {}, "group_subtasks": {}, "configs": {}, "versions": {}, "n-samples": {}}
    for shots in sorted({0} | {b.shots for b in suite.benchmarks}):  # lm-eval takes one shot count per call
        tasks = evaluated_tasks(config, shots)
        run = lm_eval.simple_evaluate(
            model="hf", model_args=f"pretrained={checkpoint},dtype={'bfloat16' if cuda else 'float32'}",
            tasks=tasks, num_fewshot=shots, task_manager=manager, batch_size=options.batch_size,
            device="cuda" if cuda else "cpu", log_samples=True, limit=options.limit,
            gen_kwargs=f"max_gen_toks={options.max_gen_toks}" if options.max_gen_toks else None,
        )
        for key in results:
            results[key].update(run.get(key, {}))
        for task, samples in run["samples"].items():
            write_atomically(out / f"samples_{task}.jsonl", "".join(json.dumps(s, default=str) + "\n" for s in samples))
        if progress:
            progress(len(tasks))
    results |= {"checkpoint": str(checkpoint), "arm": info["arm"], "rung": info["rung"], "seed": info["seed"],
                "step": info["step"],
                "tasks_source": options.tasks, "lm_eval_version": lm_eval.__version__}
    # last and whole: a checkpoint is done when its results.json parses (read_result)
    write_atomically(out / "results.json", json.dumps(results, indent=2, default=str) + "\n")
    return out


def no_checkpoint_refusal(config: ExperimentConfig, config_path: str) -> str:
    return (f"{config_path}: no exported checkpoint under {config.output_root / 'train'}; "
            f"train first: bash slurm/pretrain.sh {config_path}")


def submit(config: ExperimentConfig, config_path: str, rung: str | None = None) -> str | None:
    """One Slurm array task per pending checkpoint."""
    todo = pending(config, rung)
    if not todo:
        print("every checkpoint is evaluated")
        return None
    s = config.evaluation.slurm
    folder = config.output_root / "eval" / "slurm"
    folder.mkdir(parents=True, exist_ok=True)
    listing = folder / "checkpoints.txt"
    listing.write_text("".join(f"{c.resolve()}\n" for c in todo))
    job = BatchJob(
        name="evaluate", partition=s.partition, qos=s.qos, time=s.time, cpus_per_task=s.cpus_per_task, mem_gb=s.mem_gb,
        output=folder.resolve() / "evaluate-%A_%a.out", gpus=s.gpus, array=f"0-{len(todo) - 1}%{s.parallel}",
        commands=f"""
CHECKPOINT=$(sed -n "$((SLURM_ARRAY_TASK_ID + 1))p" {shlex.quote(str(listing.resolve()))})
exec python -m evaluation.evaluate {shlex.quote(str(Path(config_path).resolve()))} --checkpoint "$CHECKPOINT"
""")
    script = write_job(job, config, folder / "evaluate.sbatch")
    job_id = sbatch(script)
    print(f"job {job_id}: {len(todo)} checkpoints ({listing})")
    return job_id


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m evaluation.evaluate", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("config")
    parser.add_argument("--submit", action="store_true", help="submit a Slurm job array instead of running here")
    parser.add_argument("--checkpoint", type=Path, help="evaluate this exported checkpoint only")
    parser.add_argument("--rung", help="the checkpoints of this rung of pretrain.ladder only (default: every rung)")
    console.add_verbose_flag(parser)
    args = parser.parse_args(argv)
    console.apply_verbose_flag(args)
    config = load_experiment_or_exit(args.config)
    if config.evaluation is None or config.pretrain is None:
        print(f"{args.config}: needs pretrain and evaluation sections", file=sys.stderr)
        return 2
    if args.rung is not None and args.rung not in config.rungs():
        print(f"--rung {args.rung!r} is not a rung of {args.config} ({config.rungs()})", file=sys.stderr)
        return 2
    if args.submit:
        submit(config, args.config, args.rung)
        return 0
    try:
        check_output_root(config.output_root)
    except ConfigError as e:
        print(f"{args.config}: {e}", file=sys.stderr)
        return 2
    if not args.checkpoint and not exported_checkpoints(config, args.rung):
        print(no_checkpoint_refusal(config, args.config), file=sys.stderr)
        return 2
    todo = [args.checkpoint] if args.checkpoint else pending(config, args.rung)
    if not todo:
        console.say("every checkpoint is evaluated")
        return 0
    try:  # the data the checkpoints were trained on, and the tokenizer they read text with
        console.say(check_inputs(config, sorted({checkpoint_info(c)["arm"] for c in todo})))
    except DatasetMismatch as e:
        print(f"{args.config}: {e}", file=sys.stderr)
        return 2
    log = config.output_root / "logs" / "evaluate.log"
    with console.redirected(log):
        manager = task_manager(config)
    tasks = sum(len(evaluated_tasks(config, shots)) for shots in {0} | {b.shots for b in load_suite().benchmarks})
    runs: dict[tuple[str, str, int], list[Path]] = {}
    for checkpoint in todo:
        info = checkpoint_info(checkpoint)
        runs.setdefault((info["rung"], info["arm"], info["seed"]), []).append(checkpoint)
    for (rung, arm, seed), checkpoints in runs.items():
        one = config.for_rung(rung)
        title = f"evaluate {arm} {rung} seed {seed}"
        if warning := write_provenance(one.eval_dir(arm, seed), one, "evaluation"):
            console.say(f"warning: {warning}")
        with console.stage(title, log, "tasks", len(checkpoints) * tasks) as bar:
            for checkpoint in checkpoints:
                evaluate_checkpoint(config, checkpoint, manager, progress=bar.update)
        console.closing_line(title, f"{len(checkpoints)} checkpoints × {tasks} tasks", one.eval_dir(arm, seed), log)
    return 0


if __name__ == "__main__":
    sys.exit(main())
