"""The block classifier's model: P(main) for every block of a page from its features
(corpus.extractors.block_classifier.features), and how it is trained, saved and loaded.

Two kinds, trained on the same examples:
- `gbdt`: LightGBM gradient-boosted trees in two passes. The first labels each block from its own
  features (its neighbours' shape and its enclosing elements' among them); the second sees those
  labels across the page (corpus.extractors.block_classifier.features.context_features) beside the same features, and
  decides, as Web2Text's smoothing does. The second pass is trained on first-pass labels of pages
  the first pass did not train on (out of fold), so it learns how far to trust them on new pages;
- `sequence`: a bidirectional GRU over the page's standardised feature rows, so every block
  sees the whole page (as Dripper's whole-page prompt does); torch.

A model is a folder: `block_model.json` (kind, feature names, threshold, training report) and
`gbdt.txt` + `gbdt_context.txt` or `sequence.pt`. It is loaded once per datatrove task.
"""

from __future__ import annotations

import json
import pickle  # nosec B403  # only its error type: torch.load(weights_only=True) raises it for a file it refuses
import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import torch
from torch import nn

from corpus.extractors.block_classifier.blocks import Block
from corpus.extractors.block_classifier.features import (
    CONTEXT_NAMES,
    FEATURE_NAMES,
    STALE_MODEL,
    computed_by_this_version,
    context_features,
)

META = "block_model.json"
PAGES_PER_BATCH = 16
FALLBACK_SHARE = 0.5
FOLDS = 5  # out-of-fold first-pass labels for the second pass, when the examples have one source
Kind = Literal["gbdt", "sequence"]


@dataclass
class PageExample:
    """One page's blocks, their feature rows and the label of each (1: main content)."""

    blocks: list[Block]
    features: np.ndarray
    labels: np.ndarray
    source: str = ""  # where the page came from: its page file, "generated" or "teacher"


Unit = Literal["page", "items"]


