"""Extraction stage: every arm over the same WARC records, under a datatrove executor.

    python -m corpus.extract CONFIG [--arms A B]

Writes, per arm, under `<output_root>/extract/<arm>/`: `output/*.jsonl.gz` (documents),
`logs/` (datatrove logs, per-task stats, completion markers: a re-run skips finished tasks) and
`summary.json` (every record accounted for). Locally it runs the arms one after the other and
prints the summary table; with `executor.kind: slurm` it submits one job array per arm
(Trafilatura on the CPU partition, Dripper with a GPU per task, as the arm's resources say).
"""

from __future__ import annotations

import argparse
import os
import sys

from corpus.arms import extraction_pipeline
from corpus.config import DripperArm, ExperimentConfig, load_experiment_or_exit
from corpus.inputs import resolve_inputs
from corpus.summary import print_summaries, summarize_arm, write_summary


def local_workers(arm, requested: int) -> int:
    """Parallel local processes: one for an in-process vLLM engine (it takes the whole machine,
    or its one GPU), else at most one per core."""
    if isinstance(arm, DripperArm) and arm.labeler.kind == "vllm":
        return 1
    return min(requested, os.cpu_count() or 1)


def arm_executor(config: ExperimentConfig, arm_name: str, pipeline: list, kind: str):
    arm = config.arms[arm_name]
    res = arm.resources
    logs = str(config.arm_dir(arm_name) / "logs")
    if kind == "local":
        from datatrove.executor import LocalPipelineExecutor

        return LocalPipelineExecutor(pipeline, tasks=res.tasks, workers=local_workers(arm, res.workers),
                                     logging_dir=logs, skip_completed=True)
    from datatrove.executor import SlurmPipelineExecutor

    return SlurmPipelineExecutor(
        pipeline, tasks=res.tasks, workers=res.workers, time=res.time, partition=res.partition,
        cpus_per_task=res.cpus_per_task, mem_per_cpu_gb=res.mem_per_cpu_gb, gpus_per_task=res.gpus_per_task,
        qos=res.qos, job_name=f"{config.executor.job_name_prefix}-extract-{arm_name}",
        env_command=config.executor.env_command, logging_dir=logs,
        slurm_logs_folder=str(config.arm_dir(arm_name) / "slurm_logs"), skip_completed=True,
    )


def run_extraction(config: ExperimentConfig, arms: list[str] | None = None, executor: str | None = None) -> list[dict]:
    """Run (locally) or submit (Slurm) each arm; returns the local summaries."""
    kind = executor or config.executor.kind
    base, paths_file = resolve_inputs(config)
    summaries = []
    for arm_name in arms or list(config.arms):
        arm_executor(config, arm_name, extraction_pipeline(config, arm_name, base, paths_file), kind).run()
        if kind == "local":
            summary = summarize_arm(config, arm_name)
            write_summary(config, arm_name, summary)
            summaries.append(summary)
    return summaries


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m corpus.extract", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("config", help="experiment YAML, e.g. configs/local.yaml")
    parser.add_argument("--arms", nargs="+", help="only these arms (default: all)")
    parser.add_argument("--executor", choices=["local", "slurm"],
                        help="override the config's executor.kind (slurm/extract.sh sets it from its context)")
    args = parser.parse_args(argv)
    config = load_experiment_or_exit(args.config)
    unknown = set(args.arms or []) - set(config.arms)
    if unknown:
        print(f"--arms: {sorted(unknown)} not in {args.config} (arms: {sorted(config.arms)})", file=sys.stderr)
        return 2
    summaries = run_extraction(config, args.arms, args.executor)
    if summaries:
        print_summaries(summaries)
    else:
        print(f"submitted; when the jobs finish: python -m corpus.summary {args.config}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
