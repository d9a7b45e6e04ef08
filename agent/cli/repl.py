"""`krefine repl`: paste a PyTorch module, watch KernelLLM's Triton answer stream.

Like kernelllm.py's REPL, but the prompt is built from what you pasted (kernelllm.py's
REPL formats its default module whatever you paste) and a module ends at a line `END`,
so one session takes many modules. The model is agent.toml's [model] (or --model /
--config, where the CLI passes them). A model that cannot load is one line and exit 2
(BackendUnavailable is a BadInput; agent/cli/__init__.py prints it). The loop itself is
agent/models/kernelllm.py's `run_repl`, which `KernelLLM.run_repl()` runs too.
"""
from __future__ import annotations

from agent.config import load_config
from agent.models.kernelllm import INSTRUCTIONS, KernelLLM, read_module, run_repl  # noqa: F401 (the REPL's parts live there)
from agent.models.llm import NO_MODEL
from tools.errors import BadInput


def main(args) -> int:
    config = load_config(getattr(args, "config", None))
    spec = getattr(args, "model", None) or config.model.id
    if spec == NO_MODEL:
        raise BadInput("--model none", "krefine repl needs a model to write kernels")
    llm = KernelLLM(spec, config=config)
    return run_repl(llm)
