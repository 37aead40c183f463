import json
import shutil
from pathlib import Path

import pytest
import yaml

from configs.base import ConfigError
from configs.experiment import load_experiment
from corpus.extractors import DripperArm, TrafilaturaArm

REPO = Path(__file__).resolve().parents[1]


def write(tmp_path: Path, data: dict) -> Path:
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def minimal(tmp_path: Path) -> dict:
    return {"name": "t", "output_root": str(tmp_path / "out"), "inputs": {"sample": {"pages": 5}},
            "arms": {"trafilatura": {"extractor": "trafilatura"}}}


def test_minimal_config_loads_with_defaults(tmp_path):
    config = load_experiment(write(tmp_path, minimal(tmp_path)))
    arm = config.arms["trafilatura"]
    assert isinstance(arm, TrafilaturaArm)
    assert arm.options.output_format == "markdown"
    assert config.extraction.max_html_bytes == 5_000_000


def test_unknown_key_is_named(tmp_path):
    data = minimal(tmp_path)
    data["arms"]["trafilatura"]["optoins"] = {}
    with pytest.raises(ConfigError, match=r"exp.yaml.*\n.*arms\.trafilatura\.trafilatura\.optoins: Extra inputs"):
        load_experiment(write(tmp_path, data))


def test_wrong_type_is_named(tmp_path):
    data = minimal(tmp_path)
    data["arms"]["trafilatura"]["resources"] = {"tasks": "many"}
    with pytest.raises(ConfigError, match=r"arms\.trafilatura\.trafilatura\.resources\.tasks"):
        load_experiment(write(tmp_path, data))


def test_an_unknown_kind_of_any_tagged_section_names_the_key_and_the_known_kinds(tmp_path):
    data = minimal(tmp_path)
    data["arms"]["trafilatura"]["extractor"] = "boilerpipe"
    with pytest.raises(ConfigError, match=r"\n  arms\.trafilatura\.extractor: unknown kind 'boilerpipe'; "
                                          r"known: trafilatura, dripper, .*, gold \(or `corpus: "):
        load_experiment(write(tmp_path, data))
    data["arms"]["trafilatura"] = {"extractor": "dripper", "labeler": {"kind": "gpu", "model": "x"}}
    with pytest.raises(ConfigError, match=r"arms\.trafilatura\.dripper\.labeler\.kind: unknown kind 'gpu'; "
                                          r"known: vllm, endpoint, encoder$"):
        load_experiment(write(tmp_path, data))
    data["arms"]["trafilatura"] = {"options": {}}
    with pytest.raises(ConfigError, match=r"arms\.trafilatura\.extractor: missing; give one of: trafilatura, "):
        load_experiment(write(tmp_path, data))


def test_a_config_without_an_arm_to_train_the_tokenizer_on_is_refused_at_load(tmp_path):
    data = minimal(tmp_path) | {"arms": {"gold": {"extractor": "gold"}},
                                "tokenizer": {"kind": "sentencepiece", "vocab_size": 600}}
    with pytest.raises(ConfigError, match=r"tokenizer: kind: sentencepiece is trained on the extractor arms' text.*"
                                          r"\(gold\).*add one"):
        load_experiment(write(tmp_path, data))
    data["tokenizer"] = {"kind": "pretrained", "name_or_path": str(tmp_path)}
    assert load_experiment(write(tmp_path, data)).tokenizer_arms() == []


def test_missing_warc_file_is_named(tmp_path):
    data = minimal(tmp_path)
    data["inputs"] = {"warc": [str(tmp_path / "nothing-*.warc.gz")]}
    with pytest.raises(ConfigError, match=r"inputs: .*no file matches .*nothing-\*\.warc\.gz"):
        load_experiment(write(tmp_path, data))


def test_two_input_sources_are_refused(tmp_path):
    data = minimal(tmp_path)
    data["inputs"]["common_crawl"] = {"snapshots": ["CC-MAIN-2024-10"], "files_per_snapshot": 1}
    with pytest.raises(ConfigError, match=r"exactly one of warc, common_crawl, sample"):
        load_experiment(write(tmp_path, data))


