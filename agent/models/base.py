"""What every LLM backend shares: `Completion`, the `Backend` protocol, the errors a
backend raises (BackendUnavailable, ServerUnreachable, ReplayExhausted), "none"
(`NoModelBackend`) and `estimate_tokens`.

Apart from agent/models/llm.py (which picks a backend and imports them all) so that each
backend's own module (agent/models/transformers_backend.py, openai_backend.py, replay.py) needs
only this one, never another backend's.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from agent.config import DEFAULT_MODEL_ID, SamplingConfig
from tools.errors import BadInput

_HOW_TO = ("point --model at a local checkpoint directory, a .gguf file, an OpenAI-compatible server "
           f"(openai:http://HOST:PORT, e.g. from `vllm serve {DEFAULT_MODEL_ID}` or `transformers serve`) or "
           "recorded completions (replay:FILE), or run without a model: --model none --seed-kernel inductor")


@dataclass(frozen=True)
class Completion:
    text: str                      # the model's answer only, never the prompt
    prompt_tokens: int             # the prompt's length; the same for every completion of one call
    completion_tokens: int
    model: str
    finish_reason: str | None = None   # "stop" | "length" | None (unknown)


class Backend(Protocol):
    name: str

    def load(self) -> None: ...    # fail fast (BackendUnavailable) before a run starts; generate loads anyway

    def generate(self, prompt: str, n: int, sampling: SamplingConfig) -> list[Completion]: ...

    def count_tokens(self, text: str) -> int: ...


class ReplayExhausted(Exception):
    """The replay file has no completion left: the run stops with "replay_exhausted"."""


class BackendUnavailable(BadInput):
    """This backend cannot serve: no GPU, weights unreachable, server down. str() is
    one line: what failed, and how to point krefine at a model that works. A BadInput,
    so the CLI prints it as one line and exits 2."""

    def __init__(self, spec: str, why: str):
        super().__init__(spec, f"{why}; {_HOW_TO}")
        self.why = why               # without the advice: what krefine run says before going on without a model


class ServerUnreachable(BackendUnavailable):
    """The model server refused the connection or has no address: `server` (its base URL)
    is not worth asking again soon (krefine bench stops asking it)."""

    def __init__(self, spec: str, why: str, server: str):
        super().__init__(spec, why)
        self.server = server


NO_MODEL = "none"   # --model none / [model] id = "none": no model, the run is the seed and the sweep


class NoModelBackend:
    """--model none: nothing to load and nothing to sample. The loop checks `name` and
    never calls generate; a call is our own bug."""
    name = NO_MODEL

    def load(self) -> None:
        """Nothing to load."""

    def generate(self, prompt: str, n: int, sampling: SamplingConfig) -> list[Completion]:
        raise RuntimeError("--model none: the loop asked for completions")

    def count_tokens(self, text: str) -> int:
        return estimate_tokens(text)


def estimate_tokens(text: str) -> int:
    """Token count where no tokenizer is at hand: about four characters a token."""
    return len(text) // 4
