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
