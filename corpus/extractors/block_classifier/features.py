"""Per-block features of a page (corpus.extractors.block_classifier.blocks), as found useful by Boilerpipe, Dragnet, Web2Text
and NeuScraper: text shape (length, link density, punctuation, stop words), the tag and its
ancestry, class/id words (a few known ones, the rest hashed), the position in the page, the
relation to the page's longest block and to the blocks sharing its parent, the text totals of the
elements one to three levels up, whether the block lies in the element Readability would pick as
the article, and the same shape features of the two blocks before and after.

`page_features(blocks)` returns one row per block (float32); `FEATURE_NAMES` names the columns.
`context_features(blocks, first_pass)` is what the model's second pass adds (`CONTEXT_NAMES`).
"""

from __future__ import annotations

import math
import re
import zlib
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from corpus.extractors.block_classifier.blocks import Block

TAGS = ("p", "h1", "h2", "h3", "h456", "ul", "ol", "dl", "table", "pre", "math", "#inline", "dtdd", "caption")
ANCESTORS = ("nav", "header", "footer", "aside", "form", "article", "main", "li", "td", "blockquote", "section", "center")
POSITIVE = frozenset("content article post entry body main text story blog news detail single page column".split())
NEGATIVE = frozenset("nav menu footer header sidebar side comment comments share sharing social related ad ads advert "
                     "banner breadcrumb breadcrumbs widget cookie copyright promo sponsor login search subscribe tag tags "
                     "meta author date byline reply navigation nav-links pagination rss links skip hidden".split())
HASH_BUCKETS = 32
UP = (1, 2, 3)  # the enclosing element, its parent, its grandparent
NEIGHBOURS = (-2, -1, 1, 2)
STOP_WORDS = frozenset(
    "the of and to a in is that for it as was with be by on not he i this are or his from at which but have an they "
    "you were her she there been one all we their has would when if so what its can who our will more no out up them "
    "into than then about also some could these two may other time like only over such after most very".split())
_WORD = re.compile(r"\w+", re.UNICODE)
_PUNCT = re.compile(r"[.,;:!?\"'()\[\]«»“”‘’。，；：！？、]")
_SENTENCE_END = re.compile(r"[.!?。！？]")
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]")

SHAPE = ("log_chars", "log_words", "link_density", "punct_share", "digit_share", "stop_share", "cjk_share",
         "mean_word_len", "log_sentences", "ends_sentence")
FEATURE_NAMES = (
    *SHAPE, *(f"tag_{t}" for t in TAGS), *(f"in_{a}" for a in ANCESTORS), "depth", "relative_depth",
    "positive_words", "negative_words", *(f"word_hash_{i}" for i in range(HASH_BUCKETS)),
    "position", "chars_before", "log_page_chars", "log_page_blocks", "page_share", "to_longest",
    "longest_parent", "shared_ancestry", "distance_to_longest", "parent_share", "log_parent_blocks",
    *(f"up{k}_{f}" for k in UP for f in ("share", "link_density", "prose_share", "log_blocks")),
    "in_best_container", "best_container_share", "below_best_container",
    *(f"n{o:+d}_{f}" for o in NEIGHBOURS for f in ("present", "log_chars", "link_density", "stop_share", "tag_p",
                                                    "same_parent")),
)


def _tag(block: Block) -> str:
    t = block.tag
    if t in ("h4", "h5", "h6"):
        return "h456"
    if t in ("dt", "dd"):
        return "dtdd"
    if t in ("caption", "figcaption"):
        return "caption"
    return t if t in TAGS else "#inline" if t == "#inline" else "p"


def _shape(block: Block) -> list[float]:
    text = block.text
    chars = len(text)
    words = _WORD.findall(text.lower())
    n_words = max(len(words), 1)
    return [
        math.log1p(chars), math.log1p(len(words)), min(block.link_chars / max(chars, 1), 1.0),
        len(_PUNCT.findall(text)) / max(chars, 1), sum(map(str.isdigit, text)) / max(chars, 1),
        sum(map(STOP_WORDS.__contains__, words)) / n_words, len(_CJK.findall(text)) / max(chars, 1),
        sum(map(len, words)) / n_words, math.log1p(len(_SENTENCE_END.findall(text))),
        float(bool(_SENTENCE_END.match(text[-1:]))),
    ]


