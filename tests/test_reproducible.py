"""The corpus flow is reproducible by construction and survives SIGKILL in the middle of a task.

Two runs of the same config into two folders write byte-identical outputs (every file outside
the logs: documents, removed documents, dedup signatures, tokenizer, `.bin/.idx`, selected ids,
manifest, provenance). A run killed with SIGKILL (the whole process group, as a node failure or
`scancel` does) in the middle of a task that is writing, then re-run, ends with exactly the
outputs of the uninterrupted run: no document lost or duplicated, every ledger balanced."""

import gzip
import json
import os
import random
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from configs.provenance import read_provenance
from conftest import make_config, output_hashes
from corpus.accounting.ledger import arm_ledger
from corpus.flow.run import run_corpus
from corpus.sample.text import Prose

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[1]

# SIGKILL to this run's whole process group (workers included) once the named stage's reader has
# yielded AFTER documents in one task: the steps behind it are mid-way through writing
KILLED_RUN = """
import os, signal, sys
from pathlib import Path

import corpus.flow.run
from configs.experiment import ExperimentConfig

label, after = sys.argv[2], int(sys.argv[3])


class KillAfter:
    def __call__(self, data, rank=0, world_size=1):
        for n, document in enumerate(data):
            if n == after:
                os.killpg(0, signal.SIGKILL)
            yield document


build = corpus.flow.run.corpus_stages


def corpus_stages(*args, **kwargs):
    stages = build(*args, **kwargs)
    for stage in stages:
        if stage.label == label:
            stage.pipeline.insert(1, KillAfter())
    return stages


corpus.flow.run.corpus_stages = corpus_stages
if __name__ == "__main__":
    corpus.flow.run.run_corpus(ExperimentConfig.model_validate_json(Path(sys.argv[1]).read_text()))
"""


def experiment(root: Path, sample_dir: Path, out: str):
    corpus = root / "corpus.jsonl.gz"
    if not corpus.exists():
        rng = random.Random(2)
        with gzip.open(corpus, "wt") as f:
            f.writelines(json.dumps({"text": "\n\n".join(Prose(rng).paragraph() for _ in range(2)), "id": f"r{i}",
                                     "url": f"https://reference.example.org/{i}"}) + "\n" for i in range(200))
    # extraction in two worker processes, post-processing in two tasks run one after the other here
    arms = {"trafilatura": {"extractor": "trafilatura", "resources": {"tasks": 2, "workers": 2}},
            "reference": {"corpus": "jsonl", "paths": [str(corpus)], "postprocess": True, "sample_rate": 0.5, "seed": 1}}
    return make_config(root / out, sample_dir / "sample.warc.gz", arms,
                       tokenizer={"kind": "sentencepiece", "vocab_size": 600, "sample_chars_per_arm": 20000},
                       dataset={"tokens_per_arm": 3000, "seed": 0},
                       postprocess={"minhash": {"num_buckets": 4, "hashes_per_bucket": 4},
                                    "resources": {"tasks": 2, "workers": 1}})


@pytest.fixture(scope="module")
def clean(tmp_path_factory, sample_dir):
    root = tmp_path_factory.mktemp("reproducible")
    config = experiment(root, sample_dir, "clean")
    run_corpus(config)
    return root, output_hashes(config.output_root)


def test_two_runs_write_byte_identical_outputs(clean, sample_dir):
    root, first = clean
    again = experiment(root, sample_dir, "again")
    run_corpus(again)
    assert output_hashes(again.output_root) == first
    kinds = {Path(p).suffix for p in first}
    assert {".gz", ".bin", ".idx", ".json", ".model", ".sigs", ".dups"} <= kinds
    made = read_provenance(again.dataset_dir("trafilatura"))
    assert made["config_sha256"] and made["seeds"]["dataset.seed"] == 0 and made["packages"]["datatrove"]
    assert read_provenance(again.tokenizer_dir()) == made  # every stage folder says what made it


def test_a_run_killed_mid_task_resumes_to_the_uninterrupted_outputs(clean, sample_dir):
    """One output root killed three times, each time in the middle of another stage (an extraction
    in a worker process, a post-processing filter, the tokenisation), each run resuming the last:
    a stage resumed after a kill goes on with the later stages and ends with the outputs of the
    uninterrupted run (one killed root, not three: every resume still redoes its killed task)."""
    root, expected = clean
    config = experiment(root, sample_dir, "killed")
    config_file = root / "killed.json"
    config_file.write_text(config.model_dump_json())
    script = root / "killed_run.py"
    script.write_text(KILLED_RUN)
    stage_logs = {"extract": config.arm_dir("trafilatura") / "logs",
                  "tokenize": config.dataset_dir("trafilatura") / "logs" / "tokenize"}
    for label in ("extract-trafilatura", "filter-trafilatura", "tokenize-trafilatura"):
        killed = subprocess.run([sys.executable, str(script), str(config_file), label, "3"], cwd=REPO,
                                start_new_session=True, capture_output=True, text=True, timeout=600,
                                env={**os.environ, "PYTHONPATH": str(REPO)})
        assert killed.returncode == -signal.SIGKILL, (label, killed.stderr[-2000:])
        stage, _, arm = label.rpartition("-")
        logs = stage_logs.get(stage, config.post_dir(arm) / "logs" / stage)
        assert len(list((logs / "completions").glob("*"))) < 2, f"the kill came after {label} finished"

    run_corpus(config)  # the re-run: finished tasks are skipped, the killed one is redone
    assert output_hashes(config.output_root) == expected
    assert all(arm_ledger(config, arm)["balanced"] for arm in config.arms)


# the lines past which SentencePiece, at the suite's former `input_sentence_size` (its own default),
# kept a random subsample with a seed of its own per process
SENTENCEPIECE_LIMIT = 2_000_000
TRAIN_TOKENIZER = """
import sys
from pathlib import Path
from configs.tokens import TokenizerConfig
from corpus.tokens.tokenizer import train_sentencepiece
lines = int(sys.argv[2])
train_sentencepiece([chr(10).join(f"w{(i * 7919) % 100003}" for i in range(lines))],
                    TokenizerConfig(kind="sentencepiece", vocab_size=400), Path(sys.argv[1]))
"""


def test_two_processes_train_the_same_tokenizer_past_sentencepiece_s_sentence_limit(tmp_path):
    """More sample lines than SentencePiece's limit: every line is kept, so two processes (each its
    own SentencePiece seed) train byte-identical tokenizers (~10 s each)."""
    lines = SENTENCEPIECE_LIMIT + 1000
    for name in ("a", "b"):
        subprocess.run([sys.executable, "-c", TRAIN_TOKENIZER, str(tmp_path / name), str(lines)], check=True, cwd=REPO)
    for file in ("tokenizer.model", "tokenizer.json"):
        assert (tmp_path / "a" / file).read_bytes() == (tmp_path / "b" / file).read_bytes(), file
