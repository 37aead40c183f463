"""A vLLM labeler's hub model is pinned at first use: the driver records the commit once
(`extract/<arm>/labeler-revision.json`), every task loads the recorded one, a config that asks
for another is refused, and a local model folder needs none. The hub is a fake here."""

import json

import pytest
from test_slurm_submit import fake_slurm  # noqa: F401  (the fake sbatch and squeue)

from configs.base import ConfigError
from conftest import make_config
from corpus.extractors.dripper import DripperArm
from corpus.extractors.dripper.labelers.config import VllmLabelerConfig
from corpus.extractors.dripper.labelers.revision import REVISION_RECORD, pin_revision, pinned_labeler, recorded_commit
from corpus.flow.run import run_corpus
from corpus.sample import write_sample

HUB_MODEL = "someone/labeler"


def vllm_labeler(model: str = HUB_MODEL, **options) -> VllmLabelerConfig:
    return VllmLabelerConfig.model_validate({"kind": "vllm", "model": model, **options})


class FakeHub:
    """The commit the hub's main points at, and how often it was asked."""

    def __init__(self, commit: str):
        self.commit, self.asked = commit, 0

    def __call__(self, model: str) -> str:
        assert model == HUB_MODEL
        self.asked += 1
        return self.commit


def test_the_hub_commit_is_recorded_once_and_later_runs_read_the_record(tmp_path):
    hub = FakeHub("c0ffee1")
    assert pin_revision(tmp_path, vllm_labeler(), hub) == "c0ffee1"
    hub.commit = "beef002"  # the hub's main moved on
    assert pin_revision(tmp_path, vllm_labeler(), hub) == "c0ffee1" and hub.asked == 1
    record = json.loads((tmp_path / REVISION_RECORD).read_text())
    assert record["model"] == HUB_MODEL and record["revision"] == "c0ffee1"
    assert recorded_commit(tmp_path) == {HUB_MODEL: "c0ffee1"}  # what the arm's summary names


def test_every_task_loads_the_recorded_commit(tmp_path):
    arm = DripperArm.model_validate({"extractor": "dripper", "labeler": {"kind": "vllm", "model": HUB_MODEL}})
    step = arm.run_step(tmp_path)  # as the flow builds it, pickled for every task
    with pytest.raises(ConfigError, match="driver"):  # no task loads the hub's moving main
        pinned_labeler(step.arm.labeler, step.arm_dir)
    pin_revision(tmp_path, arm.labeler, FakeHub("c0ffee1"))
    assert pinned_labeler(step.arm.labeler, step.arm_dir).revision == "c0ffee1"


@pytest.mark.parametrize("asked", [{"revision": "beef002"}, {"model": "someone/another"}])
def test_a_config_that_differs_from_the_record_is_refused(tmp_path, asked):
    pin_revision(tmp_path, vllm_labeler(), FakeHub("c0ffee1"))
    with pytest.raises(ConfigError) as refused:
        pin_revision(tmp_path, vllm_labeler(**asked), FakeHub("beef002"))
    assert "labeler.revision: c0ffee1" in str(refused.value) and f"remove {tmp_path}" in str(refused.value)
    assert pin_revision(tmp_path, vllm_labeler(revision="c0ffee1"), FakeHub("beef002")) == "c0ffee1"


def test_a_revision_in_the_config_is_recorded_without_asking_the_hub(tmp_path):
    hub = FakeHub("beef002")
    assert pin_revision(tmp_path, vllm_labeler(revision="c0ffee1"), hub) == "c0ffee1" and hub.asked == 0


def test_an_unreachable_hub_is_a_config_error_that_says_how_to_pin(tmp_path):
    def offline(model: str) -> str:
        raise ConnectionError("no route to the hub")

    with pytest.raises(ConfigError, match="pin labeler.revision"):
        pin_revision(tmp_path, vllm_labeler(), offline)
    assert not (tmp_path / REVISION_RECORD).exists()


