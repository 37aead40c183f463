"""The experiment config: one YAML per experiment, validated into pydantic models at load.

Every stage (corpus, pretrain, evaluation) reads its settings from here; nothing reads environment
variables or globals for experiment settings. `load_experiment(path)` raises `ConfigError` naming
the file and the key. This module is the root: the sections' own models are the modules named
after them (`configs.inputs`, `configs.arms`, `configs.postprocess`, `configs.tokens`,
`configs.pretrain`, `configs.evaluation`, `configs.executor`, `configs.plan`); what needs several
sections (the ladder against the budget, an arm against the inputs) is checked here, and the paths
of every stage's outputs are derived here.
"""

from __future__ import annotations

from pathlib import Path

import yaml
from pydantic import Field, PrivateAttr, ValidationError, field_validator, model_validator

from configs.arms import Arm, ExtractionConfig
from configs.base import SAFE_NAME, ConfigError, Resources, StrictModel
from configs.evaluation import EvaluationConfig
from configs.executor import ExecutorConfig
from configs.inputs import InputsConfig
from configs.plan import PlanConfig
from configs.postprocess import PostprocessConfig
from configs.pretrain import PretrainConfig, Rung
from configs.tokens import DatasetConfig, TokenizerConfig
from corpus.extractors import KINDS, ExtractorArm, GoldArm, kind_name
from corpus.read.reference import ReferenceArm


