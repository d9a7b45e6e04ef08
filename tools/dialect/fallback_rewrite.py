"""Ops Inductor leaves to PyTorch (a fallback kernel, so no pure-Triton seed), rewritten for
every capture (tools/dialect/inductor_capture.py) as ops it writes Triton for: the same
values, computed in fp32 as the reference's dtype gives.

- `aten._trilinear` (nn.Bilinear, F.bilinear): the three operands unsqueezed at their expand
  dims, multiplied and summed over `sumdim`: one fused reduction (ATen's own definition,
  aten/src/ATen/native/Linear.cpp, without its bmm regrouping).
- `aten.kthvalue` and `aten.median` (with and without a dim): a stable sort along the dim,
  then the k-th value (median: the lower one, k = (n + 1) // 2) and its index; median gives
  NaN (and the first NaN's index) where the slice holds one, as torch.median does: the stable
  sort puts NaNs last in index order, so that is the sorted slice's entry n - (NaN count).
- `aten.embedding_renorm` (nn.Embedding's `max_norm`, which renormalises the rows the
  forward looks up, in place, before the lookup): the looked-up rows' p-norms, each row whose
  norm passes max_norm scaled by max_norm / (norm + 1e-7) (ATen's constant,
  aten/src/ATen/native/Embedding.cpp `embedding_renorm_`), put back by index: a row looked up
  twice is written twice with the same value.

- `aten.scatter.src` of booleans (a top-p filter's `mask.scatter(1, order, mask)`): Inductor's
  cuda backend leaves a bool (or int64) scatter to PyTorch, for want of an atomic add no plain
  scatter needs (torch/_inductor/utils.py `use_scatter_fallback`); scattered as uint8 and
  read back as bool, the same values.

And one op Inductor miscompiles:

- `aten.add.Tensor` with an `alpha` other than 1 (`torch.add(b, x @ w, alpha=0.1)`, an EMA's
  `avg.mul_(decay).add_(a @ b, alpha=1 - decay)`): Inductor's post-grad pass that fuses a
  matmul and an add into one addmm matched such an add and dropped its alpha (torch 2.11 and
  2.13: the seed, and torch.compile itself, computed b + x @ w). Written as the add of
  `y * alpha`, the product ATen's own kernel forms, there is no alpha left to drop.

- `aten.grid_sampler_2d` in nearest mode: torch's decomposition maps grid coordinates to
  pixels as `x * (size / 2 - 1 / 2) + (size / 2 - 1 / 2)`, eager as `((x + 1) / 2) * (size - 1)`
  (aten/src/ATen/native/GridSampler.h `grid_sampler_unnormalize`); a point halfway between two
  pixels (an identity grid resizing a label map) came out 0.5 exactly, or 0.50000006, and
  rounded half-to-even to another pixel than eager's: whole columns off. Written with eager's
  arithmetic, then padding as torch's decomposition and eager both apply it.

- `aten.grid_sampler_3d` (F.grid_sample of a volume), which Inductor has no decomposition for:
  eager's own arithmetic (aten/src/ATen/native/GridSampler.cpp): each coordinate unnormalized
  and padded as `grid_sampler_compute_source_index`; trilinear, the eight corners in eager's
  order weighted as eager weights them, a corner outside the volume adding nothing; nearest, the
  voxel at the rounded coordinate (half to even, as nearbyint), zero outside.

And one decomposition of torch's that is wrong:

- `aten.multilabel_margin_loss_forward` (F.multilabel_margin_loss): torch's decomposition
  (torch/_decomp/decompositions.py, torch 2.11 and 2.13) treats the target slots after the first
  -1 as class 0 and adds their hinge terms (pytorch/pytorch#141017: eager 3.86, compiled 11.70).
  Written as eager's loop computes it (aten/src/ATen/native/LossMultiLabelMargin.cpp): each target
  slot before the first -1 against every class that is no target, sum(max(0, 1 - (x[t] - x[i])))
  over the class count; its is_target as eager's.

Grid sampling of an image that is not nearest goes to Inductor's own decomposition. A form outside these
(a 0-dim input, an add whose alpha is 1) returns NotImplemented: the op stays a fallback and
the seed names it.
"""
from __future__ import annotations


def fallback_decompositions() -> dict:
    import torch
    aten = torch.ops.aten
    return {aten._trilinear.default: trilinear, aten.kthvalue.default: kthvalue,
            aten.median.dim: median_dim, aten.median.default: median,
            aten.embedding_renorm.default: embedding_renorm, aten.scatter.src: scatter_bool,
            aten.add.Tensor: add_alpha, aten.grid_sampler_2d.default: grid_sample_nearest,
            aten.grid_sampler_3d.default: grid_sample_3d,
            aten.multilabel_margin_loss_forward.default: multilabel_margin_loss,
            aten._adaptive_avg_pool3d.default: adaptive_avg_pool3d}


