"""The one tokenizer every arm is counted and tokenised with.

`SharedTokenizer` is a one-task datatrove step run after extraction of every arm. It writes a
Hugging Face tokenizer folder to `<output_root>/tokenizer/` (with `tokenizer.json`, which
datatrove's token steps read, and which the exported checkpoints carry):

- `pretrained`: the given folder or hub id, saved as is;
- `sentencepiece`: a byte-fallback BPE model trained on the same number of characters from
  every arm's extracted documents, leaving out pages a record-level filter (URL blocklist)
  removes. Each arm's sample is its documents in the order of a hash of (`tokenizer.seed`, record
  id), taken until `sample_chars_per_arm` characters (the last one cut to fit), then cut to the
  size of the smallest arm's, so no arm weighs more in the vocabulary. The draw is per document:
  how the arm was split into extraction tasks and files changes neither the sample nor its order,
  so the tokenizer (and every token count after it) is the same at any split. Every extracted
  document is read once; only the sample is held. Only extractor arms are sampled: the gold bound
  and reference corpora are not, so adding those rows never changes the tokenizer.
"""

from __future__ import annotations

import gzip
import hashlib
import heapq
import io
import json
from pathlib import Path

from datatrove.data import Document, DocumentsPipeline
from datatrove.pipeline.base import PipelineStep

from configs.experiment import ExperimentConfig
from configs.tokens import TokenizerConfig
from corpus.extractors.prefilters import passes_record_filters
from corpus.stage import record_hash


def tokenizer_sha256(folder: Path) -> str:
    return hashlib.sha256((folder / "tokenizer.json").read_bytes()).hexdigest()


def sample_key(seed: int, record_id: str) -> int:
    """Where a document stands in the tokenizer's draw: a hash of the seed and its record id (not
    the budget's draw, which has its own seed)."""
    return record_hash(f"tokenizer:{seed}:{record_id}")


def arm_documents(output_dir: Path, seed: int, keep):
    """One arm's extracted documents that `keep` accepts, as (draw key, text hash, text); any
    order (the files as listed)."""
    for path in sorted(output_dir.glob("*.jsonl.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as f:
            for line in f:
                record = json.loads(line)
                doc = Document(text=record["text"], id=record["id"], metadata=record.get("metadata", {}))
                if keep(doc):
                    yield sample_key(seed, str(doc.id)), record_hash(doc.text), doc.text


def first_by_key(documents, chars: int) -> list[str]:
    """The texts of the documents of lowest (key, text hash) whose characters reach `chars` (all
    of them if they do not), in that order, holding only those: each document in, the highest
    ones out while the rest still reach `chars`. Equal (key, text hash) means the same text, so
    the result does not depend on the order the documents come in."""
    heap: list[tuple[int, int, str]] = []  # (-key, -text hash, text): the highest first
    held = 0
    for key, text_hash, text in documents:
        heapq.heappush(heap, (-key, -text_hash, text))
        held += len(text)
        while held - len(heap[0][2]) >= chars:
            held -= len(heapq.heappop(heap)[2])
    return [text for _, _, text in sorted(heap, reverse=True)]


def take_chars(texts, chars: int) -> list[str]:
    """Texts until `chars` characters; the last one is cut to fit."""
    out, total = [], 0
    for text in texts:
        if total >= chars:
            break
        out.append(text[: chars - total])
        total += len(out[-1])
    return out


def train_sentencepiece(texts: list[str], options: TokenizerConfig, out: Path) -> None:
    import sentencepiece as spm
    from transformers import LlamaTokenizer

    out.mkdir(parents=True, exist_ok=True)
    # SentencePiece reads sentences; a document's lines are enough context for BPE merges. From
    # an iterator into memory: the model then records no file path and is the same in any folder.
    # Every line is kept (input_sentence_size=0): past a limit SentencePiece subsamples with a seed of
    # its own per process, and the sample is the suite's own draw already, bounded by
    # sample_chars_per_arm.
    lines = (line for t in texts for line in t.splitlines() if line.strip())
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=lines, model_writer=model, vocab_size=options.vocab_size,
        # identity normalisation keeps newlines and runs of spaces (Markdown needs them); bytes
        # outside the vocabulary fall back to byte tokens, so every text round-trips
        model_type="bpe", byte_fallback=True, split_digits=True, character_coverage=0.9995,
        normalization_rule_name="identity", remove_extra_whitespaces=False, allow_whitespace_only_pieces=True,
        unk_id=0, bos_id=1, eos_id=2, pad_id=-1, input_sentence_size=0,
        seed_sentencepiece_size=1_000_000, num_threads=1, minloglevel=2,
        hard_vocab_limit=False,
    )
    (out / "tokenizer.model").write_bytes(model.getvalue())
    # Llama's tokenizer class reads tokenizer.model and saves the fast tokenizer.json beside it;
    # local_files_only is saved into tokenizer_config.json, so it is set rather than left to
    # HF_HUB_OFFLINE (the same tokenizer, the same bytes)
    LlamaTokenizer.from_pretrained(str(out), legacy=False, local_files_only=True).save_pretrained(str(out))  # nosec B615  # local


class SharedTokenizer(PipelineStep):
    type = "🔢 - TOKENIZER"
    name = "🔤 shared tokenizer"

    def __init__(self, config: ExperimentConfig):
        super().__init__()
        self.config = config

    def run(self, data: DocumentsPipeline = None, rank: int = 0, world_size: int = 1):
        options, out = self.config.tokenizer, self.config.tokenizer_dir()
        with self.track_time():
            if options.kind == "pretrained":
                from transformers import AutoTokenizer

                # the config's tokenizer (a folder or a hub id its author chose), copied once into the output root
                AutoTokenizer.from_pretrained(options.name_or_path).save_pretrained(str(out))  # nosec B615  # see above
            else:
                # the sample leaves out what record-level filters remove, wherever they run, so the
                # tokenizer does not depend on that choice
                keep = passes_record_filters(self.config)
                per_arm = {arm: take_chars(first_by_key(arm_documents(self.config.arm_dir(arm) / "output", options.seed, keep),
                                                        options.sample_chars_per_arm), options.sample_chars_per_arm)
                           for arm in self.config.tokenizer_arms()}
                size = min(sum(map(len, texts)) for texts in per_arm.values())
                sample = []
                for arm, texts in per_arm.items():
                    cut = take_chars(texts, size)
                    self.stat_update(f"chars_{arm}", value=sum(map(len, cut)))
                    sample.extend(cut)
                train_sentencepiece(sample, options, out)
        check_tokenizer(self.config)


def check_tokenizer(config: ExperimentConfig) -> None:
    """The saved folder has tokenizer.json and knows the end-of-document token."""
    from tokenizers import Tokenizer

    path = config.tokenizer_file()
    if not path.is_file():
        raise FileNotFoundError(f"{path}: the tokenizer has no tokenizer.json (a fast tokenizer is needed)")
    if Tokenizer.from_file(str(path)).token_to_id(config.tokenizer.eos_token) is None:
        raise ValueError(f"{path}: no end-of-document token {config.tokenizer.eos_token!r}; set tokenizer.eos_token")
