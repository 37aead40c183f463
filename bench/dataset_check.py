"""What checking a dataset against the budget's manifest costs before training (pretrain.verify).

    python -m bench.dataset_check [--mib 512] [--out bench/results/dataset_check.json]

Writes one `--mib` file of random bytes (a stand-in for an arm's `.bin`), then times
configs.durable.sha256_once on it twice: the first call reads and hashes every byte (what a new or
changed file costs), the second reads the stamp (what every later run costs). Wall clock, one
core. The figure for the paper's shape (63B tokens an arm, 2 bytes a token with a vocabulary
under 65,536: 126 GB a `.bin`) is the measured rate scaled, printed as such, on the storage it ran
on; a cluster filesystem's read rate may be the limit there instead.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from configs.durable import sha256_once

PAPER_BIN_BYTES = 63e9 * 2


def timed(fn) -> float:
    began = time.perf_counter()
    fn()
    return time.perf_counter() - began


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.dataset_check", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mib", type=int, default=512, help="size of the stand-in .bin (MiB)")
    parser.add_argument("--out", type=Path, default=Path("bench/results/dataset_check.json"))
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "arm_text_document.bin"
        with open(path, "wb") as f:
            for _ in range(args.mib):
                f.write(bytes(range(256)) * 4096)
        first, again = timed(lambda: sha256_once(path)), timed(lambda: sha256_once(path))
    size = args.mib * 2**20
    rate = size / first
    result = {"mib": args.mib, "first_check_s": first, "stamped_check_s": again, "hash_mb_per_s": rate / 1e6,
              "paper_bin_bytes": PAPER_BIN_BYTES, "paper_first_check_s_scaled": PAPER_BIN_BYTES / rate}
    print(f"{'':28} {'seconds':>10}")
    print(f"{'first check (hash + stamp)':28} {first:10.3f}   {rate / 1e6:,.0f} MB/s")
    print(f"{'stamped check':28} {again:10.6f}")
    print(f"scaled to a 126 GB .bin (63B tokens, uint16): {PAPER_BIN_BYTES / rate / 60:.1f} min the first time, "
          f"{again * 1000:.2f} ms after")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
