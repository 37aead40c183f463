"""A small transformer encoder that labels mineru-html blocks main/other on CPU.

In the spirit of HTML-LM: the page is reduced to its simplified blocks, each block's HTML
(attributes trimmed, text cut to `max_block_tokens`, led by tokens for its full text length and
link share) is preceded by a `[BLK]` token, and a
ModernBERT-style encoder (transformers) classifies the hidden state at every `[BLK]`. The
tokenizer is a byte-level BPE trained by the project, with dedicated tokens for frequent tags.
Pages longer than the context are covered by overlapping windows (stride half a window); a block
seen by several windows gets the mean of their probabilities, so nothing is truncated away.

A model folder is an ordinary Hugging Face folder (config, weights, tokenizer) plus
`block_labeler.json` with the windowing settings.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from corpus.extractors.dripper.labelers.base import MAIN, OTHER, BlockLabeler, BlockPage, PageLabels

BLOCK_TOKEN = "[BLK]"
LENGTH_BUCKETS = 14
SHAPE_TOKENS = [f"[LEN{i}]" for i in range(LENGTH_BUCKETS)] + [f"[LINK{i}]" for i in range(5)]
SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", BLOCK_TOKEN, *SHAPE_TOKENS]
TAGS = ["p", "div", "span", "a", "li", "ul", "ol", "h1", "h2", "h3", "h4", "h5", "h6", "table", "tr", "td", "th",
        "pre", "code", "img", "form", "input", "button", "nav", "header", "footer", "aside", "section", "article",
        "main", "blockquote", "br", "strong", "em", "dl", "dt", "dd", "label", "select", "option", "time"]
TAG_TOKENS = [f"<{t}" for t in TAGS] + [f"</{t}>" for t in TAGS] + [' class="', ' id="', ' href="', "...", "©"]
SETTINGS_FILE = "block_labeler.json"
_ITEM_ID = re.compile(r'\s_item_id="\d+"')


@dataclass(frozen=True)
class WindowSettings:
    window: int = 512
    max_block_tokens: int = 48


def shape_tokens(el) -> str:
    """What truncation would hide: the block's text length (log2 bucket) and the share of it
    inside links (quarters), the two classic boilerplate cues."""
    text = " ".join(el.text_content().split())
    linked = sum(len(" ".join(a.text_content().split())) for a in el.iter("a"))
    length = min(LENGTH_BUCKETS - 1, len(text).bit_length())
    links = round(4 * linked / len(text)) if text else 0
    return f"[LEN{length}][LINK{min(links, 4)}]"


def page_blocks(simplified_html: str) -> list[tuple[int, str]]:
    """(block id, shape tokens + block HTML without its id) for every block, in page order."""
    from lxml import html as lxml_html

    root = lxml_html.fromstring(simplified_html)
    blocks = []
    for el in root.iter():
        if isinstance(el.tag, str) and (item_id := el.get("_item_id")) is not None:
            html = _ITEM_ID.sub("", lxml_html.tostring(el, encoding="unicode", with_tail=False))
            blocks.append((int(item_id), shape_tokens(el) + html))
    return blocks


def train_tokenizer(texts, vocab_size: int = 8000):
    """Byte-level BPE over block HTML, with one token per frequent tag and attribute."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.add_tokens(TAG_TOKENS)
    tok.train_from_iterator(texts, trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="[PAD]", unk_token="[UNK]", cls_token="[CLS]",
                                   sep_token="[SEP]", mask_token="[MASK]", additional_special_tokens=[BLOCK_TOKEN, *SHAPE_TOKENS])


def page_windows(tokenizer, blocks: list[tuple[int, str]], settings: WindowSettings):
    """Token windows over a page: (input_ids, block positions [(position, block id)]) per window."""
    blk = tokenizer.convert_tokens_to_ids(BLOCK_TOKEN)
    encoded = tokenizer([text for _, text in blocks], add_special_tokens=False, truncation=True,
                        max_length=settings.max_block_tokens)["input_ids"]
    ids, positions = [], []
    for (item_id, _), block_ids in zip(blocks, encoded, strict=True):
        positions.append((len(ids), item_id))
        ids.append(blk)
        ids.extend(block_ids)
    stride = settings.window // 2
    windows = []
    start = 0
    while True:
        end = min(start + settings.window, len(ids))
        windows.append((ids[start:end], [(p - start, i) for p, i in positions if start <= p < end]))
        if end == len(ids):
            break
        start += stride
    return windows


