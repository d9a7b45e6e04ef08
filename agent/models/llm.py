"""LLM backends behind one interface: `generate(prompt, n, sampling) -> [Completion]`.

Three backends, picked by `make_backend(spec, config)` (and "none": no model at all):
  - transformers (agent/models/transformers_backend.py): KernelLLM (or any causal LM) from a
    Hugging Face id, a local directory or a local .gguf file (from_pretrained(dir,
    gguf_file=name), offline; needs the gguf package); bf16 on GPU, fp32 on CPU; n
    candidates per call; completions cut by token ids; the prompt tokenized without
    special tokens (it already carries <|begin_of_text|>), or, for an instruct model of
    another family ([model] chat_template), sent as one user turn of its chat
    template. Loads lazily, at first use or `load()`.
  - openai:URL (agent/models/openai_backend.py): an OpenAI-compatible server (`vllm serve
    facebook/KernelLLM`, `transformers serve`) through POST /v1/completions or
    /v1/chat/completions ([model] api); stdlib HTTP, retries on 429/5xx/connection errors.
  - replay:FILE (agent/models/replay.py): recorded completions (JSONL, a "completion"
    string per line), or replay:RUN_DIR, a run's own completions in the order they
    were made; handed out in order; ReplayExhausted when used up.
  - none: `NoModelBackend`, for a run that is the Inductor seed and the constant sweep
    only (agent/loop/graph.py never asks it for a completion). It lives in
    agent/models/base.py with the types and errors every backend shares.

A backend that cannot serve at all raises BackendUnavailable with one line saying why
and what to use instead. Does not build prompts (agent/loop/prompting.py) or extract code
(agent/loop/extract.py). This module picks the backend (`make_backend`) and re-exports
what callers import from the backends' modules.
"""
from __future__ import annotations

import os

from agent.config import DEFAULT_MODEL_ID, AgentConfig, url_fault
from agent.models.base import (NO_MODEL, Backend, BackendUnavailable, Completion, NoModelBackend, ReplayExhausted,
                            ServerUnreachable, estimate_tokens)
from agent.models.openai_backend import OpenAIBackend, server_url
from agent.models.replay import ReplayBackend
from agent.models.transformers_backend import TransformersBackend, packaged_gguf
from tools.errors import BadInput

# what callers import from here; each lives in its own module
__all__ = ["Backend", "BackendUnavailable", "Completion", "NO_MODEL", "NoModelBackend", "OpenAIBackend",
           "ReplayBackend", "ReplayExhausted", "ServerUnreachable", "TransformersBackend", "check_spec",
           "estimate_tokens", "make_backend", "packaged_gguf", "server_url"]


def check_spec(spec: str) -> None:
    """A model spec's faults that need no file, server or weights (a server URL with no
    scheme), as BadInput: one line, before any work starts. make_backend checks them too."""
    if spec.startswith("openai:"):
        fault = url_fault(spec[len("openai:"):])
        if fault is not None:
            raise BadInput(spec, fault)
    if spec.startswith("replay:") and not spec[len("replay:"):].strip():
        raise BadInput(spec, "names no file: replay:FILE (recorded completions) or replay:RUN_DIR")


def make_backend(spec: str, config: AgentConfig) -> Backend:
    """The backend for `spec`: "replay:FILE" | "openai:URL" | HF id | local path | "none"."""
    check_spec(spec)
    m = config.model
    if spec == NO_MODEL:
        return NoModelBackend()
    if spec.startswith("replay:"):
        return ReplayBackend(spec[len("replay:"):])
    url = server_url(spec)
    if url is not None:
        # the key comes from the environment, by the name agent.toml gives, never from the file
        key = os.environ.get(m.openai_api_key_env) or None
        return OpenAIBackend(url, m.served_model_name or DEFAULT_MODEL_ID, m, api_key=key)
    return TransformersBackend(spec, m)