def adaptive_avg_pool3d(a, output_size):
    """A box mean is separable: the mean along depth of the means over (height, width), each
    an adaptive average over two dims, which Inductor writes in Triton (the 3-D one it leaves
    to PyTorch, whatever the sizes). Every (height, width) box of one output position has the
    same size at each depth, so the mean of means is the box's mean."""
    import torch
    if a.dim() not in (4, 5):
        return NotImplemented
    x = a.unsqueeze(0) if a.dim() == 4 else a
    n, c, d, h, w = x.shape
    od, oh, ow = output_size
    y = torch.ops.aten._adaptive_avg_pool2d(x.reshape(n, c * d, h, w), [oh, ow])
    y = torch.ops.aten._adaptive_avg_pool2d(y.reshape(n, c, d, oh * ow), [od, oh * ow]).reshape(n, c, od, oh, ow)
    return y.squeeze(0) if a.dim() == 4 else y


def grid_sample_nearest(a, grid, interpolation_mode=0, padding_mode=0, align_corners=False):
    import torch
    if interpolation_mode != 1 or a.dim() != 4:   # Inductor's own decomposition (a fallback beside it: refused)
        from torch._inductor.decomposition import select_decomp_table
        return select_decomp_table()[torch.ops.aten.grid_sampler_2d.default](
            a, grid, interpolation_mode, padding_mode, align_corners)
    n, c, height, width = a.shape
    _, out_h, out_w, _ = grid.shape
    ix, iy = (_source_index(grid[..., k], size, padding_mode, align_corners).round()   # half to even, as nearbyint
              for k, size in enumerate((width, height)))
    inside = ((ix >= 0) & (ix < width) & (iy >= 0) & (iy < height)).view(n, 1, out_h, out_w)
    ix = torch.where(inside, ix.view(n, 1, out_h, out_w), 0).long()
    iy = torch.where(inside, iy.view(n, 1, out_h, out_w), 0).long()
    rows, chans = torch.arange(n, device=a.device).view(n, 1, 1, 1), torch.arange(c, device=a.device).view(1, c, 1, 1)
    return torch.where(inside, a[rows, chans, iy, ix], 0)


def _source_index(coords, size: int, padding_mode: int, align_corners: bool):
    """Eager's unnormalize, then its padding (border: clamp; reflection: reflect, then clamp)."""
    import torch
    at = ((coords + 1) / 2) * (size - 1) if align_corners else ((coords + 1) * size - 1) / 2
    if padding_mode == 2:
        low, span = (0.0, size - 1.0) if align_corners else (-0.5, float(size))
        if span > 0:
            dist = (at - low).abs()
            extra, flips = torch.fmod(dist, span), (dist / span).floor()
            at = torch.where(torch.remainder(flips, 2) == 0, extra + low, span + low - extra)
        else:
            at = torch.zeros_like(at)
    return at.clamp(0, size - 1) if padding_mode in (1, 2) else at


def grid_sample_3d(a, grid, interpolation_mode=0, padding_mode=0, align_corners=False):
    import torch
    if interpolation_mode not in (0, 1) or a.dim() != 5:   # bicubic has no 3-D form: eager refuses it too
        return NotImplemented
    n, c, depth, height, width = a.shape
    _, out_d, out_h, out_w, _ = grid.shape
    ix, iy, iz = (_source_index(grid[..., k], size, padding_mode, align_corners).view(n, 1, out_d, out_h, out_w)
                  for k, size in enumerate((width, height, depth)))
    rows = torch.arange(n, device=a.device).view(n, 1, 1, 1, 1)
    chans = torch.arange(c, device=a.device).view(1, c, 1, 1, 1)

    def voxel(z, y, x):   # a[n, c, z, y, x], 0 outside the volume
        inside = (x >= 0) & (x < width) & (y >= 0) & (y < height) & (z >= 0) & (z < depth)
        at = [torch.where(inside, t, 0).long() for t in (z, y, x)]
        return torch.where(inside, a[rows, chans, at[0], at[1], at[2]], 0)
    if interpolation_mode == 1:
        return voxel(iz.round(), iy.round(), ix.round())
    x0, y0, z0 = ix.floor(), iy.floor(), iz.floor()
    out = None      # tnw, tne, tsw, tse, bnw, bne, bsw, bse; tnw's weight (x1 - ix) * (y1 - iy) * (z1 - iz)
    for z, wz in ((z0, z0 + 1 - iz), (z0 + 1, iz - z0)):
        for y, wy in ((y0, y0 + 1 - iy), (y0 + 1, iy - y0)):
            for x, wx in ((x0, x0 + 1 - ix), (x0 + 1, ix - x0)):
                term = voxel(z, y, x) * (wx * wy * wz)
                out = term if out is None else out + term
    return out


