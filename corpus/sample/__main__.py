import argparse
import time
from collections import Counter
from pathlib import Path

from corpus.sample import read_gold, write_annotated_sample, write_manifest, write_sample


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m corpus.sample",
        description="Write DIR/sample.warc.gz, DIR/gold.jsonl (gold main content) and DIR/manifest.jsonl (each WARC's "
                    "size, sha256 and records, for inputs.manifest): generated pages and bad records, or (--from-pages) "
                    "the pages of annotated page files.",
    )
    parser.add_argument("--out", type=Path, required=True, help="output folder")
    parser.add_argument("--pages", type=int, default=300, help="number of generated pages (bad records come on top)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--from-pages", nargs="+", type=Path,
                        help="annotated page files (e.g. ../shared/data/extraction/*/pages.jsonl.gz) instead of generated pages")
    parser.add_argument("--max-pages", type=int, help="with --from-pages: at most this many pages of each file")
    parser.add_argument("--files", type=int, default=1, help="with --from-pages: WARC files to deal the pages into")
    args = parser.parse_args()
    start = time.perf_counter()
    if args.from_pages:
        warcs = write_annotated_sample(args.out, args.from_pages, args.max_pages, args.files)
    else:
        warcs = [write_sample(args.out, args.pages, args.seed)[0]]
    manifest = write_manifest(args.out, warcs)
    counts = Counter(r.get("template") or r.get("dataset") or r["expect"]
                     for warc in warcs for r in read_gold(warc.with_name("gold.jsonl")))
    size = sum(warc.stat().st_size for warc in warcs) / 1e6
    print(f"wrote {', '.join(map(str, warcs))} ({size:.1f} MB), their gold.jsonl and {manifest} (sizes, sha256, "
          f"records: inputs.manifest) in {time.perf_counter() - start:.1f}s")
    print("records: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))


if __name__ == "__main__":
    main()
