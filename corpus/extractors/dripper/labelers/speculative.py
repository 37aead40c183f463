"""Exact speculative labelling: vLLM verifies a drafted answer and decodes only where it disagrees.

The Dripper model's answer is nearly fixed in advance: the regex fixes every block id
(`<answer>1main2other…</answer>`), and only the label after each id is the model's to choose. A
draft labels every block (corpus.extractors.dripper.labelers.draft); this module turns it into
draft tokens that vLLM's own speculative decoding verifies, in the same engine, under the same
regex and greedy sampling:

- `DraftingEngine` stands in front of `vllm.LLM` inside mineru-html's backend, so the prompt, the
  chat template, the length check and the regex stay mineru-html's; it only attaches each page's
  draft to that page's request (`SamplingParams.extra_args`) and reads back how many verify steps
  the request took (vLLM's per-request speculative-decoding metrics).
- `DraftProposer` is vLLM 0.32's custom proposer (`speculative_config: {method: custom_class}`):
  at every step, for every request with a draft, it proposes the next `num_speculative_tokens`
  tokens of the answer that keeps what the model has written so far (the label it is in the
  middle of included) and takes the draft's label for every later block.

Why exact: vLLM's rejection sampler accepts a draft token under greedy sampling only when it is
the argmax of the target model's logits after the regex's mask, and emits the model's own token at
the first disagreement, so the output is plain greedy decoding's whatever the draft says (the
draft only decides how many tokens one step verifies). The one caveat is vLLM's: the verify step
computes a position's logits in a batch of several query tokens, plain decoding in a batch of
one; on a GPU in bf16 two labels whose logits tie to the last bit can resolve differently
(`VLLM_BATCH_INVARIANT=1` removes that). Tested label for label against plain decoding
(tests/test_speculative.py) and measured on a GPU by bench.labeler_gpu.

Why a custom proposer and not a verify loop of our own over the prefix cache: a loop would send
one request per disagreement (a page with ten disagreements re-enters the scheduler ten times,
each time re-checking its prefix) and would have to rebuild the regex's token masks itself to
know the constrained argmax; inside the engine, verification, the regex mask, the KV cache and
the correction token all come from vLLM's one code path, in one step per disagreement.
"""

from __future__ import annotations

from collections.abc import Sequence

from corpus.extractors.dripper.labelers.base import MAIN, OTHER

DRAFT_KEY = "xsuite_draft"  # the request's extra_args key: {"ids": [...], "labels": "mo…"} (m: main, o: other)
OPEN, CLOSE = "<answer>", "</answer>"
PROPOSER = "corpus.extractors.dripper.labelers.speculative.DraftProposer"


def answer_pieces(item_ids: Sequence[int], labels: dict[int, str]) -> list[str]:
    """The drafted answer after `<answer>`: one piece a block (`12main`), then `</answer>`."""
    return [f"{i}{labels[i]}" for i in item_ids] + [CLOSE]


def rest_of_answer_parts(generated: str, item_ids: Sequence[int], labels: dict[int, str]) -> tuple[str, int] | None:
    """What follows `generated` (the answer so far) to the end of the answer, as (`head`, `k`): the
    rest is `head` (the rest of the block, or of the tag, the model is writing; its label is the
    model's once begun, else the draft's) and then `answer_pieces(...)[k:]` (the draft's label for
    every later block, and `</answer>`). None when `generated` is not the start of an answer over
    `item_ids` (the regex would not allow it; nothing is proposed)."""
    if not generated.startswith(OPEN):
        return (OPEN[len(generated):], 0) if OPEN.startswith(generated) else None
    rest = generated[len(OPEN):]
    pos = len(rest) - len(rest.lstrip())  # the regex allows whitespace after <answer>
    for k, item_id in enumerate(item_ids):
        remaining, digits = rest[pos:], str(item_id)
        if not remaining:
            return "", k
        if len(remaining) < len(digits):
            return (digits[len(remaining):] + labels[item_id], k + 1) if digits.startswith(remaining) else None
        if not remaining.startswith(digits):
            return None
        pos += len(digits)
        remaining = rest[pos:]
        if not remaining:  # the id written, its label not begun: the draft's
            return labels[item_id], k + 1
        for label in (MAIN, OTHER):
            if remaining.startswith(label):
                pos += len(label)
                break
            if label.startswith(remaining):  # in the middle of a label: the model's, finished
                return label[len(remaining):], k + 1
        else:
            return None
    tail = rest[pos:].lstrip()
    return (CLOSE[len(tail):], len(item_ids) + 1) if CLOSE.startswith(tail) else None


def rest_of_answer(generated: str, item_ids: Sequence[int], labels: dict[int, str]) -> str | None:
    """The rest of the answer after `generated` as one string (rest_of_answer_parts)."""
    parts = rest_of_answer_parts(generated, item_ids, labels)
    return None if parts is None else parts[0] + "".join(answer_pieces(item_ids, labels)[parts[1]:])


def draft_payload(item_ids: Sequence[int], labels: dict[int, str]) -> dict:
    return {"ids": list(item_ids), "labels": "".join("m" if labels[i] == MAIN else "o" for i in item_ids)}


def labels_of_payload(payload: dict) -> tuple[list[int], dict[int, str]]:
    ids = [int(i) for i in payload["ids"]]
    return ids, {i: MAIN if c == "m" else OTHER for i, c in zip(ids, payload["labels"], strict=True)}