@pytest.mark.parametrize("inputs, message", [
    ({"warc": ["http://a.example/x.warc.gz", "LOCAL"]}, r"inputs: warc: give local paths or URLs, not both"),
    ({"warc": ["http://a.example/x.warc.gz", "http://b.example/y.warc.gz"]}, r"URLs of one scheme and host .*b\.example"),
    ({"warc": ["s3://bucket/*.warc.gz"]}, r"'s3://bucket/\*\.warc\.gz': URLs are read as given, not expanded"),
    ({"sample": {}, "on_corrupt": "ignore"}, r"inputs\.on_corrupt: Input should be 'fail' or 'skip'"),
    ({"sample": {}, "retries": {"attempts": -1}}, r"inputs\.retries\.attempts: Input should be greater than or equal to 0"),
])
def test_how_input_files_are_read_is_checked_at_load(tmp_path, inputs, message):
    data = minimal(tmp_path)
    (tmp_path / "local.warc.gz").write_bytes(b"")
    data["inputs"] = {k: [str(tmp_path / "local.warc.gz") if p == "LOCAL" else p for p in v] if k == "warc" else v
                      for k, v in inputs.items()}
    with pytest.raises(ConfigError, match=message):
        load_experiment(write(tmp_path, data))


def test_missing_local_model_folder_is_named(tmp_path):
    data = minimal(tmp_path)
    data["arms"]["dripper"] = {"extractor": "dripper", "labeler": {"kind": "vllm", "model": "./no/such/model"}}
    with pytest.raises(ConfigError, match=r"arms\.dripper\.dripper\.labeler\.vllm\.model: .*not a model folder"):
        load_experiment(write(tmp_path, data))


def test_missing_config_file(tmp_path):
    with pytest.raises(ConfigError, match="no such config file"):
        load_experiment(tmp_path / "absent.yaml")


def test_paper_config_loads():
    config = load_experiment(REPO / "configs" / "paper.yaml")
    assert config.executor.job_name_prefix == "paper"
    dripper = config.arms["dripper"]
    assert isinstance(dripper, DripperArm)
    assert dripper.resources.gpus_per_task == 1 and dripper.resources.partition == "gpu"
    assert config.arms["trafilatura"].resources.gpus_per_task == 0
    assert len(config.inputs.common_crawl.snapshots) >= 1


def test_local_config_loads(tmp_path, monkeypatch):
    # the local config names the demo's model folders relative to the repository root
    shutil.copytree(REPO / "configs", tmp_path / "configs")
    from corpus.extractors.block_classifier.features import CONTEXT_NAMES, FEATURE_NAMES

    block_meta = {"features": list(FEATURE_NAMES), "context": list(CONTEXT_NAMES)}
    models = (("encoder-labeler", "block_labeler.json", {}), ("block-classifier", "block_model.json", block_meta))
    for folder, marker, meta in models:
        model = tmp_path / "out" / "local" / "models" / folder
        model.mkdir(parents=True)
        (model / marker).write_text(json.dumps(meta))
    monkeypatch.chdir(tmp_path)
    config = load_experiment("configs/local.yaml")
    assert set(config.arms) == {"trafilatura", "dripper", "block_classifier", "whole_page", "gold"}
    assert config.tokenizer_arms() == ["trafilatura", "dripper", "block_classifier", "whole_page"]
    assert config.arms["dripper"].labeler.kind == "encoder"
    assert config.inputs.sample is not None and config.extraction.text_format == "native"
    assert [s.name for s in config.evaluation.clean_text.sets] == ["web"]
    plain = load_experiment("configs/local-plain.yaml")  # the same experiment, every arm as plain text
    assert plain.extraction.text_format == "plain"
    differs = {"name", "output_root", "extraction", "arms"}  # the gold arm's default files lie under output_root
    assert plain.model_dump(exclude=differs) == config.model_dump(exclude=differs)
    assert plain.extraction.model_dump(exclude={"text_format"}) == config.extraction.model_dump(exclude={"text_format"})
    assert {a: arm.model_dump() for a, arm in plain.arms.items() if a != "gold"} == \
        {a: arm.model_dump() for a, arm in config.arms.items() if a != "gold"}
    # the demo's ladder: its middle rung is the demo's own runs, trained once and found done
    from configs.provenance import config_sha256, provenance

    ladder = load_experiment("configs/local-ladder.yaml")
    assert ladder.rungs() == ["nano", "tiny", "mini"] and ladder.trained_arms() == ["whole_page", "trafilatura", "gold"]
    tiny = ladder.for_rung("tiny")
    assert tiny.run_dir("gold", 2) == config.run_dir("gold", 2) and tiny.training_steps() == config.training_steps()
    for stage in ("training", "evaluation"):
        assert config_sha256(tiny, stage) == config_sha256(config, stage)
        # the config a rung's run names is the ladder's whole, as its datasets' is
        assert provenance(tiny, stage)["config_sha256"] == config_sha256(ladder) != config_sha256(tiny)
    assert ladder.report_dir() != config.report_dir()