class ExperimentConfig(StrictModel):
    name: str = Field(pattern=SAFE_NAME, description="The experiment's name; it names its report folder "
                      "(`report/<name>`), so configs that share an output root keep their reports apart.")
    output_root: Path = Field(description="The folder every stage writes under; a run that finds its outputs "
                              "there resumes. Configs may share one (a variant that `include:`s another) to build "
                              "the corpora once. No comma (it reaches lm-eval's `model_args`) and no control "
                              "character (it reaches `#SBATCH` lines).")
    inputs: InputsConfig = Field(description="Where the WARC records come from (exactly one source) and how their "
                                 "files are read.")
    extraction: ExtractionConfig = Field(ExtractionConfig(), description="Record limits applied identically "
                                         "before every arm, and the format of every extractor arm's text.")
    executor: ExecutorConfig = Field(ExecutorConfig(), description="How jobs are launched on Slurm. Whether they are "
                                     "is decided by how a script is started (`sbatch slurm/<stage>.sh` submits, "
                                     "`bash slurm/<stage>.sh` runs here), not by this config.")
    arms: dict[str, Arm] = Field(min_length=1, description="The rows of the comparison, by name (letters, digits, "
                                 "`-`, `_`: it names folders): each extracts the WARC records with "
                                 "`extractor: <kind>`, or reads an existing corpus with `corpus: <format>`. At "
                                 "least one extractor arm.")
    postprocess: PostprocessConfig = Field(PostprocessConfig(), description="The filters and deduplication, applied "
                                           "as one block to every arm.")
    tokenizer: TokenizerConfig | None = Field(None, description="The one tokenizer of every arm; null: the flow "
                                              "stops after post-processing.")
    dataset: DatasetConfig | None = Field(None, description="The token budget each arm is cut to; needs "
                                          "`tokenizer`.")
    pretrain: PretrainConfig | None = Field(None, description="The decoders trained on every arm; needs `dataset`.")
    evaluation: EvaluationConfig | None = Field(None, description="lm-eval over every exported checkpoint, and the "
                                                "report's settings.")
    plan: PlanConfig = Field(PlanConfig(), description="The pilot of `python -m corpus.flow.plan` and the rates it "
                             "assumes where nothing measured them.")
    _experiment: ExperimentConfig | None = PrivateAttr(None)  # for_rung's: the whole experiment it was cut from
    _source: Path | None = PrivateAttr(None)  # the YAML it was loaded from (load_experiment): its git record

    @field_validator("output_root")
    @classmethod
    def _output_root_one_argument(cls, value: Path) -> Path:
        text = str(value)
        if "," in text or any(ord(c) < 32 or ord(c) == 127 for c in text):
            raise ValueError(f"{text!r} holds a comma or a control character: a comma would add lm-eval model_args "
                             "and a newline #SBATCH lines; choose a path without them")
        return value

    @field_validator("arms", mode="before")
    @classmethod
    def _no_extraction_options_on_a_corpus(cls, arms):
        if isinstance(arms, dict):
            options = {f for kind in KINDS for f in kind.model_fields} - set(ReferenceArm.model_fields)
            for name, arm in arms.items():
                if isinstance(arm, dict) and "corpus" in arm and (extraction := sorted(set(arm) & options)):
                    raise ValueError(f"arms.{name}: a reference arm reads an existing corpus; {extraction} are "
                                     "extraction options: drop them")
        return arms

    @field_validator("arms")
    @classmethod
    def _arm_names(cls, arms: dict) -> dict:
        for name in arms:
            if not name.replace("_", "").replace("-", "").isalnum():
                raise ValueError(f"arm name {name!r} must be letters, digits, '-' or '_' (it names folders)")
        return arms

    @model_validator(mode="after")
    def _dataset_needs_tokenizer(self) -> ExperimentConfig:
        if self.dataset is not None and self.tokenizer is None:
            raise ValueError("dataset needs a tokenizer section (one tokenizer for every arm)")
        if self.pretrain is not None and self.dataset is None:
            raise ValueError("pretrain needs a dataset section (the token-matched datasets it trains on)")
        return self

    @model_validator(mode="after")
    def _ladder_fits_the_budget(self) -> ExperimentConfig:
        if self.pretrain is None:
            return self
        if unknown := sorted(set(self.pretrain.arms or []) - set(self.arms)):
            raise ValueError(f"pretrain.arms: {unknown} are not arms of this experiment ({sorted(self.arms)})")
        budget, compute = self.dataset.tokens_per_arm, []
        for rung in self.pretrain.ladder:
            tokens = self.rung_tokens(rung)
            if tokens > budget:
                raise ValueError(f"pretrain.ladder.{rung.name}: {tokens:,} training tokens, more than the budget "
                                 f"dataset.tokens_per_arm {budget:,} (every rung trains on a prefix of it)")
            compute.append(rung.model.non_embedding_parameters * tokens)
        if any(b <= a for a, b in zip(compute, compute[1:], strict=False)):
            raise ValueError("pretrain.ladder: list the rungs from the least training compute to the most (parameters "
                             "x tokens); the last is the target the others are read against")
        return self

    @model_validator(mode="after")
    def _clean_text_unseen(self) -> ExperimentConfig:
        sample = self.inputs.sample
        if self.evaluation is None or sample is None:
            return self
        training = range(sample.seed, sample.seed + sample.files)  # the seeds of the sample's files
        for s in self.evaluation.clean_text.sets:
            if s.generated is not None and s.generated.seed in training:
                raise ValueError(f"evaluation.clean_text: set {s.name!r} generates its pages with seed {s.generated.seed}, "
                                 f"a seed of the training sample (inputs.sample: {list(training)}): pick another")
        return self

    @model_validator(mode="after")
    def _primary_arms(self) -> ExperimentConfig:
        primary = self.evaluation.primary if self.evaluation else None
        trained = self.trained_arms() or list(self.arms)
        if primary and (unknown := [a for a in primary.pair if a not in trained]):
            raise ValueError(f"evaluation.primary.pair: {', '.join(unknown)} is not a trained arm of this experiment "
                             f"({', '.join(trained)})")
        if primary and primary.deciding_rung and primary.deciding_rung not in self.rungs():
            raise ValueError(f"evaluation.primary.deciding_rung: {primary.deciding_rung} is not a rung of "
                             f"pretrain.ladder ({', '.join(self.rungs())})")
        return self

    def deciding_rung(self) -> str | None:
        """The rung that decides the primary decision: evaluation.primary.deciding_rung, or the ladder's last."""
        primary = self.whole().evaluation.primary if self.evaluation else None
        rungs = self.whole().rungs()
        return (primary.deciding_rung or rungs[-1]) if primary and rungs else None

    @model_validator(mode="after")
    def _arms_in_context(self) -> ExperimentConfig:
        if not self.extractor_arms:
            raise ValueError("every arm reads an existing corpus: give at least one extractor arm (the comparison)")
        if self.tokenizer is not None and self.tokenizer.kind == "sentencepiece" and not self.tokenizer_arms():
            raise ValueError(f"tokenizer: kind: sentencepiece is trained on the extractor arms' text, bounds "
                             f"({', '.join(self.extractor_arms)}) and reference corpora aside, and this config has no "
                             "such arm: add one (e.g. extractor: trafilatura), or use "
                             "tokenizer: {kind: pretrained, name_or_path: ...}")
        for name, arm in self.reference_arms.items():
            if self.dataset is None and arm.max_documents is None:
                raise ValueError(f"arms.{name}: a reference arm reads as many tokens as dataset.tokens_per_arm needs; "
                                 "without a dataset section give max_documents")
        for name, arm in self.extractor_arms.items():
            if isinstance(arm, GoldArm) and arm.gold is None:
                if self.inputs.sample is None:
                    raise ValueError(f"arms.{name}: extractor: gold needs `gold` files (JSONL of WARC-Record-ID and "
                                     "gold), or inputs.sample, whose gold.jsonl it reads by default")
                sample = self.output_root / "sample"
                gold = [str((sample / p).with_name("gold.jsonl")) for p in self.inputs.sample.warc_paths()]
                # the sample is generated at run time, so its gold files need not exist yet
                self.arms[name] = arm.model_copy(update={"gold": gold})
        return self

    @property
    def extractor_arms(self) -> dict[str, ExtractorArm]:
        """The arms that extract the WARC records (the gold bound included)."""
        return {name: arm for name, arm in self.arms.items() if isinstance(arm, ExtractorArm)}

    @property
    def reference_arms(self) -> dict[str, ReferenceArm]:
        """The arms that read an existing corpus."""
        return {name: arm for name, arm in self.arms.items() if isinstance(arm, ReferenceArm)}

    def document_resources(self, arm: str) -> Resources:
        """The tasks of an arm's per-document stages after its extraction or read (post-processing,
        tokenisation): `postprocess.resources`, and for a reference arm one task per file its read
        stage writes (`ReferenceArm.files_written`)."""
        resources = self.postprocess.resources
        if arm in self.extractor_arms:
            return resources
        files = self.reference_arms[arm].files_written(self.dataset)
        return resources.model_copy(update={"tasks": files, "workers": min(resources.workers, files)})

    def tokenizer_arms(self) -> list[str]:
        """The arms whose text trains the tokenizer: the extractors, bounds and references aside,
        so that adding a bound or a reference row never changes the tokenizer."""
        return [name for name, arm in self.extractor_arms.items() if not arm.bound]

    def rung_tokens(self, rung: Rung) -> int:
        return rung.training_tokens(self.dataset.tokens_per_arm)

    def training_steps(self) -> tuple[int, int]:
        """(steps, samples) of the rung: the most whole global batches one pass over its tokens (a
        prefix of the budget) gives. A sample is `seq_length + 1` tokens (inputs and shifted
        labels), consecutive samples share one."""
        rung = self.pretrain.rung
        seq, batch, tokens = rung.model.seq_length, rung.training.global_batch_size, self.rung_tokens(rung)
        samples = (tokens - 1) // seq
        steps = samples // batch
        if steps < 1:
            raise ValueError(f"{tokens:,} training tokens give {samples} sequences of {seq} tokens: not one global "
                             f"batch of {batch}. Raise the budget (or the rung's tokens) or lower the batch.")
        return steps, steps * batch

    def for_rung(self, name: str) -> ExperimentConfig:
        """This experiment with one rung of its ladder, whose training and Slurm job are then the
        pretrain section's: what every command of one rung (training, evaluation, a rung's tables)
        reads."""
        rung = self.pretrain.rung_named(name)
        pretrain = self.pretrain.model_copy(update={"training": rung.training, "slurm": rung.slurm, "ladder": [rung]})
        one = self.model_copy(update={"pretrain": pretrain})
        one._experiment = self.whole()
        return one

    def source(self) -> Path | None:
        """The YAML file this experiment was loaded from (None: built in code)."""
        return self.whole()._source

    def whole(self) -> ExperimentConfig:
        """The experiment as configured: for one rung's config (for_rung), the ladder it was cut from."""
        return self._experiment or self

    def rungs(self) -> list[str]:
        return [r.name for r in self.pretrain.ladder] if self.pretrain else []

    def trained_arms(self) -> list[str]:
        return list(self.pretrain.arms or self.arms) if self.pretrain else []

    def runs(self) -> list[tuple[str, int]]:
        """Every (arm, seed) training run of the rung, in (arm, seed) order: the one list training,
        evaluation and the report iterate over."""
        seeds = self.pretrain.seeds if self.pretrain else []
        return [(arm, seed) for arm in self.trained_arms() for seed in seeds]

    def relative(self, path: Path | str) -> str:
        """A path under the output root as written into outputs, so that the same run in another
        folder writes the same bytes."""
        return str(Path(path).relative_to(self.output_root))

    def arm_dir(self, arm: str) -> Path:
        return self.output_root / "extract" / arm

    def post_dir(self, arm: str) -> Path:
        return self.output_root / "post" / arm

    def removed_dir(self, arm: str, step: str) -> Path:
        """Every document a post-processing step removed from the arm, with its reason."""
        return self.post_dir(arm) / "removed" / step

    def tokenizer_dir(self) -> Path:
        return self.output_root / "tokenizer"

    def tokenizer_file(self) -> Path:
        """The shared tokenizer as datatrove's token steps and training read it."""
        return self.tokenizer_dir() / "tokenizer.json"

    def dataset_dir(self, arm: str) -> Path:
        return self.output_root / "datasets" / arm

    def dataset_prefix(self, arm: str) -> Path:
        """The arm's budget-cut Megatron dataset (`.bin` and `.idx` beside each other)."""
        return self.dataset_dir(arm) / f"{arm}_text_document"

    def datasets_manifest(self) -> Path:
        """What the budget cut: every arm's tokens, `.bin/.idx` digests, and the tokenizer's digest."""
        return self.output_root / "datasets" / "manifest.json"

    def eval_dir(self, arm: str, seed: int) -> Path:
        return self.output_root / "eval" / arm / self.pretrain.rung.name / f"seed{seed}"

    def report_dir(self) -> Path:
        """The report of this config (named after it: a ladder and a one-size config may share their
        output root, and with it the corpora and runs, not their reports)."""
        return self.output_root / "report" / self.name

    def plan_dir(self) -> Path:
        """The planner's pilot outputs and `plan.json`."""
        return self.output_root / "plan"

    def run_dir(self, arm: str, seed: int) -> Path:
        """Checkpoints, logs and exported models of one (arm, seed) training run of the rung."""
        return self.output_root / "train" / arm / self.pretrain.rung.name / f"seed{seed}"


