"""The corpus flow at the shape it runs at: the sample split into several WARC files and every stage in
many tasks (extraction per file, several post-processing tasks, more finder tasks than one,
MinHash's bucket merge in batches) keeps, after each dedup stage and at the end, exactly the
records a one-task run of the single file keeps, in every arm."""

import gzip
import json

import pytest

from conftest import make_config, split_warc
from corpus.flow.run import run_corpus
from corpus.sample import write_sample

pytestmark = pytest.mark.slow
ARMS = {"traf": {"extractor": "trafilatura"}, "page": {"extractor": "html2text"}}
# Five files of uneven record counts (records dealt in turn), read by five extraction tasks and
# post-processed by three tasks (two files, two, one): every boundary a task split has (a file
# inside a task, a task of fewer files, a dedup copy in another file or task) is crossed; 16 files
# cross the same ones at three times the tasks.
FILES = 5


def ids(folder) -> set[str]:
    out = set()
    for path in sorted(folder.glob("*.jsonl.gz")):
        with gzip.open(path, "rt") as f:
            out.update(json.loads(line)["id"] for line in f)
    return out


def kept_after_each_dedup(config, arm: str) -> dict[str, set[str]]:
    post = config.post_dir(arm)
    return {"exact dedup": ids(config.arm_dir(arm) / "output") - ids(config.removed_dir(arm, "exact_dedup")),
            "after filtering": ids(post / "filtered"), "removed by MinHash": ids(config.removed_dir(arm, "minhash")),
            "post-processed": ids(post / "output")}


def test_many_files_and_tasks_keep_exactly_the_records_of_a_one_task_run(tmp_path):
    warc, _ = write_sample(tmp_path / "sample", 300, seed=0)  # the demo's sample
    one = make_config(tmp_path / "one", warc, ARMS, postprocess={"minhash": {"num_buckets": 4}})
    run_corpus(one, until="postprocess")
    many = make_config(tmp_path / "many", warc, {arm: {**options, "resources": {"tasks": FILES, "workers": 2}}
                                                 for arm, options in ARMS.items()},
                       inputs={"warc": split_warc(warc, tmp_path / "parts", FILES)},
                       postprocess={"resources": {"tasks": 3, "workers": 2}, "exact_dedup": {"finder_tasks": 3},
                                    "minhash": {"num_buckets": 4, "batch_files": 2}})
    run_corpus(many, until="postprocess")
    for arm in ARMS:
        expected, got = kept_after_each_dedup(one, arm), kept_after_each_dedup(many, arm)
        assert expected["removed by MinHash"] and len(expected["exact dedup"]) < len(ids(one.arm_dir(arm) / "output"))
        assert got == expected, arm
