"""The Dripper LLM labeler: mineru-html's own inference backend, in-process vLLM or a server.

Both kinds go through mineru-html's `InferenceBackend.process`, so the model sees exactly the
reference input: the same prompt, chat template, context-length check and the regex that
constrains the answer to `<answer>1main2other…</answer>` over that page's ids, greedy.

- `vllm`: mineru-html's VLLMInferenceBackend, one engine per process (one datatrove task per
  GPU on a cluster); many pages go to the engine in one `generate` call.
- `endpoint`: the same backend with its engine swapped for a client of an OpenAI-compatible
  `/v1/completions` server (e.g. `python -m vllm.entrypoints.openai.api_server`), so the same
  prompt strings and the same regex go over HTTP.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from types import SimpleNamespace
from typing import TYPE_CHECKING

from corpus.extractors.dripper.labelers.base import BlockLabeler, BlockPage, LabelerEngineError, PageLabels, labels_from_response
from corpus.extractors.dripper.labelers.speculative import PROPOSER, DraftingEngine, draft_payload
from corpus.shims import backend_engine, set_backend_engine, set_backend_tokenizer

if TYPE_CHECKING:
    from corpus.extractors.dripper.labelers.config import EndpointLabelerConfig, VllmLabelerConfig


class MineruBackendLabeler(BlockLabeler):
    """Labels pages with any mineru-html InferenceBackend configured for the compact format. With a
    `draft` (corpus.extractors.dripper.labelers.draft) and an engine that verifies drafts, each
    page's request carries the draft's labels; the answer is greedy decoding's either way."""

    def __init__(self, backend, prompt_version: str, draft=None):
        self.backend = backend
        self.prompt_version = prompt_version
        self.draft = draft

    def _draft(self, page: BlockPage) -> dict[int, str] | None:
        """The draft's labels; a page it cannot draft is decoded without one (same labels, no speed-up)."""
        if self.draft is None:
            return None
        try:
            return self.draft.labels(page)
        except Exception:
            return None

    def count_tokens(self, text: str) -> int:
        return len(self.backend.get_tokenizer().encode(text, add_special_tokens=False))

    def label(self, pages: Sequence[BlockPage], drafts: Sequence[dict[int, str] | None] | None = None) -> list[PageLabels]:
        """`drafts` (one label dict per page, or None) overrides the configured draft: the GPU bench
        drafts at a chosen agreement."""
        from mineru_html.base import MinerUHTMLGenerateInput
        from mineru_html.exceptions import MinerUHTMLInputTooLongError
        from mineru_html.process.build_prompt import get_full_prompt

        inputs = {
            str(i): MinerUHTMLGenerateInput(full_prompt=get_full_prompt(p.simplified_html, self.prompt_version))
            for i, p in enumerate(pages)
        }
        engine = backend_engine(self.backend)
        if isinstance(engine, DraftingEngine):
            if drafts is None:
                drafts = [self._draft(p) for p in pages]
            engine.pending = [(p.simplified_html, draft_payload(p.item_ids, d) if d is not None else None)
                              for p, d in zip(pages, drafts, strict=True)]
        try:
            outputs, errors = self.backend.process(inputs)
        except Exception as e:
            # the engine (or the server) is gone: the task fails and its re-run redoes it, rather
            # than every later page of the task going to the fallback as if the model had refused it
            raise LabelerEngineError(f"the labeler engine failed on a batch of {len(pages)} pages: {e!r}. "
                                     "This task fails (no page went to the fallback); a re-run redoes it.") from e
        results = []
        for i, page in enumerate(pages):
            key = str(i)
            if key in errors:
                too_long = isinstance(errors[key], MinerUHTMLInputTooLongError)
                results.append(PageLabels(error="too_long" if too_long else "labeler_error"))
            elif key in outputs:
                results.append(labels_from_response(outputs[key].response, page.item_ids))
            else:
                results.append(PageLabels(error="labeler_error"))
        if isinstance(engine, DraftingEngine):
            results = [replace(r, answer_passes=passes, draft=d if d is not None and r.ok else None)
                       for r, passes, d in zip(results, engine.passes, drafts, strict=True)]
        return results


