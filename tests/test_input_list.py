"""The input list of an output root is fixed for its life, and a file a finished task skipped comes back.

The list (`inputs/warc_paths.txt` and `inputs/manifest.json`) is written at the first run; a rerun
whose inputs resolve to another list is refused, naming each difference. A file no arm has read whole
may be replaced (fetched again); a skipped one that was is read again, with every stage built on its
task, to the bytes of a run that never saw it damaged."""

import json
import os

import pytest

from configs.experiment import ExperimentConfig
from configs.provenance import config_sha256, read_provenance
from conftest import damaged_in_the_middle, make_config, member_starts, output_hashes
from corpus.accounting.ledger import accounted_text, ledgers
from corpus.flow.run import run_corpus
from corpus.read.inputs import InputListError, files_to_read_again, resolve_inputs
from corpus.read.manifest import MANIFEST, read_manifest
from corpus.read.warc import DAMAGED, INPUT_FILES, READ_WHOLE, SKIPPED, file_record, read_input_files
from corpus.sample import read_gold, write_manifest, write_sample

FAST = {"safety": {"before_extraction": False}}  # no URL block lists to load: these runs are about reading


def with_inputs(config: ExperimentConfig, **inputs) -> ExperimentConfig:
    return config.model_copy(update={"inputs": config.inputs.model_copy(update=inputs)})


def test_the_input_list_is_fixed_for_the_life_of_an_output_root(tmp_path, sample_dir):
    whole = (sample_dir / "sample.warc.gz").read_bytes()
    folder = tmp_path / "in"
    folder.mkdir()
    for name in ("a.warc.gz", "b.warc.gz"):
        (folder / name).write_bytes(whole)
    config = make_config(tmp_path / "out", folder / "*.warc.gz", {"x": {"extractor": "trafilatura"}})
    base, paths_file = resolve_inputs(config)
    manifest = paths_file.with_name(MANIFEST)
    assert paths_file.read_text().split() == ["a.warc.gz", "b.warc.gz"]
    assert {p: e["size"] for p, e in read_manifest(manifest)["files"].items()} == {"a.warc.gz": len(whole),
                                                                                   "b.warc.gz": len(whole)}
    # the glob shrinks (a file removed to be fetched again): refused, naming the file
    (folder / "b.warc.gz").unlink()
    with pytest.raises(InputListError, match=rf"1 gone, 0 new\n  gone: {folder / 'b.warc.gz'}\nRestore the files"):
        resolve_inputs(config)
    # or grows
    (folder / "b.warc.gz").write_bytes(whole)
    (folder / "c.warc.gz").write_bytes(whole)
    with pytest.raises(InputListError, match=rf"0 gone, 1 new\n  new: {folder / 'c.warc.gz'}\n"):
        resolve_inputs(config)
    (folder / "c.warc.gz").unlink()
    # a larger file that no arm has read whole (a good copy fetched again): its new size taken
    (folder / "b.warc.gz").write_bytes(whole + bytes(100))
    assert resolve_inputs(config) == (base, paths_file)
    assert read_manifest(manifest)["files"]["b.warc.gz"]["size"] == len(whole) + 100
    # ... and one an arm has read whole: refused, naming the arm
    logs = config.arm_dir("x") / "logs" / INPUT_FILES
    logs.mkdir(parents=True)
    (logs / "00000.jsonl").write_text(json.dumps(file_record("b.warc.gz") | {"outcome": READ_WHOLE}) + "\n")
    (folder / "b.warc.gz").write_bytes(whole)
    with pytest.raises(InputListError, match=rf"1 input files changed since an arm of .* read them whole\n  "
                                             rf"{folder / 'b.warc.gz'}: {len(whole):,} bytes, {len(whole) + 100:,} bytes "
                                             "when x read it whole"):
        resolve_inputs(config)
    assert paths_file.read_text().split() == ["a.warc.gz", "b.warc.gz"]  # written once


