"""Submit training runs to Slurm GPU nodes: one job per (arm, seed), shaped by `pretrain.slurm`.

    python -m pretrain.submit CONFIG [--rung RUNG] [--arm ARM] [--seed SEED] [--dry-run]

(`sbatch slurm/pretrain.sh CONFIG [ARM] [SEED] [RUNG]` runs this on the cluster.) One job per
(rung, arm, seed), shaped by the rung's `slurm` (pretrain.slurm with the rung's keys over it): a
ladder's small rungs ask for few GPUs and short times, its target the full allocation. Each job runs one
srun task per node, each a torchrun over the node's GPUs, rendezvous on the first node. Jobs are
`--requeue`: after a preemption or a node failure Slurm starts them again, and before the time
limit they save a checkpoint and requeue themselves (USR1, 5 minutes ahead: the job's trap asks the
loop to save at the end of its step, pretrain.train.STOP_REQUEST); every start resumes from the
run's latest checkpoint. Finished runs are not submitted again. The job script is written to
`<run_dir>/train.sbatch`, its output to `<run_dir>/slurm-<jobid>.out`.
"""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
from pathlib import Path

from configs.experiment import ExperimentConfig, load_experiment_or_exit
from pretrain.train import STOP_REQUEST, selected_runs, unfinished
from slurm.console import say
from slurm.jobs import REPO, BatchJob, sbatch, write_job
from slurm.lock import ENDED, DriverLocked, driving


def training_job(config: ExperimentConfig, config_path: str, arm: str, seed: int) -> BatchJob:
    """The job of one run of `config`'s one rung (ExperimentConfig.for_rung)."""
    s, rung = config.pretrain.slurm, config.pretrain.rung.name
    run_dir = config.run_dir(arm, seed).resolve()
    config_file = Path(config_path).resolve()
    torchrun = (f'torchrun --nnodes="$SLURM_NNODES" --nproc-per-node={s.gpus_per_node} --rdzv-id="$SLURM_JOB_ID" '
                f'--rdzv-backend=c10d --rdzv-endpoint="$MASTER_ADDR:$MASTER_PORT" '
                f"-m pretrain.train {shlex.quote(str(config_file))} --rung {rung} --arm {arm} --seed {seed}")
    # the job's CPUs go to its task explicitly: since Slurm 22.05 srun does not inherit sbatch's
    # --cpus-per-task, and the node's torchrun (8 ranks, their data loaders) would share one core
    srun, env_command = f"srun --kill-on-bad-exit=1 --cpus-per-task={s.cpus_per_task}", None
    if s.container_image:
        mounts = container_mounts([REPO, config.output_root.resolve(), config_file.parent], s.container_mounts)
        if missing := unmounted(s.container_env or "", mounts):
            raise SystemExit(f"pretrain.slurm.container_env names {', '.join(missing)}, which the container does not "
                             f"see: add it to pretrain.slurm.container_mounts (e.g. {missing[0]}:{missing[0]})")
        srun += (f" --container-image={shlex.quote(s.container_image)} --container-mounts={shlex.quote(mounts)}"
                 f" --container-workdir={shlex.quote(str(REPO))}")
        inside = f"{s.container_env} && exec {torchrun}" if s.container_env else f"exec {torchrun}"
        command = f"{srun} bash -c {shlex.quote(inside)}"
        env_command = "# the environment is the container's (pretrain.slurm.container_image, container_env)"
    else:
        command = f"{srun} {torchrun}"
    return BatchJob(
        name=f"train-{arm}-{rung}-seed{seed}", partition=s.partition, qos=s.qos, time=s.time, cpus_per_task=s.cpus_per_task,
        mem_gb=s.mem_gb, output=run_dir / "slurm-%j.out", nodes=s.nodes, ntasks_per_node=1,
        gpus_per_node=s.gpus_per_node, requeue=True, signal="B:USR1@300", open_mode="append", env_command=env_command,
        commands=f"""
# 5 minutes before the time limit: the run saves a checkpoint at the end of the step it is in and
# stops, then the job requeues itself; the next start resumes from that checkpoint. Should the save
# not end in 4 minutes, the job requeues all the same (and resumes from the checkpoint before it)
STOP={shlex.quote(str(run_dir / STOP_REQUEST))}
rm -f "$STOP"
REQUEUE=
trap 'echo "time limit near: saving a checkpoint, then requeueing"; touch "$STOP"; REQUEUE=1
      (sleep 240 && scontrol requeue "$SLURM_JOB_ID") &' USR1
export MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
export MASTER_PORT=$((20000 + SLURM_JOB_ID % 20000))
{command} &
TRAINING=$!
while :; do  # the trap interrupts wait: wait again while training runs
  STATUS=0
  wait "$TRAINING" || STATUS=$?
  kill -0 "$TRAINING" 2>/dev/null || break
done
if [ -n "$REQUEUE" ]; then scontrol requeue "$SLURM_JOB_ID"; fi
exit "$STATUS"
""")


