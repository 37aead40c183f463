"""No credential reaches a record, a log, a pickle, the config hash or a message: keys come from the
environment as SecretStr, a config that carries one is refused without echoing it, and a run with a
canary in every credential leaves no canary byte in its output root, its console or the sbatch calls:
locally, and through the fake Slurm the corpus submission (its continuation job's config snapshot
included), `slurm/pretrain.sh` and `slurm/evaluate.sh`, each run as its job runs it."""

import gzip
import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml
from test_slurm_submit import fake_slurm, submitted  # noqa: F401  (the fake sbatch and squeue)

from configs.base import ConfigError
from configs.experiment import load_experiment
from configs.provenance import config_sha256
from configs.secrets import redact_url
from conftest import StubCompletionsServer, make_config, pretrain_experiment
from corpus.extractors.dripper.labelers.config import EndpointLabelerConfig
from corpus.flow.run import main as corpus_main
from corpus.flow.run import run_corpus
from corpus.flow.submit import CONTINUE
from slurm.jobs import REPO

CANARY = "CanaryQ7x9Zk"
CREDENTIAL_VARIABLES = ("XS_TEST_LABELER_KEY", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
                        "HF_TOKEN")


@pytest.fixture
def canary_environment(monkeypatch):
    for i, name in enumerate(CREDENTIAL_VARIABLES):
        monkeypatch.setenv(name, f"{CANARY}{i}")


def no_canary_under(root) -> list[str]:
    """The files under `root` that hold a canary byte, gzip files (the documents) read decompressed."""
    def content(path: Path) -> bytes:
        data = path.read_bytes()
        return data + gzip.decompress(data) if path.suffix == ".gz" else data

    return [str(p) for p in root.rglob("*") if p.is_file() and CANARY.encode() in content(p)]


def test_the_byte_search_reads_the_documents_decompressed(tmp_path):
    (tmp_path / "output").mkdir()
    (tmp_path / "output" / "00000.jsonl.gz").write_bytes(gzip.compress(f'{{"text": "{CANARY}"}}'.encode()))
    assert no_canary_under(tmp_path) == [str(tmp_path / "output" / "00000.jsonl.gz")]


def endpoint(url: str, **extra) -> dict:
    return {"kind": "endpoint", "url": url, "model": "served", **extra}


def refusal(tmp_path, sample_dir, inputs: dict | None = None, **arm) -> str:
    """The message `load_experiment` gives for a YAML with the given inputs and one arm."""
    raw = {"name": "t", "output_root": str(tmp_path / "out"), "arms": {"a": arm or {"extractor": "trafilatura"}},
           "inputs": inputs or {"warc": [str(sample_dir / "sample.warc.gz")]}}
    (tmp_path / "x.yaml").write_text(yaml.safe_dump(raw))
    with pytest.raises(ConfigError) as refused:
        load_experiment(tmp_path / "x.yaml")
    return str(refused.value)


def test_an_api_key_in_the_config_is_refused_without_echoing_it(tmp_path, sample_dir):
    message = refusal(tmp_path, sample_dir, extractor="dripper", labeler=endpoint("http://gpu:8000/v1", api_key=CANARY))
    assert "api_key_env" in message and CANARY not in message


def test_the_key_comes_from_the_environment_and_no_repr_or_hash_holds_it(canary_environment, tmp_path, sample_dir,
                                                                         monkeypatch):
    config = EndpointLabelerConfig.model_validate(endpoint("http://gpu:8000/v1", api_key_env="XS_TEST_LABELER_KEY"))
    key = config.api_key()
    assert key.get_secret_value() == f"{CANARY}0"
    assert CANARY not in str(config) + repr(config) + str(key) + repr(key)
    experiment = make_config(tmp_path / "out", sample_dir / "sample.warc.gz",
                             {"d": {"extractor": "dripper", "labeler": endpoint("http://gpu:8000/v1",
                                                                                api_key_env="XS_TEST_LABELER_KEY")}})
    before = config_sha256(experiment)
    monkeypatch.setenv("XS_TEST_LABELER_KEY", "another")
    assert config_sha256(experiment) == before  # rotating a key is not another config


@pytest.mark.parametrize("url", [f"https://user:{CANARY}@host/a.warc.gz", f"https://host/a.warc.gz?X-Amz-Signature={CANARY}"])
def test_a_url_with_credentials_is_refused_and_the_message_shows_it_redacted(tmp_path, sample_dir, url):
    message = refusal(tmp_path, sample_dir, inputs={"warc": [url]})
    assert "carries userinfo or a query string" in message and "https://host/a.warc.gz" in message
    assert CANARY not in message and CANARY not in redact_url(url)
    labeler = refusal(tmp_path, sample_dir, extractor="dripper", labeler=endpoint(url))
    assert "carries userinfo" in labeler and CANARY not in labeler


@pytest.mark.parametrize("options", [{"key": CANARY}, {"client_kwargs": {"aws_secret_access_key": CANARY}},
                                     {"headers": {"x": CANARY}}])