# the field each tagged union of the config is told apart by (pydantic names a callable discriminator)
DISCRIMINATOR_FIELDS = {"extractor_or_corpus()": "extractor"}


def _error_line(e: dict) -> str:
    """`key: message`, with the key a person writes in the YAML."""
    key = ".".join(str(p) for p in e["loc"]) or "(top level)"
    msg = e["msg"].removeprefix("Value error, ")
    if e["type"] in ("union_tag_invalid", "union_tag_not_found"):
        discriminator = e["ctx"]["discriminator"]
        field = DISCRIMINATOR_FIELDS.get(discriminator, discriminator.strip("'"))
        known = [t.strip("' ") for t in e["ctx"].get("expected_tags", "").split(",") if t.strip()]
        if not known:  # union_tag_not_found does not list them
            known = [kind_name(k) for k in KINDS] if field == "extractor" else []
        corpus = " (or `corpus: huggingface|parquet|jsonl` for a reference corpus)" if field == "extractor" else ""
        names = ", ".join(t for t in known if t != "reference")
        if e["type"] == "union_tag_invalid":
            return f"{key}.{field}: unknown kind {e['ctx']['tag']!r}; known: {names}{corpus}"
        return f"{key}.{field}: missing" + (f"; give one of: {names}{corpus}" if names else "")
    return msg if msg.startswith(f"{key}.") or msg.startswith(f"{key}:") else f"{key}: {msg}"


