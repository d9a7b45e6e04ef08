"""The openai:URL backend: an OpenAI-compatible server (`vllm serve facebook/KernelLLM`)
through POST /v1/completions with `n` (`OpenAIBackend`), stdlib HTTP, with retries on
429/5xx and connection errors; and `server_url`, the base URL a spec names.

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

from agent.config import ModelConfig, SamplingConfig, server_base
from agent.models.base import BackendUnavailable, Completion, ServerUnreachable, estimate_tokens

_RETRY_HTTP = (429, 500, 502, 503, 504)


def server_url(spec: str) -> str | None:
    """The base URL of the OpenAI-compatible server make_backend would serve `spec`
    from (without a trailing /v1), or None for a replay file, a transformers model or "none"."""
    return server_base(spec[len("openai:"):]) if spec.startswith("openai:") else None


class OpenAIBackend:
    """POST {base}/v1/completions on a server such as `vllm serve facebook/KernelLLM`."""

    def __init__(self, base_url: str, model: str, config: ModelConfig, api_key: str | None = None):
        self.base = server_base(base_url)
        self.model, self.config, self.name = model, config, f"openai:{self.base}"
        self._api_key = api_key
        self._tokenize_works: bool | None = None   # vLLM's /tokenize: exact counts when present

    def load(self) -> None:
        """Fail fast when the server cannot be reached or refuses the key (a server
        without /v1/models is fine: generate will tell)."""
        try:
            self._request("GET", "/v1/models", None, retries=0)
        except BackendUnavailable as e:
            if getattr(e, "http_status", None) not in (None, 401, 403):
                return
            raise

    def generate(self, prompt: str, n: int, sampling: SamplingConfig) -> list[Completion]:
        doc = self._request("POST", "/v1/completions", self._body(prompt, n, sampling))
        try:
            choices = sorted(doc["choices"], key=lambda c: c.get("index", 0))
            texts = [str(c["text"]) for c in choices]
        except (KeyError, TypeError, AttributeError):
            raise BackendUnavailable(self.name, f"unexpected /v1/completions answer: {str(doc)[:200]}") from None
        usage = doc.get("usage") or {}
        prompt_tokens = usage.get("prompt_tokens")
        if not isinstance(prompt_tokens, int):
            prompt_tokens = estimate_tokens(prompt)
        counts = _split_total(usage.get("completion_tokens"), texts)
        return [Completion(text=t, prompt_tokens=prompt_tokens, completion_tokens=k,
                           model=str(doc.get("model") or self.model), finish_reason=c.get("finish_reason"))
                for t, k, c in zip(texts, counts, choices)]

    def stream(self, prompt: str, sampling: SamplingConfig) -> Iterator[str]:
        """One completion as server-sent events."""
        response = self._request("POST", "/v1/completions", {**self._body(prompt, 1, sampling), "stream": True},
                                 stream=True)
        with response:
            for raw in response:
                line = raw.decode("utf-8", "replace").strip()
                if not line.startswith("data:"):
                    continue
                data = line[len("data:"):].strip()
                if data == "[DONE]":
                    return
                choices = json.loads(data).get("choices") or [{}]
                yield str(choices[0].get("text") or "")

    def count_tokens(self, text: str) -> int:
        if self._tokenize_works is not False:
            try:
                body = {"model": self.model, "prompt": text}
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

    def _body(self, prompt: str, n: int, sampling: SamplingConfig) -> dict:
        body = {"model": self.model, "prompt": prompt, "n": n, "temperature": sampling.temperature,
                "top_p": sampling.top_p, "max_tokens": sampling.max_new_tokens}
        if sampling.seed is not None:
            body["seed"] = sampling.seed
        if sampling.top_k > 0:
            body["top_k"] = sampling.top_k                  # vLLM extension
        if self.config.openai_suppress_bos:
            body["add_special_tokens"] = False              # vLLM extension: no second BOS
        return body

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
                    error.http_status = e.code
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
