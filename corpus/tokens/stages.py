"""The token stages: the shared tokenizer (after the extraction of the arms it is trained on),
each arm's tokenisation to Megatron `.bin/.idx` with the record ids beside them (after its
post-processing), and the equal token budget (after every arm's tokenisation)."""

from __future__ import annotations

from datatrove.pipeline.tokens import MegatronDocumentTokenizer

from configs.base import Resources
from configs.experiment import ExperimentConfig
from corpus.postprocess.stages import final_stage
from corpus.stage import Stage, documents_reader, label
from corpus.tokens.budget import DocumentKeys, TokenBudget
from corpus.tokens.tokenizer import SharedTokenizer


def one_task(config_resources) -> Resources:
    return Resources(tasks=1, workers=1, **config_resources.model_dump())


def tokenizer_stage(config: ExperimentConfig) -> Stage:
    """A trained tokenizer waits for the extraction of the arms it is trained on; a pretrained one
    for nothing (so re-extracting an arm never makes it, or the stages that count with it, run
    again)."""
    sampled = [label("extract", arm) for arm in config.tokenizer_arms()] if config.tokenizer.kind == "sentencepiece" else []
    return Stage("tokenizer", None, [SharedTokenizer(config)], one_task(config.tokenizer.resources),
                 config.output_root / "logs" / "tokenizer", sampled, outputs=[config.tokenizer_dir()])


def dataset_stages(config: ExperimentConfig) -> list[Stage]:
    """Every arm tokenised (a task per post-processed file: a token shard each), then cut to the budget."""
    tokenized = []
    for arm in config.arms:
        tokens = config.dataset_dir(arm) / "tokens"
        tokenized.append(Stage("tokenize", arm, [
            documents_reader(config.post_dir(arm) / "output"),
            DocumentKeys(str(tokens), save_filename=arm),
            MegatronDocumentTokenizer(str(tokens), save_filename=arm, tokenizer_name_or_path=str(config.tokenizer_file()),
                                      eos_token=config.tokenizer.eos_token),
        ], config.document_resources(arm), config.dataset_dir(arm) / "logs" / "tokenize", [final_stage(config, arm), "tokenizer"],
            outputs=[tokens]))
    budget = Stage("budget", None, [TokenBudget(config)], one_task(config.dataset.resources),
                   config.output_root / "logs" / "budget", [stage.label for stage in tokenized])
    return [*tokenized, budget]


def token_stages(config: ExperimentConfig) -> list[Stage]:
    """The tokenizer and, with a dataset section, tokenisation and the budget."""
    if config.tokenizer is None:
        return []
    return [tokenizer_stage(config), *(dataset_stages(config) if config.dataset else [])]