def test_an_unreachable_hub_endpoint_is_a_config_error_not_a_traceback(tmp_path, monkeypatch):
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "ENDPOINT", "http://127.0.0.1:9")  # nothing listens: refused
    with pytest.raises(ConfigError, match="pin labeler.revision"):
        pin_revision(tmp_path, vllm_labeler())
    assert not (tmp_path / REVISION_RECORD).exists()


def test_a_local_model_folder_needs_no_revision(tmp_path):
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    labeler = vllm_labeler(str(folder))
    assert pin_revision(tmp_path, labeler, FakeHub("never asked")) is None
    assert pinned_labeler(labeler, tmp_path) is labeler and not (tmp_path / REVISION_RECORD).exists()


@pytest.mark.usefixtures("fake_slurm")
def test_the_driver_records_the_commit_before_it_submits_the_arm(tmp_path, sample_dir, monkeypatch):
    import corpus.extractors.dripper.labelers.revision as revision

    hub = FakeHub("c0ffee1")
    monkeypatch.setattr(revision, "hub_commit", hub)
    config = make_config(tmp_path / "out", sample_dir / "sample.warc.gz",
                         {"d": {"extractor": "dripper", "labeler": {"kind": "vllm", "model": HUB_MODEL}}},
                         executor={"job_name_prefix": "t"})
    run_corpus(config, until="extract", executor="slurm")
    assert recorded_commit(config.arm_dir("d")) == {HUB_MODEL: "c0ffee1"} and hub.asked == 1
    assert list(config.arm_dir("d").rglob("executor.pik"))  # submitted after the record was written


@pytest.mark.slow
def test_several_arms_and_tasks_load_their_recorded_commits_and_a_rerun_asks_no_hub(tmp_path, monkeypatch):
    """The flow's shape: two Dripper arms of two tasks each (workers: 2 asked; an in-process vLLM
    engine runs one task at a time), one pinned by the config, one at the hub's main."""
    from test_extract import FirstHalfMain

    import corpus.extractors.dripper.labelers.revision as revision
    import corpus.extractors.dripper.step as dripper_step

    loaded = []  # (model, revision) of every labeler a task built

    def probe(labeler):
        loaded.append((labeler.model, labeler.revision))
        return FirstHalfMain()

    hub = FakeHub("c0ffee1")
    monkeypatch.setattr(revision, "hub_commit", hub)
    monkeypatch.setattr(dripper_step, "get_labeler", probe)
    warcs = tmp_path / "warcs"
    for name in ("a", "b"):  # a WARC a task, a few pages each
        write_sample(warcs / name, 2, seed=1)
    resources = {"tasks": 2, "workers": 2}
    config = make_config(tmp_path / "out", warcs / "*" / "sample.warc.gz", {
        "main": {"extractor": "dripper", "resources": resources, "labeler": {"kind": "vllm", "model": HUB_MODEL}},
        "pinned": {"extractor": "dripper", "resources": resources,
                   "labeler": {"kind": "vllm", "model": HUB_MODEL, "revision": "abc1234"}}})
    run_corpus(config, until="extract")
    assert sorted(loaded) == [(HUB_MODEL, "abc1234")] * 2 + [(HUB_MODEL, "c0ffee1")] * 2 and hub.asked == 1
    assert recorded_commit(config.arm_dir("main")) == {HUB_MODEL: "c0ffee1"}
    assert recorded_commit(config.arm_dir("pinned")) == {HUB_MODEL: "abc1234"}

    hub.commit, loaded[:] = "beef002", []  # the hub's main moved on; task 1 of each arm runs again
    for arm in ("main", "pinned"):
        (config.arm_dir(arm) / "logs" / "completions" / "00001").unlink()
    run_corpus(config, until="extract")
    assert sorted(loaded) == [(HUB_MODEL, "abc1234"), (HUB_MODEL, "c0ffee1")] and hub.asked == 1


