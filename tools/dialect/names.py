"""Names a candidate used that the installed torch or Triton lacks: where each one came
from, and what to write instead.

`describe(module, name)` -> (kind, message) for a failed import or attribute lookup of
`module.name` (of the module itself when `name` is None), or None for a module outside
torch and triton. Three cases, told apart only by the committed tables below (no
history is guessed):

  * a name Inductor's generated code imported (torch 2.5, where KernelBook's code came
    from, or an older torch) that the installed torch no longer has:
    "dialect:removed_import", naming torch and its version;
  * a name an older Triton had: "dialect:removed_import", naming the installed Triton
    and its version (a Triton matter, not torch's);
  * any other name: "dialect:unknown_name". A Triton name is "not part of Triton"
    (`tl.relu`): the advice is a libdevice function, a tl.* formula, or the nearest
    names the module has.

Not covered: making KernelBook-era code run (tools/dialect/portable.py defines the launch
grids and helpers in the file); finding the failure in a verdict (tools/dialect/causes.py).
"""
from __future__ import annotations

import difflib
import importlib
import importlib.metadata
import sys

# Names Inductor's generated code imported that the installed torch lacks, and the torch
# that wrote them. Taken from the headers of Inductor's own output files:
#   torch 2.5 wrapper: `from torch._inductor.runtime.triton_heuristics import grid,
#     split_scan_grid, grid_combo_kernels, start_graph, end_graph` (the grid helpers went
#     away in torch 2.7; tools/dialect/inductor_grid.py has them as torch 2.6 did);
#   torch 2.5 kernels: `from torch._inductor.runtime.hints import AutotuneHint,
#     ReductionHint, TileHint, instance_descriptor, DeviceProperties`;
#   older torch: `from torch._inductor.triton_heuristics import AutotuneHint, pointwise`,
#     `from torch._inductor.utils import instance_descriptor`, `from torch._inductor
#     import triton_helpers`, `from torch._inductor.ir import TileHint`.
# A None name stands for the module itself.
_KERNELBOOK_TORCH = "torch 2.5's Inductor had it (KernelBook's code is torch 2.5's)"
_OLDER_TORCH = "Inductor's code before torch 2.5 imported it"
_TORCH_ERA = {
    ("torch._inductor.runtime.triton_heuristics", "grid"): _KERNELBOOK_TORCH,
    ("torch._inductor.runtime.triton_heuristics", "split_scan_grid"): _KERNELBOOK_TORCH,
    ("torch._inductor.runtime.triton_heuristics", "grid_combo_kernels"): _KERNELBOOK_TORCH,
    ("torch._inductor.runtime.hints", "instance_descriptor"): _KERNELBOOK_TORCH,
    ("torch._inductor.triton_heuristics", None): _OLDER_TORCH,
    ("torch._inductor.triton_helpers", None): _OLDER_TORCH,
    ("torch._inductor", "triton_heuristics"): _OLDER_TORCH,
    ("torch._inductor", "triton_helpers"): _OLDER_TORCH,
    ("torch._inductor.utils", "instance_descriptor"): _OLDER_TORCH,
    ("torch._inductor.ir", "TileHint"): _OLDER_TORCH,
}

# Names an older Triton had, and which. torch 2.5's kernel header imports
# `from triton.compiler.compiler import AttrsDescriptor` (its Triton was 3.1); torch 2.0's
# kernels called `tl.libdevice.tanh(...)` (Triton 2.0's triton/language/libdevice.py);
# torch 2.1-2.3's called `tl.math.tanh(...)`: before Triton 3.0, tl.math held every
# libdevice function (see _older_triton).
_TRITON_ERA = {
    ("triton.compiler.compiler", "AttrsDescriptor"): "Triton 3.1 (torch 2.5's) had it",
    ("triton.language", "libdevice"): "Triton 2.0 had it",
    ("triton.language.libdevice", None): "Triton 2.0 had it",
}

# where KernelBook-era modules went, and what to write instead
_MOVED_MODULES = {
    "torch._inductor.triton_heuristics": "import it from torch._inductor.runtime.triton_heuristics",
    "torch._inductor.triton_helpers": "import it from torch._inductor.runtime.triton_helpers",
    "triton.language.libdevice": "use `from torch._inductor.runtime.triton_helpers import libdevice`",
    "triton.language.math.libdevice": "use `from torch._inductor.runtime.triton_helpers import libdevice`",
}

