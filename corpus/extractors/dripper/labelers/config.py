"""The config of each labeler kind (the Dripper arm's `labeler:`). A config imports none of the code it
configures: `corpus.extractors.dripper.labelers.build_labeler` makes the labeler in the process that uses it."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal, Union

from pydantic import Field, SecretStr, field_validator, model_validator

from configs.base import StrictModel, check_local_model, require_model_folder
from configs.secrets import check_env_name, refuse_credentials_in_url, secret_from_env
from corpus.shims import VLLM_MAX_SPEC_TOKENS

DEFAULT_DRIPPER_MODEL = "opendatalab/MinerU-HTML-v1.1-hunyuan0.5B-compact"
DRAFT_MODEL_HINT = ("train one with python -m corpus.extractors.dripper.draft_training (docs/explanation/extractors.md, "
                    "the speculative draft)")


class LlmLabelerOptions(StrictModel):
    """What the model and its prompt are, wherever the model runs."""

    model: str = Field(DEFAULT_DRIPPER_MODEL, description="The labeling model: a hub id or a local Hugging Face "
                       "folder (with kind: vllm, a path starting `/`, `./` or `../` must be one, checked at load; with "
                       "kind: endpoint, the served model's name).")
    revision: str | None = Field(None, description="The commit of the hub model (and its tokenizer, and the "
                                 "speculative draft's) vLLM loads: the model repository's commit hash. null: the "
                                 "hub's current commit, pinned at first use: the driver records it in "
                                 "`extract/<arm>/labeler-revision.json` before any task starts and every task loads "
                                 "it; a later config that names another is refused. A local folder needs none.")
    max_context_tokens: int = Field(32768, ge=256, description="The model's context in tokens; a page whose prompt "
                                    "and answer do not fit falls back to Trafilatura (`too_long`).")
    max_output_tokens: int = Field(4096, ge=16, description="The most tokens of one answer.")
    # mineru-html checks `prompt + dummy answer <= context`, but its dummy answer lacks the
    # `<answer>…</answer>` tags and its vLLM path adds a second chat-template turn
    answer_margin_tokens: int = Field(64, ge=0, description="Tokens of the context kept free beyond mineru-html's "
                                      "own length check, so that pages that would get truncated answers take the "
                                      "counted `too_long` fallback instead.")
    prompt_version: str = Field("short_compact", description="mineru-html's prompt, by name: the one the model was "
                                "trained with.")

    @property
    def token_source(self) -> str:
        """How the labeler's tokens are counted (BlockLabeler.count_tokens)."""
        return f"{self.model}'s tokenizer"


class VllmLabelerConfig(LlmLabelerOptions):
    """The Dripper model in an in-process vLLM engine (one engine per datatrove task)."""

    kind: Literal["vllm"] = Field(description="The Dripper model in an in-process vLLM engine, one per datatrove "
                                  "task (one task per GPU on a cluster).")
    gpu_memory_utilization: float = Field(0.8, gt=0, le=1, description="Share of the GPU's memory vLLM may take.")
    dtype: str = Field("auto", description="vLLM's dtype of the weights (`auto`, `bfloat16`, `float16`, ...).")
    engine_kwargs: dict = Field(default_factory=dict, description="More keyword arguments of vLLM's engine, "
                                "passed as they are (not `speculative_config` with a block-classifier draft).")
    # corpus.extractors.dripper.labelers.speculative
    draft: Literal["block_classifier", "none"] | None = Field(None, description="Exact speculative labelling: the "
                                                              "block classifier drafts every label and the model "
                                                              "verifies the whole answer, decoding only where it "
                                                              "disagrees; the labels are greedy decoding's either "
                                                              "way, only the speed differs. null: `block_classifier` "
                                                              "where `draft_model` is given, else `none`.")
    draft_model: str | None = Field(None, description="The draft's model folder, written by `python -m "
                                    "corpus.extractors.dripper.draft_training`; needed by `draft: block_classifier`.")
    draft_tokens: int = Field(64, ge=1, le=VLLM_MAX_SPEC_TOKENS, description="Drafted tokens one step verifies "
                              "(vLLM's `num_speculative_tokens`; its rejection sampler takes 128 at most).")

    _model_exists = field_validator("model")(check_local_model)

    @model_validator(mode="before")
    @classmethod
    def _draft_where_a_model_is(cls, data):
        if isinstance(data, dict) and data.get("draft") is None:
            data = {**data, "draft": "block_classifier" if data.get("draft_model") else "none"}
        return data

    @model_validator(mode="after")
    def _draft_model(self):
        if self.draft == "block_classifier":
            if not self.draft_model:
                raise ValueError(f"draft: block_classifier needs draft_model: a folder; {DRAFT_MODEL_HINT}")
            # a cluster path may not exist where the config is planned: the preflight and the step check it
            if Path(self.draft_model).exists():
                require_model_folder(self.draft_model, "block_model.json", DRAFT_MODEL_HINT)
        if "speculative_config" in self.engine_kwargs and self.draft == "block_classifier":
            raise ValueError("engine_kwargs.speculative_config and the block classifier's draft both set vLLM's "
                             "speculative decoding: keep one (draft: none for your own)")
        return self

    @property
    def drafted(self) -> bool:
        return self.draft == "block_classifier"


