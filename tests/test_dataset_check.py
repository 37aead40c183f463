"""The datasets and tokenizer checked against the budget's manifest before training and evaluation
(pretrain.verify): a damaged or changed file is refused in one line naming it, before any step."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from configs.experiment import ExperimentConfig
from conftest import build_pretrain_corpus, pretrain_experiment
from pretrain.verify import DatasetMismatch, check_inputs


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("checked")
    build_pretrain_corpus(root)
    return root


@pytest.fixture
def config(built, tmp_path) -> ExperimentConfig:
    """A copy of the built corpus (each test damages its own)."""
    shutil.copytree(built, tmp_path / "out")
    return ExperimentConfig.model_validate(pretrain_experiment(tmp_path / "out"))


def flip_bytes_in_place(path: Path, at: int = 40) -> None:
    """Same size, valid token ids (two tokens swapped), mtime moved on as an editor would."""
    data = bytearray(path.read_bytes())
    data[at:at + 2], data[at + 2:at + 4] = data[at + 2:at + 4], data[at:at + 2]
    path.write_bytes(bytes(data))


def test_an_intact_dataset_passes_and_a_second_check_reads_only_the_stamps(config):
    assert "(all from stamps)" not in check_inputs(config, ["a", "b"])  # a copy: other inodes, hashed again
    assert "(all from stamps)" in check_inputs(config, ["a", "b"])


def test_a_same_size_change_of_a_bin_is_refused_naming_the_file_and_both_digests(config):
    check_inputs(config, ["a"])  # stamped: the change must be seen all the same
    path = Path(f"{config.dataset_prefix('a')}.bin")
    size = path.stat().st_size
    flip_bytes_in_place(path)
    assert path.stat().st_size == size
    with pytest.raises(DatasetMismatch, match=rf"{path}: sha256 [0-9a-f]{{16}}…, the manifest records [0-9a-f]{{16}}…") as e:
        check_inputs(config, ["a"])
    assert "rm -r" in str(e.value) and "logs/budget/completions" in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("suffix", ["bin", "idx"])
def test_a_cut_file_is_refused_by_its_size_against_the_index(config, suffix):
    path = Path(f"{config.dataset_prefix('b')}.{suffix}")
    os.truncate(path, path.stat().st_size - 6)
    with pytest.raises(DatasetMismatch, match=rf"{path}: [\d,]+ bytes, its (index|header) says [\d,]+.*damaged"):
        check_inputs(config, ["b"])


def test_random_bytes_for_an_index_are_refused(config):
    path = Path(f"{config.dataset_prefix('a')}.idx")
    path.write_bytes(os.urandom(path.stat().st_size))
    with pytest.raises(DatasetMismatch, match=rf"{path}: not a megatron index"):
        check_inputs(config, ["a"])


def test_another_tokenizer_is_refused(config):
    tokenizer = config.tokenizer_file()
    tokenizer.write_text(tokenizer.read_text().replace("</s>", "</S>", 1))
    with pytest.raises(DatasetMismatch, match=rf"{tokenizer}: sha256 .* the datasets were cut with tokenizer"):
        check_inputs(config, ["a"])


def test_training_refuses_a_changed_dataset_before_its_first_step(config):
    from pretrain.train import train

    flip_bytes_in_place(Path(f"{config.dataset_prefix('a')}.bin"))
    with pytest.raises(DatasetMismatch, match="the manifest records"):
        train(config, "a", seed=1)
    assert not config.run_dir("a", 1).exists()


def test_no_manifest_is_refused_with_the_command_that_makes_it(config):
    config.datasets_manifest().unlink()
    with pytest.raises(DatasetMismatch, match=r"manifest.json: unreadable .* rebuild it: rm -r .*budget/completions"):
        check_inputs(config, ["a"])


def test_a_dataset_folder_this_user_cannot_write_is_checked_all_the_same(config, monkeypatch):
    def read_only(path, data):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr("configs.durable.write_atomically", read_only)  # no stamp can be written
    assert "(all from stamps)" not in check_inputs(config, ["a"])
    flip_bytes_in_place(Path(f"{config.dataset_prefix('a')}.bin"))
    with pytest.raises(DatasetMismatch, match="the manifest records"):
        check_inputs(config, ["a"])


def test_a_missing_tokenizer_is_refused_in_one_line(config):
    config.tokenizer_file().unlink()
    with pytest.raises(DatasetMismatch, match=rf"{config.tokenizer_file()}: missing; .* restore it") as e:
        check_inputs(config, ["a"])
    assert "\n" not in str(e.value)


RANKS = """
import sys, torch.distributed as dist
import pretrain.verify as verify
from configs.experiment import ExperimentConfig
def broken(config, arms):
    raise OSError("disk gone")
verify.check_inputs = broken
dist.init_process_group("gloo", init_method=f"file://{sys.argv[1]}", rank=int(sys.argv[2]), world_size=2)
try:
    verify.check_inputs_once(None, ["a"])
except (OSError, verify.DatasetMismatch) as e:
    print(type(e).__name__, e, flush=True)
"""


@pytest.mark.slow
def test_when_rank_0_cannot_check_the_other_ranks_are_told_not_left_waiting(tmp_path):
    import subprocess
    import sys

    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    ranks = [subprocess.Popen([sys.executable, "-c", RANKS, str(tmp_path / "rendezvous"), str(rank)], env=env,
                              stdout=subprocess.PIPE, text=True) for rank in (0, 1)]
    outs = [rank.communicate(timeout=120)[0] for rank in ranks]
    assert "OSError disk gone" in outs[0]
    assert "DatasetMismatch rank 0 could not check the datasets: OSError('disk gone')" in outs[1]