def test_the_arms_score_and_the_preflight_use_the_recorded_commit(tmp_path, sample_dir, monkeypatch):
    """Outside the arm's tasks too: evaluation.extraction scores the weights that labeled the
    arm's corpus, and the preflight checks (and runs) the commit the tasks will load."""
    import huggingface_hub.constants

    from bench import preflight
    from evaluation.extraction.benchmark import resolve_arms

    config = make_config(tmp_path / "out", sample_dir / "sample.warc.gz",
                         {"d": {"extractor": "dripper", "labeler": {"kind": "vllm", "model": HUB_MODEL}}})
    assert resolve_arms(config, None)["d"].labeler.revision is None  # nothing recorded yet: the config's
    recorded, newer = "c0ffee10" * 5, "beef0020" * 5  # 40 hex digits, as the hub's commits
    pin_revision(config.arm_dir("d"), config.arms["d"].labeler, FakeHub(recorded))
    assert resolve_arms(config, None)["d"].labeler.revision == recorded
    assert preflight.labeler_under_test(config, tmp_path, cuda=True).revision == recorded

    cache = tmp_path / "hf" / "models--someone--labeler"  # the node's cache: main moved on since the record
    (cache / "snapshots" / recorded).mkdir(parents=True)
    (cache / "snapshots" / recorded / "config.json").write_text("{}")
    (cache / "refs").mkdir()
    (cache / "refs" / "main").write_text(newer)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hf"))
    assert preflight.model_available(HUB_MODEL, recorded)[0]
    ok, detail = preflight.model_available(HUB_MODEL)
    assert not ok and HUB_MODEL in detail


def test_a_run_refused_for_its_split_records_no_commit(tmp_path, monkeypatch):
    """A refused run changes nothing: no commit recorded that a corrected config would then be held to."""
    import corpus.extractors.dripper.labelers.revision as revision
    from corpus.flow.execute import SplitChanged, record_splits
    from corpus.flow.stages import corpus_stages
    from corpus.read.inputs import resolve_inputs

    hub = FakeHub("c0ffee1")
    monkeypatch.setattr(revision, "hub_commit", hub)
    for name in ("a", "b"):
        write_sample(tmp_path / "warcs" / name, 2, seed=1)

    def config(tasks: int):
        return make_config(tmp_path / "out", tmp_path / "warcs" / "*" / "sample.warc.gz",
                           {"d": {"extractor": "dripper", "resources": {"tasks": tasks},
                                  "labeler": {"kind": "vllm", "model": HUB_MODEL}}})

    earlier = config(2)  # an arm whose task 0 finished at two tasks, before its commit was recorded
    record_splits(corpus_stages(earlier, *resolve_inputs(earlier), "extract", None))
    (earlier.arm_dir("d") / "logs" / "completions").mkdir(parents=True)
    (earlier.arm_dir("d") / "logs" / "completions" / "00000").touch()
    with pytest.raises(SplitChanged):
        run_corpus(config(1), until="extract")
    assert recorded_commit(earlier.arm_dir("d")) == {} and hub.asked == 0


def test_the_tokenizer_that_builds_the_prompts_is_loaded_at_the_pinned_commit(monkeypatch):
    """mineru-html's vLLM backend builds every prompt (chat template) and length check with a
    tokenizer of its own, which it loads from the hub's main: it gets the pinned commit's instead."""
    import transformers
    from mineru_html.inference.vllm_backend import VLLMInferenceBackend

    from corpus.extractors.dripper.labelers.llm import build_llm_labeler

    loaded = []  # (model, revision) of every tokenizer loaded
    monkeypatch.setattr(VLLMInferenceBackend, "setup_llm", lambda self: None)  # no engine: only the tokenizer is looked at
    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained",
                        lambda name, **options: loaded.append((name, options.get("revision"))) or object())
    labeler = build_llm_labeler(vllm_labeler(revision="c0ffee1"))
    labeler.backend.get_tokenizer()
    assert loaded == [(HUB_MODEL, "c0ffee1")]