class DraftProposer:
    """vLLM's custom proposer (it runs in the engine's worker process, between the GPU's steps, so
    its CPU time is the GPU's idle time). Per request: the token ids of the answer the draft and the
    model's own tokens so far make, kept while the model writes them (each step compares only the
    tokens added since the last), rebuilt at a disagreement from the text the model has written,
    the few tokens of the block it is in, and each later block's tokens (cached by piece)."""

    def __init__(self, vllm_config):
        from transformers import AutoTokenizer

        from corpus.shims import model_runner_building_proposer

        self.runner = model_runner_building_proposer()
        model = vllm_config.model_config
        self.tokenizer = AutoTokenizer.from_pretrained(model.tokenizer, revision=model.tokenizer_revision,
                                                       trust_remote_code=model.trust_remote_code)
        self.k = vllm_config.speculative_config.num_speculative_tokens
        self.targets: dict[str, list] = {}  # request id -> [the answer's tokens it is proposed, tokens checked]
        self.piece_tokens: dict[str, list[int]] = {}
        # the answer's canonical tokens are its pieces' tokens where the tokenizer never merges
        # across a piece (digits after a label, as byte-level BPEs split them); else encoded whole
        sample = answer_pieces(range(1, 300), {i: MAIN if i % 3 else OTHER for i in range(1, 300)})
        self.piecewise = self._encode("".join(sample)) == [t for p in sample for t in self._encode(p)]
        self.eos = [self.tokenizer.eos_token_id] if self.tokenizer.eos_token_id is not None else []

    def load_model(self, *args, **kwargs) -> None:  # no model: the draft came with the request
        pass

    def _encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=False)

    def propose(self, sampled_token_ids, num_tokens_no_spec, token_ids_cpu, slot_mappings=None) -> list[list[int]]:
        from corpus.shims import proposer_request

        proposals = []
        for row, sampled in enumerate(sampled_token_ids):
            request = proposer_request(self.runner, row) if sampled else None
            payload = (request.extra_args or {}).get(DRAFT_KEY) if request else None
            if payload is None:  # a prefill still in chunks, or a request without a draft
                proposals.append([])
                continue
            start, written = request.num_prompt_tokens, num_tokens_no_spec[row] - request.num_prompt_tokens
            entry = self.targets.get(request.req_id)
            if entry is None or token_ids_cpu[row, start + entry[1]:start + written].tolist() != entry[0][entry[1]:written]:
                entry = [self._target(token_ids_cpu[row, start:start + written].tolist(), payload), 0]
                self.targets[request.req_id] = entry
            entry[1] = written
            proposals.append(entry[0][written:written + self.k])
        if len(self.targets) > 2 * len(sampled_token_ids) + 64:  # finished requests
            from corpus.shims import live_request_ids

            live = live_request_ids(self.runner)
            self.targets = {r: t for r, t in self.targets.items() if r in live}
        return proposals

    def _target(self, generated: list[int], payload: dict) -> list[int]:
        """The whole answer's tokens: the model's own so far, then the rest (rest_of_answer_parts)."""
        ids, labels = labels_of_payload(payload)
        parts = rest_of_answer_parts(self.tokenizer.decode(generated), ids, labels)
        if parts is None:
            return generated
        head, k = parts
        pieces = answer_pieces(ids, labels)[k:]
        if not self.piecewise:
            return generated + self._encode(head + "".join(pieces)) + self.eos
        rest = self._encode(head) if head else []
        for piece in pieces:
            if piece not in self.piece_tokens:
                self.piece_tokens[piece] = self._encode(piece)
            rest += self.piece_tokens[piece]
        return generated + rest + self.eos


class DraftingEngine:
    """`vllm.LLM` as mineru-html's backend calls it (`generate(prompts, sampling_params)`), with each
    page's draft attached to its request. `pending` is set before each batch: (simplified page,
    draft payload) in page order; mineru-html sends the pages that fit the context in that order,
    each prompt holding its page verbatim. After the batch, `passes[i]` is the number of forward
    passes that wrote page i's answer (`answer_passes`: plain decoding takes one a token), None for
    a page not sent."""

    def __init__(self, llm):
        self.llm = llm
        self.pending: list[tuple[str, dict | None]] = []
        self.passes: list[int | None] = []

    def __getattr__(self, name):  # everything else is the engine's (llm_engine, get_tokenizer, ...)
        return getattr(self.llm, name)

    def generate(self, prompts, sampling_params, **kwargs):
        params = sampling_params if isinstance(sampling_params, list) else [sampling_params] * len(prompts)
        sent, j = [], 0
        for prompt, sp in zip(prompts, params, strict=True):
            while j < len(self.pending) and self.pending[j][0] not in prompt:
                j += 1
            if j == len(self.pending):
                raise RuntimeError("a prompt matches no page of the batch: the draft cannot be attached")
            payload = self.pending[j][1]
            if payload is not None:
                sp.extra_args = {**(sp.extra_args or {}), DRAFT_KEY: payload}
            sent.append(j)
            j += 1
        outputs = self.llm.generate(prompts, params, **kwargs)
        self.passes = [None] * len(self.pending)
        for index, output in zip(sent, outputs, strict=True):
            self.passes[index] = answer_passes(len(output.outputs[0].token_ids), output.outputs[0].spec_decode_metrics)
        return outputs


def answer_passes(tokens: int, metrics) -> int:
    """Forward passes that wrote an answer of `tokens` tokens: the prefill's (its first token), one
    per verify step (vLLM's per-request histogram of steps by accepted draft tokens: a step that
    accepts j writes j + 1), and one per token written without a draft. The last step's tokens can
    run past the answer (an end token, max_tokens), hence the floor at 0."""
    if metrics is None:
        return tokens
    steps = sum(metrics.histogram)
    by_steps = sum((j + 1) * n for j, n in enumerate(metrics.histogram))
    return 1 + steps + max(0, tokens - 1 - by_steps)
