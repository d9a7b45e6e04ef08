"""Convolutions that Inductor has no Triton template for, rewritten as ones it has (and
3-D average pooling, which has no Triton kernel at all, as a convolution).

Inductor's convolution template (max-autotune, Triton backend) takes 2-D and 3-D,
non-transposed, undilated convolutions; a transposed, 1-D or dilated one fails the seed's
template compile with "NoValidChoicesError". `template_decompositions()` is a
decomposition table for that compile (tools/dialect/inductor_capture.py): `aten.convolution` is rewritten, exactly
(the same sums, in fp32), as

- 1-D: the 2-D convolution of a height-1 image;
- dilated: the convolution with the kernel's taps spread apart by zeros;
- transposed: the convolution of the input spread apart by zeros (stride - 1 between
  elements), padded by dilation * (kernel - 1) - padding (+ output_padding at the end;
  negative: cropped), with the kernel flipped and its in/out channels swapped per group.

Each step calls `aten.convolution` again, and tracing applies the table to that call too,
until what is left is a convolution the template takes (the rest of the work is pointwise,
which Inductor writes as Triton kernels). The zeros cost multiply-adds (a stride-s
transposed convolution does s^d times the work): a correct pure-Triton seed to refine,
not a fast one.

A depthwise convolution (one input channel per group, at most MAX_TAPS kernel taps) is
not left to the template at all: it is the sum over the taps of the input's strided
window times that tap's weight per channel, which Inductor fuses into pointwise Triton
kernels (the padded input, then one kernel reading it once per tap): the GEMM template
makes each group a GEMM of one input channel, far slower than eager. The products are
the convolution's; only the order of the additions differs.
"""
from __future__ import annotations

import itertools
import math

MAX_TAPS = 64   # a depthwise kernel with more taps stays a convolution (one load per tap)


def template_decompositions() -> dict:
    import torch
    return {torch.ops.aten.convolution.default: convolution, torch.ops.aten.avg_pool3d.default: avg_pool3d}


def avg_pool3d(x, kernel_size, stride=(), padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    """3-D average pooling (Inductor: a cuDNN fallback, no Triton kernel at all; level 1's
    46) as the depthwise convolution with a uniform kernel, where that is the same sum:
    zero padding counted, no ceil_mode, no divisor override, a batch dimension."""
    import torch
    k = _triple(kernel_size)
    s = _triple(stride) if stride else k
    p = _triple(padding)
    if ceil_mode or not count_include_pad or divisor_override or x.dim() != 5:
        return NotImplemented
    c = x.shape[1]
    w = x.new_full((c, 1, *k), 1.0 / (k[0] * k[1] * k[2]))
    return torch.ops.aten.convolution.default(x, w, None, s, p, [1, 1, 1], False, [0, 0, 0], c)


def _triple(v) -> list[int]:
    v = [v] if isinstance(v, int) else list(v)
    return v * 3 if len(v) == 1 else v


def convolution(x, w, bias, stride, padding, dilation, transposed, output_padding, groups):
    """aten.convolution's signature; a depthwise convolution (at most MAX_TAPS taps,
    dilated or not) is rewritten as a sum over its taps (`_depthwise`); NotImplemented
    (leave it to Inductor) for any other 2-D / 3-D undilated, non-transposed convolution."""
    import torch
    conv = torch.ops.aten.convolution.default
    nd = w.dim() - 2
    stride, padding, dilation, output_padding = (list(v) for v in (stride, padding, dilation, output_padding))
    if nd == 1:
        y = conv(x.unsqueeze(-2), w.unsqueeze(-2), bias, [1, *stride], [0, *padding], [1, *dilation], transposed,
                 [0, *output_padding], groups)
        return y.squeeze(-2)
    if transposed:
        return _transposed(x, w, bias, stride, padding, dilation, output_padding, groups)
    if groups == x.shape[1] and w.shape[1] == 1 and math.prod(w.shape[2:]) <= MAX_TAPS:
        return _depthwise(x, w, bias, stride, padding, dilation)
    if any(d != 1 for d in dilation):
        return conv(x, _spread(w, dilation, first_dim=2), bias, stride, padding, [1] * nd, False, [0] * nd, groups)
    return NotImplemented


def _depthwise(x, w, bias, stride, padding, dilation):
    """Σ over the kernel's taps of x's strided window (zero-padded) × the tap's weight, per
    output channel (channel c*m + j reads input channel c: m = out / in channels)."""
    import torch
    n, c = x.shape[:2]
    nd, kernel = w.dim() - 2, list(w.shape[2:])
    m = w.shape[0] // c
    out = [(x.shape[2 + i] + 2 * padding[i] - dilation[i] * (kernel[i] - 1) - 1) // stride[i] + 1 for i in range(nd)]
    pads = [p for i in reversed(range(nd)) for p in (padding[i], padding[i])]
    xp = torch.ops.aten.constant_pad_nd.default(x, pads, 0.0)
    if m > 1:   # each input channel feeds m output channels, in order
        xp = xp.unsqueeze(2).expand(n, c, m, *xp.shape[2:]).reshape(n, c * m, *xp.shape[2:])
    y = None
    for taps in itertools.product(*(range(k) for k in kernel)):
        window = xp
        for i, t in enumerate(taps):
            start = t * dilation[i]
            window = window[(slice(None), slice(None), *([slice(None)] * i),
                             slice(start, start + stride[i] * (out[i] - 1) + 1, stride[i]))]
        term = window * w[(slice(None), 0, *taps)].reshape(1, c * m, *[1] * nd)
        y = term if y is None else y + term
    return y if bias is None else y + bias.reshape(1, c * m, *[1] * nd)


def _transposed(x, w, bias, stride, padding, dilation, output_padding, groups):
    import torch
    nd = w.dim() - 2
    kernel = list(w.shape[2:])
    xs = _spread(x, stride, first_dim=2)
    # pads of constant_pad_nd run from the last dimension backwards, (start, end) each
    pads = []
    for i in reversed(range(nd)):
        edge = dilation[i] * (kernel[i] - 1) - padding[i]
        pads += [edge, edge + output_padding[i]]
    xs = torch.ops.aten.constant_pad_nd.default(xs, pads, 0.0)
    c_in, c_out_g = w.shape[0], w.shape[1]
    wt = (w.reshape(groups, c_in // groups, c_out_g, *kernel).transpose(1, 2)
          .reshape(groups * c_out_g, c_in // groups, *kernel).flip(list(range(2, 2 + nd))))
    return torch.ops.aten.convolution.default(xs, wt, bias, [1] * nd, [0] * nd, dilation, False, [0] * nd, groups)


def _spread(t, steps, first_dim: int):
    """`t` with steps[i] - 1 zeros between neighbours along dimension first_dim + i."""
    import torch
    for i, step in enumerate(steps):
        if step == 1:
            continue
        dim = first_dim + i
        n = t.shape[dim]
        gap = list(t.unsqueeze(dim + 1).shape)
        gap[dim + 1] = step - 1
        t = torch.cat([t.unsqueeze(dim + 1), t.new_zeros(gap)], dim=dim + 1)
        t = t.flatten(dim, dim + 1).narrow(dim, 0, (n - 1) * step + 1)
    return t