@pytest.mark.parametrize("clean_text,message", [
    ({"sets": [{"name": "web", "generated": {"seed": 0}}]}, "a seed of the training sample"),
    ({"sets": [{"name": "web", "generated": {}, "jsonl": ["x.jsonl"]}]}, "exactly one of generated, jsonl"),
    ({"sets": [{"name": "web", "jsonl": ["absent*.jsonl"]}]}, "no file matches 'absent*.jsonl'"),
    ({"sets": [{"name": "Web page", "generated": {}}]}, "evaluation.clean_text.sets.0.name"),
    ({"sets": [{"name": "web", "generated": {}}, {"name": "web", "generated": {"seed": 12}}]}, "names repeat"),
])
def test_bad_clean_text_sets_fail_at_load_with_the_key(tmp_path, clean_text, message):
    data = minimal(tmp_path) | {"evaluation": {"clean_text": clean_text}}
    with pytest.raises(ConfigError, match="evaluation") as err:
        load_experiment(write(tmp_path, data))
    assert message in str(err.value), str(err.value)


def test_later_stages_need_the_sections_they_stand_on(tmp_path):
    data = minimal(tmp_path) | {"dataset": {"tokens_per_arm": 1000}}
    with pytest.raises(ConfigError, match="dataset needs a tokenizer section"):
        load_experiment(write(tmp_path, data))
    data |= {"tokenizer": {"kind": "pretrained"}}
    with pytest.raises(ConfigError, match="kind: pretrained needs name_or_path"):
        load_experiment(write(tmp_path, data))
    data = minimal(tmp_path) | {"tokenizer": {"kind": "sentencepiece"},
                                "pretrain": {"model": "tiny", "training": {"global_batch_size": 2, "micro_batch_size": 2,
                                                                           "checkpoint_every": 1}}}
    with pytest.raises(ConfigError, match="pretrain needs a dataset section"):
        load_experiment(write(tmp_path, data))


def test_batch_sizes_must_divide(tmp_path):
    data = minimal(tmp_path) | {"tokenizer": {"kind": "sentencepiece"}, "dataset": {"tokens_per_arm": 1000},
                                "pretrain": {"model": "tiny", "training": {"global_batch_size": 6, "micro_batch_size": 4,
                                                                           "checkpoint_every": 1}}}
    with pytest.raises(ConfigError, match="global_batch_size 6 is not a multiple of micro_batch_size 4"):
        load_experiment(write(tmp_path, data))


@pytest.mark.parametrize("key, value", [("vocab_size", 4096), ("sample_chars_per_arm", 10_000), ("seed", 3)])
def test_sentencepiece_options_are_refused_for_a_pretrained_tokenizer(tmp_path, key, value):
    data = minimal(tmp_path) | {"tokenizer": {"kind": "pretrained", "name_or_path": "gpt2", key: value}}
    with pytest.raises(ConfigError, match=rf"tokenizer: .*\['{key}'\] only apply to kind: sentencepiece"):
        load_experiment(write(tmp_path, data))


