"""Slurm job scripts for the stages that are not datatrove pipelines (pretraining, evaluation).

The shell scripts beside this file are the entry points (`sbatch slurm/<stage>.sh`); the corpus
stages are submitted by datatrove's SlurmPipelineExecutor (corpus.flow.stages)."""
