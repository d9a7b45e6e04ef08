"""What the two endpoints of an OpenAI-compatible server take and give back: the raw
KernelLLM prompt for POST /v1/completions, the prompt as one user turn for POST
/v1/chat/completions ([model] api), as `request_body` shapes them; `choices_of` and
`piece_of` read an answer and a stream chunk of either; `endpoint_missing` and
`refuses_extensions` tell which refusals mean "no such endpoint here" and "no vLLM fields
here".

No HTTP and no state: agent/models/openai_backend.py sends, retries, and remembers what
the server refused.
"""
from __future__ import annotations

from typing import Literal

from agent.config import SamplingConfig

Api = Literal["completions", "chat"]
PATHS: dict[str, str] = {"completions": "/v1/completions", "chat": "/v1/chat/completions"}
# fields only vLLM knows; a server that refuses them by name is sent requests without them
EXTENSIONS = ("add_special_tokens", "top_k")
_KERNELLLM_BOS = "<|begin_of_text|>"   # what prompts/ start with


def request_body(api: Api, model: str, prompt: str, n: int, sampling: SamplingConfig, *,
                 suppress_bos: bool, extensions: bool) -> dict:
    """The JSON body of one request for `n` completions of `prompt`."""
    body: dict = {"model": model}
    if api == "chat":
        # less its <|begin_of_text|>: the server's chat template opens the text with its own
        body["messages"] = [{"role": "user", "content": prompt.lstrip().removeprefix(_KERNELLLM_BOS)}]
    else:
        body["prompt"] = prompt
    body.update(n=n, temperature=sampling.temperature, top_p=sampling.top_p, max_tokens=sampling.max_new_tokens)
    if sampling.seed is not None:
        body["seed"] = sampling.seed
    if extensions and sampling.top_k > 0:
        body["top_k"] = sampling.top_k
    if extensions and suppress_bos and api == "completions":
        body["add_special_tokens"] = False      # the prompt starts with <|begin_of_text|>: no second BOS
    return body


def choices_of(api: Api, doc: object) -> list[tuple[str, str | None]]:
    """(text, finish_reason) of each choice of an answer, in index order; ValueError when
    `doc` is not an answer of that endpoint."""
    try:
        choices = sorted(doc["choices"], key=lambda c: c.get("index", 0))
        if api == "chat":   # content is null in an answer that is all tool calls or reasoning
            return [(str(c["message"].get("content") or ""), c.get("finish_reason")) for c in choices]
        return [(str(c["text"]), c.get("finish_reason")) for c in choices]
    except (KeyError, TypeError, AttributeError):
        raise ValueError(f"unexpected {PATHS[api]} answer: {str(doc)[:200]}") from None


def piece_of(api: Api, chunk: dict) -> str:
    """The text one server-sent chunk adds: a choice's `text`, or its `delta.content` on
    chat (absent in the chunk that opens the turn and in the one with only usage)."""
    choice = (chunk.get("choices") or [{}])[0]
    if api == "chat":
        return str((choice.get("delta") or {}).get("content") or "")
    return str(choice.get("text") or "")


def endpoint_missing(status: int | None, detail: str) -> bool:
    """The server answered that it has no such endpoint (a route it lacks, or a hosted API
    saying its model is for chat only), not that the request or the model was wrong."""
    detail = detail.lower()
    if status in (404, 405, 501):
        return "does not exist" not in detail        # vLLM and OpenAI: 404 "The model `x` does not exist"
    return status == 400 and "not supported" in detail and "completions" in detail


def refuses_extensions(status: int | None, detail: str, body: dict) -> bool:
    """The server refused the request for a vLLM field it was sent, naming it
    (transformers serve: 422 "Unexpected fields in the request: {'add_special_tokens'}")."""
    return status in (400, 422) and any(f in body and f in detail for f in EXTENSIONS)