def test_credentials_in_storage_options_are_refused_without_echoing_them(tmp_path, sample_dir, options):
    message = refusal(tmp_path, sample_dir, inputs={"warc": [str(sample_dir / "sample.warc.gz")], "storage_options": options})
    assert "credentials in a config" in message and CANARY not in message


def canary_experiment(tmp_path, sample_dir, server: str, **extra):
    return make_config(tmp_path / "out", sample_dir / "sample.warc.gz",
                       {"dripper": {"extractor": "dripper", "batch_pages": 16,
                                    "labeler": endpoint(server, api_key_env="XS_TEST_LABELER_KEY",
                                                        tokenizer=extra.pop("tokenizer"), max_context_tokens=4096)}},
                       inputs={"warc": [str(sample_dir / "sample.warc.gz")], "storage_options": {"anon": False}},
                       **extra)


@pytest.mark.slow
def test_a_local_run_with_a_canary_in_every_credential_writes_no_canary_byte(
        tmp_path, sample_dir, random_model, stub_server, canary_environment, capfd):
    config = canary_experiment(tmp_path, sample_dir, stub_server, tokenizer=str(random_model))
    (summary,) = run_corpus(config, until="extract")
    assert summary["complete"] and summary["documents_out"] > 0
    assert StubCompletionsServer.authorizations == {f"Bearer {CANARY}0"}  # the key was sent, from the environment
    console = capfd.readouterr()
    assert CANARY not in console.out + console.err
    assert no_canary_under(config.output_root) == []


def canary_yaml(tmp_path, sample_dir, random_model, warc: str | None = None) -> Path:
    """A demo-shaped experiment as a user writes it (corpus, pretraining, evaluation), every credential
    named by its environment variable; `warc`: a WARC URL in its place."""
    sections = {k: v for k, v in pretrain_experiment(tmp_path / "out").items() if k in ("tokenizer", "dataset", "pretrain")}
    raw = {"name": "canary", "output_root": str(tmp_path / "out"),
           "inputs": {"warc": [warc or str(sample_dir / "sample.warc.gz")], "storage_options": {"anon": False}},
           "arms": {"dripper": {"extractor": "dripper", "batch_pages": 16,
                                "labeler": endpoint("http://gpu-node:8000/v1", api_key_env="XS_TEST_LABELER_KEY",
                                                    tokenizer=str(random_model), max_context_tokens=4096)}},
           # three tasks a round: the rest goes to the continuation job, which runs logs/slurm/config.json
           "executor": {"job_name_prefix": "t", "max_queued_tasks": 3},
           "evaluation": {"tasks": "offline"}, **sections}
    path = tmp_path / ("refused.yaml" if warc else "canary.yaml")
    path.write_text(yaml.safe_dump(raw))
    return path


def job_script(script: str, path: Path) -> str:
    """What `sbatch slurm/<script> CONFIG` runs inside its job: the submission, here, to the fake Slurm."""
    env = os.environ | {"SLURM_JOB_ID": "1"}
    done = subprocess.run(["bash", str(REPO / "slurm" / script), str(path)], env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout + done.stderr


@pytest.mark.slow
@pytest.mark.usefixtures("fake_slurm")
def test_slurm_submissions_with_a_canary_in_every_credential_write_no_canary_byte(
        tmp_path, sample_dir, random_model, canary_environment, capfd):
    log = Path(os.environ["FAKE_SBATCH_LOG"])
    for url in (f"https://host/a.warc.gz?X-Amz-Signature={CANARY}", f"https://user:{CANARY}@host/a.warc.gz"):
        with pytest.raises(SystemExit) as refused:  # a URL that carries one: refused, the message without it
            corpus_main([str(canary_yaml(tmp_path, sample_dir, random_model, warc=url))])
        assert "carries userinfo or a query string" in str(refused.value) and CANARY not in str(refused.value)
    path = canary_yaml(tmp_path, sample_dir, random_model)
    config = load_experiment(path)
    run_corpus(config, executor="slurm")
    assert any(job["name"].endswith(CONTINUE) for job in submitted(log))
    assert (config.output_root / "logs" / "slurm" / "config.json").is_file()
    assert list(config.output_root.rglob("executor.pik"))  # the pickled pipelines were written
    console = job_script("pretrain.sh", path)
    assert "job" in console and (config.run_dir("dripper", 1) / "train.sbatch").is_file()
    exported = config.run_dir("dripper", 1) / "hf" / "step_0000010"  # what pretrain.export leaves for lm-eval
    exported.mkdir(parents=True)
    (exported / "xsuite.json").write_text(json.dumps({"experiment": "canary", "arm": "dripper", "rung": "model",
                                                      "seed": 1, "step": 10}))
    console += job_script("evaluate.sh", path)
    assert "1 checkpoints" in console and (config.output_root / "eval" / "slurm" / "evaluate.sbatch").is_file()
    captured = capfd.readouterr()
    assert CANARY not in console + captured.out + captured.err + log.read_text()
    assert no_canary_under(config.output_root) == []
