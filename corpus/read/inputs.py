"""Resolve an experiment's inputs to one list of WARC files, the same for every arm and every run.

At the first run of an output root the list is written to `<output_root>/inputs/`: `warc_paths.txt`
(paths relative to a base folder or URL, the readers' paths file) and `manifest.json` (each file's
expected size, and what the source or `inputs.manifest` adds: corpus.read.manifest). It is fixed for
the life of the output root: a rerun whose inputs resolve to another list (a file gone, a new file, a
file of another size that an arm has read whole, a file smaller than the list records) is refused
with one message naming each difference. A remote file whose size nothing gives is refused unless
`inputs.unknown_size: read`. A file that no arm has read whole may come back replaced by a copy at
least as large (fetched again): the manifest takes its new size, and `files_to_read_again` finds the
files a finished task skipped that came back (another size, version or content), so that the flow
reads them again.
"""

from __future__ import annotations

import copy
import glob
import gzip
import os
import random
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from configs.base import ConfigError
from configs.durable import write_atomically
from configs.experiment import ExperimentConfig
from configs.inputs import CommonCrawlInput, InputsConfig
from corpus.read.framing import WHAT_TO_DO
from corpus.read.manifest import MANIFEST, identity, location, read_manifest, read_user_manifest, write_manifest
from corpus.read.warc import (
    DAMAGED,
    INPUT_FILES,
    READ_WHOLE,
    SKIPPED,
    lasting_fault,
    pause_s,
    read_input_files,
    retryable,
    why,
)
from corpus.stage import stream_sha256
from slurm.console import say


def storage_options(inputs: InputsConfig, base: str) -> dict:
    """fsspec options for the input files under `base`: the config's, and the read timeout in the
    form the remote filesystem takes (aiohttp's for http(s), botocore's for s3)."""
    options = copy.deepcopy(inputs.storage_options)
    protocol, timeout = base.split("://")[0] if "://" in base else "file", inputs.read_timeout_s
    if protocol in ("http", "https"):
        from aiohttp import ClientTimeout

        options.setdefault("client_kwargs", {}).setdefault("timeout", ClientTimeout(sock_connect=timeout, sock_read=timeout))
    elif protocol in ("s3", "s3a"):
        config = options.setdefault("config_kwargs", {})
        config.setdefault("connect_timeout", timeout)
        config.setdefault("read_timeout", timeout)
    return options


def input_folder(inputs: InputsConfig, base: str) -> tuple[str, dict]:
    """The readers' data folder (datatrove's `(path, storage options)` form)."""
    return base, storage_options(inputs, base)


def select_common_crawl(cc: CommonCrawlInput, options: dict | None = None) -> list[str]:
    """`files_per_snapshot` paths from each snapshot's warc.paths.gz, drawn with a seeded generator."""
    import fsspec

    selected = []
    for snapshot in cc.snapshots:
        url = f"{cc.base_url.rstrip('/')}/crawl-data/{snapshot}/warc.paths.gz"
        with fsspec.open(url, "rb", **(options or {})) as f:
            paths = gzip.decompress(f.read()).decode().split()
        if len(paths) < cc.files_per_snapshot:
            raise ValueError(f"{snapshot} lists {len(paths)} WARC files, fewer than files_per_snapshot={cc.files_per_snapshot}")
        rng = random.Random(f"{cc.seed}:{snapshot}")
        selected += sorted(rng.sample(sorted(paths), cc.files_per_snapshot))
    return selected


def local_paths(files: list[str]) -> tuple[str, list[str]]:
    """(their common folder, their paths relative to it, in the order given) for local files: a
    datatrove reader's data folder and paths file."""
    files = list(dict.fromkeys(os.path.abspath(p) for p in files))
    base = os.path.commonpath(files) if len(files) > 1 else os.path.dirname(files[0])
    return base, [os.path.relpath(p, base) for p in files]


def url_paths(urls: list[str]) -> tuple[str, list[str]]:
    """The same for URLs of one scheme and host (the config checks that): their common prefix up to
    a '/', and the rest of each."""
    urls = list(dict.fromkeys(urls))
    base = os.path.commonprefix(urls) if len(urls) > 1 else urls[0]
    base = base[:base.rindex("/")]
    return base, [url[len(base) + 1:] for url in urls]


PATHS_FILE = "warc_paths.txt"