_NAME_ADVICE = {
    "get_raw_stream": "write `from torch._C import _cuda_getCurrentRawStream as get_raw_stream`",
    "libdevice": "write `from torch._inductor.runtime.triton_helpers import libdevice`",
    "AttrsDescriptor": "drop it: kernels here are plain @triton.jit functions, without Inductor's decorators",
    "instance_descriptor": "drop it: kernels here are plain @triton.jit functions, without Inductor's decorators",
}

_GRID_ADVICE = "launch with a grid tuple instead: kernel[(triton.cdiv(xnumel, XBLOCK),)](...)"

# torch functions a kernel writer reaches for that triton.language never had, as tl.* code
_TL_FORMULAS = {
    "relu": "tl.maximum(x, 0.0)",
    "leaky_relu": "tl.where(x > 0, x, negative_slope * x)",
    "gelu": "0.5 * x * (1 + libdevice.erf(x * 0.7071067811865476))",
    "silu": "x * tl.sigmoid(x)",
    "mean": "tl.sum(x, axis=0) / n",
}


def describe(module: str, name: str | None) -> tuple[str, str] | None:
    """(diagnostic kind, message) for `module.name` missing; None outside torch/triton."""
    package = module.split(".")[0]
    if package not in ("torch", "triton"):
        return None
    what = f"`{_short(module)}.{name}`" if name else f"module {module}"
    advice = _advice(module, name)
    if package == "torch":
        era = _TORCH_ERA.get((module, name))
        said = f"{what} does not exist in the installed torch {_version('torch')}"
        if era is None:
            return "unknown_name", f"{said}; {advice}"
        return "removed_import", f"{said}: {era}; {advice}"
    era = _TRITON_ERA.get((module, name)) or _older_triton(module, name)
    if era is not None:
        return "removed_import", \
            f"{what} is not in the installed triton {_version('triton')}: {era}; {advice}"
    has = f"{module} has no {name}" if name else f"triton {_version('triton')} has no such module"
    return "unknown_name", f"{what} is not part of Triton ({has}); {advice}"


def _older_triton(module: str, name: str | None) -> str | None:
    if module == "triton.language.math" and name and hasattr(_libdevice(), name):
        return "Triton before 3.0 had it in tl.math, which then held every libdevice function"
    return None


def _advice(module: str, name: str | None) -> str:
    if name is None:
        return _MOVED_MODULES.get(module, "remove it and write what it provided in this file")
    if name in _NAME_ADVICE:
        return _NAME_ADVICE[name]
    if module.endswith("triton_heuristics") and "grid" in name:
        return _GRID_ADVICE
    triton_language = module.startswith("triton.language") or module.endswith("libdevice")
    if triton_language:
        import triton.language as tl
        if hasattr(_libdevice(), name):
            return f"use libdevice.{name}(x) (`from torch._inductor.runtime.triton_helpers import libdevice`)"
        if hasattr(tl, name):
            return f"use tl.{name}"
        if name in _TL_FORMULAS:
            return f"write {_TL_FORMULAS[name]}"
    near = _nearest(module, name)
    if near:
        return "the nearest names it has: " + ", ".join(f"{_short(module)}.{n}" for n in near)
    return f"compute {name} from tl.* operations" if triton_language else \
        "remove it and write what it provided in this file"


def _nearest(module: str, name: str) -> list[str]:
    """Public names of `module` spelled like `name`. Torch's modules only when already
    loaded: importing torch._inductor here, in a judge thread, could race another."""
    loaded = sys.modules.get(module)
    if loaded is None and module.startswith("triton"):
        try:
            loaded = importlib.import_module(module)
        except Exception:   # the module itself is what is missing
            return []
    public = [n for n in dir(loaded) if not n.startswith("_")] if loaded is not None else []
    return difflib.get_close_matches(name, public, n=3, cutoff=0.75)


def _libdevice():
    from triton.language.extra import libdevice
    return libdevice


def _short(module: str) -> str:
    """triton.language as the `tl` every kernel imports it as."""
    return "tl" + module[len("triton.language"):] if module.startswith("triton.language") else module


def _version(dist: str) -> str:
    loaded = sys.modules.get(dist)
    if loaded is not None and getattr(loaded, "__version__", None):
        return str(loaded.__version__)
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "?"
