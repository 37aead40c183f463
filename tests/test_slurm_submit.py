"""Submission to Slurm past the array size limit, with a fake `sbatch` that records what it is
given: a stage of more tasks than `executor.max_array_size` becomes several arrays launched
together, and every stage waits (afterok) for every array of every stage it needs."""

import json
import os
import re
import stat

from conftest import make_config
from corpus.flow.run import run_corpus
from corpus.flow.stages import corpus_stages
from corpus.read.inputs import resolve_inputs

FAKE_SBATCH = """#!/usr/bin/env python3
import json, os, re, sys
log = os.environ["FAKE_SBATCH_LOG"]
script = open(sys.argv[-1]).read()
job = 1000 + (sum(1 for _ in open(log)) if os.path.exists(log) else 0)
dependency = next((a.split("=", 1)[1] for a in sys.argv[1:] if a.startswith("--dependency=")), "")
with open(log, "a") as f:
    f.write(json.dumps({"job": str(job), "name": re.search(r"--job-name=(\\S+)", script).group(1),
                        "dependency": dependency, "merge_stats": "merge_stats" in script}) + "\\n")
print(f"Submitted batch job {job}")
"""


def test_every_stage_waits_for_every_array_of_the_stages_it_needs(tmp_path, sample_dir, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "sbatch").write_text(FAKE_SBATCH)
    (bin_dir / "sbatch").chmod(stat.S_IRWXU)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_SBATCH_LOG", str(tmp_path / "sbatch.jsonl"))
    config = make_config(tmp_path / "out", sample_dir / "sample.warc.gz",
                         {"a": {"extractor": "trafilatura", "resources": {"tasks": 5}}, "b": {"extractor": "html2text"}},
                         executor={"max_array_size": 2, "job_name_prefix": "t"},
                         postprocess={"resources": {"tasks": 3}, "exact_dedup": {"finder_tasks": 3},
                                      "minhash": {"num_buckets": 4}},
                         tokenizer={"kind": "sentencepiece", "vocab_size": 600}, dataset={"tokens_per_arm": 1000})
    run_corpus(config, executor="slurm")

    submitted = [json.loads(line) for line in (tmp_path / "sbatch.jsonl").read_text().splitlines()]
    assert not any(job["merge_stats"] for job in submitted)  # nothing waits on a stats-merging job
    arrays: dict[str, list[dict]] = {}
    for job in submitted:
        arrays.setdefault(job["name"].removeprefix("t-"), []).append(job)
    stages = corpus_stages(config, *resolve_inputs(config))
    assert set(arrays) == {stage.label for stage in stages}
    parts = [stage.part_label for stage in stages]
    assert all(parts[i] == parts[i + 1] or parts[i] not in parts[i + 1:] for i in range(len(parts) - 1))  # in one piece
    for stage in stages:
        jobs = arrays[stage.label]
        assert len(jobs) == -(-stage.tasks // 2), stage.label  # arrays of at most max_array_size tasks
        for job in jobs:
            assert "afterany" not in job["dependency"]  # a stage's arrays run together, not one after another
            waits_for = set(re.findall(r"\d+", re.search(r"afterok:([\d:]+)", job["dependency"]).group(1))) \
                if stage.needs else set()
            for need in stage.needs:
                assert {j["job"] for j in arrays[need]} <= waits_for, (stage.label, need)
    assert len(arrays["extract-a"]) == 3 and len(arrays["exact-find-a"]) == 2 and len(arrays["minhash-buckets-b"]) == 2