class BlockModel:
    """`unit` says whose blocks it labels: the page's own (corpus.extractors.block_classifier.blocks, the
    block_classifier arm) or mineru-html's `_item_id` blocks (corpus.extractors.dripper.items, the Dripper
    labeler's draft); a model is refused where the other kind is expected."""

    def __init__(self, kind: Kind, threshold: float = 0.5, report: dict | None = None, unit: Unit = "page"):
        self.kind, self.threshold, self.report, self.unit = kind, threshold, report or {}, unit
        self.booster = self.context_booster = None  # gbdt's two passes
        self.network = None  # sequence
        self.mean = self.std = None

    # ---------------------------------------------------------------- inference

    def probabilities(self, blocks: list[Block], features: np.ndarray) -> np.ndarray:
        if not len(features):
            return np.zeros(0, dtype=np.float32)
        if self.kind == "gbdt":
            first = self.booster.predict(features, num_threads=1)
            both = np.hstack([features, context_features(blocks, first)])
            return self.context_booster.predict(both, num_threads=1).astype(np.float32)
        with torch.no_grad():
            x = torch.from_numpy((features - self.mean) / self.std).unsqueeze(0)
            return torch.sigmoid(self.network(x))[0].numpy()

    def main_blocks(self, blocks: list[Block], features: np.ndarray) -> np.ndarray:
        """Blocks above the threshold; on a page where none is, the blocks within half of the
        likeliest one's probability (every page the guard lets through has some main content,
        and an empty answer scores nothing: +0.006 mean ROUGE-5 leave-one-dataset-out)."""
        p = self.probabilities(blocks, features)
        main = p > self.threshold
        return main if main.any() or not len(p) else p >= FALLBACK_SHARE * p.max()

    def describe(self) -> str:
        r = self.report
        return (f"{self.kind} model of {'mineru-html' if self.unit == 'items' else 'page'} blocks on {r['pages']} pages "
                f"({r['blocks']} blocks, {r['main_share']:.0%} main) in {r['seconds']}s")

    # ---------------------------------------------------------------- files

    def save(self, folder: Path) -> Path:
        folder.mkdir(parents=True, exist_ok=True)
        if self.kind == "gbdt":
            self.booster.save_model(str(folder / "gbdt.txt"))
            self.context_booster.save_model(str(folder / "gbdt_context.txt"))
        else:
            # tensors and an int only: loaded with weights_only=True, so a model folder cannot run code
            torch.save({"state": self.network.state_dict(), "mean": torch.from_numpy(self.mean),
                        "std": torch.from_numpy(self.std), "hidden": self.network.hidden}, folder / "sequence.pt")
        (folder / META).write_text(json.dumps({"kind": self.kind, "unit": self.unit, "threshold": self.threshold,
                                               "features": list(FEATURE_NAMES), "context": list(CONTEXT_NAMES),
                                               "report": self.report}, indent=2) + "\n")
        return folder

    @classmethod
    def load(cls, folder: Path) -> BlockModel:
        meta = json.loads((Path(folder) / META).read_text())
        if not computed_by_this_version(meta):
            raise ValueError(f"{folder}: {STALE_MODEL}")
        model = cls(meta["kind"], meta["threshold"], meta["report"], meta.get("unit", "page"))
        if model.kind == "gbdt":
            import lightgbm

            model.booster = lightgbm.Booster(model_file=str(Path(folder) / "gbdt.txt"))
            model.context_booster = lightgbm.Booster(model_file=str(Path(folder) / "gbdt_context.txt"))
        else:
            try:
                saved = torch.load(Path(folder) / "sequence.pt", weights_only=True)
            except pickle.UnpicklingError as error:
                raise ValueError(f"{folder}/sequence.pt holds more than tensors (an older save, or not this suite's): "
                                 f"it is not loaded, since unpickling it could run code. Train the model again "
                                 f"(python -m corpus.extractors.block_classifier.training). {error}") from None
            model.network = PageGRU(len(FEATURE_NAMES), saved["hidden"])
            model.network.load_state_dict(saved["state"])
            model.network.eval()
            model.mean, model.std = saved["mean"].numpy(), saved["std"].numpy()
        return model


