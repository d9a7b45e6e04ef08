"""krefine's lookup kernels, in Triton: nn.EmbeddingBag and torch.cdist, two ops Inductor has no
Triton lowering for and leaves to PyTorch (fallback kernels) on every device.

A seed writes `torch.ops.aten._embedding_bag.default(...)` as `embedding_bag_op(...)` and
`torch.ops.aten._cdist_forward.default(...)` as `cdist_op(...)` (tools/dialect/families.py),
with the op's own arguments:

  embedding_bag_op: one program per (bag, block of columns) walks the bag's indices
  (offsets[b] to offsets[b+1]) and sums, averages or takes the maximum of the rows, each
  scaled by its per-sample weight where given (sum only, as torch allows); an index equal to
  padding_idx is skipped and not counted; an empty bag is zeros. Returns the op's 4-tuple
  with three empty tensors in place of offset2bag, bag_size and max_indices, which only the
  backward reads (the converter accepts a capture that reads element 0 alone).
  cdist_op: one program per (batch, block of rows of x1, block of rows of x2) accumulates
  sum |a - b|^p over the feature dimension, by differences (exact where torch's p = 2 path
  may use a matrix product, ||a||² + ||b||² - 2ab, which cancels); p = 0 counts nonzero
  differences, p = inf takes their maximum.

Both accumulate in fp32, in fp64 for a float64 output.

This file stands alone (torch and triton only): a seed copies its text, unchanged, into its
`ModelNew`, so `best.py` carries it.
"""
import math

import torch
import triton
import triton.language as tl

MODES = {0: "sum", 1: "mean", 2: "max"}
# 2**-126, fp32's smallest normal: Triton types a smaller float literal (1e-38) as fp64, and
# Triton 3.6 then widens the fp32 tensor it meets to fp64 (3.9 keeps it fp32)
FLT_MIN = tl.constexpr(1.1754943508222875e-38)


@triton.jit
def embedding_bag_kernel(w_ptr, idx_ptr, off_ptr, psw_ptr, out_ptr, n_idx, n_bags, dim, padding_idx,
                         w_sr, out_sr, MODE: tl.constexpr, HAS_PSW: tl.constexpr, LAST_OFFSET: tl.constexpr,
                         BLOCK: tl.constexpr):
    bag = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    ok = cols < dim
    start = tl.load(off_ptr + bag)
    if LAST_OFFSET:     # offsets has n_bags + 1 entries, the last the end
        end = tl.load(off_ptr + bag + 1)
    else:
        end = tl.where(bag + 1 < n_bags, tl.load(off_ptr + bag + 1, mask=bag + 1 < n_bags, other=0), n_idx)
    if MODE == 2:
        acc = tl.full([BLOCK], float("-inf"), tl.float64 if out_ptr.dtype.element_ty == tl.float64 else tl.float32)
    else:
        acc = tl.zeros([BLOCK], tl.float64 if out_ptr.dtype.element_ty == tl.float64 else tl.float32)
    count = 0
    for i in range(start, end):
        row = tl.load(idx_ptr + i)
        if row != padding_idx:
            v = tl.load(w_ptr + row * w_sr + cols, mask=ok, other=0.0).to(acc.dtype)
            if HAS_PSW:
                v = v * tl.load(psw_ptr + i).to(acc.dtype)
            if MODE == 2:
                acc = tl.maximum(acc, v)
            else:
                acc += v
            count += 1
    if MODE == 1:
        acc = acc / tl.maximum(count, 1).to(acc.dtype)
    if MODE == 2:
        acc = tl.where(count > 0, acc, 0.0)
    tl.store(out_ptr + bag * out_sr + cols, acc.to(out_ptr.dtype.element_ty), mask=ok)


def embedding_bag_op(weight, indices, offsets, scale_grad_by_freq=False, mode=0, sparse=False,
                     per_sample_weights=None, include_last_offset=False, padding_idx=-1, precision="ieee"):
    """`torch.ops.aten._embedding_bag.default(weight, indices, offsets, ...)` (1-D indices with
    offsets, as nn.EmbeddingBag passes 2-D input): (output, offset2bag, bag_size,
    max_indices), the last three as empty tensors (the backward's; see the module
    docstring). `precision` is unused (no dot): the converter gives every family launch one."""
    mode = int(mode)
    if mode not in MODES:
        raise ValueError(f"embedding_bag: unknown mode {mode}")
    if per_sample_weights is not None and mode != 0:
        raise ValueError("embedding_bag: per_sample_weights only with mode 'sum', as torch allows")
    if indices.dim() != 1 or offsets.dim() != 1 or weight.dim() != 2:
        raise ValueError("embedding_bag: 1-D indices and offsets and a 2-D weight")
    weight, indices, offsets = weight.contiguous(), indices.contiguous(), offsets.contiguous()
    n_bags = offsets.numel() - 1 if include_last_offset else offsets.numel()
    dim = weight.shape[1]
    out = torch.empty((n_bags, dim), device=weight.device, dtype=weight.dtype)
    empty = torch.empty(0, device=weight.device, dtype=torch.int64)
    if out.numel():
        block = max(16, min(256, triton.next_power_of_2(dim)))
        psw = per_sample_weights.contiguous() if per_sample_weights is not None else weight
        embedding_bag_kernel[(n_bags, triton.cdiv(dim, block))](
            weight, indices, offsets, psw, out, indices.numel(), n_bags, dim,
            -1 if padding_idx is None else int(padding_idx), weight.stride(0), out.stride(0),
            MODE=mode, HAS_PSW=per_sample_weights is not None, LAST_OFFSET=bool(include_last_offset), BLOCK=block)
    return out, empty, empty, empty


