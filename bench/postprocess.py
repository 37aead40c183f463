"""Documents/s per core of every post-processing step, and the peak memory of each stage.

    python -m bench.postprocess [--docs 4000] [--out bench/results/postprocess.json]

Documents: the gold main texts of `../shared/data/extraction` (real web text) when present,
topped up with generated articles, plus 10% exact copies and 5% near-copies so that the dedup
stages have work. Each step runs alone in a fresh process (so documents/s is per core and the
peak resident memory is the step's own, interpreter and imports included) with the same step
options as `configs/local.yaml`'s post-processing. The MinHash stages use FineWeb's defaults
(5-grams, 14 buckets x 8 hashes).
"""

from __future__ import annotations

import argparse
import gzip
import json
import multiprocessing as mp
import random
import resource
import tempfile
import time
from pathlib import Path

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data" / "extraction"


def documents(n: int) -> list[dict]:
    from corpus.sample.text import Prose

    texts = []
    for path in sorted(SHARED.glob("*/pages.jsonl.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as f:
            texts += [t for t in (json.loads(line).get("text") or "" for line in f) if len(t) > 200]
    rng = random.Random(0)
    while len(texts) < int(n * 0.85):
        prose = Prose(rng)
        texts.append("\n\n".join(prose.paragraph() for _ in range(rng.randint(3, 8))))
    texts = texts[: int(n * 0.85)]
    copies = [rng.choice(texts) for _ in range(n // 10)]
    near = [t.replace(". ", ". Indeed, ", 1) for t in rng.sample(texts, n // 20)]
    texts = texts + copies + near
    rng.shuffle(texts)
    return [{"id": f"d{i}", "text": t, "metadata": {"url": f"https://site{i % 97}.example.com/{i}"}} for i, t in enumerate(texts)]


def build(name: str, work: Path, tokenizer: str):
    from datatrove.pipeline.dedup import (
        MinhashDedupBuckets,
        MinhashDedupCluster,
        MinhashDedupFilter,
        MinhashDedupSignature,
    )
    from datatrove.pipeline.dedup.minhash import MinhashConfig
    from datatrove.pipeline.filters import GopherQualityFilter, GopherRepetitionFilter
    from datatrove.pipeline.tokens import MegatronDocumentTokenizer, TokensCounter

    from corpus.extractors.prefilters import OfflineURLFilter
    from corpus.language import default_lid_model
    from corpus.postprocess.exact_dedup import Sha256DedupFilter, Sha256DedupSignature, Sha256FindDuplicates
    from corpus.postprocess.filters import KeywordFilter, LocalLanguageFilter

    mh = MinhashConfig()
    keywords = work / "keywords.txt"
    keywords.write_text("forbidden phrase\nanother banned word\n")
    return {
        "token counter": lambda: TokensCounter(tokenizer, count_eos_token=True),
        "exact dedup: signatures": lambda: Sha256DedupSignature(str(work / "exact-sigs")),
        "exact dedup: find": lambda: Sha256FindDuplicates(str(work / "exact-sigs"), str(work / "exact-dups")),
        "exact dedup: filter": lambda: Sha256DedupFilter(str(work / "exact-dups")),
        "language id (lid.176.ftz)": lambda: LocalLanguageFilter(default_lid_model(), ["en"], 0.65),
        "Gopher quality": lambda: GopherQualityFilter(),
        "Gopher repetition": lambda: GopherRepetitionFilter(),
        "URL blocklist": lambda: OfflineURLFilter(),
        "keyword blocklist": lambda: KeywordFilter(keywords),
        "MinHash 1: signatures": lambda: MinhashDedupSignature(str(work / "mh-sigs"), config=mh),
        "MinHash 2: buckets": lambda: MinhashDedupBuckets(str(work / "mh-sigs"), str(work / "mh-buckets"), config=mh),
        "MinHash 3: cluster": lambda: MinhashDedupCluster(str(work / "mh-buckets"), str(work / "mh-remove"), config=mh),
        "MinHash 4: filter": lambda: MinhashDedupFilter(str(work / "mh-remove")),
        "Megatron tokenise": lambda: MegatronDocumentTokenizer(str(work / "tokens"), tokenizer_name_or_path=tokenizer,
                                                               eos_token="</s>"),
    }[name]()


STEPS = ["token counter", "exact dedup: signatures", "exact dedup: find", "exact dedup: filter",
         "language id (lid.176.ftz)", "Gopher quality", "Gopher repetition", "URL blocklist", "keyword blocklist",
         "MinHash 1: signatures", "MinHash 2: buckets", "MinHash 3: cluster", "MinHash 4: filter", "Megatron tokenise"]
DOC_INPUT = {"token counter", "exact dedup: signatures", "exact dedup: filter", "language id (lid.176.ftz)",
             "Gopher quality", "Gopher repetition", "URL blocklist", "keyword blocklist", "MinHash 1: signatures",
             "MinHash 4: filter", "Megatron tokenise"}
PER_BUCKET = {"MinHash 2: buckets": 14}


def run_one(name: str, work: Path, tokenizer: str, queue) -> None:
    from datatrove.data import Document
    from datatrove.utils.logging import logger

    logger.remove()  # the table is the output
    docs = [Document(**d) for d in json.loads((work / "docs.json").read_text())]
    step = build(name, work, tokenizer)
    start = time.perf_counter()
    if name in DOC_INPUT:
        for _ in step(iter(docs), 0, 1) or ():
            pass
    else:
        for rank in range(PER_BUCKET.get(name, 1)):  # one task per bucket, run one after the other here
            for _ in step.run(None, rank, PER_BUCKET.get(name, 1)) or ():
                pass
    seconds = time.perf_counter() - start
    queue.put({"step": name, "seconds": seconds, "docs_per_s": len(docs) / seconds,
               "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024})


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.postprocess", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--docs", type=int, default=4000)
    parser.add_argument("--out", type=Path, default=Path("bench/results/postprocess.json"))
    args = parser.parse_args()

    from configs.tokens import TokenizerConfig
    from corpus.tokens.tokenizer import train_sentencepiece

    docs = documents(args.docs)
    ctx = mp.get_context("spawn")
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "docs.json").write_text(json.dumps(docs))
        options = TokenizerConfig(kind="sentencepiece", vocab_size=8000)
        train_sentencepiece([d["text"] for d in docs[:1000]], options, work / "tok")
        for name in STEPS:
            queue = ctx.Queue()
            proc = ctx.Process(target=run_one, args=(name, work, str(work / "tok" / "tokenizer.json"), queue))
            proc.start()
            result = queue.get()
            proc.join()
            results.append(result)
            print(f"{name:28s} {result['docs_per_s']:10.1f} docs/s   peak RSS {result['peak_rss_mb']:7.0f} MB")
    chars = sum(len(d["text"]) for d in docs)
    report = {"documents": len(docs), "mean_chars": chars / len(docs), "steps": results}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"\n{len(docs)} documents, mean {chars / len(docs):.0f} characters; wrote {args.out}")


if __name__ == "__main__":
    main()
