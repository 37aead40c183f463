"""The experiment config: one YAML per experiment (`configs/*.yaml`), validated into pydantic models.

`configs.experiment` is the tree every stage reads (corpus, pretrain, evaluation); the arm section
of each extractor kind comes from `corpus.extractors`, the model shapes from `configs.model`.
"""
