"""`tokenizer:` and `dataset:`: the one tokenizer of every arm, and the token budget each arm is cut to."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from configs.base import StrictModel, TaskResources


class TokenizerConfig(StrictModel):
    """One tokenizer for every arm.

    `pretrained`: a Hugging Face tokenizer (local folder or hub id, fetched once by the tokenizer
    stage). `sentencepiece`: trained by the project on the same number of characters drawn from
    every arm's extracted documents.
    """

    kind: Literal["pretrained", "sentencepiece"] = Field(description="`pretrained`: an existing Hugging Face "
                                                         "tokenizer; `sentencepiece`: one trained by the project on "
                                                         "the extractor arms' text.")
    name_or_path: str | None = Field(None, description="kind: pretrained only (and needed there): the tokenizer's "
                                     "local folder or hub id, fetched once by the tokenizer stage.")
    eos_token: str = Field("</s>", description="The end-of-document token appended to every document; kind: "
                           "sentencepiece always uses `</s>`, so change it only for a pretrained tokenizer.")
    # 256 byte-fallback pieces + specials + merges
    vocab_size: int = Field(8000, ge=384, description="kind: sentencepiece only: vocabulary size of the trained "
                            "tokenizer.")
    sample_chars_per_arm: int = Field(2_000_000, ge=1000, description="kind: sentencepiece only: characters of "
                                      "extracted text drawn from each extractor arm (bounds and reference corpora "
                                      "aside) to train the tokenizer on.")
    seed: int = Field(0, description="kind: sentencepiece only: seed of the training sample's draw.")
    resources: TaskResources = Field(TaskResources(mem_per_cpu_gb=16), description="Slurm resources of the "
                                     "tokenizer stage's one task.")

    @model_validator(mode="after")
    def _options_of_the_kind(self) -> TokenizerConfig:
        if self.kind == "pretrained":
            if not self.name_or_path:
                raise ValueError("kind: pretrained needs name_or_path (a folder or a hub id)")
            trained_only = sorted(self.model_fields_set & {"vocab_size", "sample_chars_per_arm", "seed"})
            if trained_only:
                raise ValueError(f"kind: pretrained uses the tokenizer as it is; {trained_only} only apply to "
                                 "kind: sentencepiece: drop them")
        if self.kind == "sentencepiece" and self.name_or_path:
            raise ValueError("kind: sentencepiece trains its own tokenizer; drop name_or_path")
        if self.kind == "sentencepiece" and self.eos_token != "</s>":
            raise ValueError("kind: sentencepiece ends documents with </s>; drop eos_token")
        return self


class DatasetConfig(StrictModel):
    """Every arm is cut to exactly `tokens_per_arm` tokens (end-of-document tokens included):
    whole documents in the order of a hash of (seed, record id), so the same record is preferred
    in every arm and the draw depends on neither the task count nor the file order; only the last
    selected document is cut short. The budget stage reads one token shard at a time."""

    tokens_per_arm: int = Field(ge=1, description="The token budget: every arm's dataset is cut to exactly this "
                                "many tokens (end-of-document tokens included). It must hold each rung's "
                                "training tokens.")
    seed: int = Field(0, description="Seed of the document order the budget is cut in (a hash of seed and record "
                      "id, so every arm prefers the same records).")
    # a read task's share of the tokens is split into such files, and the arm's post-processing and
    # tokenisation run a task per file, so a corpus read in 32 tasks still gives bounded token shards
    reference_shard_tokens: int = Field(250_000_000, ge=1, description="The most tokens (a document more, at most) "
                                        "of one file a reference arm's read stage writes, and so of one task of its "
                                        "post-processing and tokenisation and of one token shard. Lower it when "
                                        "those tasks run out of memory or time.")
    resources: TaskResources = Field(TaskResources(mem_per_cpu_gb=8, time="24:00:00"), description="Slurm resources "
                                     "of the budget stage's task.")
