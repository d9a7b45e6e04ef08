"""krefine's batch-statistics kernel, in Triton: a training-mode BatchNorm's per-channel mean and
variance, and its running update, in one launch.

`batch_stats(x)` is `torch.var_mean(x, [0, 2, ...], correction=0, keepdim=True)` for x of shape
(N, C, *spatial) with 0 to 3 spatial dims, through any strides (NCHW, channels-last, a view);
`batch_stats(x, running_mean, running_var, momentum, unbias)` also updates the running statistics
in place as a BatchNorm does: running_mean = mean * momentum + running_mean * (1 - momentum), and
running_var the same with var * unbias (n / (n - 1)); strided running statistics are updated
through contiguous copies.

Inductor writes these statistics as a split reduction of three launches (tools/dialect/batch_stats.py
says why that matters). Here the grid is (channel blocks, row splits). Each program reduces its
rows of its channels, less each channel's first value (so a large mean's fp32 rounding does not
swamp a small spread), to a count, mean and sum of squared deviations, tile by tile (Chan's
combination: no sum of squares, so no cancellation), beside the plain sum of x that gives the mean
(the shifted mean is off by about an ulp of the shift, which a mean of 0 does not absorb: a
BatchNorm after a bias-free 1x1 convolution of a normalized input), and writes them to a workspace; then it
takes a ticket (an atomic add, release and acquire). The program that takes a channel block's
last ticket combines the block's partials (at most MAX_SPLITS) as one tile, in a reduction tree
fixed by the code, so the result does not depend on which program finishes last: the same bits at
every run. It writes var and mean (float32, shape
(1, C, 1, ...)) and the running update, and puts the block's ticket back to zero. The workspace
(partials and tickets) is allocated, zeroed, once a layout and stream, and kept: a call allocates
its outputs only, and launches nothing but the kernel (a zeroed allocation a call was a fill
kernel's launch a BatchNorm). A partial is always written in the launch that reads it.

This file stands alone (torch and triton only): a seed copies its text, unchanged, into its
`ModelNew`, so `best.py` carries it.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _chan(n_a, mean_a, m2_a, n_b, mean_b, m2_b):
    """Chan's combination of two (count, mean, M2) per channel; a count of zero adds nothing (also
    the combine function of the last program's tl.reduce)."""
    n = n_a + n_b
    frac = tl.where(n > 0, n_b / tl.maximum(n, 1.0), 0.0)
    delta = mean_b - mean_a
    return n, mean_a + delta * frac, m2_a + m2_b + delta * delta * n_a * frac


