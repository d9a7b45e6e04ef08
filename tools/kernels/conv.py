"""Convolution in Triton: forward (1-D, 2-D, 3-D) and transposed, with a fused epilogue.

This file stands alone (torch and triton only): a seed copies its text, unchanged, into its `ModelNew`
(tools/dialect/kernelbook.py), so `best.py` carries it.

Layout: any strides, each tensor read and written through its own (a channels-last input, what Inductor hands a
convolution, is read channel-contiguous, not copied; a strided bias is copied); 1-D and 2-D are 3-D with unit leading
dimensions. Weights: OIDHW forward, IODHW transposed, any strides; "igemm" packs one in its order (`_igemm_order`)
unless laid out so. The output takes the input's memory format (torch's rule) or `out_stride`. A call's Python that
depends on its key alone (shapes, strides, arguments) is done once a key (`_planned`).

Members (the launcher picks one; `member=` forces it):
  "igemm"      implicit GEMM (1x1: a GEMM): M = batch x output positions, N = output channels of a group,
               K = input channels of a group x taps; a loop over taps, then BLOCK_K channels at a time through
               `tl.dot` at `precision` ("ieee" exact fp32, "tf32x3", "tf32": operands rounded to TF32 as cuDNN does).
  "direct"     the same tiles, one input channel at a time as rank-1 fp32 FMAs (no dot), < 16 channels in a group.
  "depthwise"  one input channel per group: tiles of positions x channels, an FMA a tap.
  "phases"     transposed convolution without zero insertion: outputs split by position modulo the stride,
               a phase a program, gathering over the taps that reach it; dot or rank-1.

Epilogue, in this order, fused into the store: + bias[channel], x scale, + residual (the output's shape, any
strides), activation ("relu", "leaky_relu", "sigmoid", "tanh", "silu"), clamp(lo, hi). Accumulation is fp32 (fp64 for
float64, exact dots, out_dtype said as Triton 3.6 needs); the store casts to the output dtype (the input's).

Not covered: string padding ("same"/"valid"), padding_mode other than zeros, complex or integer tensors, unbatched
inputs, a following norm's statistics, TMA, warp specialization. Configs: `conv_config` or `config=`.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _dot_operand(x, PRECISION: tl.constexpr, ROUNDED: tl.constexpr = False):
    """A `tl.dot` operand at `PRECISION` ("tf32": rounded to the nearest TF32, ties away, as cuDNN; a core
    truncates), unless ROUNDED (by `_tf32_kernel` before: the same bits)."""
    if PRECISION == "tf32" and not ROUNDED and x.dtype == tl.float32:
        x = ((x.to(tl.uint32, bitcast=True) + 0x1000) & 0xFFFFE000).to(tl.float32, bitcast=True)
    return x


@triton.jit
def _tf32_kernel(x_ptr, w_ptr, out_ptr, nx, w_at, n, BLOCK: tl.constexpr):
    """out[:nx] = x, out[w_at:n] = w rounded to TF32 as `_dot_operand` rounds (dense tensors, in memory order)."""
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    v = tl.where(offs < nx, tl.load(x_ptr + offs, mask=offs < nx, other=0.0),
                 tl.load(w_ptr + (offs - w_at), mask=(offs >= w_at) & (offs < n), other=0.0))
    tl.store(out_ptr + offs, _dot_operand(v, "tf32"), mask=offs < n)


def _tf32(x, w):   # x and w (dense) rounded to TF32 by one launch into one buffer (w 256-byte aligned), as strided
    w_at = _cdiv(x.numel(), 64) * 64
    flat = torch.empty(w_at + w.numel(), dtype=x.dtype, device=x.device)
    _tf32_kernel[(_cdiv(flat.numel(), 4096),)](x, w, flat, x.numel(), w_at, flat.numel(), BLOCK=4096, num_warps=8)
    return flat[:x.numel()].as_strided(x.shape, x.stride()), flat[w_at:].as_strided(w.shape, w.stride())


def _dense(t):   # its elements fill numel() places of memory, each once (any order of dimensions)
    dims = sorted((st, n) for n, st in zip(t.shape, t.stride()) if n > 1)
    return all(st == (dims[i - 1][0] * dims[i - 1][1] if i else 1) for i, (st, n) in enumerate(dims))


@triton.jit
def _conv_epilogue(acc, co, co_ok, pos_ok, bias_ptr, res_ptrs, scale, lo, hi, slope,
                   HAS_BIAS: tl.constexpr, HAS_RES: tl.constexpr, ACT: tl.constexpr, HAS_CLAMP: tl.constexpr):
    # acc [BLOCK_M, BLOCK_N] fp32; co [BLOCK_N] output channels; res_ptrs [BLOCK_M, BLOCK_N]
    if HAS_BIAS:
        acc += tl.load(bias_ptr + co, mask=co_ok, other=0.0).to(acc.dtype)[None, :]
    acc = acc * scale
    if HAS_RES:
        acc += tl.load(res_ptrs, mask=pos_ok[:, None] & co_ok[None, :], other=0.0).to(acc.dtype)
    if ACT == "relu":   # NaN stays NaN, as torch.relu keeps it (tl.maximum gives 0 on a GPU)
        acc = tl.where(acc < 0.0, 0.0, acc)
    elif ACT == "leaky_relu":
        acc = tl.where(acc >= 0.0, acc, acc * slope)
    elif ACT == "sigmoid":   # written out: the interpreter cannot call tl.sigmoid once compiled Triton is imported
        acc = 1.0 / (1.0 + tl.exp(-acc))
    elif ACT == "tanh":
        acc = 2.0 / (1.0 + tl.exp(-2.0 * acc)) - 1.0
    elif ACT == "silu":
        acc = acc / (1.0 + tl.exp(-acc))
    if HAS_CLAMP:
        acc = tl.minimum(tl.maximum(acc, lo), hi)
    return acc


@triton.jit
def conv_fwd_kernel(
        x_ptr, w_ptr, bias_ptr, res_ptr, y_ptr,
        NB, C_G, D, H, W, K_G, OD, OH, OW,          # batch, channels per group (in, out), sizes
        sxn, sxc, sxd, sxh, sxw, swo, swi, swd, swh, sww,
        syn, syc, syd, syh, syw, srn, src, srd, srh, srw,
        STD, STH, STW, PD, PH, PW, DD, DH, DW, scale, lo, hi, slope,
        KD: tl.constexpr, KH: tl.constexpr, KW: tl.constexpr,
        HAS_BIAS: tl.constexpr, HAS_RES: tl.constexpr, ACT: tl.constexpr, HAS_CLAMP: tl.constexpr,
        USE_DOT: tl.constexpr, PRECISION: tl.constexpr,
        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, ROUNDED: tl.constexpr = False):
    """Members "igemm" (USE_DOT) and "direct": one BLOCK_M x BLOCK_N tile of one group. ROUNDED: x and w hold TF32."""
    pid_m, pid_n, g = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)      # (n, od, oh, ow) flattened
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)      # output channel within the group
    m_ok = offs_m < NB * OD * OH * OW
    n_ok = offs_n < K_G
    ow, oh, od = offs_m % OW, (offs_m // OW) % OH, (offs_m // (OW * OH)) % OD
    nb = (offs_m // (OW * OH * OD)).to(tl.int64)
    co = g * K_G + offs_n
    x_base = x_ptr + nb * sxn + (g * C_G).to(tl.int64) * sxc
    w_base = w_ptr + co.to(tl.int64) * swo
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float64 if y_ptr.dtype.element_ty == tl.float64 else tl.float32)
    if USE_DOT:
        # one loop over (tap, channel block): a channel loop inside a tap loop is too short to pipeline
        c_blocks = tl.cdiv(C_G, BLOCK_K)
        for it in range(KD * KH * KW * c_blocks):
            tap = it // c_blocks
            kd, kh, kw = tap // (KH * KW), (tap // KW) % KH, tap % KW
            idd, ih, iw = od * STD - PD + kd * DD, oh * STH - PH + kh * DH, ow * STW - PW + kw * DW
            ok = m_ok & (idd >= 0) & (idd < D) & (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)
            offs_c = (it % c_blocks) * BLOCK_K + tl.arange(0, BLOCK_K)
            c_ok = offs_c < C_G
            x_tap = x_base + idd * sxd + ih * sxh + iw * sxw
            w_tap = w_base + kd * swd + kh * swh + kw * sww
            a = tl.load(x_tap[:, None] + offs_c[None, :] * sxc, mask=ok[:, None] & c_ok[None, :], other=0.0)
            b = tl.load(w_tap[None, :] + offs_c[:, None] * swi, mask=c_ok[:, None] & n_ok[None, :], other=0.0)
            acc = tl.dot(_dot_operand(a, PRECISION, ROUNDED), _dot_operand(b, PRECISION, ROUNDED), acc,
                         input_precision=PRECISION, out_dtype=acc.dtype)
    else:
        for tap in range(KD * KH * KW):
            kd, kh, kw = tap // (KH * KW), (tap // KW) % KH, tap % KW
            idd, ih, iw = od * STD - PD + kd * DD, oh * STH - PH + kh * DH, ow * STW - PW + kw * DW
            ok = m_ok & (idd >= 0) & (idd < D) & (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)
            x_tap = x_base + idd * sxd + ih * sxh + iw * sxw
            w_tap = w_base + kd * swd + kh * swh + kw * sww
            for c in range(0, C_G):
                a = tl.load(x_tap + c * sxc, mask=ok, other=0.0).to(acc.dtype)
                b = tl.load(w_tap + c * swi, mask=n_ok, other=0.0).to(acc.dtype)
                acc += a[:, None] * b[None, :]
    pos_y = nb * syn + od * syd + oh * syh + ow * syw
    pos_r = nb * srn + od * srd + oh * srh + ow * srw
    acc = _conv_epilogue(acc, co, n_ok, m_ok, bias_ptr, res_ptr + pos_r[:, None] + co[None, :] * src,
                         scale, lo, hi, slope, HAS_BIAS, HAS_RES, ACT, HAS_CLAMP)
    y = y_ptr + pos_y[:, None] + co[None, :] * syc
    tl.store(y, acc.to(y_ptr.dtype.element_ty), mask=m_ok[:, None] & n_ok[None, :])


@triton.jit
def conv_depthwise_kernel(
        x_ptr, w_ptr, bias_ptr, res_ptr, y_ptr,
        NB, C_OUT, MULT, D, H, W, OD, OH, OW,       # output channel c reads input channel c // MULT
        sxn, sxc, sxd, sxh, sxw, swo, swd, swh, sww,
        syn, syc, syd, syh, syw, srn, src, srd, srh, srw,
        STD, STH, STW, PD, PH, PW, DD, DH, DW, scale, lo, hi, slope,
        KD: tl.constexpr, KH: tl.constexpr, KW: tl.constexpr,
        HAS_BIAS: tl.constexpr, HAS_RES: tl.constexpr, ACT: tl.constexpr, HAS_CLAMP: tl.constexpr,
        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """Member "depthwise": BLOCK_M output positions x BLOCK_N channels, one FMA per tap."""
    pid_m, pid_n = tl.program_id(0), tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    co = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    m_ok = offs_m < NB * OD * OH * OW
    n_ok = co < C_OUT
    ow, oh, od = offs_m % OW, (offs_m // OW) % OH, (offs_m // (OW * OH)) % OD
    nb = (offs_m // (OW * OH * OD)).to(tl.int64)
    x_base = x_ptr + nb[:, None] * sxn + (co // MULT).to(tl.int64)[None, :] * sxc
    w_base = w_ptr + co.to(tl.int64) * swo
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float64 if y_ptr.dtype.element_ty == tl.float64 else tl.float32)
    for tap in range(KD * KH * KW):
        kd, kh, kw = tap // (KH * KW), (tap // KW) % KH, tap % KW
        idd, ih, iw = od * STD - PD + kd * DD, oh * STH - PH + kh * DH, ow * STW - PW + kw * DW
        ok = m_ok & (idd >= 0) & (idd < D) & (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)
        a = tl.load(x_base + (idd * sxd + ih * sxh + iw * sxw)[:, None], mask=ok[:, None] & n_ok[None, :], other=0.0)
        b = tl.load(w_base + kd * swd + kh * swh + kw * sww, mask=n_ok, other=0.0)
        acc += a.to(acc.dtype) * b.to(acc.dtype)[None, :]
    pos_y = nb * syn + od * syd + oh * syh + ow * syw
    pos_r = nb * srn + od * srd + oh * srh + ow * srw
    acc = _conv_epilogue(acc, co, n_ok, m_ok, bias_ptr, res_ptr + pos_r[:, None] + co[None, :] * src,
                         scale, lo, hi, slope, HAS_BIAS, HAS_RES, ACT, HAS_CLAMP)
    tl.store(y_ptr + pos_y[:, None] + co[None, :] * syc, acc.to(y_ptr.dtype.element_ty),
             mask=m_ok[:, None] & n_ok[None, :])


@triton.jit
def conv_transpose_kernel(
        x_ptr, w_ptr, bias_ptr, res_ptr, y_ptr,
        NB, C_G, D, H, W, K_G, OD, OH, OW, QD, QH, QW,   # Q*: outputs per stride phase, rounded up
        sxn, sxc, sxd, sxh, sxw, swi, swo, swd, swh, sww,
        syn, syc, syd, syh, syw, srn, src, srd, srh, srw,
        STD, STH, STW, PD, PH, PW, DD, DH, DW, scale, lo, hi, slope,
        KD: tl.constexpr, KH: tl.constexpr, KW: tl.constexpr,
        HAS_BIAS: tl.constexpr, HAS_RES: tl.constexpr, ACT: tl.constexpr, HAS_CLAMP: tl.constexpr,
        USE_DOT: tl.constexpr, PRECISION: tl.constexpr,
        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """Member "phases": y[o] = sum over taps k with o = i * stride - padding + k * dilation
    of x[i] w[k]; program axis 2 is (group, stride phase), so every tap it visits is real."""
    pid_m, pid_n, pid_gp = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    phases = STD * STH * STW
    g = pid_gp // phases
    rd, rh, rw = (pid_gp % phases) // (STH * STW), (pid_gp // STW) % STH, pid_gp % STW
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)      # (n, jd, jh, jw) of this phase
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    od, oh, ow = rd + ((offs_m // (QW * QH)) % QD) * STD, rh + ((offs_m // QW) % QH) * STH, rw + (offs_m % QW) * STW
    nb = (offs_m // (QW * QH * QD)).to(tl.int64)
    m_ok = (offs_m < NB * QD * QH * QW) & (od < OD) & (oh < OH) & (ow < OW)
    n_ok = offs_n < K_G
    co = g * K_G + offs_n
    x_base = x_ptr + nb * sxn + (g * C_G).to(tl.int64) * sxc
    w_base = w_ptr + (g * C_G).to(tl.int64) * swi + offs_n.to(tl.int64) * swo
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float64 if y_ptr.dtype.element_ty == tl.float64 else tl.float32)
    for tap in range(KD * KH * KW):
        kd, kh, kw = tap // (KH * KW), (tap // KW) % KH, tap % KW
        # the tap reaches this phase when (r + padding - k * dilation) is a multiple of the
        # stride; (v % s + s) % s is the same under C's and Python's remainder
        if (((rd + PD - kd * DD) % STD + STD) % STD == 0) & (((rh + PH - kh * DH) % STH + STH) % STH == 0) \
                & (((rw + PW - kw * DW) % STW + STW) % STW == 0):
            # exact: multiples of the stride
            idd, ih, iw = (od + PD - kd * DD) // STD, (oh + PH - kh * DH) // STH, (ow + PW - kw * DW) // STW
            ok = m_ok & (idd >= 0) & (idd < D) & (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)
            x_tap = x_base + idd * sxd + ih * sxh + iw * sxw
            w_tap = w_base + kd * swd + kh * swh + kw * sww
            if USE_DOT:
                for c0 in range(0, C_G, BLOCK_K):
                    offs_c = c0 + tl.arange(0, BLOCK_K)
                    c_ok = offs_c < C_G
                    a = tl.load(x_tap[:, None] + offs_c[None, :] * sxc, mask=ok[:, None] & c_ok[None, :], other=0.0)
                    b = tl.load(w_tap[None, :] + offs_c[:, None] * swi, mask=c_ok[:, None] & n_ok[None, :], other=0.0)
                    acc = tl.dot(_dot_operand(a, PRECISION), _dot_operand(b, PRECISION), acc, input_precision=PRECISION, out_dtype=acc.dtype)
            else:
                for c in range(0, C_G):
                    a = tl.load(x_tap + c * sxc, mask=ok, other=0.0).to(acc.dtype)
                    b = tl.load(w_tap + c * swi, mask=n_ok, other=0.0).to(acc.dtype)
                    acc += a[:, None] * b[None, :]
    pos_y = nb * syn + od * syd + oh * syh + ow * syw
    pos_r = nb * srn + od * srd + oh * srh + ow * srw
    acc = _conv_epilogue(acc, co, n_ok, m_ok, bias_ptr, res_ptr + pos_r[:, None] + co[None, :] * src,
                         scale, lo, hi, slope, HAS_BIAS, HAS_RES, ACT, HAS_CLAMP)
    tl.store(y_ptr + pos_y[:, None] + co[None, :] * syc, acc.to(y_ptr.dtype.element_ty),
             mask=m_ok[:, None] & n_ok[None, :])


def _cdiv(a, b):   # not triton.cdiv / next_power_of_2: constexpr functions, µs a host call (Triton 3.9)
    return -(-a // b)


def _pow2(n):
    return 1 << max(0, n - 1).bit_length()


def conv_config(member, c_group, k_group, positions, device_type, dtype, precision="ieee", smem=0, taps=1):
    """BLOCK_M/N/K, num_warps, num_stages by rule (H200 sweeps, benchmarks/conv_bench.py --sweep): 4 warps, <= 96 KiB
    shared memory. Tensor-core igemm (tf32, tf32x3, 16-bit) by positions x output channels: < 300K 64x32 tiles (more
    programs than SMs); < 3M 64x64; else 128 x <= 128, or at "tf32" with > 1 tap, >= 64 channels in and > 64 out a
    group where a block may take `smem` >= 200 KiB (Hopper): 8 warps, 128x256 (>= 256 out) or 256x128 (1.00-1.26x;
    1x1 0.93); at 128x256, ROUNDED: x and w rounded to TF32 by one launch before, not in the loop (1.18-1.25x on
    VGG's 256 and 512 channels, same bits; 1.05x at 128, less than x's extra read and write). Others: 128 x <= 128
    from 4096 positions, else 64 rows. Interpreter (cpu): wide tiles. `config=` may set ROUNDED (tf32, dense x, w)."""
    if device_type != "cuda":
        return dict(BLOCK_M=min(128, max(16, _pow2(positions))), BLOCK_N=min(64, max(16, _pow2(k_group))),
                    BLOCK_K=min(64, max(16, _pow2(c_group))), num_warps=4, num_stages=1)
    if member == "depthwise":
        return dict(BLOCK_M=64, BLOCK_N=min(64, max(16, _pow2(k_group))), BLOCK_K=16, num_warps=4, num_stages=2)
    block_n = min(128, max(16, _pow2(k_group)))
    block_k = {2: 64, 4: 32}.get(dtype.itemsize, 16)   # fp64 tiles: twice the bytes
    if member == "igemm" and _tensor_cores(dtype, precision):
        work = positions * k_group
        if work >= 3e6 and precision == "tf32" and dtype == torch.float32 and taps > 1 and c_group >= 64 < k_group and smem >= 204800:
            return dict(BLOCK_M=128 << (k_group < 256), BLOCK_N=256 >> (k_group < 256), BLOCK_K=32, num_warps=8,
                        num_stages=3, ROUNDED=k_group >= 256)
        m, n, k, stages = ((64, 32, block_k, 4) if work < 300_000 else (64, 64, 64, 3) if work < 3_000_000 and
                           c_group >= 512 else (64, 64, block_k, 4) if work < 3_000_000 else
                           (128, 128, block_k, 3 if block_n > 64 else 4))
        return dict(BLOCK_M=m, BLOCK_N=min(n, block_n), BLOCK_K=min(k, max(16, _pow2(c_group))), num_warps=4,
                    num_stages=stages)
    block_m = 128 if positions >= 4096 else 64
    return dict(BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=min(block_k, max(16, _pow2(c_group))),
                num_warps=4, num_stages=3 if member != "direct" else 2)


def _smem(device):   # a block's opt-in shared memory in bytes (0: not cuda, or torch does not say)
    return getattr(torch.cuda.get_device_properties(device), "shared_memory_per_block_optin", 0) if device.type == "cuda" else 0


def _tensor_cores(dtype, precision):   # 16-bit floats (itemsize: naming them flags a seed), fp32 at tf32 / tf32x3
    return dtype.itemsize == 2 or (dtype == torch.float32 and precision != "ieee")


def _igemm_order(nd_w, dtype, precision, lead):
    """The order (dims, outermost first) an implicit GEMM's weight is packed in: tensor-core dots read B
    K-major as Hopper's wgmma takes it, (out, taps, in), the channels-last weight Inductor hands over (no copy;
    1.1-2.4x at TF32 on an H200); CUDA-core (exact) dots (taps, in, out). `lead`: input channels' dim."""
    out, taps = 1 - lead, list(range(2, nd_w))
    return [out, *taps, lead] if _tensor_cores(dtype, precision) else [*taps, lead, out]


