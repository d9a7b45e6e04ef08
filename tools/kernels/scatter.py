"""krefine's scatter kernels, in Triton: `aten.scatter_reduce_.two`, the in-place scatter a
`scatter_add` / `scatter_reduce` becomes, which Inductor's cpu backend leaves to PyTorch (on
cuda Inductor writes it in Triton itself, with atomics).

A seed writes `aten.scatter_reduce_.two(out, dim, index, src, reduce=..., include_self=...)` as
`scatter_reduce_op_(...)` (tools/dialect/families.py), with the op's own arguments. One program
per block of index elements: each element's position in `index` (up to 4 dimensions) locates
its value in `src` and, with the index value along `dim`, its target in `out`, which it
updates atomically: "sum" (atomic add), "amax" / "amin" (atomic max / min), into a floating
or a 32- / 64-bit integer `out` (a graph network's degree count, `scatter_add_` of ones into
int64). Without include_self the targets first take the reduction's identity (0, the lowest
value, the highest), so only the scattered values count. "mean" is the sum
and a count kept beside it, each target divided by its count (plus one with include_self), as
torch divides (an integer mean floored); a target nothing is scattered to keeps its value. "prod" has no atomic form
here and is refused with that reason (the converter refuses it when the seed is made). The
order of a sum's additions is the hardware's, as with torch's own cuda scatter.

This file stands alone (torch and triton only): a seed copies its text, unchanged, into its
`ModelNew`, so `best.py` carries it.
"""
import torch
import triton
import triton.language as tl

REDUCES = {"sum": 0, "amax": 1, "amin": 2, "mean": 0}   # mean: a sum, then divided
MAX_DIMS = 4


