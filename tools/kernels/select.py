"""krefine's selection kernels: top-k and sort along one dimension, in Triton.

Inductor has no Triton lowering for `aten.topk` or `aten.sort` and leaves them to PyTorch
(a fallback kernel: a mixture-of-experts gate's `scores.topk(k)`, an `argsort`); a seed
writes them as `topk_op(...)` / `sort_op(...)` (tools/dialect/families.py), with the op's
own arguments, returning (values, indices) as the op does. One program per row holds the
row in registers (up to MAX_N elements) and takes its k largest (or smallest) one at a
time: the key of the largest live element, the smallest index holding it (so equal keys
come out in index order, as a stable sort gives them), then that element leaves the row.
NaN ranks above every number, as torch's topk and sort rank it. O(k·n) per row: meant for
the short rows a gate or a small sort has, not for sorting long ones. A row longer than
MAX_N (top-k sampling over a vocabulary) is read in LONG_CHUNK pieces, one read of it per pick
(`select_long_kernel`), in the same order. Keys: floats of 32 bits or fewer as fp32 (exact),
float64 and integers in their own type (rows up to MAX_N); any strides, or a contiguous copy
where the dims around the one selected along do not collapse into one stride each.
"""
import torch
import triton
import triton.language as tl

MAX_N = 16384    # elements per row one program holds; longer rows: select_long_kernel
LONG_CHUNK = 4096   # elements a longer row is read in, per read


@triton.jit
def select_kernel(x_ptr, val_ptr, idx_ptr, n, k, inner, x_so, x_sn, x_si,
                  LARGEST: tl.constexpr, BLOCK_N: tl.constexpr, KEYS: tl.constexpr):
    # KEYS: 0 floats of 32 bits or fewer (compared as fp32, exact), 1 float64, 2 integers (in their own type)
    row = tl.program_id(0)
    o = row // inner
    i = row % inner
    base = x_ptr + o.to(tl.int64) * x_so + i.to(tl.int64) * x_si
    offs = tl.arange(0, BLOCK_N)
    live = offs < n
    v = tl.load(base + offs.to(tl.int64) * x_sn, mask=live, other=0)
    if KEYS == 0:
        v = v.to(tl.float32)
    nan = v != v
    if KEYS == 2:   # ~v orders as -v does, without -v's overflow at the type's minimum
        key = v if LARGEST else ~v
    elif LARGEST:     # NaN ranks above every number: first among the largest, last among the smallest
        key = tl.where(nan, float("inf"), v)
    else:
        key = tl.where(nan, float("-inf"), -v)
    floor = tl.min(key, axis=0)   # at most every live key: what a spent element is taken to be
    # outputs: (outer, k, inner) contiguous
    out_base = o.to(tl.int64) * k * inner + i
    for j in range(0, k):
        top = tl.max(tl.where(live, key, floor), axis=0)
        hit = live & (key == top)
        if LARGEST:     # a NaN before a true +inf
            pick = tl.min(tl.where(hit & nan, offs, BLOCK_N), axis=0)
        else:           # a true +inf before a NaN
            pick = tl.min(tl.where(hit & (nan == 0), offs, BLOCK_N), axis=0)
        at = tl.where(pick < BLOCK_N, pick, tl.min(tl.where(hit, offs, BLOCK_N), axis=0))
        value = tl.load(base + at.to(tl.int64) * x_sn)
        tl.store(val_ptr + out_base + j * inner, value)
        tl.store(idx_ptr + out_base + j * inner, at.to(tl.int64))
        live = live & (offs != at)


@triton.jit
def _rank(v, LARGEST: tl.constexpr):
    """An element's place in the order taken: (class, key), the larger first; NaN's class is
    above every number's for the largest (first), below for the smallest (last)."""
    nan = v != v
    if LARGEST:
        return nan.to(tl.int32), tl.where(nan, 0.0, v)
    return (nan == 0).to(tl.int32), tl.where(nan, 0.0, -v)


