import gzip

from configs.experiment import CommonCrawlInput, ExperimentConfig
from conftest import make_config
from corpus.read.inputs import resolve_inputs, select_common_crawl


def fake_crawl(root, snapshot: str, n: int):
    folder = root / "crawl-data" / snapshot
    folder.mkdir(parents=True)
    paths = [f"crawl-data/{snapshot}/segments/{i}/warc/CC-MAIN-{i:05d}.warc.gz" for i in range(n)]
    (folder / "warc.paths.gz").write_bytes(gzip.compress("\n".join(paths).encode()))
    return paths


def test_common_crawl_selection_is_seeded_and_per_snapshot(tmp_path):
    a = fake_crawl(tmp_path, "CC-MAIN-2024-10", 50)
    b = fake_crawl(tmp_path, "CC-MAIN-2024-18", 50)
    cc = CommonCrawlInput(snapshots=["CC-MAIN-2024-10", "CC-MAIN-2024-18"], files_per_snapshot=5,
                          seed=3, base_url=f"file://{tmp_path}/")
    first = select_common_crawl(cc)
    assert first == select_common_crawl(cc)  # same files every time, hence for every arm
    assert len(first) == 10 and set(first[:5]) <= set(a) and set(first[5:]) <= set(b)
    assert first != select_common_crawl(cc.model_copy(update={"seed": 4}))


def test_resolved_paths_file_is_shared_by_every_arm(tmp_path, sample_dir):
    config = make_config(tmp_path / "out", sample_dir / "sample.warc.gz",
                         {"a": {"extractor": "trafilatura"}, "b": {"extractor": "trafilatura"}})
    base, paths_file = resolve_inputs(config)
    assert paths_file.read_text().split() == ["sample.warc.gz"] and base == str(sample_dir)


def test_sample_input_is_generated_once(tmp_path):
    config = ExperimentConfig.model_validate({"name": "t", "output_root": str(tmp_path), "inputs": {"sample": {"pages": 4}},
                                              "arms": {"a": {"extractor": "trafilatura"}}})
    base, _ = resolve_inputs(config)
    warc = tmp_path / "sample" / "sample.warc.gz"
    mtime = warc.stat().st_mtime_ns
    resolve_inputs(config)
    assert warc.stat().st_mtime_ns == mtime