@pytest.mark.parametrize("backend, languages, ok", [
    ("ft176", ["en", "de"], True), ("ft176", ["eng_Latn"], False), ("ft176", ["english"], False),
    ("glotlid", ["eng_Latn", "cmn_Hani"], True), ("glotlid", ["en"], False)])
def test_languages_must_be_labels_of_the_language_id_backend(tmp_path, backend, languages, ok):
    data = minimal(tmp_path) | {"postprocess": {"language": {"backend": backend, "languages": languages}}}
    if ok:
        assert load_experiment(write(tmp_path, data)).postprocess.language.languages == languages
    else:
        with pytest.raises(ConfigError, match=rf"postprocess\.language: .*not labels of the {backend} model"):
            load_experiment(write(tmp_path, data))


def test_executor_kind_is_refused_with_what_decides_instead(tmp_path):
    data = minimal(tmp_path) | {"executor": {"kind": "slurm"}}
    with pytest.raises(ConfigError, match=r"\n  executor\.kind is gone: `sbatch slurm/extract\.sh`"):
        load_experiment(write(tmp_path, data))


def test_every_registered_extractor_kind_is_an_arm_with_a_step():
    from corpus.extractors import KINDS, default_arm, kind_name, standalone_kinds

    names = [kind_name(k) for k in KINDS]
    assert len(set(names)) == len(names)
    # dripper and block_classifier need options (a labeler, a model); gold is a bound, not an
    # extractor to run by name
    assert set(names) - set(standalone_kinds()) == {"dripper", "block_classifier", "gold"}
    for name in standalone_kinds():
        arm = default_arm(name)
        assert arm.extractor == name and hasattr(arm.step(), "run")


def test_an_option_of_another_kind_is_refused(tmp_path):
    data = minimal(tmp_path)
    data["arms"]["trafilatura"] = {"extractor": "resiliparse", "language": "German"}  # jusText's option
    with pytest.raises(ConfigError, match=r"arms\.trafilatura\.resiliparse\.language: Extra inputs"):
        load_experiment(write(tmp_path, data))


def test_a_pretrained_tokenizer_waits_for_no_extraction(tmp_path):
    from corpus.tokens.stages import tokenizer_stage

    data = minimal(tmp_path) | {"tokenizer": {"kind": "sentencepiece", "vocab_size": 600}}
    assert tokenizer_stage(load_experiment(write(tmp_path, data))).needs == ["extract-trafilatura"]
    data["tokenizer"] = {"kind": "pretrained", "name_or_path": str(tmp_path)}  # re-extracting an arm cannot change it
    assert tokenizer_stage(load_experiment(write(tmp_path, data))).needs == []


def test_every_named_model_size_states_its_own_parameters_and_flops():
    """The comment of each configs/models/<size>.yaml is what configs/model.py computes for it."""
    import re

    from configs.model import MODELS_DIR, ModelConfig, named_model

    sizes = sorted(MODELS_DIR.glob("*.yaml"))
    assert {p.stem for p in sizes} >= {"nano", "tiny", "mini", "20m", "60m", "150m", "300m", "530m", "1b"}
    for path in sizes:
        text = path.read_text()
        stated = re.search(r"# ([\d,]+) parameters with a ([\d,]+)-token vocabulary \(([\d,]+) without embeddings\);\n"
                           r"# ([\d.e+]+) training FLOPs per token \(configs/model.py; causal attention, ([\d.e+]+) with "
                           r"the full score matrix\)", text)
        assert stated, f"{path.name}: no parameter/FLOP comment"
        total, vocab, non_embedding = (int(g.replace(",", "")) for g in stated.groups()[:3])
        model = ModelConfig.model_validate(named_model(path.stem))
        assert model.parameters(vocab)["total"] == total and model.parameters(vocab)["non_embedding"] == non_embedding
        assert f"{model.flops_per_token(vocab):.3g}" == stated.group(4), path.name
        assert f"{model.flops_per_token(vocab, causal=False):.3g}" == stated.group(5), path.name
        if path.stem[0].isdigit():  # named by total parameters, e.g. 150m: within 15% of 150M
            scale = float(path.stem[:-1]) * (1e9 if path.stem.endswith("b") else 1e6)
            assert abs(total / scale - 1) < 0.15, path.name


