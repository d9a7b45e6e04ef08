"""What the worker observes of a candidate's forward, besides its time.

Covers the aten compute ops dispatched while the forward runs (library work an
operator hides from the static guards), allocations filled with NaN while it runs (an
output the candidate never writes cannot read as an answer), its outputs flattened
with the names of their types, and whether an input changed. The output contract: an
output is a torch.Tensor by identity (`type(x) is Tensor`, with torch.Tensor, tuple and
list as they were at setup), checked before anything else touches it; only then is it
read, and only through TensorBase's own functions (TensorBase is an immutable type, so
no candidate can replace them), never through a method the object itself offers. The
name TENSOR is given on that identity only. Facts for the judge, which decides what
they mean (tools/judge/).
"""
from __future__ import annotations

import contextlib

# aten ops that allocate, move, view or describe data; anything else in the forward is
# library compute (an operator like `x * (x > 0)` that no static guard can see). Only
# aten's own ops can be data ops: an op of another namespace (a custom op the file
# registers, `mylib::copy_`) runs its body below this mode, where nothing is counted, so
# it counts as compute whatever it is called.
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


TENSOR = "torch.Tensor"   # the only output type name the judge accepts: given on identity alone
_TYPE, _TUPLE, _LIST, _STR = type, tuple, list, str   # as they were when the worker started
_TENSOR = _BASE = _COUNTER = None   # torch.Tensor, torch._C.TensorBase, the aten mode: capture_types
_TYPE_NAME, _TYPE_MODULE, _TYPE_MRO = (type.__dict__[k] for k in ("__qualname__", "__module__", "__mro__"))


def capture_types() -> None:
    """At setup, before any candidate code: the worker's own references to torch.Tensor,
    TensorBase and the aten counting mode's class (made once, so its identity is checked)."""
    global _TENSOR, _BASE, _COUNTER
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    _TENSOR, _BASE = torch.Tensor, torch._C.TensorBase

    class AtenCounter(TorchDispatchMode):
        """Counts aten compute ops into `counts`; tells `on_scalar_read` of each
        aten._local_scalar_dense (a tensor's value read on the host)."""
        def __init__(self, counts: dict, on_scalar_read):
            super().__init__()
            self.counts, self.on_scalar_read = counts, on_scalar_read

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            space, name = func.namespace, func.overloadpacket.__name__
            if space != "aten" or name not in _ATEN_DATA_OPS:
                key = f"aten.{name}" if space == "aten" else f"{space}::{name} (custom op)"
                self.counts[key] = self.counts.get(key, 0) + 1
            elif name == "_local_scalar_dense" and self.on_scalar_read is not None:
                self.on_scalar_read()
            return func(*args, **(kwargs or {}))
    _COUNTER = AtenCounter


@contextlib.contextmanager
def count_aten_compute(counts: dict, on_scalar_read):
    """Count aten compute ops dispatched while the candidate's forward runs; yields the mode."""
    if _COUNTER is None:
        capture_types()
    with _COUNTER(counts, on_scalar_read) as mode:
        yield mode


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


def flatten_output(out) -> tuple[list, str, list[str]]:
    """(items, structure, their type names): `out`, or the items of an exact tuple or list.
    Types are checked by identity before anything touches an object; a name is TENSOR
    only for an exact torch.Tensor. Nothing here calls code the candidate wrote."""
    if _TENSOR is None:
        capture_types()
    t = _TYPE(out)
    if t is _TUPLE or t is _LIST:
        items = _LIST(out)   # an exact builtin: iterating it runs no candidate code
        return items, f"{'tuple' if t is _TUPLE else 'list'}:{len(items)}", [describe_type(x) for x in items]
    name = describe_type(out)
    return [out], "tensor" if name == TENSOR else name, [name]


def all_tensors(types: list[str]) -> bool:
    return all(n == TENSOR for n in types)


def describe_type(x) -> str:
    """TENSOR for an exact torch.Tensor; otherwise a truthful name read from the class's own
    slots (no metaclass or descriptor of the candidate's runs): "subclass of torch.Tensor:
    NAME" or "MODULE.NAME"."""
    if _TENSOR is None:
        capture_types()
    t = _TYPE(x)
    if t is _TENSOR:
        return TENSOR
    name, module = _TYPE_NAME.__get__(t), _TYPE_MODULE.__get__(t)
    name = name[:80] if _TYPE(name) is _STR else "?"
    if _TENSOR in _TYPE_MRO.__get__(t):
        return f"subclass of torch.Tensor: {name}"
    return f"{module[:80] if _TYPE(module) is _STR else '?'}.{name}"


def device_of(t) -> str:
    """An exact tensor's device, read through TensorBase."""
    return str(_BASE.device.__get__(t))


def same(a, b) -> bool:
    import torch
    B = _BASE
    if B.shape.__get__(a) != B.shape.__get__(b) or B.dtype.__get__(a) != B.dtype.__get__(b):
        return False
    return bool(torch.equal(a, b)) or bool(torch.equal(B.isnan(a), B.isnan(b)) and
                                           torch.equal(B.nan_to_num(a), B.nan_to_num(b)))


_FINGERPRINT_CHUNK = 1 << 24   # elements per pass: int64 temporaries of 128 MiB


def fingerprint(t):
    """Two sums over a tensor's raw bytes, plain and position-weighted, per chunk: equal
    before and after a call when the call did not write it, with 256 MiB of scratch
    instead of a copy (a lean worker's inputs are GBs). A small int64 tensor."""
    import torch
    B = _BASE if _BASE is not None else torch._C.TensorBase
    flat = B.detach(t)
    if not B.is_contiguous(flat):
        flat = B.contiguous(flat)
    raw = B.view(B.reshape(flat, (-1,)), torch.uint8)
    words = B.view(raw, torch.int32) if B.numel(raw) % 4 == 0 else raw
    n = B.numel(words)
    device = B.device.__get__(words)
    weights = torch.arange(min(n, _FINGERPRINT_CHUNK), device=device, dtype=torch.int64) % 61 + 1
    sums = [torch.zeros(2, dtype=torch.int64, device=device)]
    for i in range(0, n, _FINGERPRINT_CHUNK):
        c = B.to(words[i:i + _FINGERPRINT_CHUNK], torch.int64)
        sums.append(torch.stack([c.sum(), (c * weights[:c.numel()]).sum()]))
    return torch.stack(sums)