class PageGRU(nn.Module):
    """Block feature rows of a page in, one logit per block out: a bidirectional GRU gives each
    block the page around it, and the head sees that context beside the block's own features."""

    def __init__(self, features: int, hidden: int):
        super().__init__()
        self.hidden = hidden
        self.gru = nn.GRU(features, hidden, batch_first=True, bidirectional=True)
        self.out = nn.Sequential(nn.Linear(2 * hidden + features, hidden), nn.ReLU(), nn.Linear(hidden, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        context, _ = self.gru(x)
        return self.out(torch.cat([context, x], dim=-1)).squeeze(-1)


# ---------------------------------------------------------------- training


def train(examples: list[PageExample], kind: Kind = "gbdt", seed: int = 0, max_seconds: float = 300,
          trees: int = 400, hidden: int = 64, unit: Unit = "page") -> BlockModel:
    """A model of `kind` on the examples; training stops at `max_seconds` (sequence: between
    epochs; gbdt: its trees are few enough to finish in time on 2 cores)."""
    examples = [e for e in examples if len(e.labels)]
    if len(examples) < 2:  # (the second pass of the trees trains on pages the first pass left out)
        raise ValueError(f"{len(examples)} page(s) with labelled blocks: too few to train on")
    started = time.perf_counter()
    blocks = sum(len(e.labels) for e in examples)
    report = {"pages": len(examples), "blocks": blocks, "main_share": float(sum(e.labels.sum() for e in examples) / blocks),
              "sources": {s: sum(e.source == s for e in examples) for s in sorted({e.source for e in examples})}}
    model = BlockModel(kind, report=report, unit=unit)
    if kind == "gbdt":
        _train_gbdt(model, examples, seed, trees)
    else:
        _train_sequence(model, examples, seed, max_seconds, hidden)
    report["seconds"] = round(time.perf_counter() - started, 1)
    return model


def _fit_trees(rows: list[tuple[np.ndarray, np.ndarray]], seed: int, trees: int):
    import lightgbm

    x = np.vstack([features for features, _ in rows])
    y = np.concatenate([labels for _, labels in rows])
    params = {"objective": "binary", "learning_rate": 0.05, "num_leaves": 31, "min_data_in_leaf": 20,
              "feature_fraction": 0.8, "bagging_fraction": 0.8, "bagging_freq": 1, "seed": seed,
              "deterministic": True, "num_threads": 2, "verbose": -1}
    return lightgbm.train(params, lightgbm.Dataset(x, y), num_boost_round=trees)


def _folds(examples: list[PageExample]) -> list[list[int]]:
    """Held-out pages of each fold: one source per fold (so the second pass learns from first-pass
    labels of sources the first pass never saw, as on a new crawl), or FOLDS folds of pages when
    the examples come from one source."""
    sources = sorted({e.source for e in examples})
    if len(sources) > 1:
        return [[i for i, e in enumerate(examples) if e.source == s] for s in sources]
    return [list(range(k, len(examples), FOLDS)) for k in range(min(FOLDS, len(examples)))]


def _train_gbdt(model: BlockModel, examples: list[PageExample], seed: int, trees: int) -> None:
    model.booster = _fit_trees([(e.features, e.labels) for e in examples], seed, trees)
    second, folds = [], _folds(examples)
    for held in folds:
        out = set(held)
        first = _fit_trees([(e.features, e.labels) for i, e in enumerate(examples) if i not in out], seed, trees)
        for i in held:
            e = examples[i]
            second.append((np.hstack([e.features, context_features(e.blocks, first.predict(e.features))]), e.labels))
    model.context_booster = _fit_trees(second, seed, trees)
    model.report.update(trees=trees, folds=len(folds))


def _train_sequence(model: BlockModel, examples: list[PageExample], seed: int, max_seconds: float, hidden: int) -> None:
    torch.manual_seed(seed)
    rng = random.Random(seed)
    stacked = np.vstack([e.features for e in examples])
    model.mean = stacked.mean(axis=0).astype(np.float32)
    model.std = (stacked.std(axis=0) + 1e-6).astype(np.float32)
    pages = [(torch.from_numpy((e.features - model.mean) / model.std), torch.from_numpy(e.labels.astype(np.float32)))
             for e in examples]
    network = PageGRU(stacked.shape[1], hidden)
    optimizer = torch.optim.AdamW(network.parameters(), lr=3e-3, weight_decay=1e-4)
    started, epochs = time.perf_counter(), 0
    while epochs < 40 and time.perf_counter() - started < max_seconds:
        # batches of pages of similar length, padded; padding is masked out of the loss
        rng.shuffle(pages)
        order = sorted(range(len(pages)), key=lambda i: len(pages[i][1]))
        batches = [order[i:i + PAGES_PER_BATCH] for i in range(0, len(order), PAGES_PER_BATCH)]
        rng.shuffle(batches)
        for batch in batches:
            x = nn.utils.rnn.pad_sequence([pages[i][0] for i in batch], batch_first=True)
            y = nn.utils.rnn.pad_sequence([pages[i][1] for i in batch], batch_first=True)
            mask = nn.utils.rnn.pad_sequence([torch.ones(len(pages[i][1])) for i in batch], batch_first=True)
            optimizer.zero_grad()
            loss = (nn.functional.binary_cross_entropy_with_logits(network(x), y, reduction="none") * mask).sum() / mask.sum()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(network.parameters(), 1.0)
            optimizer.step()
        epochs += 1
    network.eval()
    model.network = network
    model.report["epochs"] = epochs
