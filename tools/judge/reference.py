"""The reference, in the judge: the problem's own Model on the trial inputs.

Covers `compute_reference` (Model.forward on the inputs of a seed, no grad, outputs
checked to be tensors), `problem_fault` (the problem's own code failing here: bad input,
exit 2, or out of memory, exit 3) and `default_device`. The Model is built once per
session with KernelBench's seeds and init order (tools/judge/service.py's Judge); no
candidate code runs here.
"""
from __future__ import annotations

from tools.errors import BadInput, EvaluatorError
from tools.problem import make_inputs


def default_device() -> str:
    import torch
    return "cuda" if torch.cuda.is_available() else "cpu"


def compute_reference(ref_model, mod, seed: int, dev: str, sizes: dict | None = None) -> list:
    """The problem's own Model on the trial inputs of `seed`; its faults are BadInput.
    An allocation failure is raised as it is, for the judge to relieve memory and
    retry (tools/judge/memory.py). `sizes`, when given, receives the inputs' bytes and
    the allocator's peak during the forward, inputs included (0 on cpu)."""
    import torch
    from tools.judge.memory import is_oom, tensor_bytes
    path = getattr(mod, "__file__", None) or "problem"
    cuda = dev.startswith("cuda")
    try:
        if cuda:
            base = torch.cuda.memory_allocated(dev)
            torch.cuda.reset_peak_memory_stats(dev)
        inputs = make_inputs(mod, seed, dev)
        if sizes is not None:
            sizes["input_bytes"] = tensor_bytes(inputs)
        with torch.no_grad():
            out = ref_model(*inputs)
        del inputs
        if cuda:
            torch.cuda.synchronize()
        if sizes is not None:
            sizes["peak_bytes"] = torch.cuda.max_memory_allocated(dev) - base if cuda else 0
    except Exception as e:
        if is_oom(e):
            raise
        problem_fault(path, e, "the reference Model.forward(*get_inputs())")
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    if not outs or not all(isinstance(o, torch.Tensor) for o in outs):
        got = type(out).__name__ if not isinstance(out, (tuple, list)) else \
            f"{type(out).__name__} of {', '.join(sorted({type(o).__name__ for o in outs})) or 'nothing'}"
        raise BadInput(path, f"Model.forward returned {got}; expected a tensor or a tuple of tensors")
    return outs


def problem_fault(path, e: Exception, what: str):
    """The problem's own code failed in the judge: bad input (exit 2), except running out
    of memory, which is this machine's limit (exit 3)."""
    import torch
    from tools.problem import describe_fault
    if isinstance(e, getattr(torch, "OutOfMemoryError", torch.cuda.OutOfMemoryError)):
        raise EvaluatorError(f"{path}: {what} ran out of memory: {describe_fault(e)}") from None
    raise BadInput(path, f"{what} raised {describe_fault(e)}") from None