class InputListError(ConfigError):
    """The inputs resolve to another list than the output root's, or some of their files cannot be listed."""


def inputs_folder(config: ExperimentConfig) -> Path:
    return config.output_root / "inputs"


def configured_files(config: ExperimentConfig) -> tuple[str, list[str]]:
    """(base folder or URL, paths relative to it) as the config's inputs resolve now; generates the
    sample if configured."""
    inputs = config.inputs
    if inputs.sample is not None:
        from corpus.sample import write_sample

        sample_dir = config.output_root / "sample"
        paths = inputs.sample.warc_paths()
        for i, path in enumerate(paths):
            if not (sample_dir / path).exists():
                write_sample((sample_dir / path).parent, inputs.sample.pages, inputs.sample.seed + i)
        return str(sample_dir.resolve()), paths
    if inputs.common_crawl is not None:
        base = inputs.common_crawl.base_url.rstrip("/")  # the readers join paths with '/'
        return base, select_common_crawl(inputs.common_crawl, storage_options(inputs, base))
    if "://" in inputs.warc[0]:
        return url_paths(inputs.warc)
    files = sorted(p for pattern in inputs.warc for p in glob.glob(pattern))
    if not files:
        raise InputListError(f"inputs.warc: no file matches {inputs.warc}")
    return local_paths(files)


def resolve_inputs(config: ExperimentConfig) -> tuple[str, Path]:
    """(base folder or URL, paths file) for the readers. The first run writes the list and its
    manifest; a later one checks that the inputs still resolve to it (InputListError naming each
    difference) and keeps the first run's order."""
    out = inputs_folder(config)
    out.mkdir(parents=True, exist_ok=True)
    paths_file, manifest_file = out / PATHS_FILE, out / MANIFEST
    base, paths = configured_files(config)
    first = paths_file.read_text().split() if paths_file.is_file() else None
    stored = read_manifest(manifest_file) if manifest_file.is_file() else None
    if first is not None:
        _same_files(config, stored["base"] if stored else base, first, base, paths)
        paths = first
    entries = expected_files(config, base, paths, stored["files"] if stored else None)
    if stored is not None:
        entries = _replaced(config, base, stored["files"], entries)
    if config.inputs.unknown_size == "refuse" and (unsized := [e["path"] for e in entries if e.get("size") is None]):
        named = ", ".join(location(base, p) for p in unsized[:5]) + (", …" if len(unsized) > 5 else "")
        raise InputListError(
            f"{len(unsized):,} of {len(entries):,} input files have no known size (the source gave no length): {named}. "
            "A file read without its size ends at the first end of its stream, so a connection closed at a record "
            "boundary would read as the whole file. Give each file's size in inputs.manifest (from the source's "
            "listing: python -m corpus.read.manifest; docs/guides/cluster.md), or set inputs.unknown_size: read to "
            "read them anyway, each marked "
            "'completeness not verified' in the ledger")
    if stored is None or entries != [stored["files"][p] for p in paths]:
        write_manifest(manifest_file, base, entries)
    if first is None:  # what every later run keeps: never a cut list (a kill, a full disk)
        write_atomically(paths_file, "".join(f"{p}\n" for p in paths))
    return base, paths_file


def input_manifest(paths_file: Path) -> Path | None:
    """The manifest written beside a paths file, if any (a plan's pilot lists its files without one:
    their sizes are then those their filesystem reports)."""
    return path if (path := paths_file.with_name(MANIFEST)).is_file() else None


def _same_files(config: ExperimentConfig, first_base: str, first: list[str], base: str, paths: list[str]) -> None:
    """InputListError unless the inputs resolve to the files of the first run (the base may move)."""
    if set(first) == set(paths):
        return
    old, new = {location(first_base, p) for p in first}, {location(base, p) for p in paths}
    gone, added = sorted(old - new), sorted(new - old)
    lines = [*(f"  gone: {p}" for p in gone[:10]), *(["  …"] if len(gone) > 10 else []),
             *(f"  new: {p}" for p in added[:10]), *(["  …"] if len(added) > 10 else [])]
    raise InputListError(
        f"the inputs resolve to another list than the first run of {config.output_root} "
        f"({len(first):,} files in {inputs_folder(config) / PATHS_FILE}): {len(gone):,} gone, {len(added):,} new\n"
        + "\n".join(lines) + "\nRestore the files (a file fetched again keeps its path), or start a new output root: "
        "an output root reads one list for its whole life")