def pad_batch(windows: list[list[int]], pad_id: int):
    import torch

    width = max(len(w) for w in windows)
    input_ids = torch.full((len(windows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(windows), width), dtype=torch.long)
    for row, w in enumerate(windows):
        input_ids[row, : len(w)] = torch.tensor(w)
        mask[row, : len(w)] = 1
    return input_ids, mask


def build_encoder(tokenizer, settings: WindowSettings, size: dict | None = None):
    from transformers import ModernBertConfig, ModernBertForTokenClassification

    shape = {"hidden_size": 128, "num_hidden_layers": 4, "num_attention_heads": 4, "intermediate_size": 256, **(size or {})}
    config = ModernBertConfig(
        vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id, cls_token_id=tokenizer.cls_token_id,
        sep_token_id=tokenizer.sep_token_id, bos_token_id=tokenizer.cls_token_id, eos_token_id=tokenizer.sep_token_id,
        max_position_embeddings=settings.window,
        local_attention=settings.window, global_attn_every_n_layers=1, num_labels=2,
        id2label={0: OTHER, 1: MAIN}, label2id={OTHER: 0, MAIN: 1}, attn_implementation="sdpa", **shape,
    )
    return ModernBertForTokenClassification(config)


def save_labeler(model, tokenizer, settings: WindowSettings, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    (out / SETTINGS_FILE).write_text(json.dumps(asdict(settings), indent=2) + "\n")


class EncoderLabeler(BlockLabeler):
    def __init__(self, model_dir: str | Path, batch_windows: int = 32):
        import torch
        from transformers import AutoModelForTokenClassification, AutoTokenizer

        model_dir = Path(model_dir)
        self.settings = WindowSettings(**json.loads((model_dir / SETTINGS_FILE).read_text()))
        # a local folder (the config requires block_labeler.json in it), never a hub id
        self.tokenizer = AutoTokenizer.from_pretrained(model_dir)  # nosec B615  # a local folder
        self.model = AutoModelForTokenClassification.from_pretrained(model_dir).eval()  # nosec B615  # a local folder
        self.batch_windows = batch_windows
        self._torch = torch

    def block_probabilities(self, pages: Sequence[BlockPage]) -> list[dict[int, float]]:
        """P(main) for every block of every page (mean over the windows that see it)."""
        torch = self._torch
        jobs = []  # (page index, window ids, positions)
        for n, page in enumerate(pages):
            for ids, positions in page_windows(self.tokenizer, page_blocks(page.simplified_html), self.settings):
                jobs.append((n, ids, positions))
        sums = [dict() for _ in pages]
        with torch.inference_mode():
            for start in range(0, len(jobs), self.batch_windows):
                chunk = jobs[start : start + self.batch_windows]
                input_ids, mask = pad_batch([ids for _, ids, _ in chunk], self.tokenizer.pad_token_id)
                probs = self.model(input_ids=input_ids, attention_mask=mask).logits.softmax(-1)[..., 1]
                for row, (n, _, positions) in enumerate(chunk):
                    for pos, item_id in positions:
                        total, count = sums[n].get(item_id, (0.0, 0))
                        sums[n][item_id] = (total + float(probs[row, pos]), count + 1)
        return [{i: t / c for i, (t, c) in s.items()} for s in sums]

    def label(self, pages: Sequence[BlockPage]) -> list[PageLabels]:
        results = []
        for page, probs in zip(pages, self.block_probabilities(pages), strict=True):
            if set(probs) != set(page.item_ids):
                results.append(PageLabels(error="incomplete_labels"))
            else:
                results.append(PageLabels(labels={i: MAIN if probs[i] >= 0.5 else OTHER for i in page.item_ids}))
        return results
