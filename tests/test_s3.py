"""Common Crawl input through `s3://`, the path the paper config reads (`common_crawl.base_url:
s3://commoncrawl/`), from a local S3 server (moto, on 127.0.0.1, started here): the snapshot's
`warc.paths.gz`, then the WARC itself, through the same fsspec layer (s3fs) the cluster uses."""

import gzip
import socket

import boto3
import pytest
from moto.server import ThreadedMotoServer

from configs.experiment import ExperimentConfig
from corpus.flow.run import run_corpus
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
