"""`inputs:`: where the WARC records come from (local files, Common Crawl snapshots, or the generated
sample) and how their files are read."""

from __future__ import annotations

import glob
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from configs.base import StrictModel


class SampleInput(StrictModel):
    """Generate the embedded sample WARC (corpus.sample) under the output root: `files` WARC
    files of `pages` generated pages each (file i from seed `seed + i`)."""

    pages: int = Field(300, ge=1, description="Generated pages in each sample WARC file.")
    seed: int = Field(0, description="Seed of the first file; file i is generated from seed `seed + i`. An "
                      "`evaluation.clean_text` set's generated pages must use another seed.")
    files: int = Field(1, ge=1, description="Sample WARC files to generate; more than one lets the corpus stages "
                       "run several tasks.")

    def warc_paths(self) -> list[str]:
        """Relative to the sample folder: one file is `sample.warc.gz`; several are
        `<i>/sample.warc.gz`. Each WARC has its gold.jsonl beside it."""
        return ["sample.warc.gz"] if self.files == 1 else [f"{i:05d}/sample.warc.gz" for i in range(self.files)]


class CommonCrawlInput(StrictModel):
    """WARC files of Common Crawl snapshots, the same files for every arm.

    From each snapshot's `warc.paths.gz`, `files_per_snapshot` paths are drawn with a seeded
    generator, so the selection is reproducible and independent of the arm.
    """

    snapshots: list[str] = Field(min_length=1, description="Common Crawl snapshot names, each like "
                                 "`CC-MAIN-2024-10` (another form is refused).")
    files_per_snapshot: int = Field(ge=1, description="WARC files drawn from each snapshot's `warc.paths.gz`; "
                                    "sets how much is read, so size it to the token budget (`python -m "
                                    "corpus.flow.plan` says whether it suffices).")
    seed: int = Field(0, description="Seed of the draw of files from each snapshot.")
    base_url: str = Field("s3://commoncrawl/", description="Where the snapshots are read from, through fsspec: "
                          "`s3://commoncrawl/` or `https://data.commoncrawl.org/` (or a mirror of the same layout).")

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

    attempts: int = Field(8, ge=0, description="Transient read errors of one file in a row (no record read in "
                          "between) that are retried; the next one fails the task.")
    backoff_s: float = Field(2.0, ge=0, description="Seconds before the first retry; the n-th failure in a row "
                             "waits `backoff_s` x 2^(n-1) seconds.")
    max_backoff_s: float = Field(120.0, ge=0, description="The longest wait between two retries, in seconds.")


class InputsConfig(StrictModel):
    """Exactly one source of WARC records, and how its files are read."""

    warc: list[str] | None = Field(None, description="Local WARC paths or globs (relative to the working "
                                   "directory), or URLs of one scheme and host listed one by one (not globs). One "
                                   "of `warc`, `common_crawl`, `sample`.")
    common_crawl: CommonCrawlInput | None = Field(None, description="A seeded draw of WARC files from Common Crawl "
                                                  "snapshots. One of `warc`, `common_crawl`, `sample`.")
    sample: SampleInput | None = Field(None, description="The embedded sample: WARC files the project generates "
                                       "under the output root, with their gold main content. One of `warc`, "
                                       "`common_crawl`, `sample`.")
    manifest: str | None = Field(None, description="A local mirror's own record of its files (`python -m "
                                 "corpus.read.manifest` writes one): JSON lines of `path` (relative to the "
                                 "manifest's folder), `size` and/or `sha256`, optionally `records`, one file a "
                                 "line. Its sizes replace the listing's and its sha256 is checked as each file is "
                                 "read. Not with `sample`.")
    on_corrupt: Literal["fail", "skip"] = Field("fail", description="A file that is not whole WARC records "
                                                "(truncated, a corrupt gzip member, not a WARC): `fail` fails its "
                                                "task; `skip` counts it, keeps its whole records and names it in "
                                                "the ledger.")
    verify_digests: bool = Field(True, description="Check each response record's WARC-Block-Digest (else its "
                                 "WARC-Payload-Digest) where it carries one; a record whose bytes do not give it is "
                                 "damaged, and `on_corrupt` decides. `false` trusts the records as framed.")
    unknown_size: Literal["refuse", "read"] = Field("refuse", description="A remote file whose size neither its "
                                                    "listing nor `manifest` gives: `refuse` the run, naming it, or "
                                                    "`read` it to the end of its stream, marked not verified in "
                                                    "the ledger.")
    retries: ReadRetries = Field(ReadRetries(), description="Retries of transient read errors (HTTP 5xx, "
                                 "throttling, a dropped connection, a timeout), each from the next unread record.")
    read_timeout_s: float = Field(120.0, gt=0, description="Seconds a remote read may stall before it fails (and "
                                  "is retried).")
    storage_options: dict[str, Any] = Field({}, description="fsspec options of the input files' filesystem, e.g. "
                                            "`{anon: true}` or `{profile: NAME}` for `s3://`, `{block_size: BYTES}` "
                                            "(bytes per request; 0 streams each file from its start).")

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
                if "://" in pattern and any(c in pattern for c in "*?["):
                    raise ValueError(f"{pattern!r}: URLs are read as given, not expanded: list the files")
                if "://" not in pattern and not glob.glob(pattern):
                    raise ValueError(f"no file matches {pattern!r}")
        if self.manifest is not None:
            if self.sample is not None:
                raise ValueError("manifest: the generated sample needs none (its files are made here)")
            if "://" not in self.manifest and not Path(self.manifest).is_file():
                raise ValueError(f"manifest: no file {self.manifest!r}")
        return self
