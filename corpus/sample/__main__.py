import argparse
import time
from collections import Counter
from pathlib import Path

from corpus.sample import read_gold, write_sample


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m corpus.sample",
        description="Write DIR/sample.warc.gz (generated pages + bad records) and DIR/gold.jsonl (gold main content).",
    )
    parser.add_argument("--out", type=Path, required=True, help="output folder")
    parser.add_argument("--pages", type=int, default=300, help="number of generated pages (bad records come on top)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    start = time.perf_counter()
    warc, gold = write_sample(args.out, args.pages, args.seed)
    counts = Counter(r["template"] or r["expect"] for r in read_gold(gold))
    print(f"wrote {warc} ({warc.stat().st_size / 1e6:.1f} MB) and {gold} in {time.perf_counter() - start:.1f}s")
    print("records: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))


if __name__ == "__main__":
    main()