def ladder_experiment(tmp_path, ladder, **pretrain) -> dict:
    from conftest import pretrain_experiment

    raw = pretrain_experiment(tmp_path)
    raw["pretrain"] = {"training": raw["pretrain"]["training"], "ladder": ladder, **pretrain}
    return raw


def test_a_ladder_validates_its_rungs_and_an_old_config_is_one_rung(tmp_path):
    from pydantic import ValidationError

    from configs.experiment import ExperimentConfig
    from conftest import PRETRAIN_MODEL, pretrain_experiment

    old = ExperimentConfig.model_validate(pretrain_experiment(tmp_path))
    assert old.rungs() == ["model"] and old.pretrain.seeds == [1] and old.pretrain.model.hidden_size == 32
    assert old.run_dir("a", 1) == tmp_path / "train" / "a" / "model" / "seed1"

    small = PRETRAIN_MODEL | {"hidden_size": 16, "ffn_hidden_size": 32}
    config = ExperimentConfig.model_validate(ladder_experiment(tmp_path, [
        {"name": "s", "model": small, "tokens": 2000, "seeds": [1, 2, 3], "training": {"lr": 1e-2},
         "slurm": {"nodes": 1, "gpus_per_node": 1, "time": "01:00:00"}},
        {"name": "l", "model": PRETRAIN_MODEL, "seeds": [1, 2], "slurm": {"nodes": 2}}],
        slurm={"gpus_per_node": 4, "partition": "h100"}, arms=["a"]))
    assert config.rungs() == ["s", "l"] and config.pretrain.target.name == "l" and config.trained_arms() == ["a"]
    with pytest.raises(ValueError, match="has 2 rungs \\(s, l\\): name one"):
        config.pretrain.model  # noqa: B018
    s, large = config.for_rung("s"), config.for_rung("l")
    assert s.runs() == [("a", 1), ("a", 2), ("a", 3)] and large.runs() == [("a", 1), ("a", 2)]
    assert s.pretrain.training.lr == 1e-2 and large.pretrain.training.lr == 3e-3  # the rung's keys over the shared
    assert (s.pretrain.slurm.gpus_per_node, s.pretrain.slurm.partition, s.pretrain.slurm.time) == (1, "h100", "01:00:00")
    assert (large.pretrain.slurm.nodes, large.pretrain.slurm.gpus_per_node) == (2, 4)
    assert s.training_steps()[0] < large.training_steps()[0]  # 2,000 tokens, then the whole budget (4,000)
    assert s.run_dir("a", 1) == tmp_path / "train" / "a" / "s" / "seed1" and s.eval_dir("a", 1).parent.name == "s"
    assert ExperimentConfig.model_validate(config.model_dump()) == config  # the dump loads back the same

    per_parameter = ladder_experiment(tmp_path, [{"name": "s", "model": small, "tokens_per_parameter": 0.5, "seeds": [1]},
                                                 {"name": "l", "model": PRETRAIN_MODEL, "seeds": [1]}])
    rung = ExperimentConfig.model_validate(per_parameter).pretrain.ladder[0]
    assert rung.training_tokens(4000) == round(0.5 * rung.model.non_embedding_parameters)

    wrong = {
        "more than the budget": [{"name": "s", "model": small, "tokens": 10**6, "seeds": [1]}],
        "from the least training compute to the most": [{"name": "l", "model": PRETRAIN_MODEL, "seeds": [1]},
                                                        {"name": "s", "model": small, "tokens": 1000, "seeds": [1]}],
        "rung names repeat": [{"name": "s", "model": small, "seeds": [1]}, {"name": "s", "model": small, "seeds": [1]}],
        "tokens or tokens_per_parameter, not both": [{"name": "s", "model": small, "tokens": 10, "tokens_per_parameter": 1,
                                                      "seeds": [1]}],
        "the same model.seq_length": [{"name": "s", "model": small | {"seq_length": 16}, "tokens": 1000, "seeds": [1]},
                                      {"name": "l", "model": PRETRAIN_MODEL, "seeds": [1]}],
    }
    for message, ladder in wrong.items():
        with pytest.raises(ValidationError, match=message):
            ExperimentConfig.model_validate(ladder_experiment(tmp_path, ladder))
    both = ladder_experiment(tmp_path, [{"name": "s", "model": small, "seeds": [1]}])
    both["pretrain"]["model"] = "tiny"
    with pytest.raises(ValidationError, match="give model and seeds \\(one size\\) or ladder"):
        ExperimentConfig.model_validate(both)
    with pytest.raises(ValidationError, match="pretrain.arms: \\['c'\\] are not arms"):
        ExperimentConfig.model_validate(ladder_experiment(tmp_path, [{"name": "s", "model": small, "seeds": [1]}], arms=["c"]))