class EndpointLabelerConfig(LlmLabelerOptions):
    """The same requests sent to an OpenAI-compatible server someone already runs."""

    kind: Literal["endpoint"] = Field(description="The same requests sent to an OpenAI-compatible server someone "
                                      "already runs (e.g. `python -m vllm.entrypoints.openai.api_server`).")
    url: str = Field(description="The server's base URL, e.g. `http://gpu-node:8000/v1` (no userinfo or query "
                     "string: the config is recorded).")
    api_key_env: str | None = Field(None, description="Name of the environment variable that holds the server's API "
                                    "key (sent as `Authorization: Bearer`); the key itself never goes in the config, "
                                    "which the suite records. null: the key `EMPTY` (a vLLM server started without "
                                    "`--api-key`).")
    tokenizer: str | None = Field(None, description="Folder or hub id of the served model's tokenizer, to count "
                                  "prompt tokens here; null: `model`'s.")
    concurrency: int = Field(16, ge=1, description="Requests in flight at once.")
    timeout_s: float = Field(600.0, gt=0, description="Seconds one request may take.")
    retries: int = Field(2, ge=0, description="Retries of a failed request; when they are spent the labeler "
                         "fails with an engine error naming the server.")

    _url_without_credentials = field_validator("url")(lambda value: refuse_credentials_in_url(value, "labeler.url"))

    @field_validator("api_key_env")
    @classmethod
    def _env_name(cls, value: str | None) -> str | None:
        return check_env_name(value, "labeler.api_key_env")

    @model_validator(mode="before")
    @classmethod
    def _no_key_in_the_config(cls, data):
        if isinstance(data, dict) and "api_key" in data:
            raise ValueError("labeler.api_key: a key in the config would be recorded in the output root (config.json, "
                             "executor.json, the pickled pipeline, the config hash): export it in an environment "
                             "variable and name that variable in labeler.api_key_env")
        return data

    def api_key(self) -> SecretStr:
        """The key, read from the environment where the labeler runs (never stored on the config)."""
        if self.api_key_env is None:
            return SecretStr("EMPTY")
        return secret_from_env(self.api_key_env, "labeler.api_key_env")

    @property
    def token_source(self) -> str:
        return f"{self.tokenizer or self.model}'s tokenizer"


class EncoderLabelerConfig(StrictModel):
    """The project's small encoder (corpus/extractors/dripper/labelers/encoder.py) on CPU; train it with
    `python -m corpus.extractors.dripper.training`."""

    kind: Literal["encoder"] = Field(description="The project's small encoder on CPU.")
    model: str = Field(description="The encoder's folder, written by `python -m corpus.extractors.dripper.training` "
                       "(`block_labeler.json` in it; checked at load).")
    batch_windows: int = Field(32, ge=1, description="Token windows per forward pass (a long page is covered by "
                               "overlapping windows).")

    @field_validator("model")
    @classmethod
    def _model_folder(cls, value: str) -> str:
        return require_model_folder(value, "block_labeler.json", "train one with python -m corpus.extractors.dripper.training")

    @property
    def token_source(self) -> str:
        return "4 UTF-8 bytes a token: a stand-in, the encoder has no LLM tokenizer"


LabelerConfig = Annotated[Union[VllmLabelerConfig, EndpointLabelerConfig, EncoderLabelerConfig], Field(discriminator="kind")]