def container_mounts(own: list[Path], listed: list[str]) -> str:
    """pyxis's --container-mounts: the folders a training job reads and writes at their own paths
    (each once, none inside another), then the config's own list."""
    folders: list[Path] = []
    for folder in sorted(set(own), key=lambda p: (len(p.parts), str(p))):  # outermost first, then by name
        if not any(folder.is_relative_to(kept) for kept in folders):
            folders.append(folder)
    return ",".join([f"{f}:{f}" for f in folders] + listed)


def unmounted(command: str, mounts: str) -> list[str]:
    """The absolute paths a shell command names (a venv to activate, a script) that lie under none
    of the container's mount points (pyxis's SRC:DST[:FLAGS] list)."""
    targets = [Path(mount.split(":")[1]) for mount in mounts.split(",") if mount]
    return [word for word in shlex.split(command) if word.startswith("/")
            and not any(Path(word).is_relative_to(target) for target in targets)]


def queued_job(script: Path) -> str | None:
    """A job of this user whose batch script is `script` (a run's train.sbatch) and that still waits
    or runs: a second one would train the same run beside it, both writing its checkpoints. None
    where no Slurm client is installed (nothing can be queued)."""
    try:
        out = subprocess.run(["squeue", "--me", "--noheader", "--format=%i|%T|%o"], capture_output=True, text=True,
                             check=True)
    except FileNotFoundError:
        return None
    except subprocess.CalledProcessError as e:
        raise SystemExit(f"cannot tell whether {script} is queued already: squeue failed ({e.stderr.strip() or e}); "
                         "submit from a node where squeue runs") from None
    for line in out.stdout.splitlines():
        job, state, command = (line.strip().split("|", 2) + ["", ""])[:3]
        # Slurm keeps the script's path as sbatch was given it (relative to where it ran: here, as a rule)
        if command and Path(command).resolve() == script and state not in ENDED:
            return job
    return None


def submit(config: ExperimentConfig, config_path: str, runs: list[tuple[str, str, int]], dry_run: bool) -> list[str]:
    jobs = []
    for rung, arm, seed in runs:
        one = config.for_rung(rung)
        if not unfinished(one, arm, seed):
            print(f"{arm} {rung} seed {seed}: finished already")
            continue
        script = one.run_dir(arm, seed) / "train.sbatch"
        if not dry_run and (queued := queued_job(script.resolve())):
            print(f"{arm} {rung} seed {seed}: queued or running already, job {queued} ({script})")
            continue
        script = write_job(training_job(one, config_path, arm, seed), one, script)
        if dry_run:
            print(f"{arm} {rung} seed {seed}: {script}")
            continue
        jobs.append(sbatch(script))
        print(f"{arm} {rung} seed {seed}: job {jobs[-1]} ({script})")
    return jobs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pretrain.submit", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("config")
    parser.add_argument("--rung", help="default: every rung of pretrain.ladder")
    parser.add_argument("--arm", help="default: every trained arm")
    parser.add_argument("--seed", type=int, help="default: every seed of each rung")
    parser.add_argument("--dry-run", action="store_true", help="write the job scripts, submit nothing")
    args = parser.parse_args(argv)
    config = load_experiment_or_exit(args.config)
    runs = selected_runs(config, args.config, args.arm, args.seed, args.rung)
    try:
        with driving(config.output_root, say):
            submit(config, args.config, runs, args.dry_run)
    except DriverLocked as e:
        print(f"{args.config}: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
