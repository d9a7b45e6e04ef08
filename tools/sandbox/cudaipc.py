"""Outputs from the worker to the judge through GPU memory (CUDA IPC), not the pipe.

The judge allocates a *staging* buffer with the CUDA driver (outside torch's caching
allocator), exports it with cuIpcGetMemHandle and sends the 64-byte handle; the worker
maps it and copies each output's bytes in at offsets it reports. The judge then reads
those bytes from its own allocation: it never maps memory the worker exported, never
trusts a size or pointer the worker chose (offsets are checked against the buffer it
allocated itself), and frees the buffer only after the worker is dead, so no memory
the worker could still reach is ever reused for trusted data.

Why: moving a 6.4 GB output GPU -> host -> pipe -> host -> GPU costs seconds per output
and trial (BENCHMARKS.md, 19_ReLU); a device copy takes milliseconds. Whatever fails here (no
driver symbol, IPC refused by the container, too little memory) leaves the pipe in use.

Covers the driver calls and the byte layout; tools/judge/compile_phase.py decides when
to use it, tools/sandbox/channel.py's unpack_tensors reads the staged specs.
"""
from __future__ import annotations

import ctypes
import functools

ALIGN = 256                 # each staged tensor starts at a multiple of this (any dtype's alignment)
HANDLE_BYTES = 64           # CU_IPC_HANDLE_SIZE
_LAZY_PEER_ACCESS = 1       # CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS


class IpcError(RuntimeError):
    """A CUDA driver call for IPC failed (the caller falls back to the pipe)."""


class _Handle(ctypes.Structure):
    _fields_ = [("reserved", ctypes.c_ubyte * HANDLE_BYTES)]


@functools.lru_cache(maxsize=1)
def _driver():
    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError as e:
        raise IpcError(f"libcuda.so.1 not loadable: {e}") from None
    u64 = ctypes.c_uint64
    lib.cuMemAlloc_v2.argtypes = [ctypes.POINTER(u64), ctypes.c_size_t]
    lib.cuMemFree_v2.argtypes = [u64]
    lib.cuIpcGetMemHandle.argtypes = [ctypes.POINTER(_Handle), u64]
    lib.cuIpcOpenMemHandle_v2.argtypes = [ctypes.POINTER(u64), _Handle, ctypes.c_uint]
    for name in ("cuMemAlloc_v2", "cuMemFree_v2", "cuIpcGetMemHandle", "cuIpcOpenMemHandle_v2"):
        getattr(lib, name).restype = ctypes.c_int
    return lib


def _check(rc: int, what: str) -> None:
    if rc != 0:
        raise IpcError(f"{what} failed: CUresult {rc}")


def _current_context(device_index: int) -> None:
    """Make torch's primary context current on this thread (driver calls use it)."""
    import torch
    from tools.perf.capture_guard import gpu_work
    torch.cuda.set_device(device_index)
    with gpu_work():   # a device-wide wait: never beside a capture (tools/perf/capture_guard.py)
        torch.cuda.synchronize(device_index)


class _DeviceBytes:
    """__cuda_array_interface__ over raw device memory, so torch can view it."""

    def __init__(self, ptr: int, nbytes: int):
        self.__cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1",
                                         "data": (ptr, False), "version": 3, "strides": None}


def _as_tensor(ptr: int, nbytes: int, device_index: int):
    import torch
    return torch.as_tensor(_DeviceBytes(ptr, nbytes), device=f"cuda:{device_index}")


class Staging:
    """The judge's exported buffer. Free it only after the worker that mapped it is dead."""

    def __init__(self, nbytes: int, device_index: int):
        if nbytes <= 0:
            raise ValueError("staging buffer needs a positive size")
        lib = _driver()
        _current_context(device_index)
        ptr = ctypes.c_uint64(0)
        _check(lib.cuMemAlloc_v2(ctypes.byref(ptr), nbytes), f"cuMemAlloc({nbytes} bytes)")
        self.ptr, self.device_index = ptr.value, device_index
        handle = _Handle()
        try:
            _check(lib.cuIpcGetMemHandle(ctypes.byref(handle), self.ptr), "cuIpcGetMemHandle")
        except IpcError:
            self.free()
            raise
        self.handle = bytes(handle.reserved)
        self.tensor = _as_tensor(self.ptr, nbytes, device_index)

    def free(self) -> None:
        if self.ptr:
            import torch
            from tools.perf.capture_guard import gpu_work
            self.tensor = None
            # freed after the candidate's worker is gone, outside every GPU hold: another
            # request may be capturing its baselines, which this device-wide wait would break
            with gpu_work():
                torch.cuda.synchronize(self.device_index)
                _driver().cuMemFree_v2(self.ptr)
            self.ptr = 0


class Mapped:
    """The worker's view of the judge's staging buffer."""

    def __init__(self, handle: bytes, nbytes: int, device_index: int = 0):
        if len(handle) != HANDLE_BYTES:
            raise IpcError(f"IPC handle of {len(handle)} bytes, expected {HANDLE_BYTES}")
        lib = _driver()
        _current_context(device_index)
        ptr, h = ctypes.c_uint64(0), _Handle.from_buffer_copy(handle)
        _check(lib.cuIpcOpenMemHandle_v2(ctypes.byref(ptr), h, _LAZY_PEER_ACCESS), "cuIpcOpenMemHandle")
        self.tensor = _as_tensor(ptr.value, nbytes, device_index)  # unmapped when the worker exits


def _padded(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


def layout(nbytes: list[int]) -> list[int]:
    """Offsets of consecutive tensors of these sizes, each aligned to ALIGN."""
    offsets, at = [], 0
    for n in nbytes:
        offsets.append(at)
        at += _padded(n)
    return offsets


def span(nbytes: list[int]) -> int:
    """Bytes a staging buffer needs to hold tensors of these sizes (layout's end)."""
    return sum(_padded(n) for n in nbytes)


def stage(tensors, buffer, at: int = 0) -> list[dict] | None:
    """Worker side: copy `tensors` into `buffer` (a uint8 tensor, usually Mapped.tensor)
    from byte `at` on (a multiple of ALIGN) and describe them; None when they do not all
    fit or are not all on its device (the caller then sends them through the pipe)."""
    import torch
    B = torch._C.TensorBase   # never a method of the output object itself (tools/sandbox/outputs.py)
    flat = [B.detach(t) for t in tensors]
    if any(B.device.__get__(t) != buffer.device for t in flat):
        return None
    sizes = [B.numel(t) * B.element_size(t) for t in flat]
    if at % ALIGN or at + span(sizes) > buffer.numel():
        return None
    specs = []
    for t, n, off in zip(flat, sizes, (at + o for o in layout(sizes))):
        if n:
            buffer[off:off + n].copy_(B.view(B.reshape(B.contiguous(t), (-1,)), torch.uint8))
        specs.append({"dtype": str(B.dtype.__get__(t)).removeprefix("torch."), "shape": list(B.shape.__get__(t)),
                      "nbytes": n, "staged": off})
    if buffer.device.type == "cuda":
        torch.cuda.synchronize(buffer.device)
    return specs
