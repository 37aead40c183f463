"""Reference-corpus arms: an existing corpus (FineWeb, RefinedWeb, local Parquet or JSONL) trained
and scored exactly as the extractor arms are, for context (the Dripper paper's Table 5 rows).

    fineweb:
      corpus: huggingface            # or parquet, jsonl (local files: `paths`)
      dataset: HuggingFaceFW/fineweb
      subset: sample-10BT
      text_field: text

The arm's read stage streams the corpus through datatrove's reader and stops as soon as it holds
`token_margin` x `dataset.tokens_per_arm` tokens (shared tokenizer, end-of-document included), so
a 15T-token corpus costs what the budget needs. By default the documents join after
post-processing (public corpora are filtered already); `postprocess: true` sends them through
the experiment's post-processing like every extractor arm. From there the arm is tokenised, cut to
the same budget, trained, evaluated and reported like the others. Reference arms are not in the
tokenizer's training sample: the tokenizer is the one the extractor arms would have alone. The
steps are `corpus.read.reference_steps`.
"""

from __future__ import annotations

import glob
from typing import Literal

from pydantic import Field, model_validator

from configs.base import Resources, StrictModel

HUB, PARQUET, JSONL = "huggingface", "parquet", "jsonl"


class ReferenceArm(StrictModel):
    corpus: Literal["huggingface", "parquet", "jsonl"] = Field(description="An existing corpus instead of an "
                                                               "extractor: a Hugging Face dataset (`huggingface`, "
                                                               "streamed) or local `parquet` or `jsonl` files.")
    dataset: str | None = Field(None, description="corpus: huggingface (and needed there): a hub id like "
                                "`HuggingFaceFW/fineweb`, or a local dataset folder.")
    subset: str | None = Field(None, description="corpus: huggingface: the dataset's config (subset), e.g. "
                               "`sample-10BT`.")
    split: str | None = Field(None, description="corpus: huggingface: the split read.")
    paths: list[str] | None = Field(None, description="corpus: parquet or jsonl (and needed there): local files "
                                    "or globs (`.jsonl`, `.jsonl.gz`), each matching a file.")
    text_field: str = Field("text", description="The field holding a document's text.")
    id_field: str = Field("id", description="The field holding a document's id; documents without one are named "
                          "`<file>/<row>`.")
    seed: int = Field(0, description="Orders the local files, and with each document's id decides which documents "
                      "`sample_rate` keeps (the same documents on every run).")
    sample_rate: float = Field(1.0, gt=0, le=1, description="Probability a document is kept, decided by a hash of "
                               "`seed` and its id.")
    max_documents: int | None = Field(None, ge=1, description="The most documents a read task reads (the token "
                                      "quota usually stops it first); needed without a `dataset` section.")
    token_margin: float | None = Field(None, ge=1, description="Tokens read per token of `dataset.tokens_per_arm`; "
                                       "null: 1.2, or 2.0 with `postprocess` (which removes some).")
    postprocess: bool = Field(False, description="Send the documents through the experiment's post-processing like "
                              "an extractor arm's; `false`: they join after it (public corpora are filtered "
                              "already).")
    resources: Resources = Field(Resources(), description="Tasks and Slurm resources of the arm's read stage; its "
                                 "post-processing and tokenisation run a task per file it writes.")

    @model_validator(mode="after")
    def _source_of_the_kind(self) -> ReferenceArm:
        if self.corpus == HUB:
            if not self.dataset:
                raise ValueError("corpus: huggingface needs dataset (a hub id like HuggingFaceFW/fineweb)")
            if self.paths is not None:
                raise ValueError("corpus: huggingface reads `dataset`; paths are for corpus: parquet or jsonl")
        else:
            if not self.paths:
                raise ValueError(f"corpus: {self.corpus} needs paths (files or globs)")
            given = sorted(k for k in ("dataset", "subset", "split") if getattr(self, k) is not None)
            if given:
                raise ValueError(f"corpus: {self.corpus} reads `paths`; {given} are for corpus: huggingface")
            for pattern in self.paths:
                if not glob.glob(pattern):
                    raise ValueError(f"no file matches {pattern!r}")
        return self

    @property
    def margin(self) -> float:
        return self.token_margin or (2.0 if self.postprocess else 1.2)

    def files(self) -> list[str]:
        """The local files, in the seeded order they are read."""
        import random

        files = sorted({p for pattern in self.paths or [] for p in glob.glob(pattern)})
        random.Random(f"reference:{self.seed}").shuffle(files)
        return files

    def token_quota(self, tokens_per_arm: int, tasks: int) -> int:
        """Tokens each read task stops at."""
        return -(-int(tokens_per_arm * self.margin) // tasks)

    def files_per_task(self, dataset) -> int:
        """Files each read task writes: its token quota in files of `dataset.reference_shard_tokens`
        (one without a dataset section: no quota)."""
        if dataset is None:
            return 1
        return -(-self.token_quota(dataset.tokens_per_arm, self.resources.tasks) // dataset.reference_shard_tokens)

    def files_written(self, dataset) -> int:
        """Files the read stage writes at most (fewer where the corpus ends first): the tasks of the
        arm's post-processing and tokenisation, and its token shards."""
        return self.resources.tasks * self.files_per_task(dataset)
