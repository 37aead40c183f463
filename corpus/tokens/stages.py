"""The token stages: the shared tokenizer (after every arm's extraction), each arm's tokenisation
to Megatron `.bin/.idx` (after its post-processing), and the equal token budget (after every arm's
tokenisation)."""

from __future__ import annotations

from datatrove.pipeline.tokens import MegatronDocumentTokenizer

from configs.experiment import ExperimentConfig
from corpus.postprocess.stages import final_stage
from corpus.stage import ONE_TASK, Stage, documents_reader, label
from corpus.tokens.budget import TokenBudget, budget_is_stale
from corpus.tokens.tokenizer import SharedTokenizer


def tokenizer_stage(config: ExperimentConfig) -> Stage:
    logs = config.output_root / "logs"
    extracted = [label("extract", arm) for arm in config.extractor_arms]
    return Stage("tokenizer", None, [SharedTokenizer(config)], ONE_TASK, logs / "tokenizer", extracted)


def dataset_stages(config: ExperimentConfig) -> list[Stage]:
    """Every arm tokenised, then cut to the budget."""
    tokenized = [Stage("tokenize", arm, [
        documents_reader(config.post_dir(arm) / "output"),
        MegatronDocumentTokenizer(str(config.dataset_dir(arm) / "tokens"), save_filename=arm,
                                  tokenizer_name_or_path=str(config.tokenizer_file()), eos_token=config.tokenizer.eos_token),
    ], config.postprocess.resources, config.dataset_dir(arm) / "logs" / "tokenize", [final_stage(config, arm), "tokenizer"])
        for arm in config.arms]
    budget = Stage("budget", None, [TokenBudget(config)], ONE_TASK, config.output_root / "logs" / "budget",
                   [stage.label for stage in tokenized])
    if budget_is_stale(config):  # the cut is deterministic: forget it and cut again
        (budget.logs / "completions" / "00000").unlink(missing_ok=True)
    return [*tokenized, budget]


def token_stages(config: ExperimentConfig) -> list[Stage]:
    """The tokenizer and, with a dataset section, tokenisation and the budget."""
    if config.tokenizer is None:
        return []
    return [tokenizer_stage(config), *(dataset_stages(config) if config.dataset else [])]