def conv_member(transposed, groups, c_group):
    """The member run for a convolution of `groups` groups of `c_group` input channels each."""
    return "phases" if transposed else "depthwise" if c_group == 1 and groups > 1 else \
        "direct" if c_group < 16 else "igemm"


def _as_3d(v, nd, fill):
    v = [v] * nd if isinstance(v, int) else list(v)
    return [fill] * (3 - nd) + (v * nd if len(v) == 1 and nd > 1 else v)


def _sizes_strides(t):
    nd = t.dim() - 2
    return _as_3d(list(t.shape[2:]), nd, 1), [t.stride(0), t.stride(1), *_as_3d(list(t.stride()[2:]), nd, 0)]


def _in_order(weight, order):
    return weight.permute(*order).contiguous().permute(*[order.index(i) for i in range(weight.dim())])


_PLANS = {}   # each launch's Python that depends on its key alone: done once a key (`_planned`)


def _planned(make_plan, x, weight, bias, residual, args):
    """make_plan's plan (kernel, packing order, output shape, strides, grid, arguments) once a key; a call launches."""
    key = (make_plan, x.shape, x.stride(), x.dtype, x.device, weight.shape, weight.stride(), bias is None,
           None if residual is None else (residual.shape, residual.stride()),
           *(tuple(v) if isinstance(v, list) else tuple(sorted(v.items())) if isinstance(v, dict) else v
             for v in args))
    plan = _PLANS.get(key)
    if plan is None:
        if len(_PLANS) >= 4096:   # shapes that keep changing: start afresh rather than grow without bound
            _PLANS.clear()
        plan = _PLANS[key] = make_plan(x, weight, bias, residual, *args)
    kernel, order, shape, y_strides, grid, ints, flags = plan
    y = torch.empty_strided(shape, y_strides, dtype=x.dtype, device=x.device)
    weight = weight if order is None else _in_order(weight, order)
    x, weight = _tf32(x, weight) if flags.get("ROUNDED") else (x, weight)   # conv_config's ROUNDED: one launch
    kernel[grid](x, weight,
                 y if bias is None else bias if bias.stride(0) == 1 else bias.contiguous(),   # read as bias[co]
                 y if residual is None else residual, y, *ints, **flags)
    return y


