"""The openai:URL backend: an OpenAI-compatible server (`vllm serve facebook/KernelLLM`,
`transformers serve MODEL`, a hosted API) through POST /v1/completions or
/v1/chat/completions ([model] api; each endpoint's request and answer shapes are
agent/models/openai_api.py's), stdlib HTTP, with retries on 429/5xx and connection
errors; and `server_url`, the base URL a spec names.

What a backend learns about its server once and keeps for the rest of the run, with a
one-line note: under api = "auto", a server without /v1/completions gets the prompt as a
chat turn; a server that refuses vLLM's extra fields by name gets requests without them.
A server that gives fewer than n choices (ignoring `n`) is asked again for the rest. An
empty [model] served_model_name is the one model the server lists at /v1/models.

Apart from agent/models/llm.py so that the HTTP client and its retry policy read on their own;
imports nothing of the other backends.
"""
from __future__ import annotations

import errno
import http.client
import json
import socket
import time
import urllib.error
import urllib.request
from typing import Iterator

from agent.config import ModelConfig, SamplingConfig, note, server_base
from agent.models.base import BackendUnavailable, Completion, ServerUnreachable, estimate_tokens
from agent.models.openai_api import (EXTENSIONS, PATHS, Api, choices_of, endpoint_missing, piece_of,
                                     refuses_extensions, request_body)

_RETRY_HTTP = (429, 500, 502, 503, 504)


def server_url(spec: str) -> str | None:
    """The base URL of the OpenAI-compatible server make_backend would serve `spec`
    from (without a trailing /v1), or None for a replay file, a transformers model or "none"."""
    return server_base(spec[len("openai:"):]) if spec.startswith("openai:") else None