def expected_files(config: ExperimentConfig, base: str, paths: list[str], stored: dict[str, dict] | None) -> list[dict]:
    """Each file's manifest entry: its size as its filesystem lists it (local files every run;
    remote ones at the first run, else as stored), with `inputs.manifest`'s size, sha256 and
    records over it."""
    local = "://" not in base
    listed = list_files(config.inputs, base, paths) if local or stored is None else {p: stored[p] for p in paths}
    entries = [{"path": p, **{k: v for k, v in listed[p].items() if k in ("size", "etag")}} for p in paths]
    if config.inputs.manifest is not None:
        try:
            user = read_user_manifest(config.inputs.manifest)
        except (OSError, ValueError) as e:
            raise InputListError(f"inputs.manifest: {e}") from None
        keys = [location(base, p).removeprefix("file://") for p in paths]
        if lacking := [k for k in keys if k not in user]:
            raise InputListError(f"inputs.manifest {config.inputs.manifest} has no line for {len(lacking):,} input files: "
                                 f"{', '.join(lacking[:3])}{', …' if len(lacking) > 3 else ''}")
        for entry, key in zip(entries, keys, strict=True):
            entry.update(user[key])
    return entries


def list_files(inputs: InputsConfig, base: str, paths: list[str]) -> dict[str, dict]:
    """Each file's size (and ETag where the source gives one) from its filesystem: a stat, an HTTP
    HEAD, an S3 HEAD; several at once, each transient error retried as the reader would. Files not
    there are named in one InputListError."""
    from datatrove.io import get_datafolder

    folder = get_datafolder(input_folder(inputs, base))

    def info(path: str) -> dict | BaseException:
        failures = 0
        while True:
            try:
                found = folder.info(path)
                return {"size": found.get("size"), **({"etag": str(found["ETag"])} if found.get("ETag") else {})}
            except Exception as error:
                if not retryable(error) or failures == inputs.retries.attempts:
                    return error
                failures += 1
                time.sleep(pause_s(inputs.retries, failures))

    with ThreadPoolExecutor(16) as pool:
        found = dict(zip(paths, pool.map(info, paths), strict=True))
    if failed := {p: e for p, e in found.items() if isinstance(e, BaseException)}:
        faults = {p: None if retryable(e) else lasting_fault(e) for p, e in failed.items()}
        named = [f"{location(base, p)} ({why(e) if faults[p] is None or faults[p].reason == 'missing' else faults[p]})"
                 for p, e in list(failed.items())[:5]]
        missing = ("Check the snapshot names (inputs.common_crawl.snapshots)" if inputs.common_crawl else
                   "Check the paths (inputs.warc)")
        advice = dict.fromkeys("Run again when the source answers" if fault is None else
                               missing if fault.reason == "missing" else WHAT_TO_DO[fault.reason] for fault in faults.values())
        raise InputListError(f"{len(failed):,} of {len(paths):,} input files could not be listed: {', '.join(named)}"
                             f"{', …' if len(failed) > 5 else ''}. {'; '.join(advice)}")
    return found


def read_by_arm(config: ExperimentConfig) -> dict[str, list[dict]]:
    """Every extractor arm's per-file records (corpus.read.warc), as its tasks last wrote them."""
    return {arm: read_input_files(config.arm_dir(arm) / "logs" / INPUT_FILES) for arm in config.extractor_arms}


