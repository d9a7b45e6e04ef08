"""KernelBook's dialect at run time: what torch.compile output of the torch 2.5 era needs.

KernelLLM learned from KernelBook: Inductor's generated code (torch 2.5), rewritten as a
ModelNew. That code imports `grid` from triton_heuristics (gone since torch 2.7),
`_cuda_getCurrentRawStream` (absent from CPU builds), allocates with
`empty_strided_cuda`, pins device 0, and calls libdevice (absent from Triton's
interpreter). `install(device)`: the worker calls it once before the candidate is
imported. It gives triton_heuristics back its launch-grid helpers
(tools/dialect/inductor_grid.py: grid, split_scan_grid, grid_combo_kernels,
cooperative_reduction_grid, as torch 2.6 had them) when that module is first imported;
on cpu it maps the CUDA helpers to the CPU (empty_strided_cuda allocates on the CPU,
get_raw_stream returns a dummy stream 0, _DeviceGuard and set_device do nothing,
reinterpret_tensor refuses views outside their buffer) and installs libdevice for the
interpreter (tools/dialect/interp_libdevice.py). On cuda the CUDA helpers stay as they
are: the worker sees one GPU, index 0. Module attributes only; the candidate's text is
never changed, so its line numbers stay its own. None of this computes on tensors.

Not covered: what to tell the model when such a candidate fails
(tools/dialect/causes.py); Inductor's runtime (CachingAutotuner, async_compile) and
extern_kernels, which stay library ops under tools/guards/'s policy.
"""
from __future__ import annotations

import importlib.abc
import sys

_HEURISTICS = "torch._inductor.runtime.triton_heuristics"


def install(device: str) -> None:
    """Provide KernelBook-era names in this (worker) process; `device` is the worker's:
    "cuda", "cpu" (Triton's interpreter) or "compile" (compiles kernels, runs nothing)."""
    import torch
    if device == "cpu":
        _cuda_helpers_on_cpu(torch)
        from tools.dialect import interp_libdevice
        interp_libdevice.install()
    elif not hasattr(torch._C, "_cuda_getCurrentRawStream"):   # a CPU-only build compiling for sm_90
        torch._C._cuda_getCurrentRawStream = _dummy_stream
    module = sys.modules.get(_HEURISTICS)
    if module is not None:
        _add_grid_helpers(module)
    elif not any(isinstance(f, _AfterImport) for f in sys.meta_path):
        # importing triton_heuristics costs ~1.5 s: only candidates that import it pay
        sys.meta_path.insert(0, _AfterImport(_HEURISTICS, _add_grid_helpers))


def _add_grid_helpers(module) -> None:
    from tools.dialect import inductor_grid
    for fn in (inductor_grid.grid, inductor_grid.split_scan_grid, inductor_grid.grid_combo_kernels,
               inductor_grid.cooperative_reduction_grid, inductor_grid.maybe_cooperative_reduction_grid):
        if not hasattr(module, fn.__name__):
            setattr(module, fn.__name__, fn)


class _AfterImport(importlib.abc.MetaPathFinder):
    """Runs `then(module)` right after `name` is first imported, before the importer
    sees it (so `from M import grid` finds what `then` added)."""

    def __init__(self, name: str, then):
        self.name, self.then = name, then

    def find_spec(self, fullname, path, target=None):
        if fullname != self.name:
            return None
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            spec = find(fullname, path, target) if finder is not self and find else None
            if spec is not None and spec.loader is not None:
                spec.loader = _ThenLoader(spec.loader, self.then)
                return spec
        return None


class _ThenLoader(importlib.abc.Loader):
    def __init__(self, loader, then):
        self._loader, self._then = loader, then

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        self._then(module)

    def __getattr__(self, name):   # get_source & co., for tracebacks and inspect
        return getattr(self._loader, name)


def _cuda_helpers_on_cpu(torch) -> None:
    guards = torch._C._dynamo.guards
    torch._C._cuda_getCurrentRawStream = _dummy_stream
    torch.cuda._DeviceGuard = _NoDeviceGuard
    torch.cuda.set_device = _no_set_device
    guards._empty_strided_cuda = _empty_strided_host
    if not getattr(guards._reinterpret_tensor, "_krefine_checked", False):
        guards._reinterpret_tensor = _checked_reinterpret(guards._reinterpret_tensor)


def _dummy_stream(device_index: int = 0) -> int:
    """get_raw_stream(i) on cpu: there is no stream; Triton's interpreter ignores it."""
    return 0


class _NoDeviceGuard:
    """torch.cuda._DeviceGuard(i) on cpu: nothing to switch."""

    def __init__(self, index: int = 0):
        self.idx = index

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _no_set_device(device) -> None:
    """torch.cuda.set_device(i) on cpu: the CPU is the only device."""


def _empty_strided_host(size, stride, dtype):
    """empty_strided_cuda on cpu. torch.empty_strided (not the C++ fast path) so the
    worker's trials can fill fresh memory with NaN."""
    import torch
    return torch.empty_strided(size, stride, dtype=dtype, device="cpu")


def _checked_reinterpret(native):
    """reinterpret_tensor that refuses a view reaching outside its tensor's storage (on
    the GPU such a view reads other memory; in the interpreter, other host memory)."""
    def reinterpret_tensor(base, size, stride, offset_increment):
        offset = base.storage_offset() + offset_increment
        have = base.untyped_storage().nbytes() // base.element_size()
        need = offset + span(size, stride)
        if offset < 0 or need > have:
            raise IndexError(
                f"reinterpret_tensor(size={tuple(size)}, stride={tuple(stride)}, offset={offset_increment}) "
                f"needs {need} elements but its tensor (size {tuple(base.shape)}, stride {tuple(base.stride())}) "
                f"has storage for {have}: the view is out of bounds")
        return native(base, size, stride, offset_increment)
    reinterpret_tensor._krefine_checked = True
    return reinterpret_tensor


def span(size, stride) -> int:
    """Elements from a view's first to its last element, inclusive (0 when empty)."""
    return 1 + sum((n - 1) * s for n, s in zip(size, stride)) if all(size) else 0