class CompletionsClient:
    """Stands in for `vllm.LLM` inside mineru-html's vLLM backend: `generate(prompts,
    sampling_params)` sent to an OpenAI-compatible `/v1/completions` server, concurrently."""

    def __init__(self, config: EndpointLabelerConfig):
        self.config = config
        self.api_key = config.api_key()  # read once, where the labeler runs; a SecretStr in any repr

    def _one(self, prompt: str, params) -> SimpleNamespace:
        import httpx

        body = {
            "model": self.config.model,
            "prompt": prompt,
            "max_tokens": params.max_tokens,
            "temperature": params.temperature,
            "top_p": params.top_p,
            "top_k": params.top_k,
        }
        if params.structured_outputs is not None and params.structured_outputs.regex:
            body["structured_outputs"] = {"regex": params.structured_outputs.regex}
        headers = {"Authorization": f"Bearer {self.api_key.get_secret_value()}"}
        last_error: Exception | None = None
        for _ in range(self.config.retries + 1):
            try:
                r = httpx.post(f"{self.config.url.rstrip('/')}/completions", json=body, headers=headers,
                               timeout=self.config.timeout_s)
                r.raise_for_status()
                text = r.json()["choices"][0]["text"]
                return SimpleNamespace(prompt=prompt, prompt_token_ids=None,
                                       outputs=[SimpleNamespace(text=text, token_ids=None)])
            except (httpx.HTTPError, KeyError, IndexError, ValueError) as e:
                last_error = e
        raise RuntimeError(f"endpoint {self.config.url} failed after {self.config.retries + 1} tries: {last_error!r}")

    def generate(self, prompts: list[str], sampling_params, **_) -> list[SimpleNamespace]:
        if not isinstance(sampling_params, list):
            sampling_params = [sampling_params] * len(prompts)
        with ThreadPoolExecutor(self.config.concurrency) as pool:
            return list(pool.map(self._one, prompts, sampling_params))


def build_llm_labeler(config: VllmLabelerConfig | EndpointLabelerConfig) -> MineruBackendLabeler:
    from mineru_html.inference.factory import create_vllm_backend

    gen_kwargs = {"max_tokens": config.max_output_tokens}
    draft = None
    if config.kind == "vllm":
        init_kwargs = {"gpu_memory_utilization": config.gpu_memory_utilization, "dtype": config.dtype,
                       "revision": config.revision, "tokenizer_revision": config.revision, **config.engine_kwargs}
        if config.drafted:
            from corpus.extractors.dripper.labelers.draft import BlockDraft

            draft = BlockDraft(config.draft_model)
            init_kwargs["speculative_config"] = {"method": "custom_class", "model": PROPOSER,
                                                 "num_speculative_tokens": config.draft_tokens}
        if "speculative_config" in init_kwargs:  # the accepted draft tokens of each request (DraftingEngine.passes)
            init_kwargs.setdefault("per_request_spec_decode_metrics", "summary")
        backend = create_vllm_backend(config.model, "compact", config.max_context_tokens, init_kwargs, gen_kwargs)
        backend.setup_llm()  # the engine is built with the full context ...
        set_backend_engine(backend, DraftingEngine(backend_engine(backend)))
        from transformers import AutoTokenizer

        # the prompts' chat template and the length check: the tokenizer of the commit the engine loads
        set_backend_tokenizer(backend, AutoTokenizer.from_pretrained(config.model, revision=config.revision))
    else:
        # the backend's model path only serves its tokenizer (chat template, length check) here
        backend = create_vllm_backend(config.tokenizer or config.model, "compact", config.max_context_tokens, {}, gen_kwargs)
        set_backend_engine(backend, CompletionsClient(config))
    backend.max_context_window = config.max_context_tokens - config.answer_margin_tokens  # ... the check leaves room
    return MineruBackendLabeler(backend, config.prompt_version, draft)