def test_a_smaller_copy_than_the_input_list_records_is_refused_until_a_good_copy_is_back(tmp_path, sample_dir):
    """The first run lists a file, and no arm reads it whole (the run stops first); a rerun finds a
    copy cut at a record boundary (an interrupted re-download), which would read as whole: refused
    before any work, naming it, its size and the list's, and what to do. A good copy put back is
    read whole, every record of it."""
    data = (sample_dir / "sample.warc.gz").read_bytes()
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "a.warc.gz").write_bytes(data)
    config = make_config(tmp_path / "out", folder / "*.warc.gz", {"x": {"extractor": "trafilatura"}}, postprocess=FAST)
    resolve_inputs(config)  # the first run's list, then it stopped
    cut = member_starts(data)[len(member_starts(data)) // 2]
    (folder / "a.warc.gz").write_bytes(data[:cut])
    with pytest.raises(InputListError, match=rf"^1 input files are smaller than the input list of {config.output_root} "
                                             rf"records .*\n  {folder / 'a.warc.gz'}: {cut:,} bytes, {len(data):,} bytes in "
                                             r"the input list\nPut back a good copy of each, at least as large as the list "
                                             r"records, at the same path"):
        run_corpus(config, until="extract")
    assert not config.arm_dir("x").exists()  # refused before any work
    (folder / "a.warc.gz").write_bytes(data)
    [summary] = run_corpus(config, until="extract")
    assert summary["input_files"]["outcomes"] == {READ_WHOLE: 1}
    assert summary["records"] == len(read_gold(sample_dir / "gold.jsonl"))


def test_a_skipped_file_fetched_again_is_read_again_with_its_task_alone(tmp_path):
    """A truncated file skipped, then fetched again and the run re-submitted (switched to `fail`): its
    task runs again in every arm (the other task's output stays as it was), and the documents are a
    clean run's."""
    whole = write_sample(tmp_path / "sample", 10, seed=3)[0].read_bytes()
    clean, damaged = tmp_path / "clean", tmp_path / "in"
    for folder in (clean, damaged):
        folder.mkdir()
        (folder / "a.warc.gz").write_bytes(whole)
    (clean / "b.warc.gz").write_bytes(whole)
    (damaged / "b.warc.gz").write_bytes(whole[:len(whole) // 2])
    arms = {arm: {"extractor": "trafilatura", "resources": {"tasks": 2}} for arm in ("x", "y")}
    reference = make_config(tmp_path / "reference", clean / "*.warc.gz", arms, postprocess=FAST)
    run_corpus(reference, until="extract")
    config = with_inputs(make_config(tmp_path / "out", damaged / "*.warc.gz", arms, postprocess=FAST), on_corrupt="skip")
    run_corpus(config, until="extract")
    files = {f["file"]: f for f in read_input_files(config.arm_dir("x") / "logs" / INPUT_FILES)}
    assert (files["b.warc.gz"]["outcome"], files["b.warc.gz"]["task"]) == (SKIPPED, 1)
    base, _ = resolve_inputs(config)
    assert files_to_read_again(config, base) == {}  # not replaced: nothing to read again, unless asked
    assert files_to_read_again(config, base, retry_skipped=True) == {"b.warc.gz": [("x", 1), ("y", 1)]}
    kept = (config.arm_dir("x") / "output" / "00000.jsonl.gz").stat().st_mtime_ns
    (damaged / "b.warc.gz").write_bytes(whole)
    for summary in run_corpus(with_inputs(config, on_corrupt="fail"), until="extract"):
        assert summary["input_files"]["outcomes"] == {READ_WHOLE: 2} and summary["balanced"]
        arm = summary["arm"]
        assert output_hashes(config.arm_dir(arm) / "output") == output_hashes(reference.arm_dir(arm) / "output")
    assert (config.arm_dir("x") / "output" / "00000.jsonl.gz").stat().st_mtime_ns == kept
    assert all(accounted_text(ledger).startswith("NO (unfinished: exact-signatures") for ledger in ledgers(config))


def test_a_good_copy_put_back_with_the_same_size_and_time_is_read_again(tmp_path, sample_dir):
    """A file read around damage (a byte flipped: its size unchanged), then its good copy put back with
    the damaged copy's modification time (as `cp -p` or `rsync -t` of a backup leaves it): its sha256
    tells it apart, so it is read again without --retry-skipped (how a file is read again:
    test_a_skipped_file_fetched_again_is_read_again_with_its_task_alone)."""
    good = (sample_dir / "sample.warc.gz").read_bytes()
    bad, _, _ = damaged_in_the_middle(good)
    (tmp_path / "in").mkdir()
    path = tmp_path / "in" / "a.warc.gz"
    path.write_bytes(bad)
    config = with_inputs(make_config(tmp_path / "out", path, {"x": {"extractor": "trafilatura"}}, postprocess=FAST),
                         on_corrupt="skip")
    [summary] = run_corpus(config, until="extract")
    assert summary["input_files"]["outcomes"] == {DAMAGED: 1}
    damaged = path.stat()
    path.write_bytes(good)
    os.utime(path, ns=(damaged.st_atime_ns, damaged.st_mtime_ns))
    base = resolve_inputs(config)[0]
    assert files_to_read_again(config, base) == {"a.warc.gz": [("x", 0)]}
    path.write_bytes(bad)  # the damaged copy itself, put back: nothing to read again
    os.utime(path, ns=(damaged.st_atime_ns, damaged.st_mtime_ns))
    assert files_to_read_again(config, base) == {}


def test_a_user_manifest_lists_every_input_file(tmp_path, sample_dir):
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    for name in ("sample.warc.gz", "gold.jsonl"):
        (mirror / name).write_bytes((sample_dir / name).read_bytes())
    config = with_inputs(make_config(tmp_path / "out", mirror / "sample.warc.gz", {"x": {"extractor": "trafilatura"}}),
                         manifest=str(tmp_path / "manifest.jsonl"))
    (tmp_path / "manifest.jsonl").write_text('{"path": "elsewhere.warc.gz", "size": 10}\n')
    with pytest.raises(InputListError, match=rf"has no line for 1 input files: {mirror / 'sample.warc.gz'}"):
        resolve_inputs(config)
    (tmp_path / "manifest.jsonl").write_text('{"path": "elsewhere.warc.gz", "records": 10}\n')
    with pytest.raises(InputListError, match=r"manifest.jsonl line 1: give a `path` and its `size` or `sha256`"):
        resolve_inputs(config)
    manifest = write_manifest(mirror, [mirror / "sample.warc.gz"])  # corpus.sample's, beside the files it lists
    [entry] = read_manifest(resolve_inputs(with_inputs(config, manifest=str(manifest)))[1].with_name(MANIFEST))["files"].values()
    assert entry == {"path": "sample.warc.gz", "size": (mirror / "sample.warc.gz").stat().st_size,
                     "sha256": entry["sha256"], "records": len(read_gold(mirror / "gold.jsonl"))}
    with pytest.raises(ValueError, match="manifest: the generated sample needs none"):
        ExperimentConfig.model_validate({"name": "t", "output_root": str(tmp_path), "arms": {"x": {"extractor": "trafilatura"}},
                                         "inputs": {"sample": {}, "manifest": str(manifest)}})


def test_a_sha256_given_after_an_arm_read_the_file_whole_is_refused_as_unchecked_not_as_changed(tmp_path, sample_dir):
    """The first run listed the file by its size alone and an arm read it whole; `inputs.manifest`
    given since adds its sha256, the size the same: the file did not change (the message said it
    had, its two sizes equal), but the arm's read was not checked against it: refused, saying so."""
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    for name in ("sample.warc.gz", "gold.jsonl"):
        (mirror / name).write_bytes((sample_dir / name).read_bytes())
    config = make_config(tmp_path / "out", mirror / "sample.warc.gz", {"x": {"extractor": "trafilatura"}})
    resolve_inputs(config)
    logs = config.arm_dir("x") / "logs" / INPUT_FILES
    logs.mkdir(parents=True)
    (logs / "00000.jsonl").write_text(json.dumps(file_record("sample.warc.gz") | {"outcome": READ_WHOLE}) + "\n")
    manifest = write_manifest(mirror, [mirror / "sample.warc.gz"])
    with pytest.raises(InputListError, match=r"^inputs.manifest gives a sha256 for 1 input files that the input list of .* had "
                                             r"none for, and an arm has read them whole without checking it .*\n  "
                                             rf"{mirror / 'sample.warc.gz'}: read whole by x unchecked\nStart a new output root"):
        resolve_inputs(with_inputs(config, manifest=str(manifest)))


def test_switching_how_files_are_read_changes_no_config_hash(sample_dir, tmp_path):
    config = make_config(tmp_path, sample_dir / "sample.warc.gz", {"x": {"extractor": "trafilatura"}})
    same = with_inputs(config, on_corrupt="skip", read_timeout_s=5.0, retries=config.inputs.retries.model_copy(
        update={"attempts": 20}), verify_digests=False, unknown_size="read")
    assert config_sha256(same) == config_sha256(config)
    assert config_sha256(with_inputs(config, manifest=str(sample_dir / "gold.jsonl"))) != config_sha256(config)


@pytest.mark.slow
def test_a_damaged_file_is_read_past_counted_and_once_replaced_read_again_to_a_clean_runs_bytes(tmp_path):
    """The whole corpus flow. A file with a corrupt gzip member in its middle (a local
    mirror with corpus.sample's manifest), under `on_corrupt: skip`: the records after the damage are
    read, the ledger says NO, naming the file, the bytes passed over and the records read of those
    the manifest lists. The good copy put back and the run re-submitted (switched to `fail`): the
    file is read again, and every stage built on it runs again, to the bytes of a run that never
    saw the damage; the ledger says yes, and no folder says it mixes two configs."""
    mirror = tmp_path / "mirror"
    write_sample(mirror / "a", 12, seed=1)
    write_sample(mirror / "b", 12, seed=2)
    write_manifest(mirror, [mirror / "a" / "sample.warc.gz", mirror / "b" / "sample.warc.gz"])
    arms = {"trafilatura": {"extractor": "trafilatura"}}  # every arm's re-read: test_a_skipped_file_fetched_again...

    def config(out: str, **inputs) -> ExperimentConfig:
        return with_inputs(make_config(
            tmp_path / out, mirror / "*" / "sample.warc.gz", arms,
            postprocess={"safety": {"before_extraction": False, "url_blocklists": False},
                         "minhash": {"num_buckets": 4, "hashes_per_bucket": 4}},
            tokenizer={"kind": "sentencepiece", "vocab_size": 600, "sample_chars_per_arm": 20000},
            dataset={"tokens_per_arm": 2000, "seed": 0}), manifest=str(mirror / "manifest.jsonl"), **inputs)

    clean = config("clean")
    run_corpus(clean)
    good = (mirror / "b" / "sample.warc.gz").read_bytes()
    bad, middle, after = damaged_in_the_middle(good)
    (mirror / "b" / "sample.warc.gz").write_bytes(bad)
    damaged = config("out", on_corrupt="skip")
    run_corpus(damaged)
    records = json.loads((mirror / "manifest.jsonl").read_text().splitlines()[1])["records"]
    for ledger in ledgers(damaged):
        assert accounted_text(ledger) == (
            f"NO (1 input file not read whole: b/sample.warc.gz read around damage (corrupt; "
            f"{after - middle:,} bytes unreadable in 1 place, at least 1 record lost; {records - 1} of {records} records))")
        [entry] = [f for f in read_input_files(damaged.arm_dir(ledger["arm"]) / "logs" / INPUT_FILES)
                   if f["file"] == "b/sample.warc.gz"]
        assert entry["outcome"] == DAMAGED and entry["records"] == records - 1
    (mirror / "b" / "sample.warc.gz").write_bytes(good)
    recovered = config("out")
    run_corpus(recovered)
    assert all(accounted_text(ledger) == "yes" for ledger in ledgers(recovered))
    for folder in ("extract", "post", "tokenizer", "datasets"):
        assert output_hashes(recovered.output_root / folder) == output_hashes(clean.output_root / folder), folder
    assert not any("begun_by" in read_provenance(p.parent) for p in recovered.output_root.rglob("provenance.json"))


def test_a_full_disk_while_the_first_run_writes_the_list_leaves_no_cut_list(tmp_path, sample_dir, monkeypatch):
    import contextlib
    from pathlib import Path

    folder = tmp_path / "in"
    folder.mkdir()
    for name in ("a.warc.gz", "b.warc.gz"):
        (folder / name).write_bytes((sample_dir / "sample.warc.gz").read_bytes())
    config = make_config(tmp_path / "out", folder / "*.warc.gz", {"x": {"extractor": "trafilatura"}})
    plain_write = Path.write_text

    def disk_full_halfway(path, text, *args, **kwargs):  # a plain write leaves what fit
        plain_write(path, text[:len(text) // 2], *args, **kwargs)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Path, "write_text", disk_full_halfway)
    with contextlib.suppress(OSError):
        resolve_inputs(config)
    monkeypatch.undo()
    # the next run reads the whole list (a cut one would be refused as changed inputs)
    assert resolve_inputs(config)[1].read_text().split() == ["a.warc.gz", "b.warc.gz"]