@lru_cache(maxsize=65536)
def _bucket(word: str) -> int:
    return zlib.crc32(word.encode()) % HASH_BUCKETS


def _up(block: Block, k: int) -> int:
    """The element k levels above the block's text (1: the element that holds it; body at most)."""
    return block.containers[max(len(block.containers) - k, 0)]


_ENDS_SENTENCE, _LINK_DENSITY = SHAPE.index("ends_sentence"), SHAPE.index("link_density")


@dataclass
class _Container:
    chars: float = 0.0
    link_chars: float = 0.0
    prose: float = 0.0  # characters of sentence-like blocks with few links
    blocks: int = 0
    score: float = 0.0  # Readability's candidate score before the link-density discount


def _containers(blocks: list[Block], shapes: list[list[float]], chars: np.ndarray) -> dict[int, _Container]:
    """Every element that encloses blocks, with its text totals and Readability's candidate score:
    each paragraph-like block of 25+ characters gives 1 + its commas + one point per 100
    characters (at most 3) to its enclosing element and half of that to the next one up; the
    element whose score, discounted by its link density, is highest is where the article is."""
    found: dict[int, _Container] = {}
    for b, shape, c in zip(blocks, shapes, chars, strict=True):
        prose = c if shape[_ENDS_SENTENCE] and shape[_LINK_DENSITY] < 0.3 else 0.0
        for cid in b.containers:
            box = found.setdefault(cid, _Container())
            box.chars += c
            box.link_chars += b.link_chars
            box.prose += prose
            box.blocks += 1
        if c >= 25:
            points = 1 + b.text.count(",") + b.text.count("，") + min(c / 100, 3)
            found[b.containers[-1]].score += points
            if len(b.containers) > 1:
                found[b.containers[-2]].score += points / 2
    for box in found.values():
        box.score *= 1 - min(box.link_chars / max(box.chars, 1), 1)
    return found


def page_features(blocks: list[Block]) -> np.ndarray:
    n = len(blocks)
    if not n:
        return np.zeros((0, len(FEATURE_NAMES)), dtype=np.float32)
    shapes = [_shape(b) for b in blocks]
    chars = np.array([len(b.text) for b in blocks], dtype=np.float64)
    total = chars.sum()
    before = np.concatenate([[0.0], np.cumsum(chars)[:-1]])
    longest = int(chars.argmax())
    max_depth = max(len(b.ancestors) for b in blocks)
    parent_chars: dict[int, float] = {}  # blocks directly in the element (its container totals include deeper ones)
    parent_blocks: dict[int, int] = {}
    for b, c in zip(blocks, chars, strict=True):
        parent_chars[b.parent] = parent_chars.get(b.parent, 0.0) + c
        parent_blocks[b.parent] = parent_blocks.get(b.parent, 0) + 1
    top = blocks[longest].ancestors
    containers = _containers(blocks, shapes, chars)
    best = max(containers, key=lambda c: containers[c].score)
    best_chars = containers[best].chars
    log_total, log_n = math.log1p(total), math.log1p(n)
    rows = []
    for i, b in enumerate(blocks):
        tag = _tag(b)
        ancestors = set(b.ancestors)
        hashed = [0.0] * HASH_BUCKETS
        for w in b.words:
            hashed[_bucket(w)] += 1.0
        shared = 0
        for x, y in zip(b.ancestors, top, strict=False):
            if x != y:
                break
            shared += 1
        row = [
            *shapes[i], *(float(tag == t) for t in TAGS), *(float(a in ancestors) for a in ANCESTORS),
            float(len(b.ancestors)), len(b.ancestors) / max_depth,
            float(sum(w in POSITIVE for w in b.words)), float(sum(w in NEGATIVE for w in b.words)), *hashed,
            i / n, before[i] / max(total, 1), log_total, log_n, chars[i] / max(total, 1),
            chars[i] / max(chars[longest], 1), float(b.parent == blocks[longest].parent),
            shared / max(len(b.ancestors), 1), abs(i - longest) / n,
            parent_chars[b.parent] / max(total, 1), math.log1p(parent_blocks[b.parent]),
        ]
        for k in UP:
            c = containers[_up(b, k)]
            row += [c.chars / max(total, 1), c.link_chars / max(c.chars, 1), c.prose / max(c.chars, 1), math.log1p(c.blocks)]
        inside = best in b.containers
        row += [float(inside), best_chars / max(total, 1),
                (len(b.containers) - b.containers.index(best)) / max_depth if inside else 0.0]
        for o in NEIGHBOURS:
            j = i + o
            if 0 <= j < n:
                s = shapes[j]
                row += [1.0, s[0], s[2], s[5], float(_tag(blocks[j]) == "p"), float(blocks[j].parent == b.parent)]
            else:
                row += [0.0] * 6
        rows.append(row)
    return np.asarray(rows, dtype=np.float32)


