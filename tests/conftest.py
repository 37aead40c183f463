import json
import re
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest

from corpus.config import ExperimentConfig
from corpus.sample import write_sample

SAMPLE_PAGES = 40  # five of each template, plus the bad records


@pytest.fixture(scope="session")
def sample_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("sample")
    write_sample(out, SAMPLE_PAGES, seed=1)
    return out


@pytest.fixture(scope="session")
def random_model(tmp_path_factory) -> Path:
    from corpus.labelers.random_model import build_random_model

    return build_random_model(tmp_path_factory.mktemp("random-labeler"), seed=0, max_positions=4096)


def make_config(output_root: Path, warc: Path, arms: dict, **extra) -> ExperimentConfig:
    return ExperimentConfig.model_validate(
        {"name": "test", "output_root": str(output_root), "inputs": {"warc": [str(warc)]}, "arms": arms, **extra}
    )


# ---------------------------------------------------------------- an OpenAI-compatible stub server


class StubCompletionsServer(BaseHTTPRequestHandler):
    """An OpenAI-compatible /v1/completions that answers the regex it was sent: all blocks main."""

    requests: list[dict] = []

    def do_POST(self):  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        StubCompletionsServer.requests.append(body)
        regex = body["structured_outputs"]["regex"]
        ids = [int(x) for x in re.findall(r"(\d+)\(main\|other\)", regex)]
        text = "<answer>" + "".join(f"{i}main" for i in ids) + "</answer>"
        payload = json.dumps({"choices": [{"text": text}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args):
        pass


@pytest.fixture
def stub_server():
    server = HTTPServer(("127.0.0.1", 0), StubCompletionsServer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    StubCompletionsServer.requests = []
    yield f"http://127.0.0.1:{server.server_port}/v1"
    server.shutdown()
