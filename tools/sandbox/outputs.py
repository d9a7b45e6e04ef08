"""What the worker observes of a candidate's forward, besides its time.

Covers the aten compute ops dispatched while the forward runs (library work an
operator hides from the static guards), allocations filled with NaN while it runs (an
output the candidate never writes cannot read as an answer), its outputs flattened
with the names of their types, and whether an input changed. Facts for the judge,
which decides what they mean (tools/judge/).
"""
from __future__ import annotations

import contextlib

# aten ops that allocate, move, view or describe data; anything else in the forward is
# library compute (an operator like `x * (x > 0)` that no static guard can see)
_ATEN_DATA_OPS = frozenset("""
empty empty_like empty_strided new_empty new_empty_strided zeros zeros_like new_zeros ones
ones_like new_ones full full_like new_full fill_ zero_ arange copy_ _to_copy to clone
contiguous view _unsafe_view reshape _reshape_alias as_strided permute transpose t expand
expand_as squeeze unsqueeze flatten unflatten slice select split split_with_sizes chunk
narrow detach alias lift_fresh lift_fresh_copy _local_scalar_dense item resize_ set_
view_as unbind movedim cat stack is_same_size sym_size sym_stride sym_numel
sym_storage_offset stride size numel dim is_contiguous result_type _has_compatible_shallow_copy_type
record_stream is_pinned _pin_memory pin_memory equal
""".split())


@contextlib.contextmanager
def count_aten_compute(counts: dict, enabled: bool):
    """Count aten compute ops dispatched while the candidate's forward runs."""
    if not enabled:
        yield
        return
    from torch.utils._python_dispatch import TorchDispatchMode

    class _Count(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            name = func.overloadpacket.__name__
            if name not in _ATEN_DATA_OPS:
                counts[f"aten.{name}"] = counts.get(f"aten.{name}", 0) + 1
            return func(*args, **(kwargs or {}))

    with _Count():
        yield


@contextlib.contextmanager
def poisoned_allocations():
    """torch.empty & co. return NaN-filled memory (integers: their max) while on, so an
    output the candidate never writes cannot read as a plausible answer."""
    import torch
    was, warn = torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled()
    torch.use_deterministic_algorithms(True, warn_only=True)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(was, warn_only=warn)


def flatten_output(out):
    import torch
    if isinstance(out, torch.Tensor):
        return [out], "tensor"
    if isinstance(out, (tuple, list)):
        return list(out), f"{type(out).__name__}:{len(out)}"
    return [out], type(out).__name__


def type_name(x) -> str:
    t = type(x)
    return f"{t.__module__}.{t.__qualname__}"


def same(a, b) -> bool:
    import torch
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    return bool(torch.equal(a, b)) or bool(torch.equal(a.isnan(), b.isnan()) and
                                           torch.equal(a.nan_to_num(), b.nan_to_num()))


_FINGERPRINT_CHUNK = 1 << 24   # elements per pass: int64 temporaries of 128 MiB


def fingerprint(t):
    """Two sums over a tensor's raw bytes, plain and position-weighted, per chunk: equal
    before and after a call when the call did not write it, with 256 MiB of scratch
    instead of a copy (a lean worker's inputs are GBs). A small int64 tensor."""
    import torch
    flat = t.detach()
    if not flat.is_contiguous():
        flat = flat.contiguous()
    raw = flat.reshape(-1).view(torch.uint8)
    words = raw.view(torch.int32) if raw.numel() % 4 == 0 else raw
    n = words.numel()
    weights = torch.arange(min(n, _FINGERPRINT_CHUNK), device=words.device, dtype=torch.int64) % 61 + 1
    sums = [torch.zeros(2, dtype=torch.int64, device=words.device)]
    for i in range(0, n, _FINGERPRINT_CHUNK):
        c = words[i:i + _FINGERPRINT_CHUNK].to(torch.int64)
        sums.append(torch.stack([c.sum(), (c * weights[:c.numel()]).sum()]))
    return torch.stack(sums)

