"""Resolve an experiment's inputs to one list of WARC files, the same for every arm.

The list is written once to `<output_root>/inputs/warc_paths.txt` (paths relative to a base
folder or URL) and every arm's reader reads exactly those files.
"""

from __future__ import annotations

import copy
import glob
import gzip
import os
import random
from pathlib import Path

from configs.experiment import CommonCrawlInput, ExperimentConfig, InputsConfig


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


def resolve_inputs(config: ExperimentConfig) -> tuple[str, Path]:
    """(base folder or URL, paths file) for the readers; generates the sample if configured."""
    out = config.output_root / "inputs"
    out.mkdir(parents=True, exist_ok=True)
    paths_file = out / "warc_paths.txt"
    inputs = config.inputs
    if inputs.sample is not None:
        from corpus.sample import write_sample

        sample_dir = config.output_root / "sample"
        paths = inputs.sample.warc_paths()
        for i, path in enumerate(paths):
            if not (sample_dir / path).exists():
                write_sample((sample_dir / path).parent, inputs.sample.pages, inputs.sample.seed + i)
        base = str(sample_dir.resolve())
    elif inputs.common_crawl is not None:
        base = inputs.common_crawl.base_url.rstrip("/")  # the readers join paths with '/'
        paths = select_common_crawl(inputs.common_crawl, storage_options(inputs, base))
    elif "://" in inputs.warc[0]:
        base, paths = url_paths(inputs.warc)
    else:
        base, paths = local_paths(sorted(p for pattern in inputs.warc for p in glob.glob(pattern)))
    paths_file.write_text("\n".join(paths) + "\n")
    return base, paths_file
