"""`krefine repl`: paste a PyTorch module, watch KernelLLM's Triton answer stream.

Like kernelllm.py's REPL, but the prompt is built from what you pasted (kernelllm.py's
REPL formats its default module whatever you paste) and a module ends at a line `END`,
so one session takes many modules. The model is agent.toml's [model] (or --model /
--config, where the CLI passes them). A model that cannot load is one line and exit 2
(BackendUnavailable is a BadInput; agent/cli.py prints it).
"""
from __future__ import annotations

import sys
from typing import IO

from agent.config import load_config
from agent.kernelllm import KernelLLM
from agent.llm import NO_MODEL
from agent.prompting import render_initial
from tools.errors import BadInput

INSTRUCTIONS = """
Paste an nn.Module file (a Model class, get_inputs() and get_init_inputs()) and end it
with a line END (or Ctrl+D). KernelLLM will answer with Triton kernels. Type exit to quit.
>>>"""


def main(args) -> int:
    config = load_config(getattr(args, "config", None))
    spec = getattr(args, "model", None) or config.model.id
    if spec == NO_MODEL:
        raise BadInput("--model none", "krefine repl needs a model to write kernels")
    llm = KernelLLM(spec, config=config)
    return run_repl(llm)


def run_repl(llm: KernelLLM, stdin: IO[str] | None = None, stdout: IO[str] | None = None) -> int:
    stdin = stdin if stdin is not None else sys.stdin
    stdout = stdout if stdout is not None else sys.stdout
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
