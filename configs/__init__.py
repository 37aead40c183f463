"""The experiment config: one YAML per experiment (`configs/*.yaml`), validated into pydantic models.

`configs.experiment` is the root every stage reads (corpus, pretrain, evaluation): loading, `include:`,
the checks across sections and the output paths. Each section of the YAML is a module of its own
(`configs.inputs`, `configs.arms`, `configs.postprocess`, `configs.tokens`, `configs.pretrain`,
`configs.evaluation`, `configs.executor`, `configs.plan`); the arm section of each extractor kind
comes from `corpus.extractors`, the model shapes from `configs.model` (named sizes: `configs/models/`).
"""