class OpenAIBackend:
    """POST {base}/v1/completions or {base}/v1/chat/completions on a server such as
    `vllm serve facebook/KernelLLM`; `model` is the name sent when [model]
    served_model_name is empty and the server does not list exactly one model."""

    def __init__(self, base_url: str, model: str, config: ModelConfig, api_key: str | None = None):
        self.base = server_base(base_url)
        self.model, self.config, self.name = model, config, f"openai:{self.base}"
        self._api_key = api_key
        self._api: Api = "chat" if config.api == "chat" else "completions"   # "auto" starts with completions
        self._extensions = True               # vLLM's fields (openai_api.EXTENSIONS) until refused by name
        self._listed = bool(config.served_model_name)   # the model's name is settled (given, or asked)
        self._tokenize_works: bool | None = None   # vLLM's /tokenize: exact counts when present

    def load(self) -> None:
        """Fail fast when the server cannot be reached or refuses the key (a server
        without /v1/models is fine: generate will tell)."""
        self._list_models(strict=True)

    def generate(self, prompt: str, n: int, sampling: SamplingConfig) -> list[Completion]:
        completions: list[Completion] = []
        while len(completions) < n:    # a server that ignores `n` answers one choice a request
            api, doc = self._post(prompt, n - len(completions), sampling)
            try:
                choices = choices_of(api, doc)
            except ValueError as e:
                raise BackendUnavailable(self.name, str(e)) from None
            if not choices:
                raise BackendUnavailable(self.name, f"{PATHS[api]} answered no choices: {str(doc)[:200]}")
            usage = doc.get("usage") or {}
            prompt_tokens = usage.get("prompt_tokens")
            if not isinstance(prompt_tokens, int):
                prompt_tokens = estimate_tokens(prompt)
            texts = [text for text, _ in choices]
            counts = _split_total(usage.get("completion_tokens"), texts)
            completions += [Completion(text=text, prompt_tokens=prompt_tokens, completion_tokens=k,
                                       model=str(doc.get("model") or self.model), finish_reason=finish)
                            for (text, finish), k in zip(choices, counts)]
        return completions[:n]

    def stream(self, prompt: str, sampling: SamplingConfig) -> Iterator[str]:
        """One completion as server-sent events."""
        api, response = self._post(prompt, 1, sampling, stream=True)
        with response:
            try:
                for raw in response:
                    line = raw.decode("utf-8", "replace").strip()
                    if not line.startswith("data:"):
                        continue
                    data = line[len("data:"):].strip()
                    if data == "[DONE]":
                        return
                    chunk = json.loads(data)
                    if isinstance(chunk, dict) and chunk.get("error"):   # the server failed mid-answer
                        raise BackendUnavailable(self.name, f"{PATHS[api]} stream failed: {str(chunk['error'])[:200]}")
                    yield piece_of(api, chunk)
            except (OSError, http.client.HTTPException, json.JSONDecodeError) as e:
                raise BackendUnavailable(self.name, f"{PATHS[api]} stream broke off: {e}") from None

    def count_tokens(self, text: str) -> int:
        if self._tokenize_works is not False:
            try:
                body = {"model": self._served_model(), "prompt": text}
                if self.config.openai_suppress_bos:
                    body["add_special_tokens"] = False
                count = self._request("POST", "/tokenize", body, retries=0).get("count")
                if isinstance(count, int):
                    self._tokenize_works = True
                    return count
            except BackendUnavailable:
                pass
            self._tokenize_works = False    # not vLLM: estimate from now on
        return estimate_tokens(text)

    def _post(self, prompt: str, n: int, sampling: SamplingConfig, stream: bool = False) -> tuple[Api, object]:
        """POST `prompt` to the endpoint in use: (that endpoint, its JSON answer or, when
        `stream`, the open response). A refusal that says the server lacks the endpoint
        (api = "auto") or vLLM's fields changes what is sent, once each, and is asked again."""
        while True:
            api = self._api
            body = request_body(api, self._served_model(), prompt, n, sampling,
                                suppress_bos=self.config.openai_suppress_bos, extensions=self._extensions)
            if stream:
                body["stream"] = True
            try:
                return api, self._request("POST", PATHS[api], body, stream=stream)
            except BackendUnavailable as e:
                status, detail = getattr(e, "http_status", None), getattr(e, "detail", "")
                if self._extensions and refuses_extensions(status, detail, body):
                    self._extensions = False
                    note(f"{self.base} refuses vLLM's fields ({', '.join(f for f in EXTENSIONS if f in body)}): "
                         "requests go without them from now on")
                elif self.config.api == "auto" and api == "completions" and endpoint_missing(status, detail):
                    self._api = "chat"
                    note(f'{self.base} has no {PATHS["completions"]} (HTTP {status}): [model] api = "auto" sends '
                         f'the prompt as one user turn to {PATHS["chat"]} from now on')
                else:
                    raise

    def _served_model(self) -> str:
        """The "model" field: [model] served_model_name, else the one model the server lists."""
        if not self._listed:
            self._list_models(strict=False)
        return self.model

    def _list_models(self, strict: bool) -> None:
        """GET /v1/models, once: with [model] served_model_name empty, the one model the
        server lists is the one asked for (`transformers serve MODEL` answers for MODEL
        only). `strict`: a server that cannot be reached or refuses the key raises."""
        self._listed = True
        try:
            listed = self._request("GET", "/v1/models", None, retries=0)
        except BackendUnavailable as e:
            if strict and getattr(e, "http_status", None) in (None, 401, 403):
                raise
            return
        data = listed.get("data") if isinstance(listed, dict) else None
        ids = [m.get("id") for m in data if isinstance(m, dict)] if isinstance(data, list) else []
        if not self.config.served_model_name and len(ids) == 1 and isinstance(ids[0], str) and ids[0]:
            self.model = ids[0]

    def _request(self, method: str, path: str, body: dict | None, retries: int | None = None,
                 stream: bool = False):
        url = self.base + path
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        data = json.dumps(body).encode() if body is not None else None
        retries = self.config.max_retries if retries is None else retries
        for attempt in range(retries + 1):
            last = attempt == retries
            try:
                request = urllib.request.Request(url, data=data, headers=headers, method=method)
                response = urllib.request.urlopen(request, timeout=self.config.request_timeout_s)
                if stream:
                    return response
                with response:
                    return json.loads(response.read().decode("utf-8"))
            except urllib.error.HTTPError as e:
                detail = " ".join(e.read().decode("utf-8", "replace").split())[:200]
                if e.code not in _RETRY_HTTP or last:
                    error = BackendUnavailable(self.name, f"{method} {path} answered HTTP {e.code}: {detail}")
                    error.http_status, error.detail = e.code, detail
                    raise error from None
            except (urllib.error.URLError, OSError, http.client.HTTPException) as e:
                if last:
                    reason = getattr(e, "reason", None) or e
                    if _refused(reason):
                        raise ServerUnreachable(self.name, f"cannot reach {url}: {reason}", self.base) from None
                    raise BackendUnavailable(self.name, f"cannot reach {url}: {reason}") from None
            except json.JSONDecodeError as e:
                raise BackendUnavailable(self.name, f"{method} {path} answered with no JSON: {e}") from None
            time.sleep(self.config.retry_backoff_s * 2 ** attempt)
        raise AssertionError("unreachable")


def _refused(reason: object) -> bool:
    """A connection nobody accepted (refused, no route, no such host), not a slow or broken answer."""
    return isinstance(reason, (ConnectionRefusedError, socket.gaierror)) or \
        getattr(reason, "errno", None) in (errno.ECONNREFUSED, errno.EHOSTUNREACH, errno.ENETUNREACH)


def _split_total(total, texts: list[str]) -> list[int]:
    """Per-completion token counts from a total over all n (what usage reports),
    shared in proportion to the texts' lengths; estimated when there is no total."""
    if not isinstance(total, int):
        return [estimate_tokens(t) for t in texts]
    weights = [len(t) for t in texts]
    if not sum(weights):
        return [total // len(texts)] * len(texts) if texts else []
    counts = [total * w // sum(weights) for w in weights]
    counts[weights.index(max(weights))] += total - sum(counts)
    return counts
