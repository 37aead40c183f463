"""Strings that reach a shell, an #SBATCH line or a folder name are refused at load when they could be
read as more than one word, and every path interpolated into a job script is quoted."""

import shlex

import pytest
from pydantic import ValidationError

import slurm.jobs as jobs
from configs.pretrain import SlurmTraining
from conftest import make_config

HOSTILE = ['x"; touch /tmp/pwned; echo "', "gpu\n#SBATCH --uid=0", "a b", "$(id)", "../..", "x`id`"]
TRAFILATURA = {"extractor": "trafilatura"}


def config_with(tmp_path, sample_dir, arms=None, **extra):
    return make_config(tmp_path / "out", sample_dir / "sample.warc.gz", arms or {"a": TRAFILATURA}, **extra)


@pytest.mark.parametrize("value", HOSTILE)
def test_hostile_slurm_words_and_names_are_refused_at_load(tmp_path, sample_dir, value):
    hostile = [
        {"executor": {"job_name_prefix": value}},
        {"arms": {"a": {**TRAFILATURA, "resources": {"partition": value}}}},
        {"arms": {"a": {**TRAFILATURA, "resources": {"qos": value}}}},
        {"postprocess": {"resources": {"partition": value}}},
        {"evaluation": {"slurm": {"qos": value}}},
        {"name": value},
    ]
    for sections in hostile:
        with pytest.raises(ValidationError, match="should match pattern"):
            config_with(tmp_path, sample_dir, **sections)
    for key in ("partition", "qos"):
        with pytest.raises(ValidationError, match="should match pattern"):
            SlurmTraining(**{key: value})


@pytest.mark.parametrize("root", ["out,pretrained=/etc", "out\n#SBATCH --uid=0"])
def test_an_output_root_with_a_comma_or_a_control_character_is_refused(tmp_path, sample_dir, root):
    with pytest.raises(ValidationError, match="comma or a control character"):
        make_config(tmp_path / root, sample_dir / "sample.warc.gz", {"a": TRAFILATURA})


def test_the_job_script_quotes_the_repository_path(tmp_path, sample_dir, monkeypatch):
    hostile = tmp_path / "repo $(touch pwned); x"
    monkeypatch.setattr(jobs, "REPO", hostile)
    config = config_with(tmp_path, sample_dir)
    job = jobs.BatchJob(name="n", partition="p", qos="q", time="01:00:00", cpus_per_task=1, mem_gb=1,
                        output=tmp_path / "o.out", commands="true")
    script = jobs.render(job, config)
    assert f"cd {shlex.quote(str(hostile))}" in script
    assert f"source {shlex.quote(f'{hostile}/.venv/bin/activate')}" in script