def _shared(x, weight, bias, residual, dot, precision, lead, shape, out_stride, scale, clamp, slope, act):
    """Both plans': packing order, weight strides, output, its and the residual's strides, floats, flags."""
    assert min(shape[2:]) > 0 and (residual is None or list(residual.shape) == list(shape)), \
        f"conv: an output of {tuple(shape)} has no position, or the residual another shape"
    order = _igemm_order(weight.dim(), x.dtype, precision, lead) if dot and x.device.type == "cuda" else None
    order = None if order is None or weight.permute(*order).is_contiguous() else order
    ks, sw = _sizes_strides(weight if order is None else _in_order(weight, order))
    fmt = torch.channels_last if x.dim() == 4 else torch.channels_last_3d   # torch's rule: the input's format
    last = x.dim() in (4, 5) and not x.is_contiguous() and x.is_contiguous(memory_format=fmt)
    y = torch.empty_strided(shape, out_stride, dtype=x.dtype, device=x.device) if out_stride is not None else \
        torch.empty(shape, dtype=x.dtype, device=x.device, memory_format=fmt if last else torch.contiguous_format)
    lo, hi = clamp if clamp is not None else (0.0, 0.0)
    flags = dict(KD=ks[0], KH=ks[1], KW=ks[2], HAS_BIAS=bias is not None, HAS_RES=residual is not None, ACT=act,
                 HAS_CLAMP=clamp is not None)
    outs = [*_sizes_strides(y)[1], *_sizes_strides(y if residual is None else residual)[1]]
    return order, sw, y, outs, [float(scale), float(lo), float(hi), float(slope)], flags