def _replaced(config: ExperimentConfig, base: str, stored: dict[str, dict], entries: list[dict]) -> list[dict]:
    """The entries, where a file's size or sha256 differs from the stored one: the new one for a file
    no arm has read whole and at least as large as stored (a good copy fetched again); InputListError
    for a file an arm has read whole (its outputs came from other bytes, or, where only a sha256 was
    added by `inputs.manifest`, from bytes not checked against it), and for a smaller file (a
    copy cut short: the size of the first run is the truth for the output root's life, and a copy cut
    at a record boundary would read as whole)."""
    changed = [e for e in entries if any(e.get(k) != stored[e["path"]].get(k) for k in ("size", "sha256"))]
    if not changed:
        return entries
    whole = {}
    for arm, records in read_by_arm(config).items():
        for record in records:
            if record["outcome"] == READ_WHOLE:
                whole.setdefault(record["file"], []).append(arm)
    if unchecked := [e for e in changed if e["path"] in whole and e.get("size") == stored[e["path"]].get("size")
                     and stored[e["path"]].get("sha256") is None]:
        # the same size, and a sha256 the first run's list had none of (inputs.manifest given since):
        # not a changed file, but one an arm read whole without the check the list now asks for
        raise _refusal(
            f"inputs.manifest gives a sha256 for {len(unchecked):,} input files that the input list of {config.output_root} "
            "had none for, and an arm has read them whole without checking it (their size is the list's)",
            [f"{location(base, e['path'])}: read whole by {', '.join(whole[e['path']])} unchecked" for e in unchecked],
            "Start a new output root to read them checked, or give this output root a manifest without their sha256 "
            "(their sizes are checked as before)")
    if refused := [e for e in changed if e["path"] in whole]:
        raise _refusal(
            f"{len(refused):,} input files changed since an arm of {config.output_root} read them whole",
            [f"{location(base, e['path'])}: {_bytes(e)}, {_bytes(stored[e['path']])} when {', '.join(whole[e['path']])} "
             "read it whole" for e in refused],
            "Restore the files the arms read, or start a new output root")
    if smaller := [e for e in changed if None not in (e.get("size"), stored[e["path"]].get("size"))
                   and e["size"] < stored[e["path"]]["size"]]:
        raise _refusal(
            f"{len(smaller):,} input files are smaller than the input list of {config.output_root} records (the sizes "
            "its first run found hold for its whole life: a copy cut short at a record boundary would read as whole)",
            [f"{location(base, e['path'])}: {_bytes(e)}, {_bytes(stored[e['path']])} in the input list" for e in smaller],
            "Put back a good copy of each, at least as large as the list records, at the same path (it is then read "
            "again, and the list takes its size), or start a new output root")
    for e in changed:
        say(f"inputs: {location(base, e['path'])} is {_bytes(e)}, {_bytes(stored[e['path']])} in the input list; no arm has "
            "read it whole: the new copy is read, and the list takes its size")
    return entries


def _refusal(what: str, files: list[str], remedy: str) -> InputListError:
    """An InputListError naming what is wrong, the first ten files it is wrong for, and what to do."""
    return InputListError("\n".join([what, *(f"  {f}" for f in files[:10]), *(["  …"] if len(files) > 10 else []), remedy]))


def _bytes(entry: dict) -> str:
    return f"{entry['size']:,} bytes" if entry.get("size") is not None else "of unknown size"


def files_to_read_again(config: ExperimentConfig, base: str, retry_skipped: bool = False) -> dict[str, list[tuple[str, int]]]:
    """The files a finished extraction task skipped (or read around damage) that came back (their size
    or version, or for a local file its sha256, differs from the one the task read), or all of them
    with `retry_skipped`: each with the (arm, task) pairs that must run again."""
    from datatrove.io import get_datafolder

    skipped = [(arm, r) for arm, records in read_by_arm(config).items() for r in records
               if r["outcome"] in (SKIPPED, DAMAGED)]
    if not skipped:
        return {}
    folder = get_datafolder(input_folder(config.inputs, base))
    now: dict[str, dict | None] = {}
    for _, record in skipped:
        if record["file"] not in now and not retry_skipped:
            now[record["file"]] = _now(folder, record["file"], record.get("seen"))
    out: dict[str, list[tuple[str, int]]] = {}
    for arm, record in skipped:
        seen = record.get("seen")
        if retry_skipped or (now[record["file"]] is not None and seen is not None and now[record["file"]] != seen):
            out.setdefault(record["file"], []).append((arm, record["task"]))
    return out


def _now(folder, path: str, seen: dict | None) -> dict | None:
    """A file's identity now, as its reader recorded it when it skipped the file (`seen`): size and
    version, and its sha256 where `seen` has one and the size and version are still those (a good
    copy put back with the same size and modification time); None if it is gone or not answering."""
    try:
        now = identity(folder.info(path))
        if seen and seen.get("sha256") and now == {k: seen.get(k) for k in now}:
            with folder.open(path, "rb") as f:
                now["sha256"] = stream_sha256(f)
        return now
    except Exception:  # gone, or not answering: not back (yet)
        return None
