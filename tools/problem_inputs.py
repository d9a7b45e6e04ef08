"""What a problem's own functions make, as KernelBench makes it: the seeded init inputs and
inputs on a device (`make_inputs`, `make_init`), the Model built in KernelBench's order
(`build_model`), and the process-wide seeding around them. tools/problem.py re-exports
each name: import them from there."""
from __future__ import annotations

import random
import threading
import types
from typing import Any

from tools.errors import BadInput


def split_init(init: Any) -> tuple[list, dict]:
    """KernelBench's flat list, or KernelBook's [args, kwargs]."""
    if (isinstance(init, (list, tuple)) and len(init) == 2
            and isinstance(init[0], (list, tuple)) and isinstance(init[1], dict)):
        return list(init[0]), dict(init[1])
    return list(init), {}


# The generators set_seed seeds are process-wide, and a judge makes references for several
# candidates from several threads at once: seeding and drawing must not interleave, or a
# reference is computed on another seed's inputs and every candidate of the session fails.
_SEEDED = threading.RLock()


def set_seed(seed: int) -> None:
    """KernelBench's set_seed: torch CPU and CUDA generators (and Python's, for safety)."""
    import torch
    torch.manual_seed(seed)
    random.seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed(seed)


def make_init(mod: types.ModuleType, seed: int, device: str) -> tuple[list, dict]:
    args, kwargs = split_init(seeded(mod.get_init_inputs, seed))
    return [_to(a, device) for a in args], {k: _to(v, device) for k, v in kwargs.items()}


def make_inputs(mod: types.ModuleType, seed: int, device: str) -> list:
    """Inputs made directly on `device` (KernelBench makes them on the CPU and copies:
    6.4 GB level-1 inputs then take seconds), laid out as that copy lays them out. Judge
    and worker call this with the same seed on the same device, so they see identical values."""
    import torch
    with torch.device(device):
        made = seeded(mod.get_inputs, seed)
        for x in made if isinstance(made, (list, tuple)) else ():
            if isinstance(x, torch.Tensor) and (x.is_meta and device != "meta" or x.layout != torch.strided):
                what = "on the meta device, which holds no data" if x.is_meta else f"of layout {x.layout}"
                raise BadInput(getattr(mod, "__file__", "problem"),
                               f"get_inputs() returned a tensor {what}; krefine judges dense tensors with values")
        return [_as_copied(_to(x, device)) for x in made]


def _as_copied(x):
    """x laid out as KernelBench's copy to the device lays it out (`x.cuda()`, preserve_format):
    an expanded or strided-slice input (overlapping or not dense) becomes contiguous, as a
    seed captured here then meets it in KernelBench's harness and in user code; any other
    layout (a transpose, channels-last) is kept."""
    import torch
    if not isinstance(x, torch.Tensor) or x.numel() < 2:
        return x
    spans = 1
    for stride, size in sorted((st, n) for n, st in zip(x.shape, x.stride()) if n != 1):
        if stride != spans:     # not a permutation of a contiguous layout (ATen's non-overlapping-and-dense)
            return torch.empty_like(x).copy_(x)
        spans *= size
    return x


def build_model(cls, mod: types.ModuleType, seed: int, device: str, module_mode: str = "train"):
    """KernelBench order: seed, init inputs, seed again, construct, move to device.
    `module_mode` ([eval] module_mode): "train" leaves the module as its constructor
    left it (training mode, unless the problem's own code calls .eval(): KernelBench
    runs it so); "eval" calls .eval() on it."""
    import torch
    with _SEEDED:
        args, kwargs = make_init(mod, seed, device)
        set_seed(seed)
        with torch.no_grad():
            model = cls(*args, **kwargs)
    if module_mode == "eval" and isinstance(model, torch.nn.Module):
        model.eval()
    return model.to(device) if hasattr(model, "to") else model


def seeded(fn, seed: int):
    """fn() right after set_seed(seed), no other thread seeding or drawing inputs meanwhile."""
    with _SEEDED:
        set_seed(seed)
        return fn()


def _to(x, device: str):
    import torch
    return x.to(device) if isinstance(x, torch.Tensor) else x
