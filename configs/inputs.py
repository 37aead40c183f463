"""`inputs:`: where the WARC records come from (local files, Common Crawl snapshots, or the generated
sample) and how their files are read."""

from __future__ import annotations

import glob
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from configs.base import StrictModel
from configs.secrets import refuse_credential_options, refuse_credentials_in_url


class SampleInput(StrictModel):
    """Generate the embedded sample WARC (corpus.sample) under the output root: `files` WARC
    files of `pages` generated pages each (file i from seed `seed + i`)."""

    pages: int = Field(300, ge=1)
    seed: int = 0
    files: int = Field(1, ge=1)

    def warc_paths(self) -> list[str]:
        """Relative to the sample folder: one file is `sample.warc.gz`; several are
        `<i>/sample.warc.gz`. Each WARC has its gold.jsonl beside it."""
        return ["sample.warc.gz"] if self.files == 1 else [f"{i:05d}/sample.warc.gz" for i in range(self.files)]


class CommonCrawlInput(StrictModel):
    """WARC files of Common Crawl snapshots, the same files for every arm.

    From each snapshot's `warc.paths.gz`, `files_per_snapshot` paths are drawn with a seeded
    generator, so the selection is reproducible and independent of the arm.
    """

    snapshots: list[str] = Field(min_length=1)
    files_per_snapshot: int = Field(ge=1)
    seed: int = 0
    base_url: str = "s3://commoncrawl/"

    _base_url_without_credentials = field_validator("base_url")(
        lambda value: refuse_credentials_in_url(value, "inputs.common_crawl.base_url"))

    @field_validator("snapshots")
    @classmethod
    def _snapshot_names(cls, names: list[str]) -> list[str]:
        for name in names:
            if not name.startswith("CC-MAIN-"):
                raise ValueError(f"snapshot {name!r} is not a Common Crawl name like CC-MAIN-2024-10")
        return names


class ReadRetries(StrictModel):
    """Transient read errors of an input file (HTTP 5xx, throttling, a dropped or reset connection, a
    timeout): the file is opened again at the next unread record after `backoff_s` × 2^(n-1) seconds
    (at most `max_backoff_s`) for the n-th failure in a row; `attempts` failures in a row with no
    record read in between, and the next one fails the task."""

    attempts: int = Field(8, ge=0)
    backoff_s: float = Field(2.0, ge=0)
    max_backoff_s: float = Field(120.0, ge=0)


class InputsConfig(StrictModel):
    """Exactly one source of WARC records, and how its files are read."""

    warc: list[str] | None = None  # local paths or globs (relative to the working directory), or URLs
    common_crawl: CommonCrawlInput | None = None
    sample: SampleInput | None = None
    # JSON lines of the input files' expected `size` and/or `sha256` (and `records`), one file a line,
    # `path` relative to the manifest's folder: a local mirror's own record of its files (corpus.read.manifest)
    manifest: str | None = None
    # a file that is not whole WARC records (truncated, a corrupt gzip member, not a WARC): `fail`
    # its task, or `skip` it, counted and named in the ledger
    on_corrupt: Literal["fail", "skip"] = "fail"
    # check each response record's WARC-Block-Digest (else its WARC-Payload-Digest) where it carries
    # one: a record whose bytes do not give it is damaged (named, and `on_corrupt` decides)
    verify_digests: bool = True
    # a remote file whose size neither its listing nor `manifest` gives: `refuse` the run, naming it,
    # or `read` it to the first end of its stream, marked "completeness not verified" in the ledger
    unknown_size: Literal["refuse", "read"] = "refuse"
    retries: ReadRetries = ReadRetries()
    read_timeout_s: float = Field(120.0, gt=0)  # a remote read that stalls this long fails (and is retried)
    storage_options: dict[str, Any] = Field(default_factory=dict, description=(
        "fsspec options of the input files' filesystem, e.g. {anon: true} or {profile: NAME} for s3://, "
        "{block_size: BYTES} (bytes per request). No credential (key, secret, token, password, headers...): "
        "the config is recorded in the output root; s3fs reads AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, "
        "AWS_SESSION_TOKEN or AWS_PROFILE from the environment, hf:// reads HF_TOKEN."))

    _no_credentials_in_options = field_validator("storage_options")(
        lambda value: refuse_credential_options(value, "inputs.storage_options"))

    @model_validator(mode="after")
    def _exactly_one(self) -> InputsConfig:
        given = [k for k in ("warc", "common_crawl", "sample") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(f"give exactly one of warc, common_crawl, sample (got {given or 'none'})")
        if self.warc is not None:
            urls = [p for p in self.warc if "://" in p]
            if urls and len(urls) < len(self.warc):
                raise ValueError("warc: give local paths or URLs, not both (the files are read from one place)")
            if len(places := sorted({"/".join(url.split("/")[:3]) for url in urls})) > 1:
                raise ValueError(f"warc: URLs of one scheme and host (the readers' base), not {places}")
            for pattern in self.warc:
                refuse_credentials_in_url(pattern, "inputs.warc")
                if "://" in pattern and any(c in pattern for c in "*?["):
                    raise ValueError(f"{pattern!r}: URLs are read as given, not expanded: list the files")
                if "://" not in pattern and not glob.glob(pattern):
                    raise ValueError(f"no file matches {pattern!r}")
        if self.manifest is not None:
            refuse_credentials_in_url(self.manifest, "inputs.manifest")
            if self.sample is not None:
                raise ValueError("manifest: the generated sample needs none (its files are made here)")
            if "://" not in self.manifest and not Path(self.manifest).is_file():
                raise ValueError(f"manifest: no file {self.manifest!r}")
        return self