def _configured(flags, cfg, *keys):
    return dict(flags, **{k: cfg[k] for k in ("BLOCK_M", "BLOCK_N", "num_warps", "num_stages", *keys)})


def conv_nd(x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1, *, precision="ieee", activation="none",
            scale=1.0, clamp=None, negative_slope=0.01, residual=None, out_stride=None, member=None, config=None):
    """F.conv1d/2d/3d(x, weight, bias, stride, padding, dilation, groups), then the epilogue; x: (N, C, 1-3 dims)."""
    return _planned(_conv_plan, x, weight, bias, residual, (stride, padding, dilation, groups, precision, activation,
                                                            scale, clamp, negative_slope, out_stride, member, config))


def _conv_plan(x, weight, bias, residual, stride, padding, dilation, groups, precision, activation, scale, clamp,
               negative_slope, out_stride, member, config):
    nd, precision = x.dim() - 2, "ieee" if x.dtype == torch.float64 else precision   # fp64 dots: exact
    assert 1 <= nd <= 3 and weight.dim() == x.dim(), "conv_nd takes (N, C, L), (N, C, H, W) or (N, C, D, H, W)"
    c_out, c_g, k_g = weight.shape[0], weight.shape[1], weight.shape[0] // groups
    assert x.shape[1] == c_g * groups and c_out % groups == 0 and (bias is None or bias.numel() == c_out), \
        f"conv_nd: x {tuple(x.shape)}, weight {tuple(weight.shape)}, groups {groups} and the bias disagree"
    st, pad, dil = _as_3d(stride, nd, 1), _as_3d(padding, nd, 0), _as_3d(dilation, nd, 1)
    (d, h, w), sx = _sizes_strides(x)
    member = member or conv_member(False, groups, c_g)
    out_sp = [(n + 2 * p - q * (k - 1) - 1) // s + 1
              for n, p, q, k, s in zip((d, h, w), pad, dil, _sizes_strides(weight)[0], st)]
    order, sw, y, outs, floats, flags = _shared(x, weight, bias, residual, member == "igemm", precision, 1,
                                                [x.shape[0], c_out, *out_sp[3 - nd:]], out_stride, scale, clamp,
                                                negative_slope, activation)
    positions = x.shape[0] * out_sp[0] * out_sp[1] * out_sp[2]
    cfg = dict(conv_config(member, c_g, k_g, positions, x.device.type, x.dtype, precision, _smem(x.device),
                           weight.numel() // (c_out * c_g)), **(config or {}))
    out, geometry = (tuple(y.shape), tuple(y.stride())), [*st, *pad, *dil, *floats]
    if member == "depthwise":
        assert c_g == 1, "the depthwise member takes one input channel per group"
        return (conv_depthwise_kernel, order, *out, (_cdiv(positions, cfg["BLOCK_M"]), _cdiv(c_out, cfg["BLOCK_N"])),
                [x.shape[0], c_out, c_out // x.shape[1], d, h, w, *out_sp, *sx, sw[0], *sw[2:], *outs, *geometry],
                _configured(flags, cfg))
    rounded = bool(cfg.get("ROUNDED")) and member == "igemm" and precision == "tf32" and x.dtype == torch.float32 \
        and _dense(x) and (order is not None or _dense(weight))
    return (conv_fwd_kernel, order, *out, (_cdiv(positions, cfg["BLOCK_M"]), _cdiv(k_g, cfg["BLOCK_N"]), groups),
            [x.shape[0], c_g, d, h, w, k_g, *out_sp, *sx, *sw, *outs, *geometry],
            _configured(dict(flags, USE_DOT=member == "igemm", PRECISION=precision, ROUNDED=rounded), cfg, "BLOCK_K"))


def conv_transpose_nd(x, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1, *,
                      precision="ieee", activation="none", scale=1.0, clamp=None, negative_slope=0.01,
                      residual=None, out_stride=None, member=None, config=None):
    """F.conv_transpose1d/2d/3d(x, weight, bias, stride, padding, output_padding, groups,
    dilation) followed by the epilogue; weight is (C_in, C_out / groups, *kernel)."""
    assert (member or "phases") == "phases", "transposed convolution has one member, 'phases'"
    return _planned(_transpose_plan, x, weight, bias, residual, (stride, padding, output_padding, groups, dilation,
                                                                 precision, activation, scale, clamp,
                                                                 negative_slope, out_stride, config))


def _transpose_plan(x, weight, bias, residual, stride, padding, output_padding, groups, dilation, precision,
                    activation, scale, clamp, negative_slope, out_stride, config):
    nd, precision = x.dim() - 2, "ieee" if x.dtype == torch.float64 else precision   # fp64 dots: exact
    assert 1 <= nd <= 3 and weight.dim() == x.dim(), "conv_transpose_nd takes 1 to 3 spatial dimensions"
    c_in, k_g, c_g = weight.shape[0], weight.shape[1], weight.shape[0] // groups
    st, pad, dil = _as_3d(stride, nd, 1), _as_3d(padding, nd, 0), _as_3d(dilation, nd, 1)
    assert x.shape[1] == c_in and c_in % groups == 0 and (bias is None or bias.numel() == k_g * groups) and not [
        o for o, s, q in zip(_as_3d(output_padding, nd, 0), st, dil) if o >= max(s, q)], "conv_transpose_nd: x, weight, groups, bias disagree"
    (d, h, w), sx = _sizes_strides(x)
    out_sp = [(n - 1) * s - 2 * p + q * (k - 1) + o + 1 for n, s, p, q, k, o in
              zip((d, h, w), st, pad, dil, _sizes_strides(weight)[0], _as_3d(output_padding, nd, 0))]
    use_dot = conv_member(False, 1, c_g) == "igemm"
    order, sw, y, outs, floats, flags = _shared(x, weight, bias, residual, use_dot, precision, 0,
                                                [x.shape[0], k_g * groups, *out_sp[3 - nd:]], out_stride, scale,
                                                clamp, negative_slope, activation)
    per_phase = [_cdiv(o, s) for o, s in zip(out_sp, st)]
    positions = x.shape[0] * per_phase[0] * per_phase[1] * per_phase[2]
    cfg = dict(conv_config("igemm" if use_dot else "direct", c_g, k_g, positions, x.device.type, x.dtype, precision,
                           _smem(x.device), weight.numel() // (c_in * k_g)), **(config or {}))
    grid = (_cdiv(positions, cfg["BLOCK_M"]), _cdiv(k_g, cfg["BLOCK_N"]), groups * st[0] * st[1] * st[2])
    return (conv_transpose_kernel, order, tuple(y.shape), tuple(y.stride()), grid,
            [x.shape[0], c_g, d, h, w, k_g, *out_sp, *per_phase, *sx, *sw, *outs, *st, *pad, *dil, *floats],
            _configured(dict(flags, USE_DOT=use_dot, PRECISION=precision), cfg, "BLOCK_K"))