def _format_errors(path: Path, err: ValidationError) -> str:
    return "\n".join([f"{path}: invalid experiment config", *(f"  {_error_line(e)}" for e in err.errors())])


def read_raw(path: Path, seen: tuple[Path, ...] = ()) -> dict:
    """A config file's mapping; `include: OTHER.yaml` (beside it) first reads OTHER, whose sections
    the file's own replace whole (as lm-eval's task `include:`): a variant states only what differs."""
    if not path.is_file():
        raise ConfigError(f"{path}: no such config file" + (f" (included by {seen[-1]})" if seen else ""))
    try:
        raw = yaml.safe_load(path.read_text())
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: not valid YAML: {e}") from e
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level")
    if "include" not in raw:
        return raw
    included = (path.parent / str(raw.pop("include"))).resolve()
    if included in seen or included == path.resolve():
        raise ConfigError(f"{path}: include {included} again (a cycle)")
    return read_raw(included, (*seen, path.resolve())) | raw


def load_experiment(path: str | Path) -> ExperimentConfig:
    path = Path(path)
    raw = read_raw(path)
    try:
        config = ExperimentConfig.model_validate(raw)
    except ValidationError as e:
        raise ConfigError(_format_errors(path, e)) from None
    config._source = path
    return config


def load_experiment_or_exit(path: str | Path) -> ExperimentConfig:
    """For command-line entry points: the config, or its error on stderr and exit status 2."""
    try:
        return load_experiment(path)
    except ConfigError as e:
        raise SystemExit(f"{e}") from None
