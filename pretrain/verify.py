"""The datasets and the tokenizer checked against the budget's manifest before the first step.

The budget stage records every arm's `.bin` and `.idx` SHA-256 and the tokenizer's in
`<output_root>/datasets/manifest.json`. Training and evaluation refuse, with one line naming the
file, both digests and how to rebuild it:
- a `.bin` or `.idx` that megatron-core's index reader would choke on (a cut `.idx`, a `.bin`
  shorter or longer than its index says), found from the sizes alone;
- a file whose digest is not the manifest's (bytes changed in place, same size);
- a tokenizer other than the one the datasets were cut with.
Hashing reads every byte, so it is done once per file version: a stamp in `logs/` beside each file keeps the
digest of its (size, mtime, inode) (configs.durable.sha256_once); the budget stage stamps the files
it writes. Under torchrun one rank checks while the others wait (`check_inputs_once`).
"""

from __future__ import annotations

import json
import struct
import time
from pathlib import Path

from configs.durable import sha256_once, write_atomically
from configs.experiment import ExperimentConfig

INDEX_HEADER = b"MMIDIDX\x00\x00"  # megatron-core's indexed_dataset, version 1
# megatron-core's DType codes -> bytes per token
TOKEN_BYTES = {1: 1, 2: 1, 3: 2, 4: 4, 5: 8, 6: 8, 7: 4, 8: 2}


class DatasetMismatch(RuntimeError):
    """A dataset or tokenizer file is damaged or is not the one the manifest records."""


def rebuild_hint(config: ExperimentConfig, stage: str) -> str:
    return (f"rebuild it: rm -r {config.output_root / 'logs' / stage / 'completions'} && "
            "bash slurm/extract.sh CONFIG")


def index_problem(prefix: str) -> str | None:
    """What is wrong with a `.bin/.idx` pair by its sizes (None if they agree with the index)."""
    idx, bin_ = Path(f"{prefix}.idx"), Path(f"{prefix}.bin")
    for path in (idx, bin_):
        if not path.is_file():
            return f"{path}: missing"
    with open(idx, "rb") as f:
        head = f.read(34)
        if len(head) < 34 or head[:9] != INDEX_HEADER:
            return f"{idx}: not a megatron index (header {'cut short' if len(head) < 34 else 'unknown'})"
        code, sequences, documents = head[17], *struct.unpack("<QQ", head[18:34])
        if code not in TOKEN_BYTES:
            return f"{idx}: unknown token type code {code}"
        expected = 34 + sequences * (4 + 8) + documents * 8
        size = idx.stat().st_size
        if size != expected:
            return f"{idx}: {size:,} bytes, its header says {expected:,} ({sequences:,} sequences)"
        if not sequences:
            tokens_end = 0
        else:
            f.seek(34 + 4 * (sequences - 1))
            last_length = struct.unpack("<i", f.read(4))[0]
            f.seek(34 + 4 * sequences + 8 * (sequences - 1))
            tokens_end = struct.unpack("<q", f.read(8))[0] + last_length * TOKEN_BYTES[code]
    if bin_.stat().st_size != tokens_end:
        return f"{bin_}: {bin_.stat().st_size:,} bytes, its index says {tokens_end:,}"
    return None


def check_inputs(config: ExperimentConfig, arms: list[str]) -> str:
    """Refuse (DatasetMismatch) a damaged or changed dataset of `arms` or tokenizer; returns what
    was checked and what it cost."""
    manifest_file = config.datasets_manifest()
    try:
        manifest = json.loads(manifest_file.read_text())
        recorded_arms, recorded_tokenizer = manifest["arms"], manifest["tokenizer"]["sha256"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise DatasetMismatch(f"{manifest_file}: unreadable ({e}); the datasets cannot be checked: "
                              f"{rebuild_hint(config, 'budget')}") from None
    began, hashed = time.perf_counter(), 0
    for arm in arms:
        if arm not in recorded_arms:
            raise DatasetMismatch(f"{manifest_file}: no arm {arm!r} (the datasets were cut for "
                                  f"{sorted(recorded_arms)}): {rebuild_hint(config, 'budget')}")
        prefix = str(config.dataset_prefix(arm))
        if problem := index_problem(prefix):
            raise DatasetMismatch(f"{problem}: the dataset of arm {arm!r} is damaged; {rebuild_hint(config, 'budget')}")
        for suffix in ("bin", "idx"):
            path = Path(f"{prefix}.{suffix}")
            digest, read = sha256_once(path)
            hashed += path.stat().st_size if read else 0
            if digest != (recorded := recorded_arms[arm][f"{suffix}_sha256"]):
                raise DatasetMismatch(f"{path}: sha256 {digest[:16]}…, the manifest records {recorded[:16]}… "
                                      f"(changed since the budget cut it); {rebuild_hint(config, 'budget')}")
    recorded, path = recorded_tokenizer, config.tokenizer_file()
    if not path.is_file():
        raise DatasetMismatch(f"{path}: missing; the datasets were cut with tokenizer {recorded[:16]}… "
                              f"({manifest_file}): restore it, or {rebuild_hint(config, 'tokenizer')}")
    digest, read = sha256_once(path)
    hashed += path.stat().st_size if read else 0
    if digest != recorded:
        raise DatasetMismatch(f"{path}: sha256 {digest[:16]}…, the datasets were cut with tokenizer "
                                  f"{recorded[:16]}… ({manifest_file}); restore it, or "
                                  f"{rebuild_hint(config, 'tokenizer')} (every later stage runs again)")
    seconds = time.perf_counter() - began
    return (f"checked {', '.join(arms) or 'no arm'} and the tokenizer against {config.relative(manifest_file)}: "
            f"{hashed / 2**20:,.1f} MiB hashed in {seconds:.2f} s" + ("" if hashed else " (all from stamps)"))


def check_inputs_once(config: ExperimentConfig, arms: list[str]) -> str:
    """`check_inputs` on rank 0 while the other ranks wait; every rank raises the same refusal.
    Whatever rank 0 raises is broadcast first: the others would otherwise wait in the broadcast
    until the process group's timeout."""
    import torch.distributed as dist

    outcome = [None, None]
    if dist.get_rank() == 0:
        try:
            outcome = [check_inputs(config, arms), None]
        except DatasetMismatch as e:
            outcome = [None, str(e)]
        except Exception as e:
            dist.broadcast_object_list([None, f"rank 0 could not check the datasets: {e!r}"], src=0)
            raise
    dist.broadcast_object_list(outcome, src=0)
    if outcome[1]:
        raise DatasetMismatch(outcome[1])
    return outcome[0]


def record_datasets(config: ExperimentConfig, arms: list[str]) -> None:
    """The digests the budget stage records (corpus.tokens.budget), for datasets made outside the
    corpus flow (benchmarks, tests): what `check_inputs` reads, nothing more."""
    manifest = {"arms": {arm: {f"{suffix}_sha256": sha256_once(Path(f"{config.dataset_prefix(arm)}.{suffix}"))[0]
                               for suffix in ("bin", "idx")} for arm in arms},
                "tokenizer": {"sha256": sha256_once(config.tokenizer_file())[0]}}
    write_atomically(config.datasets_manifest(), json.dumps(manifest, indent=2) + "\n")