@triton.jit
def cdist_kernel(a_ptr, b_ptr, out_ptr, P, R, M, p,
                 a_sb, a_sp, a_sm, b_sb, b_sr, b_sm, o_sb, o_sp, o_sr,
                 NORM: tl.constexpr, BLOCK_P: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_M: tl.constexpr):
    batch = tl.program_id(0)
    rows = tl.program_id(1) * BLOCK_P + tl.arange(0, BLOCK_P)
    cols = tl.program_id(2) * BLOCK_R + tl.arange(0, BLOCK_R)
    acc = tl.zeros([BLOCK_P, BLOCK_R], tl.float64 if out_ptr.dtype.element_ty == tl.float64 else tl.float32)
    a_base = a_ptr + batch.to(tl.int64) * a_sb
    b_base = b_ptr + batch.to(tl.int64) * b_sb
    for m0 in range(0, M, BLOCK_M):
        ks = m0 + tl.arange(0, BLOCK_M)
        a = tl.load(a_base + rows[:, None] * a_sp + ks[None, :] * a_sm,
                    mask=(rows[:, None] < P) & (ks[None, :] < M), other=0.0).to(acc.dtype)
        b = tl.load(b_base + cols[:, None] * b_sr + ks[None, :] * b_sm,
                    mask=(cols[:, None] < R) & (ks[None, :] < M), other=0.0).to(acc.dtype)
        d = tl.abs(a[:, None, :] - b[None, :, :])          # [BLOCK_P, BLOCK_R, BLOCK_M]; padding gives 0
        if NORM == 0:       # p = 0: nonzero differences
            acc += tl.sum(tl.where(d != 0.0, 1.0, 0.0), axis=2)
        elif NORM == 1:
            acc += tl.sum(d, axis=2)
        elif NORM == 2:
            acc += tl.sum(d * d, axis=2)
        elif NORM == 3:     # p = inf
            acc = tl.maximum(acc, tl.max(d, axis=2))
        else:               # |d|^p as exp2(p log2 |d|), 0 where d is 0
            acc += tl.sum(tl.where(d > 0.0, tl.exp2(p * tl.log2(tl.maximum(d, FLT_MIN))), 0.0), axis=2)
    if NORM == 2:
        acc = tl.sqrt(acc)
    elif NORM == 4:
        acc = tl.where(acc > 0.0, tl.exp2(tl.log2(tl.maximum(acc, FLT_MIN)) / p), 0.0)
    ok = (rows[:, None] < P) & (cols[None, :] < R)
    tl.store(out_ptr + batch.to(tl.int64) * o_sb + rows[:, None] * o_sp + cols[None, :] * o_sr,
             acc.to(out_ptr.dtype.element_ty), mask=ok)


def cdist_op(x1, x2, p=2.0, compute_mode=None, precision="ieee"):
    """`torch.ops.aten._cdist_forward.default(x1, x2, p, compute_mode)`: x1 (..., P, M) and x2
    (..., R, M), their batch dimensions broadcast, give (..., P, R) of the p-norm distances
    (computed by differences whatever `compute_mode` asks). `precision` is unused (no dot)."""
    p = float(p)
    if p < 0 or math.isnan(p):
        raise ValueError(f"cdist: p must be a non-negative number, got {p}")
    if x1.dim() < 2 or x2.dim() < 2 or x1.shape[-1] != x2.shape[-1]:
        raise ValueError(f"cdist: x1 {tuple(x1.shape)} and x2 {tuple(x2.shape)} need (..., N, M) with one M")
    batch = torch.broadcast_shapes(x1.shape[:-2], x2.shape[:-2])
    P, R = x1.shape[-2], x2.shape[-2]
    out = torch.empty((*batch, P, R), device=x1.device, dtype=torch.result_type(x1, x2))
    if out.numel():
        norm = {0.0: 0, 1.0: 1, 2.0: 2, math.inf: 3}.get(p, 4)
        # broadcast batch dimensions have stride 0 (expand copies nothing)
        a, b, o = (t.expand(*batch, *t.shape[-2:]) for t in (x1, x2, out))
        _cdist_launch(a, b, o, p, norm)
    return out


def _cdist_launch(a, b, o, p, norm):
    """One launch over the last batch dimension (a grid axis); the ones before it, if any, one
    launch each (a slice is a view: nothing is copied)."""
    if a.dim() > 3:
        for k in range(a.shape[0]):
            _cdist_launch(a[k], b[k], o[k], p, norm)
        return
    a, b, o = (t if t.dim() == 3 else t[None] for t in (a, b, o))
    P, M, R = a.shape[1], a.shape[2], b.shape[1]
    cdist_kernel[(o.shape[0], triton.cdiv(P, 16), triton.cdiv(R, 16))](
        a, b, o, P, R, M, p, *a.stride(), *b.stride(), *o.stride(), NORM=norm, BLOCK_P=16, BLOCK_R=16, BLOCK_M=16)
