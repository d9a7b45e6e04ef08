"""Who made the candidate's outputs, as the worker sees it: facts for the judge.

Covers two requests' worth of facts (tools/judge/ownership.py decides what they mean):

1) `op_triton_off`: one forward on a trial's inputs with every Triton launch of the
   candidate skipped (tools/sandbox/launches.py returns before launching while
   `triton_off` is set; autotuners are skipped, not benchmarked) and allocations filled
   with NaN. Its outputs go to the judge, which compares them with the reference: a
   value that is right without the candidate's kernels was made by something else
   (PyTorch's copy, index or fill kernels moving the input into place, a view of the
   input). A copy of a Triton kernel's result (`torch.cat` of two kernel outputs) is
   not right here, since that kernel did not run.
2) `shared_memory`: which outputs share storage with an input, a parameter or buffer
   of the model, or an earlier call's output still alive (returned again, or kept).

Not covered: a candidate that tells a skipped launch from a real one (reading back what
its kernel should have written) can behave honestly in this one call; which call it is
is the judge's secret (README "Trust").
"""
from __future__ import annotations

import weakref

from tools.sandbox.outputs import all_tensors, flatten_output, poisoned_allocations


def _span(t) -> tuple[str, int, int] | None:
    """(device, first byte, end) of the storage behind tensor `t`; None when empty."""
    from tools.sandbox.outputs import _BASE
    import torch
    base = _BASE or torch._C.TensorBase
    storage = base.untyped_storage(t)
    n = storage.nbytes()
    if n == 0:
        return None
    start = storage.data_ptr()
    return str(base.device.__get__(t)), start, start + n


def _overlap(a, b) -> bool:
    return a is not None and b is not None and a[0] == b[0] and a[1] < b[2] and b[1] < a[2]


def shared_memory(outputs: list, inputs: list, model, earlier: list) -> list[str]:
    """Each output that shares storage with an input, a parameter or buffer of `model`, or
    a tensor in `earlier` (weak references to earlier calls' outputs), in words."""
    import torch
    owned = [(f"input #{i}", _span(x)) for i, x in enumerate(inputs) if type(x) is torch.Tensor]
    if isinstance(model, torch.nn.Module):
        tensors = [*torch.nn.Module.named_parameters(model), *torch.nn.Module.named_buffers(model)]
        owned += [(f"the model's {name}", _span(t)) for name, t in tensors
                  if type(t) in (torch.Tensor, torch.nn.Parameter)]
    owned += [("an earlier call's output", _span(t)) for t in (r() for r in earlier) if type(t) is torch.Tensor]
    found = []
    for k, out in enumerate(outputs):
        span = _span(out)
        hit = next((name for name, s in owned if _overlap(span, s)), None)
        if hit is not None:
            found.append(f"output {k} shares memory with {hit}")
    return found


def overlapping_outputs(outputs: list) -> list[list[int]]:
    """Pairs [i, j] (i < j) of `outputs` that share an element of memory, so that writing
    one changes the other (`return out, out`). Views of one buffer at places of their own
    (q, k and v of one qkv tensor, interleaved columns) are not."""
    spans = [_addressed(t) for t in outputs]
    return [[i, j] for j in range(len(outputs)) for i in range(j)
            if _overlap(spans[i], spans[j]) and _share_elements(outputs[i], outputs[j])]


def _addressed(t) -> tuple[str, int, int] | None:
    """(device, first byte, end) of the bytes view `t` can reach; None when empty."""
    from tools.sandbox.outputs import _BASE
    import torch
    base = _BASE or torch._C.TensorBase
    shape, stride = base.shape.__get__(t), base.stride(t)
    if base.numel(t) == 0:
        return None
    size = base.element_size(t)
    low = sum((n - 1) * s for n, s in zip(shape, stride) if s < 0)
    high = sum((n - 1) * s for n, s in zip(shape, stride) if s > 0)
    start = base.data_ptr(t)
    return str(base.device.__get__(t)), start + low * size, start + (high + 1) * size


