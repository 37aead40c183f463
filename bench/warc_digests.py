"""What checking the WARC records' digests costs the reader (`inputs.verify_digests`).

    python -m bench.warc_digests [--pages 400] [--repeats 5] [--out bench/results/warc_digests.json]

Reads one generated WARC (corpus.sample: `--pages` pages, their copies and its bad records, one gzip
member a record, each response record with a WARC-Block-Digest, as Common Crawl writes them) with
the extraction's reader (corpus.read.warc.AccountedWarcReader: every record framed, checked and made
a document), digests off and on, `--repeats` times each; then the digest check alone
(corpus.read.framing.check_digest) over every record, and sha1 alone over the same records, the
floor of any digest check. CPU time (this process's, the median of the repeats: a loaded machine
slows the wall clock, not these), so the figures are per core. Prints a table and writes JSON.
What the checks add to a real run is in the plan (`python -m corpus.flow.plan`): its pilot's reader
times them (`digest_check_us`, its thread's CPU).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import tempfile
import time
from pathlib import Path

from corpus.read.framing import Source, check_digest, whole_records
from corpus.read.warc import AccountedWarcReader
from corpus.sample import write_sample


def cpu_seconds(work) -> float:
    started = time.process_time()
    work()
    return time.process_time() - started


def read(folder: Path, verify: bool) -> int:
    """The file's response records, read as the extraction reads them."""
    return sum(1 for _ in AccountedWarcReader(str(folder), verify_digests=verify).read_file("sample.warc.gz"))


def records_of(warc: Path) -> list[tuple[int, bytes]]:
    """Every record's offset and bytes, uncompressed, as the digest check sees them."""
    with open(warc, "rb") as f:
        return [(start, data) for start, _, data in whole_records(Source(f, 0, warc.stat().st_size), gzipped=True) if data]


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.warc_digests", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pages", type=int, default=400)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", type=Path, default=Path("bench/results/warc_digests.json"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        warc, _ = write_sample(folder, args.pages, seed=0)
        records = records_of(warc)
        megabytes = sum(len(data) for _, data in records) / 1e6
        responses = read(folder, verify=True)
        assert read(folder, verify=False) == responses
        work = {
            "read, digests off": lambda: read(folder, verify=False),
            "read, digests on": lambda: read(folder, verify=True),
            "the digest checks alone": lambda: [check_digest(data, start) for start, data in records],
            "sha1 alone over the same records": lambda: [hashlib.sha1(data).digest() for _, data in records],
        }
        rows = {name: statistics.median(cpu_seconds(fn) for _ in range(args.repeats)) for name, fn in work.items()}
    checks, on = rows["the digest checks alone"], rows["read, digests on"]
    result = {"pages": args.pages, "repeats": args.repeats, "records": len(records), "response_records": responses,
              "uncompressed_mb": megabytes, "cpu_seconds": rows, "digest_share_of_reading": checks / on,
              "ms_per_response_record": {k: 1000 * v / responses for k, v in rows.items()},
              "mb_per_s": {k: megabytes / v for k, v in rows.items() if v}}
    print(f"{responses} response records of {len(records)} records, {megabytes:.1f} MB uncompressed; CPU seconds, the "
          f"median of {args.repeats} (one core)")
    print(f"{'':34} {'CPU s':>8} {'ms/record':>10} {'MB/s':>8}")
    for name, seconds in rows.items():
        print(f"{name:34} {seconds:8.3f} {1000 * seconds / responses:10.3f} {megabytes / seconds if seconds else 0:8.0f}")
    print(f"the digest checks: {checks / on:.1%} of the reader's CPU (ms/record: per response record)")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