def test_a_config_includes_another_and_replaces_whole_sections(tmp_path):
    base = {"name": "base", "output_root": str(tmp_path / "out"), "inputs": {"sample": {"pages": 7}},
            "arms": {"a": {"extractor": "trafilatura"}}, "tokenizer": {"kind": "sentencepiece"},
            "dataset": {"tokens_per_arm": 1000, "seed": 3}}
    (tmp_path / "base.yaml").write_text(yaml.safe_dump(base))
    (tmp_path / "variants").mkdir()
    (tmp_path / "variants" / "v.yaml").write_text(yaml.safe_dump({"include": "../base.yaml", "name": "variant",
                                                                   "dataset": {"tokens_per_arm": 500}}))
    config = load_experiment(tmp_path / "variants" / "v.yaml")
    assert config.name == "variant" and config.inputs.sample.pages == 7
    assert config.dataset.tokens_per_arm == 500 and config.dataset.seed == 0  # the section is replaced whole
    (tmp_path / "base.yaml").write_text(yaml.safe_dump(base | {"include": "variants/v.yaml"}))
    with pytest.raises(ConfigError, match="a cycle"):
        load_experiment(tmp_path / "variants" / "v.yaml")


def test_every_shipped_experiment_pins_its_attention():
    """`auto` resolves per node (te where Transformer Engine imports): the shipped configs name the
    kernels every run of a rung runs."""
    from configs.pretrain import PretrainConfig

    for path in sorted((REPO / "configs").glob("*.yaml")):
        pretrain = yaml.safe_load(path.read_text()).get("pretrain")
        if pretrain:
            rungs = PretrainConfig.model_validate(pretrain).ladder
            assert all(r.training.attention != "auto" for r in rungs), path.name


def test_flops_per_token_is_megatron_lm_s_count_plus_the_norm_weights():
    """An independent recount of current Megatron-LM's num_floating_point_operations for the 1b
    shape (GQA, SwiGLU, causal attention: half the score matrix; untied output layer): the
    project's figure differs only by 6 x the RMSNorm weights, which Megatron-LM does not count."""
    from configs.model import ModelConfig, named_model

    m = ModelConfig(**named_model("1b"))
    layers, h, ffn, s, vocab = m.num_layers, m.hidden_size, m.ffn_hidden_size, m.seq_length, 32000
    q, kv = m.head_dim * m.num_attention_heads, m.head_dim * m.kv_groups
    attention = 6 * (h * (q + 2 * kv) + q * s / 2 * 2 + q * h)  # qkv, core attention (causal), out proj
    mlp = 6 * (3 * h * ffn)  # SwiGLU: gate, up and down
    megatron = layers * (attention + mlp) + 6 * h * vocab
    assert megatron == 6_760_169_472
    norms = layers * 2 * h + h
    assert m.flops_per_token(vocab) == megatron + 6 * norms
    assert m.flops_per_token(vocab, causal=False) == megatron + 6 * norms + 6 * layers * h * s