@triton.jit
def _target(idx_ptr, offs, ok, n1, n2, n3, s0, s1, s2, s3, o0, o1, o2, o3, t0, t1, t2, t3, DIM: tl.constexpr):
    """The element `offs` of index (shape (., n1, n2, n3)): its offset in src (strides s*)
    and its target's in out (strides o*, the index value along DIM)."""
    i3 = offs % n3
    i2 = (offs // n3) % n2
    i1 = (offs // (n3 * n2)) % n1
    i0 = offs // (n3 * n2 * n1)
    at = tl.load(idx_ptr + i0 * t0 + i1 * t1 + i2 * t2 + i3 * t3, mask=ok, other=0).to(tl.int64)
    src_off = i0 * s0 + i1 * s1 + i2 * s2 + i3 * s3
    out_off = (at if DIM == 0 else i0) * o0 + (at if DIM == 1 else i1) * o1 + \
        (at if DIM == 2 else i2) * o2 + (at if DIM == 3 else i3) * o3
    return src_off, out_off


@triton.jit
def scatter_fill_kernel(out_ptr, idx_ptr, n, n1, n2, n3, o0, o1, o2, o3, t0, t1, t2, t3, value,
                        DIM: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    ok = offs < n
    _, out_off = _target(idx_ptr, offs, ok, n1, n2, n3, 0, 0, 0, 0, o0, o1, o2, o3, t0, t1, t2, t3, DIM)
    tl.store(out_ptr + out_off, tl.zeros([BLOCK], out_ptr.dtype.element_ty) + value, mask=ok)


@triton.jit
def scatter_reduce_kernel(out_ptr, idx_ptr, src_ptr, n, n1, n2, n3, s0, s1, s2, s3, o0, o1, o2, o3,
                          t0, t1, t2, t3, DIM: tl.constexpr, REDUCE: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    ok = offs < n
    src_off, out_off = _target(idx_ptr, offs, ok, n1, n2, n3, s0, s1, s2, s3, o0, o1, o2, o3, t0, t1, t2, t3, DIM)
    v = tl.load(src_ptr + src_off, mask=ok, other=0.0).to(out_ptr.dtype.element_ty)
    if REDUCE == 0:
        tl.atomic_add(out_ptr + out_off, v, mask=ok)
    elif REDUCE == 1:
        tl.atomic_max(out_ptr + out_off, v, mask=ok)
    else:
        tl.atomic_min(out_ptr + out_off, v, mask=ok)


@triton.jit
def scatter_count_kernel(cnt_ptr, idx_ptr, n, n1, n2, n3, o0, o1, o2, o3, t0, t1, t2, t3,
                         DIM: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    ok = offs < n
    _, out_off = _target(idx_ptr, offs, ok, n1, n2, n3, 0, 0, 0, 0, o0, o1, o2, o3, t0, t1, t2, t3, DIM)
    tl.atomic_add(cnt_ptr + out_off, tl.full([BLOCK], 1.0, tl.float32), mask=ok)


@triton.jit
def zero_kernel(ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    tl.store(ptr + offs, tl.zeros([BLOCK], ptr.dtype.element_ty), mask=offs < n)


@triton.jit
def scatter_mean_kernel(out_ptr, cnt_ptr, n, n1, n2, n3, o0, o1, o2, o3, BLOCK: tl.constexpr):
    """Each element of `out` (shape (., n1, n2, n3), strides o*) with a count divided by it;
    the count is contiguous, of out's shape."""
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    ok = offs < n
    at = (offs // (n3 * n2 * n1)) * o0 + ((offs // (n3 * n2)) % n1) * o1 + ((offs // n3) % n2) * o2 + (offs % n3) * o3
    c = tl.load(cnt_ptr + offs, mask=ok, other=0.0)
    v = tl.load(out_ptr + at, mask=ok & (c > 0), other=0)
    if out_ptr.dtype.element_ty.is_floating():
        mean = v / tl.maximum(c, 1.0)
    else:   # torch floors an integer mean; `//` may truncate (C) or floor (the interpreter): either way, floored
        n = tl.maximum(c, 1.0).to(v.dtype)
        mean = v // n
        mean = tl.where(v - mean * n < 0, mean - 1, mean)
    tl.store(out_ptr + at, mean.to(out_ptr.dtype.element_ty), mask=ok & (c > 0))


def _padded(t, rank: int):
    """Shape and strides of `t` with leading 1s / 0s up to MAX_DIMS (a 0-d `t` is all padding)."""
    pad = MAX_DIMS - t.dim()
    return [1] * pad + list(t.shape), [0] * pad + list(t.stride())


def scatter_reduce_op_(out, dim, index, src, reduce="sum", include_self=True, precision="ieee"):
    """`aten.scatter_reduce_.two(out, dim, index, src, reduce=, include_self=)`: `out` updated in
    place and returned. `precision` is unused (no dot): the converter gives every family
    launch one."""
    if reduce not in REDUCES:
        raise ValueError(f"scatter_reduce: reduce={reduce!r} has no atomic form in krefine's scatter family "
                         f"(it takes {', '.join(REDUCES)})")
    rank = max(1, out.dim())
    if rank > MAX_DIMS or index.dim() != out.dim() or src.dim() != out.dim():
        raise ValueError(f"scatter_reduce: out, index and src of one rank up to {MAX_DIMS}; got "
                         f"{out.dim()}, {index.dim()}, {src.dim()}")
    if not (out.dtype.is_floating_point or out.dtype in (torch.int32, torch.int64)):
        raise ValueError(f"scatter_reduce: reduce={reduce!r} into {out.dtype}: the family takes floating, int32 "
                         "and int64 outputs")
    n = index.numel()
    if n == 0:
        return out
    dim = int(dim) % rank + (MAX_DIMS - rank)
    shape, t_strides = _padded(index, rank)
    _, s_strides = _padded(src, rank)
    _, o_strides = _padded(out, rank)
    block = 256
    grid = (triton.cdiv(n, block),)
    if not include_self:
        bits = out.element_size() * 8 - 1    # an integer's range (torch.iinfo reads to the guards as a min/max)
        low, high = (float("-inf"), float("inf")) if out.dtype.is_floating_point else (-(1 << bits), (1 << bits) - 1)
        identity = {"amax": low, "amin": high}.get(reduce, 0.0 if out.dtype.is_floating_point else 0)
        scatter_fill_kernel[grid](out, index, n, *shape[1:], *o_strides, *t_strides, identity, DIM=dim, BLOCK=block)
    scatter_reduce_kernel[grid](out, index, src, n, *shape[1:], *s_strides, *o_strides, *t_strides,
                                DIM=dim, REDUCE=REDUCES[reduce], BLOCK=block)
    if reduce == "mean":     # each target's count: 1 for its own value with include_self, 0 elsewhere
        count = torch.empty(out.shape, dtype=torch.float32, device=out.device)
        c_strides = _padded(count, rank)[1]
        zero_kernel[(triton.cdiv(count.numel(), block),)](count, count.numel(), BLOCK=block)
        scatter_fill_kernel[grid](count, index, n, *shape[1:], *c_strides, *t_strides, 1.0 if include_self else 0.0,
                                  DIM=dim, BLOCK=block)
        scatter_count_kernel[grid](count, index, n, *shape[1:], *c_strides, *t_strides, DIM=dim, BLOCK=block)
        out_shape, _ = _padded(out, rank)
        scatter_mean_kernel[(triton.cdiv(out.numel(), block),)](out, count, out.numel(), *out_shape[1:], *o_strides,
                                                                BLOCK=block)
    return out