_MARKS = {1: "int8", 2: "int16", 4: "int32", 8: "int64"}


def _share_elements(a, b) -> bool:
    """Whether views `a` and `b`, whose reach overlaps, share a byte: `a`'s layout marked in
    a zeroed copy of the memory both reach, read back through `b`'s layout. Views of two
    storages (never one element in common: one allocation each), or of an element size
    no integer type spans, count as sharing where their reach overlaps."""
    from tools.sandbox.outputs import _BASE
    import torch
    base = _BASE or torch._C.TensorBase
    sa, sb = base.untyped_storage(a), base.untyped_storage(b)
    if sa.data_ptr() != sb.data_ptr() or base.data_ptr(a) == base.data_ptr(b):
        return True   # (the same first element: `return out, out.view(...)`)
    # the marks cover the bytes the two reach, not the whole storage (a slice of a large one)
    first = min(_addressed(a)[1], _addressed(b)[1])
    end = max(_addressed(a)[2], _addressed(b)[2])
    try:
        marks = torch.zeros(end - first, dtype=torch.uint8, device=base.device.__get__(a)).untyped_storage()
    except RuntimeError:   # no memory for the marks: the first elements differ, call them apart
        return False

    def laid_out(t):
        """`t`'s layout over the marks, in an integer type of its element's width; an element
        wider than 8 bytes (complex128) as that many int64 words, an innermost dimension more."""
        size = base.element_size(t)
        words = size // 8 if size > 8 and size % 8 == 0 else 1
        dtype = _MARKS.get(size // words)
        offset = base.data_ptr(t) - first   # its first element is its lowest byte: no negative strides
        if dtype is None or offset % size:
            return None
        shape, stride = list(base.shape.__get__(t)), list(base.stride(t))
        if words > 1:
            shape, stride = shape + [words], [st * words for st in stride] + [1]
        view = torch.empty(0, dtype=getattr(torch, dtype), device=base.device.__get__(t))
        return view.set_(marks, offset // size * words, shape, stride)

    ma, mb = laid_out(a), laid_out(b)
    if ma is None or mb is None:
        return True
    ma.fill_(-1)
    return bool(mb.ne(0).any())


def note_memory(outputs: list, inputs: list, model, earlier: list, aliases: list, pairs: list) -> None:
    """One call's outputs: shared_memory's findings onto `aliases`, overlapping_outputs'
    new pairs onto `pairs`, then the outputs remembered for the next call."""
    aliases += shared_memory(outputs, inputs, model, earlier)
    pairs += [p for p in overlapping_outputs(outputs) if p not in pairs]
    remember(outputs, earlier)


def remember(outputs: list, earlier: list, keep: int = 16) -> None:
    """Weak references to `outputs` onto `earlier` (the last `keep`): an output still alive
    at a later call was kept by the candidate."""
    earlier.extend(weakref.ref(t) for t in outputs)
    del earlier[:-keep]


class OwnershipOps:
    """Worker's op_triton_off (tools/sandbox/worker.py)."""
    triton_off = False   # tools/sandbox/launches.py skips every launch while set
    skipped = 0

    def op_triton_off(self, h: dict):
        """One forward on the inputs of `seed` with every Triton launch skipped."""
        seed = int(h["seed"])
        inputs = self._inputs(seed) if self.lean else self._trial_inputs(seed)
        self._poison(h.get("poison", []))
        before, self.triton_off = self.skipped, True
        try:
            with poisoned_allocations():
                out = self._forward(inputs)
        except BaseException as e:   # a forward that needs its kernels' results to go on
            return {"ok": True, "outputs": [], "inconclusive": f"{type(e).__name__}: {str(e)[:200]}"}, b""
        finally:
            self.triton_off = False
        flat, _, names = flatten_output(out)
        if not all_tensors(names):
            self._held.append(out)
            return {"ok": True, "outputs": [], "inconclusive": "not a tensor output"}, b""
        specs, payload = self._pack(flat, h)
        return {"ok": True, "outputs": specs, "skipped_launches": self.skipped - before}, payload
