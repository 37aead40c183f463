"""Common Crawl input through `s3://`, the path the paper config reads (`common_crawl.base_url:
s3://commoncrawl/`), from a local S3 server (moto, on 127.0.0.1, started here): the snapshot's
`warc.paths.gz`, then the WARC itself, through the same fsspec layer (s3fs) the cluster uses."""

import gzip
import json
import socket

import boto3
import pytest
from datatrove.io import DataFolder
from moto.server import ThreadedMotoServer
from s3fs import S3FileSystem

from configs.experiment import ExperimentConfig
from corpus.flow.run import run_corpus
from corpus.read.inputs import resolve_inputs
from corpus.read.manifest import MANIFEST, read_manifest
from corpus.read.manifest import main as manifest_main
from corpus.sample import read_gold

SNAPSHOT = "CC-MAIN-2024-10"
KEY = f"crawl-data/{SNAPSHOT}/segments/1700000000000.0/warc/CC-MAIN-20240301000000-00000.warc.gz"


@pytest.fixture
def s3_endpoint(monkeypatch):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    for cached in (S3FileSystem, DataFolder):  # fsspec keeps a filesystem per set of options: one of another server's
        cached.clear_instance_cache()
    for name, value in {"AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
                        "AWS_DEFAULT_REGION": "us-east-1"}.items():
        monkeypatch.setenv(name, value)
    yield endpoint
    server.stop()


def test_common_crawl_input_is_read_through_s3(tmp_path, sample_dir, s3_endpoint):
    s3 = boto3.client("s3", endpoint_url=s3_endpoint)
    s3.create_bucket(Bucket="commoncrawl")
    s3.put_object(Bucket="commoncrawl", Key=KEY, Body=(sample_dir / "sample.warc.gz").read_bytes())
    s3.put_object(Bucket="commoncrawl", Key=f"crawl-data/{SNAPSHOT}/warc.paths.gz", Body=gzip.compress(f"{KEY}\n".encode()))
    config = ExperimentConfig.model_validate({
        "name": "s3", "output_root": str(tmp_path / "out"), "arms": {"trafilatura": {"extractor": "trafilatura"}},
        "inputs": {"common_crawl": {"snapshots": [SNAPSHOT], "files_per_snapshot": 1, "base_url": "s3://commoncrawl/"}}})
    summary = run_corpus(config, until="extract")[0]
    assert summary["complete"] and summary["balanced"] and summary["records"] == len(read_gold(sample_dir / "gold.jsonl"))
    assert (config.output_root / "inputs" / "warc_paths.txt").read_text().split() == [KEY]


def test_a_manifest_written_from_the_s3_listing_gives_every_input_files_size(tmp_path, sample_dir, s3_endpoint):
    """`python -m corpus.read.manifest` over the snapshot's prefix (its WARC files among others the
    bucket holds): a line per WARC file with the listing's size, which the run's input list takes."""
    s3 = boto3.client("s3", endpoint_url=s3_endpoint)
    s3.create_bucket(Bucket="commoncrawl")
    data = (sample_dir / "sample.warc.gz").read_bytes()
    s3.put_object(Bucket="commoncrawl", Key=KEY, Body=data)
    s3.put_object(Bucket="commoncrawl", Key=KEY.replace("/warc/", "/wet/").replace(".warc.gz", ".warc.wet.gz"), Body=b"x")
    s3.put_object(Bucket="commoncrawl", Key=f"crawl-data/{SNAPSHOT}/warc.paths.gz", Body=gzip.compress(f"{KEY}\n".encode()))
    out = tmp_path / "manifest.jsonl"
    assert manifest_main([f"s3://commoncrawl/crawl-data/{SNAPSHOT}/segments/", "--match", "*/warc/*.warc.gz",
                          "--out", str(out)]) == 0
    assert [json.loads(line) for line in out.read_text().splitlines()] == [{"path": f"s3://commoncrawl/{KEY}",
                                                                          "size": len(data)}]
    config = ExperimentConfig.model_validate({
        "name": "s3", "output_root": str(tmp_path / "out"), "arms": {"trafilatura": {"extractor": "trafilatura"}},
        "inputs": {"common_crawl": {"snapshots": [SNAPSHOT], "files_per_snapshot": 1, "base_url": "s3://commoncrawl/"},
                   "manifest": str(out)}})
    base, paths_file = resolve_inputs(config)
    [(path, entry)] = read_manifest(paths_file.with_name(MANIFEST))["files"].items()
    assert (path, entry["size"]) == (KEY, len(data))