CONTEXT_NAMES = ("first_pass", *(f"first_pass_n{o:+d}" for o in NEIGHBOURS), *(f"first_pass_up{k}" for k in UP),
                 "first_pass_window", "page_max", "to_page_max", "page_rank", "page_main_share")
WINDOW = 5  # blocks on each side


def context_features(blocks: list[Block], first_pass: np.ndarray) -> np.ndarray:
    """The second pass's view of the first pass's P(main) (corpus.extractors.block_classifier.model): the block's own,
    its neighbours', the character-weighted mean over each enclosing element and over a window of
    blocks, and where it stands on the page (the page's highest, its rank, the share of the page's
    characters above one half). A block that looks like boilerplate alone but sits among main
    blocks, or the best of a page where nothing looks main, is decided in the light of the page."""
    p = np.asarray(first_pass, dtype=np.float64)
    n = len(p)
    if not n:
        return np.zeros((0, len(CONTEXT_NAMES)), dtype=np.float32)
    chars = np.array([len(b.text) for b in blocks], dtype=np.float64)
    padded = np.concatenate([np.zeros(2), p, np.zeros(2)])
    neighbours = [padded[2 + o:2 + o + n] for o in NEIGHBOURS]
    enclosing = []
    for k in UP:
        keys = [_up(b, k) for b in blocks]
        mass: dict[int, float] = {}
        weight: dict[int, float] = {}
        for key, pi, c in zip(keys, p, chars, strict=True):
            mass[key] = mass.get(key, 0.0) + pi * c
            weight[key] = weight.get(key, 0.0) + c
        enclosing.append(np.array([mass[key] / max(weight[key], 1) for key in keys]))
    mass, weight = np.concatenate([[0], np.cumsum(p * chars)]), np.concatenate([[0], np.cumsum(chars)])
    lo, hi = np.clip(np.arange(n) - WINDOW, 0, n), np.clip(np.arange(n) + WINDOW + 1, 0, n)
    window = (mass[hi] - mass[lo]) / np.maximum(weight[hi] - weight[lo], 1)
    rank = p.argsort(kind="stable").argsort(kind="stable") / max(n - 1, 1)
    main_share = chars[p > 0.5].sum() / max(chars.sum(), 1)
    columns = [p, *neighbours, *enclosing, window, np.full(n, p.max()), p / max(p.max(), 1e-6), rank, np.full(n, main_share)]
    return np.stack(columns, axis=1).astype(np.float32)


STALE_MODEL = ("trained on other features than corpus.extractors.block_classifier.features computes; "
               "retrain it with python -m corpus.extractors.block_classifier.training")


def computed_by_this_version(meta: dict) -> bool:
    """Whether a model's `block_model.json` names the features this module computes."""
    return meta.get("features") == list(FEATURE_NAMES) and meta.get("context") == list(CONTEXT_NAMES)