@triton.jit
def batch_stats_kernel(x_ptr, work_ptr, var_ptr, mean_ptr, rm_ptr, rv_ptr, C, R, D, H, W, s_n, s_c, s_d, s_h,
                       s_w, rows_per, splits, momentum, unbias, UPDATE: tl.constexpr, BLOCK_R: tl.constexpr,
                       BLOCK_C: tl.constexpr, SPLITS: tl.constexpr):
    pid_c = tl.program_id(0)
    pid_r = tl.program_id(1)
    cs = pid_c * BLOCK_C + tl.arange(0, BLOCK_C)
    c_ok = cs < C
    cnt = tl.zeros([BLOCK_C], tl.float32)
    mean = tl.zeros([BLOCK_C], tl.float32)
    m2 = tl.zeros([BLOCK_C], tl.float32)
    total = tl.zeros([BLOCK_C], tl.float32)   # the sum of x itself: the mean (the shifted one is for M2)
    # every program reduces x less its channel's first value: statistics near 0, not near a large
    # mean whose fp32 rounding (1e4: 1e-3) would swamp a small spread (the shifted-data algorithm)
    shift = tl.load(x_ptr + cs.to(tl.int64) * s_c, mask=c_ok, other=0.0).to(tl.float32)
    first = pid_r * rows_per   # rows (n, d, h, w) in int32: fewer than 2**31 of them
    for start in range(0, rows_per, BLOCK_R):
        rs = first + start + tl.arange(0, BLOCK_R)
        r_ok = rs < R
        w = rs % W
        h = (rs // W) % H
        d = (rs // (W * H)) % D
        n = rs // (W * H * D)
        offs = n.to(tl.int64) * s_n + d.to(tl.int64) * s_d + h.to(tl.int64) * s_h + w.to(tl.int64) * s_w
        ok = r_ok[:, None] & c_ok[None, :]
        v = tl.load(x_ptr + offs[:, None] + cs[None, :].to(tl.int64) * s_c, mask=ok, other=0.0).to(tl.float32)
        total += tl.sum(v, 0)   # 0 where masked
        v = tl.where(ok, v - shift[None, :], 0.0)
        t_n = tl.sum(r_ok.to(tl.float32), 0)
        t_mean = tl.sum(v, 0) / tl.maximum(t_n, 1.0)
        dev = tl.where(ok, v - t_mean[None, :], 0.0)
        cnt, mean, m2 = _chan(cnt, mean, m2, t_n, t_mean, tl.sum(dev * dev, 0))
    own = work_ptr + pid_r * 3 * C + cs
    tl.store(own, mean, mask=c_ok)
    tl.store(own + C, m2, mask=c_ok)
    tl.store(own + 2 * C, total, mask=c_ok)
    # every thread's partials are written before the ticket is taken; the last taker reads them all
    tl.debug_barrier()
    ticket = tl.atomic_add(work_ptr + splits * 3 * C + pid_c, 1.0, sem="acq_rel", scope="gpu")
    if ticket == splits - 1:
        js = tl.arange(0, SPLITS)
        ok = (js < splits)[:, None] & c_ok[None, :]
        part = work_ptr + js[:, None] * 3 * C + cs[None, :]
        p_n = tl.where(ok, tl.minimum(rows_per, R - js * rows_per).to(tl.float32)[:, None], 0.0)
        p_mean = tl.load(part, mask=ok, other=0.0, volatile=True)
        p_m2 = tl.load(part + C, mask=ok, other=0.0, volatile=True)
        total = tl.sum(tl.load(part + 2 * C, mask=ok, other=0.0, volatile=True), 0)
        cnt, mean, m2 = tl.reduce((p_n, p_mean, p_m2), 0, _chan)
        tl.store(work_ptr + splits * 3 * C + pid_c, 0.0)   # every program has taken its ticket: the next call's
        var = m2 / tl.maximum(cnt, 1.0)   # a channel past C has none
        mean = total / tl.maximum(cnt, 1.0)   # not shift + the shifted mean: ~ulp(shift) off a mean near 0
        tl.store(var_ptr + cs, var, mask=c_ok)
        tl.store(mean_ptr + cs, mean, mask=c_ok)
        if UPDATE:
            rm = tl.load(rm_ptr + cs, mask=c_ok, other=0.0)
            rv = tl.load(rv_ptr + cs, mask=c_ok, other=0.0)
            tl.store(rm_ptr + cs, mean * momentum + rm * (1.0 - momentum), mask=c_ok)
            tl.store(rv_ptr + cs, var * unbias * momentum + rv * (1.0 - momentum), mask=c_ok)


MAX_SPLITS = 64   # row splits a channel block: the last program combines them as one (SPLITS, BLOCK_C) tile
_PLANS = {}   # each shape's grid and arguments, made once (the host's time is most of a small layer's)
_WORK = {}    # a workspace of each layout on each stream: partials, then tickets, at zero between calls
_SMS = {}


def _programs(device) -> int:
    """How many programs the grid aims at: four a multiprocessor on a GPU, four on the interpreter."""
    if device.type != "cuda":
        return 4
    if device.index not in _SMS:
        _SMS[device.index] = torch.cuda.get_device_properties(device).multi_processor_count
    return 4 * _SMS[device.index]


def _plan(shape, strides, device):
    n, c, *sp = shape
    s_n, s_c, *s_sp = strides
    sizes, steps = [1] * (3 - len(sp)) + list(sp), [0] * (3 - len(sp)) + list(s_sp)
    rows = n * sizes[0] * sizes[1] * sizes[2]
    block_c = min(triton.next_power_of_2(c), 64 if s_c == 1 else 8)
    block_r = max(16, min(triton.next_power_of_2(rows), 4096 // block_c))
    c_blocks = triton.cdiv(c, block_c)
    splits = max(1, min(_programs(device) // c_blocks, triton.cdiv(rows, block_r), MAX_SPLITS))
    rows_per = triton.cdiv(triton.cdiv(rows, splits), block_r) * block_r
    splits = triton.cdiv(rows, rows_per)
    return ((c_blocks, splits), [c, rows, *sizes, s_n, s_c, *steps, rows_per, splits], block_r, block_c,
            (1, c, *[1] * len(sp)), splits * 3 * c + c_blocks, triton.next_power_of_2(splits))


def batch_stats(x, running_mean=None, running_var=None, momentum=0.1, unbias=1.0):
    """(var, mean) of x over every dim but 1 (biased var), float32, each of shape (1, C, 1, ...);
    with running_mean and running_var (float32, C elements each), updates them in place too."""
    assert 2 <= x.dim() <= 5 and x.numel() > 0, "batch_stats takes (N, C) to (N, C, D, H, W), not empty"
    update = running_mean is not None
    assert update == (running_var is not None), "batch_stats updates both running statistics or neither"
    if update and (running_mean.stride(0) != 1 or running_var.stride(0) != 1):   # the kernel updates rm[c]
        rm, rv = running_mean.contiguous(), running_var.contiguous()
        var, mean = batch_stats(x, rm, rv, momentum, unbias)
        running_mean.copy_(rm)
        running_var.copy_(rv)
        return var, mean
    key = (tuple(x.shape), x.stride(), x.device)
    plan = _PLANS.get(key)
    if plan is None:
        if len(_PLANS) >= 1024:
            _PLANS.clear()
        plan = _PLANS[key] = _plan(x.shape, x.stride(), x.device)
    grid, ints, block_r, block_c, shape, size, splits_p2 = plan
    var = torch.empty(shape, dtype=torch.float32, device=x.device)
    mean = torch.empty(shape, dtype=torch.float32, device=x.device)
    stream = torch.cuda.current_stream(x.device).cuda_stream if x.device.type == "cuda" else 0
    # keyed by the layout, not the size alone: two shapes of one size place their tickets apart, and
    # one's partials would land on the other's tickets (DenseNet-201's 1376 and 352 channels)
    where = (x.device, stream, size, grid[0])
    work = _WORK.get(where)
    if work is None:
        if len(_WORK) >= 1024:
            _WORK.clear()
        work = _WORK[where] = torch.zeros(size, dtype=torch.float32, device=x.device)
    batch_stats_kernel[grid](x, work, var, mean, running_mean if update else var, running_var if update else var,
                             *ints, float(momentum), float(unbias), UPDATE=update, BLOCK_R=block_r,
                             BLOCK_C=block_c, SPLITS=splits_p2, num_warps=4)
    return var, mean
