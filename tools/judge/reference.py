"""The reference, in the judge: the problem's own Model on the trial inputs.

Covers `compute_reference` (get_inputs() of a seed, Model.forward on them, no grad,
TF32 off (tools/problem.py strict_fp32), outputs checked to be tensors) and `default_device`. The Model is built once per session
with KernelBench's seeds and init order (tools/judge/session.py's Judge); no candidate
code runs here. A fault of the problem's code here is the file's (exit 2) only when a
fresh process fails the same way (tools/judge/blame.py).
"""
from __future__ import annotations

from tools.errors import BadInput
from tools.judge.blame import Step, blame
from tools.problem import make_inputs, strict_fp32


def default_device() -> str:
    import torch
    return "cuda" if torch.cuda.is_available() else "cpu"


def compute_reference(ref_model, mod, seed: int, dev: str, *, init_seed: int, sizes: dict | None = None) -> list:
    """The problem's own Model (built with `init_seed`) on the trial inputs of `seed`.
    An allocation failure is raised as it is, for the judge to relieve memory and
    retry (tools/judge/memory.py). `sizes`, when given, receives the inputs' bytes and
    the allocator's peak during the forward, inputs included (0 on cpu)."""
    import torch
    from tools.judge.memory import is_oom, tensor_bytes
    path = getattr(mod, "__file__", None) or "problem"
    cuda = dev.startswith("cuda")
    if cuda and sizes is not None:
        base = torch.cuda.memory_allocated(dev)
        torch.cuda.reset_peak_memory_stats(dev)
    try:
        inputs = make_inputs(mod, seed, dev)
    except Exception as e:
        if is_oom(e):
            raise
        blame(path, e, "get_inputs()", Step("inputs", dev, seed=seed))
    if sizes is not None:
        sizes["input_bytes"] = tensor_bytes(inputs)
    try:
        with torch.no_grad(), strict_fp32():   # an fp32 reference in fp32, not cuDNN's TF32
            out = ref_model(*inputs)
        del inputs
        if cuda:
            torch.cuda.synchronize()
    except Exception as e:
        if is_oom(e):
            raise
        blame(path, e, "the reference Model.forward(*get_inputs())",
              Step("forward", dev, seed=seed, init_seed=init_seed))
    if sizes is not None:
        sizes["peak_bytes"] = torch.cuda.max_memory_allocated(dev) - base if cuda else 0
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    if not outs or not all(isinstance(o, torch.Tensor) for o in outs):
        got = type(out).__name__ if not isinstance(out, (tuple, list)) else \
            f"{type(out).__name__} of {', '.join(sorted({type(o).__name__ for o in outs})) or 'nothing'}"
        raise BadInput(path, f"Model.forward returned {got}; expected a tensor or a tuple of tensors")
    return outs