@triton.jit
def select_long_kernel(x_ptr, val_ptr, idx_ptr, n, k, inner, x_so, x_sn, x_si,
                       LARGEST: tl.constexpr, CHUNK: tl.constexpr):
    """select_kernel's order for rows longer than one program holds: the j-th pick is the
    first element, in (class, key) descending then index ascending, after the (j-1)-th; each
    pick reads the whole row in CHUNK-wide pieces. O(k·n) loads."""
    row = tl.program_id(0)
    o = row // inner
    i = row % inner
    base = x_ptr + o.to(tl.int64) * x_so + i.to(tl.int64) * x_si
    out_base = o.to(tl.int64) * k * inner + i
    offs = tl.arange(0, CHUNK)
    p_cls = 2              # the pick before the first: above every element
    p_key = 0.0
    p_idx = -1
    for j in range(0, k):
        b_cls = -1
        b_key = 0.0
        b_idx = n
        for start in range(0, n, CHUNK):
            at = start + offs
            ok = at < n
            v = tl.load(base + at.to(tl.int64) * x_sn, mask=ok, other=0.0).to(tl.float32)
            cls, key = _rank(v, LARGEST)
            after = (cls < p_cls) | ((cls == p_cls) & ((key < p_key) | ((key == p_key) & (at > p_idx))))
            live = ok & after
            c_cls = tl.max(tl.where(live, cls, -1), axis=0)
            in_cls = live & (cls == c_cls)
            c_key = tl.max(tl.where(in_cls, key, float("-inf")), axis=0)
            c_idx = tl.min(tl.where(in_cls & (key == c_key), at, n), axis=0)
            better = (c_cls > b_cls) | ((c_cls == b_cls) & ((c_key > b_key) | ((c_key == b_key) & (c_idx < b_idx))))
            b_cls = tl.where(better, c_cls, b_cls)
            b_key = tl.where(better, c_key, b_key)
            b_idx = tl.where(better, c_idx, b_idx)
        value = tl.load(base + b_idx.to(tl.int64) * x_sn)
        tl.store(val_ptr + out_base + j * inner, value)
        tl.store(idx_ptr + out_base + j * inner, b_idx.to(tl.int64))
        p_cls = b_cls
        p_key = b_key
        p_idx = b_idx


def _collapsed(x, dims):
    """The stride of `dims` of x read as one dimension (0 where none is longer than 1), or None."""
    kept = [(x.shape[a], x.stride(a)) for a in dims if x.shape[a] > 1]
    if [s for (_, s), (n_in, s_in) in zip(kept, kept[1:]) if s != s_in * n_in]:   # not any(): a seed defines its own
        return None
    return kept[-1][1] if kept else 0


def _select(x, k: int, dim: int, largest: bool):
    if x.dim() == 0:   # a 0-d input's values and indices are 0-d too
        values, indices = _select(x.reshape(1), k, 0, largest)
        return values.reshape(()), indices.reshape(())
    dim = dim % x.dim()
    n = x.shape[dim]
    if not 0 <= k <= n:
        raise ValueError(f"topk: k={k} out of range for a dimension of {n}")
    outer = 1
    for s in x.shape[:dim]:
        outer *= s
    inner = 1
    for s in x.shape[dim + 1:]:
        inner *= s
    shape = list(x.shape)
    shape[dim] = k
    values = torch.empty(shape, device=x.device, dtype=x.dtype)
    indices = torch.empty(shape, device=x.device, dtype=torch.int64)
    if values.numel() == 0:
        return values, indices
    # x as (outer, n, inner): the dims before `dim` collapse into one stride, those after too (a
    # dim of size 1 takes no part: its stride is anything), or x is read from a contiguous copy
    before, after = _collapsed(x, range(dim)), _collapsed(x, range(dim + 1, x.dim()))
    if before is None or after is None:
        x = x.contiguous()
        before, after = _collapsed(x, range(dim)), _collapsed(x, range(dim + 1, x.dim()))
    so, si, strides = before, after, x.stride()
    keys = 0 if x.dtype.is_floating_point and x.dtype.itemsize <= 4 else 1 if x.dtype == torch.float64 else 2
    if n > MAX_N and keys:
        raise ValueError(f"topk / sort: rows of more than {MAX_N} {x.dtype} values are not supported")
    if n > MAX_N:   # a row no program holds: one read of it per pick
        select_long_kernel[(outer * inner,)](x, values, indices, n, k, inner, so, strides[dim], si,
                                             LARGEST=bool(largest), CHUNK=LONG_CHUNK, num_warps=8)
        return values, indices
    block = max(16, triton.next_power_of_2(n))
    select_kernel[(outer * inner,)](x, values, indices, n, k, inner, so, strides[dim], si,
                                    LARGEST=bool(largest), BLOCK_N=block, KEYS=keys,
                                    num_warps=4 if block <= 2048 else 8)
    return values, indices


def topk_op(x, k, dim=-1, largest=True, sorted=True, precision="ieee"):
    """`torch.ops.aten.topk.default(x, k, dim, largest, sorted)`: (values, indices), the
    k largest (smallest) along `dim`, in order (also when `sorted` is False: any order is
    the op's). `precision` is unused (no dot): the converter gives every family launch one."""
    return _select(x, int(k), int(dim), bool(largest))


def sort_op(x, dim=-1, descending=False, stable=None, precision="ieee"):
    """`torch.ops.aten.sort.default(x, dim, descending)` and `aten.sort.stable(x, stable=,
    dim=, descending=)`: (values, indices) along `dim`; equal keys keep their order."""
    return _select(x, x.shape[int(dim) % max(1, x.dim())] if x.dim() else 1, int(dim), bool(descending))
