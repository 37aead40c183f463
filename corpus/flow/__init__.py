"""The flow that runs the stages: `stages` lists them in order, `execute` runs them here, `submit`
on Slurm, `progress` draws their bars, `run` is `python -m corpus.flow CONFIG`, and `plan` pilots a
few input files through them to project a run before it is spent (`fit`: the whole-arm stages'
nodes; `storage`: each stage's tasks queued and bytes)."""
