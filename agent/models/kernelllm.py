"""A drop-in for kernelllm.py's `KernelLLM` class (huggingface.co/facebook/KernelLLM).

Same methods and defaults: `KernelLLM(model_name, device)`, `generate_triton(code,
temperature=0.6, max_new_tokens=2048)`, `generate_raw(prompt, ...)`, `stream_raw(prompt,
...)`, `run_repl()`; `.model`, `.tokenizer`, `.device` as there. Built on agent/models/llm.py's
backends, so it also fixes kernelllm.py's answer cut (by token ids, not by prompt
characters), adds no second BOS, and takes "openai:URL" or "replay:FILE" as well as an
HF id or a path. Like kernelllm.py, the constructor loads the model.

Example:
    from agent.models.kernelllm import KernelLLM
    llm = KernelLLM()                      # or KernelLLM("openai:http://localhost:8000")
    print(llm.generate_triton(open("examples/softmax.py").read(), max_new_tokens=1024))
"""
from __future__ import annotations

import dataclasses
import sys
from typing import IO, Iterator

from agent.config import AgentConfig, SamplingConfig, load_config
from agent.models.llm import Backend, ReplayExhausted, TransformersBackend, make_backend
from agent.loop.prompting import render_initial
from tools.errors import BadInput


class KernelLLM:
    def __init__(self, model_name: str | None = None, device: str | None = None,
                 config: AgentConfig | None = None, backend: Backend | None = None):
        """`device`: None picks cuda if present (transformers only). `config`: agent.toml's
        by default (sampling top_p/top_k/seed, model loading). `backend`: use this one as is."""
        self.config = config or load_config()
        self.model_name = model_name = model_name or self.config.model.id   # [model] id: facebook/KernelLLM
        if backend is not None:
            self.backend = backend
        elif model_name.startswith(("openai:", "replay:")):
            self.backend = make_backend(model_name, self.config)
        else:
            self.backend = TransformersBackend(model_name, self.config.model, device=device)
        load = getattr(self.backend, "load", None)
        if load is not None:
            load()

    # kernelllm.py's attributes, where the backend has them
    @property
    def model(self):
        return getattr(self.backend, "model", None)

    @property
    def tokenizer(self):
        return getattr(self.backend, "tokenizer", None)

    @property
    def device(self) -> str | None:
        return getattr(self.backend, "device", None)

    def generate_raw(self, prompt: str, temperature: float = 0.6, max_new_tokens: int = 2048) -> str:
        """The model's answer to `prompt` verbatim (no template), stripped."""
        completion = self.backend.generate(prompt, 1, self._sampling(temperature, max_new_tokens))[0]
        return completion.text.strip()

    def stream_raw(self, prompt: str, max_new_tokens: int = 2048, temperature: float = 0.6,
                   file: IO[str] | None = None) -> str:
        """Print the answer to `prompt` as it is generated; also return it whole."""
        out = file if file is not None else sys.stdout
        pieces = []
        for piece in self._stream(prompt, self._sampling(temperature, max_new_tokens)):
            print(piece, end="", file=out, flush=True)
            pieces.append(piece)
        print(file=out, flush=True)
        return "".join(pieces)

    def generate_triton(self, code: str, temperature: float = 0.6, max_new_tokens: int = 2048) -> str:
        """Triton for the torch module in `code` (a Model class with get_inputs() and
        get_init_inputs()), prompted with KernelLLM's trained template. Returns the raw
        answer, as kernelllm.py does; agent.loop.extract.extract_code takes the module out."""
        return self.generate_raw(render_initial(code), temperature, max_new_tokens)

    def run_repl(self) -> int:
        return run_repl(self)

    def _sampling(self, temperature: float, max_new_tokens: int) -> SamplingConfig:
        return dataclasses.replace(self.config.sampling, temperature=temperature, max_new_tokens=max_new_tokens)

    def _stream(self, prompt: str, sampling: SamplingConfig) -> Iterator[str]:
        stream = getattr(self.backend, "stream", None)
        if stream is not None:
            return stream(prompt, sampling)
        return iter([self.backend.generate(prompt, 1, sampling)[0].text])   # replay: all at once


INSTRUCTIONS = """
Paste an nn.Module file (a Model class, get_inputs() and get_init_inputs()) and end it
with a line END (or Ctrl+D). KernelLLM will answer with Triton kernels. Type exit to quit.
>>>"""


def run_repl(llm: KernelLLM, stdin: IO[str] | None = None, stdout: IO[str] | None = None) -> int:
    stdin = stdin if stdin is not None else sys.stdin
    stdout = stdout if stdout is not None else sys.stdout
    if stdin is None:   # started with stdin closed (<&-): nothing can be pasted
        raise BadInput("stdin", "krefine repl reads a module from standard input, and it is closed")
    while True:
        print(INSTRUCTIONS, file=stdout, flush=True)
        module, at_eof = read_module(stdin)
        if module.strip().lower() in ("exit", "quit"):
            return 0
        if module.strip():
            try:
                llm.stream_raw(render_initial(module), max_new_tokens=llm.config.sampling.max_new_tokens,
                               temperature=llm.config.sampling.temperature, file=stdout)
            except KeyboardInterrupt:
                print("\n[aborted]", file=stdout, flush=True)
            except ReplayExhausted as e:   # recorded completions, all used: the session ends there
                print(f"\n[{e}]", file=stdout, flush=True)
                return 0
        if at_eof:
            return 0


def read_module(stdin: IO[str]) -> tuple[str, bool]:
    """Lines up to a line `END` (not included); also whether input ended."""
    lines = []
    while True:
        line = stdin.readline()
        if not line:
            return "".join(lines), True
        if line.strip() == "END":
            return "".join(lines), False
        lines.append(line)