def eager_multilabel_margin():
    """While it is entered, torch's own decomposition of multilabel_margin_loss_forward, which runs
    at the Autograd key before any decomposition table is read, is `multilabel_margin_loss`."""
    import contextlib

    import torch
    from torch._C import DispatchKey
    op, key = torch.ops.aten.multilabel_margin_loss_forward.default, DispatchKey.Autograd
    was = op.py_kernels.get(key)

    @contextlib.contextmanager
    def entered():
        op.py_kernels[key] = multilabel_margin_loss
        op._dispatch_cache.clear()
        try:
            yield
        finally:
            op.py_kernels[key] = was
            op._dispatch_cache.clear()
    return entered() if was is not None else contextlib.nullcontext()   # no decomposition there to replace


def multilabel_margin_loss(x, target, reduction):
    import torch
    if x.dim() > 2 or target.shape != x.shape:
        return NotImplemented
    classes = x.shape[-1] if x.dim() else 1
    x2, t2 = x.reshape(-1, classes), target.reshape(-1, classes)
    slot = torch.cumprod((t2 >= 0).to(torch.int64), dim=1).bool()   # the slots before the first -1
    at = torch.where(slot, t2, 0)
    is_target = torch.zeros_like(x2).scatter_add(1, at, slot.to(x2.dtype)) > 0
    hinge = (1 - (x2.gather(1, at).unsqueeze(2) - x2.unsqueeze(1))).clamp_min(0)   # [sample, slot, class]
    loss = torch.where(slot.unsqueeze(2) & ~is_target.unsqueeze(1), hinge, 0).sum((1, 2)) / classes
    loss = loss.reshape(x.shape[:-1]) if x.dim() else loss.reshape(())
    loss = loss if reduction == 0 else loss.mean() if reduction == 1 else loss.sum()
    return loss, is_target.to(x.dtype).reshape(x.shape)


def add_alpha(x, y, *, alpha=1):
    if alpha == 1:
        return NotImplemented
    import torch
    return torch.ops.aten.add.Tensor(x, torch.ops.aten.mul.Tensor(y, alpha))


def scatter_bool(x, dim, index, src):
    import torch
    if src.dtype != torch.bool or x.dtype != torch.bool:
        return NotImplemented
    return torch.ops.aten.scatter.src(x.to(torch.uint8), dim, index, src.to(torch.uint8)).to(torch.bool)


def trilinear(i1, i2, i3, expand1, expand2, expand3, sumdim, unroll_dim=1):
    total = i1.dim() + len(expand1)

    def expanded(t, dims):
        for d in range(total):
            if d in dims:
                t = t.unsqueeze(d)
        return t
    out = expanded(i1, expand1) * expanded(i2, expand2) * expanded(i3, expand3)
    return out.sum(list(sumdim)) if len(sumdim) else out


def kthvalue(x, k, dim=-1, keepdim=False):
    import torch
    if x.dim() == 0:
        return NotImplemented
    values, indices = torch.sort(x, dim=dim, stable=True)
    values, indices = values.narrow(dim, k - 1, 1), indices.narrow(dim, k - 1, 1)
    if not keepdim:
        values, indices = values.squeeze(dim), indices.squeeze(dim)
    return values, indices


def median_dim(x, dim=0, keepdim=False):
    """The lower median, or NaN and the first NaN's index where the slice holds one. A stable
    sort puts NaN last, in index order, so both are one gather from the sorted slice: position
    k - 1, or n - (NaN count) where the last sorted value is NaN. (Not isnan().any() beside an
    argmax of isnan: Inductor's cuda fusion of that pair (torch 2.11, Triton 3.6) read every
    row as holding a NaN.)"""
    import torch
    if x.dim() == 0:
        return NotImplemented
    n = x.shape[dim]
    values, indices = torch.sort(x, dim=dim, stable=True)
    pos = torch.full_like(values.narrow(dim, 0, 1), (n - 1) // 2, dtype=torch.int64)
    if x.is_floating_point():   # an integer tensor holds no NaN
        nans = (values != values).sum(dim, keepdim=True)
        pos = torch.where(nans > 0, n - nans, pos)
    values, indices = values.gather(dim, pos), indices.gather(dim, pos)
    if not keepdim:
        values, indices = values.squeeze(dim), indices.squeeze(dim)
    return values, indices


def median(x):
    if x.dim() == 0:
        return NotImplemented
    return median_dim(x.reshape(-1), 0)[0]


def embedding_renorm(weight, indices, max_norm, norm_type):
    """The table with each looked-up row whose norm passes `max_norm` scaled down to it."""
    import torch
    if weight.dim() != 2:
        return NotImplemented
    idx = indices.reshape(-1)
    rows = weight[idx]
    norms = torch.linalg.vector_norm(rows, norm_type, dim=1, keepdim=True)
    scale = torch.where(norms > max_norm, max_norm / (norms + 1e-7), torch.ones_like(norms))
    return weight.index_put((idx,), rows * scale)
