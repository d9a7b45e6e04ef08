"""What the worker provides before a candidate is imported: libdevice for Triton's interpreter.

Candidates are judged in their portable form (tools/dialect/portable.py): KernelBook's
torch-2.5 runtime (`grid`, `triton_helpers`, `empty_strided_cuda`, a pinned device 0) is
replaced by definitions in the candidate's own file before it is judged, so the worker
gives torch nothing back: a name torch no longer has fails to import here as it would for
the user. `install(device)`: on cpu, Triton's interpreter has no libdevice, so
tools/dialect/interp_libdevice.py installs one that computes what the GPU's does (a
kernel that calls libdevice therefore passes on cpu but runs outside krefine on a GPU
only: README says so), tools/dialect/interp_reduce.py a `tl.reduce` with a combine
function that works on whole blocks instead of element by element, and
tools/dialect/interp_index.py an integer argument as a loop bound on Triton 3.6 with NumPy
2.4. None of this computes on tensors.

Not covered: what to tell the model when such a candidate fails (tools/dialect/causes.py).
"""
from __future__ import annotations


def install(device: str) -> None:
    """Prepare this (worker) process for candidates; `device` is the worker's: "cuda",
    "cpu" (Triton's interpreter) or "compile" (compiles kernels, runs nothing)."""
    if device == "cpu":
        from tools.dialect import interp_bf16, interp_index, interp_libdevice, interp_reduce
        interp_libdevice.install()
        interp_bf16.install()     # bf16 dots and float32 -> bf16 casts (bf16 held as raw uint16 bits)
        interp_reduce.install()   # tl.reduce with a combine function, on whole blocks
        interp_index.install()    # `range(0, n, BLOCK)` with a runtime n on Triton 3.6


def span(size, stride) -> int:
    """Elements from a view's first to its last element, inclusive (0 when empty)."""
    return 1 + sum((n - 1) * s for n, s in zip(size, stride)) if all(size) else 0
