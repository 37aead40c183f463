"""The input list of an output root: `<output_root>/inputs/manifest.json`, written at its first run.

Every WARC file the arms read, by its path relative to the readers' base (the order of
`warc_paths.txt`), with the size its filesystem reported then (local stat, HTTP Content-Length, the
S3 listing) and what the source or a user manifest adds: `etag` (HTTP, S3), `sha256` and `records`
(response records; `inputs.manifest`, which `python -m corpus.sample` writes). The reader reads each
file to that size and checks its sha256 where one is given; the ledger checks each arm's records per
file against `records`.

A user manifest (`inputs.manifest`) is JSON lines, one file a line: `path` (relative to the
manifest's folder, or absolute, or a URL), and `size` or `sha256` or both, optionally `records`.
One from a source's own listing (an S3 prefix, a local or mounted folder):

    python -m corpus.read.manifest ROOT [--match '*/warc/*.warc.gz'] --out FILE

lists every file under ROOT whose path below it matches, with the size the listing gives (one
request per 1,000 keys on S3, with the credentials s3fs finds), as JSON lines of full URL (or
absolute path) and `size`.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import posixpath
import sys
from pathlib import Path

from configs.durable import write_atomically

MANIFEST = "manifest.json"
USER_FIELDS = ("size", "sha256", "records")


def read_manifest(path: str | Path) -> dict:
    """{"base": the readers' base at the first run, "files": {path: entry}}."""
    data = json.loads(Path(path).read_text())
    return {"base": data["base"], "files": {entry["path"]: entry for entry in data["files"]}}


def write_manifest(path: Path, base: str, entries: list[dict]) -> None:
    """Written aside, then renamed: a manifest is whole or absent."""
    write_atomically(path, json.dumps({"base": base, "files": entries}, indent=1) + "\n")


def identity(info: dict) -> dict:
    """What tells one version of a file from another, from its filesystem's info: its size and the
    first of ETag (HTTP, S3), modification time (local) or Last-Modified that the filesystem gives."""
    version = next((str(info[k]) for k in ("ETag", "etag", "mtime", "LastModified", "Last-Modified") if info.get(k)), None)
    return {"size": info.get("size"), "version": version}


def location(base: str, path: str) -> str:
    """A file's full path or URL: `path` under the readers' base."""
    return posixpath.join(base, path) if "://" in base else os.path.join(base, path)


def read_user_manifest(manifest: str) -> dict[str, dict]:
    """A user manifest's entries by each file's full path or URL; ValueError naming the line that
    lacks what an entry needs."""
    import fsspec

    folder = posixpath.dirname(manifest) if "://" in manifest else os.path.dirname(os.path.abspath(manifest))
    out = {}
    with fsspec.open(manifest, "rt") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(f"{manifest} line {n}: not JSON ({e})") from None
            if not isinstance(entry, dict) or not isinstance(entry.get("path"), str) or \
                    not any(entry.get(k) is not None for k in ("size", "sha256")):
                raise ValueError(f"{manifest} line {n}: give a `path` and its `size` or `sha256` (got {line.strip()[:120]})")
            path = entry["path"].removeprefix("file://")
            full = path if "://" in path or os.path.isabs(path) else location(folder, path)
            key = full if "://" in full else os.path.abspath(full)
            out[key] = {k: entry[k] for k in USER_FIELDS if entry.get(k) is not None}
    return out


def listing_manifest(root: str, match: str) -> list[dict]:
    """Every file under `root` whose path below it matches `match` (fnmatch: `*` crosses `/`), with
    its size as the listing gives it, by full URL (or absolute path); ValueError for a file the
    listing gives no size."""
    import fsspec

    fs, path = fsspec.core.url_to_fs(root)
    prefix = root.rstrip("/") if "://" in root else os.path.abspath(root)
    out = []
    for name, info in sorted(fs.find(path, detail=True).items()):
        relative = posixpath.relpath(name, path.rstrip("/"))
        if info.get("type", "file") != "file" or not fnmatch.fnmatch(relative, match):
            continue
        if info.get("size") is None:
            raise ValueError(f"the listing of {root} gives no size for {relative}")
        out.append({"path": location(prefix, relative), "size": int(info["size"])})
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m corpus.read.manifest", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("root", help="a folder, or a URL prefix (s3://bucket/prefix/)")
    parser.add_argument("--match", default="*.warc.gz", help="the files' paths below ROOT (default: *.warc.gz)")
    parser.add_argument("--out", type=Path, required=True, help="the manifest to write (JSON lines), for inputs.manifest")
    args = parser.parse_args(argv)
    try:
        entries = listing_manifest(args.root, args.match)
    except (OSError, ValueError) as e:
        print(f"{args.root}: {e}", file=sys.stderr)
        return 1
    if not entries:
        print(f"{args.root}: no file matches {args.match!r}", file=sys.stderr)
        return 1
    args.out.write_text("".join(json.dumps(entry) + "\n" for entry in entries))
    print(f"wrote {args.out}: {len(entries):,} files, {sum(e['size'] for e in entries):,} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
