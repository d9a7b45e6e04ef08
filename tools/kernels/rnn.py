"""Recurrent layers in Triton: nn.LSTM, nn.GRU and nn.RNN (tanh / relu), several layers, either
direction, as per-step matrix products with the gates fused into one kernel.

This file stands alone (torch and triton only): a seed copies its text, unchanged, into its
`ModelNew` (tools/dialect/kernelbook.py), so `best.py` carries it. A recurrent module of the
problem is compiled as one call `torch.ops.krefine.rnn` (tools/dialect/rnn_op.py) instead of
being unrolled step by step into the graph (a 6-layer LSTM over 512 steps is 3,072 steps:
torch.compile of it ran past any seed budget); the converter writes that call as
`rnn_seq(...)` here.

Per layer: the input projection of every step at once, x W_ihᵀ + b_ih (`rnn_linear_kernel`, one
launch per direction), then the recurrence. Where every program fits on the GPU at once
(`persistent_plan`), one persistent launch per layer runs every step of both directions
(`rnn_persistent_kernel`): each program owns a slice of the hidden units, multiplies the whole
previous h by its rows of W_hh, applies the cell, writes its slice and meets the others at a
barrier (an atomic counter) before the next step. Otherwise, two launches per step and
direction: the hidden projection h W_hhᵀ + b_hh, then the cell (`*_cell_kernel`). PyTorch's
gate order and equations (nn.LSTM: i, f, g, o; nn.GRU: r, z, n with r applied to the hidden
projection's n part). fp32 accumulation; `tl.dot` at `precision` ("ieee" exact fp32,
"tf32x3", "tf32").

Not covered: projections (proj_size), dropout between layers (random in training mode),
packed sequences, the backward.
"""
import os

import torch
import triton
import triton.language as tl


@triton.jit
def rnn_linear_kernel(x_ptr, w_ptr, b_ptr, y_ptr, M, N, K, sxm, sxk, swn, swk, sym, syn,
                      HAS_BIAS: tl.constexpr, PRECISION: tl.constexpr,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    # y (M, N) = x (M, K) @ w (N, K)^T + b (N)
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        k = k0 + rk
        a = tl.load(x_ptr + rm.to(tl.int64)[:, None] * sxm + k[None, :] * sxk,
                    mask=(rm[:, None] < M) & (k[None, :] < K), other=0.0)
        b = tl.load(w_ptr + rn.to(tl.int64)[None, :] * swn + k[:, None] * swk,
                    mask=(rn[None, :] < N) & (k[:, None] < K), other=0.0)
        acc = tl.dot(a, b, acc, input_precision=PRECISION)
    if HAS_BIAS:
        acc += tl.load(b_ptr + rn, mask=rn < N, other=0.0).to(tl.float32)[None, :]
    tl.store(y_ptr + rm.to(tl.int64)[:, None] * sym + rn.to(tl.int64)[None, :] * syn,
             acc.to(y_ptr.dtype.element_ty), mask=(rm[:, None] < M) & (rn[None, :] < N))


@triton.jit
def _tanh(x):
    return 2.0 * tl.sigmoid(2.0 * x) - 1.0


@triton.jit
def lstm_cell_kernel(gx_ptr, gh_ptr, c_ptr, h_out_ptr, c_out_ptr, B, H,
                     sgx, sgh, sc, sho, sco, BLOCK: tl.constexpr):
    # gates (B, 4H) = gx + gh in PyTorch's order i, f, g, o; one program per batch row and block of H
    b = tl.program_id(0).to(tl.int64)
    j = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    ok = j < H
    gx = gx_ptr + b * sgx
    gh = gh_ptr + b * sgh
    i = tl.load(gx + j, mask=ok, other=0.0).to(tl.float32) + tl.load(gh + j, mask=ok, other=0.0).to(tl.float32)
    f = tl.load(gx + H + j, mask=ok, other=0.0).to(tl.float32) + tl.load(gh + H + j, mask=ok, other=0.0).to(tl.float32)
    g = tl.load(gx + 2 * H + j, mask=ok, other=0.0).to(tl.float32) + \
        tl.load(gh + 2 * H + j, mask=ok, other=0.0).to(tl.float32)
    o = tl.load(gx + 3 * H + j, mask=ok, other=0.0).to(tl.float32) + \
        tl.load(gh + 3 * H + j, mask=ok, other=0.0).to(tl.float32)
    c = tl.load(c_ptr + b * sc + j, mask=ok, other=0.0).to(tl.float32)
    c_new = tl.sigmoid(f) * c + tl.sigmoid(i) * _tanh(g)
    h_new = tl.sigmoid(o) * _tanh(c_new)
    tl.store(c_out_ptr + b * sco + j, c_new.to(c_out_ptr.dtype.element_ty), mask=ok)
    tl.store(h_out_ptr + b * sho + j, h_new.to(h_out_ptr.dtype.element_ty), mask=ok)


@triton.jit
def gru_cell_kernel(gx_ptr, gh_ptr, h_ptr, h_out_ptr, B, H, sgx, sgh, sh, sho, BLOCK: tl.constexpr):
    # r, z, n: r = σ(x_r + h_r), z = σ(x_z + h_z), n = tanh(x_n + r * h_n), h' = (1 - z) n + z h
    b = tl.program_id(0).to(tl.int64)
    j = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    ok = j < H
    gx = gx_ptr + b * sgx
    gh = gh_ptr + b * sgh
    r = tl.sigmoid(tl.load(gx + j, mask=ok, other=0.0).to(tl.float32) +
                   tl.load(gh + j, mask=ok, other=0.0).to(tl.float32))
    z = tl.sigmoid(tl.load(gx + H + j, mask=ok, other=0.0).to(tl.float32) +
                   tl.load(gh + H + j, mask=ok, other=0.0).to(tl.float32))
    n = _tanh(tl.load(gx + 2 * H + j, mask=ok, other=0.0).to(tl.float32) +
              r * tl.load(gh + 2 * H + j, mask=ok, other=0.0).to(tl.float32))
    h = tl.load(h_ptr + b * sh + j, mask=ok, other=0.0).to(tl.float32)
    tl.store(h_out_ptr + b * sho + j, ((1.0 - z) * n + z * h).to(h_out_ptr.dtype.element_ty), mask=ok)


@triton.jit
def rnn_cell_kernel(gx_ptr, gh_ptr, h_out_ptr, B, H, sgx, sgh, sho, RELU: tl.constexpr, BLOCK: tl.constexpr):
    b = tl.program_id(0).to(tl.int64)
    j = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    ok = j < H
    a = tl.load(gx_ptr + b * sgx + j, mask=ok, other=0.0).to(tl.float32) + \
        tl.load(gh_ptr + b * sgh + j, mask=ok, other=0.0).to(tl.float32)
    h = tl.maximum(a, 0.0) if RELU else _tanh(a)
    tl.store(h_out_ptr + b * sho + j, h.to(h_out_ptr.dtype.element_ty), mask=ok)


@triton.jit
def _gate_w(w_ptr, rj, gate, kk, swn, swk, H):
    # one gate's rows of W_hh, transposed: w[gate * H + rj, kk]ᵀ, (BK, BJ), in fp32 as h is
    return tl.load(w_ptr + (gate * H + rj).to(tl.int64)[None, :] * swn + kk[:, None] * swk,
                   mask=(rj[None, :] < H) & (kk[:, None] < H), other=0.0).to(tl.float32)


@triton.jit
def _gate_in(gx, b_ptr, gate, rj, ok, H, HAS_BIAS: tl.constexpr, WITH_X: tl.constexpr):
    # one gate's input projection for this step (WITH_X) plus b_hh
    v = tl.zeros(ok.shape, dtype=tl.float32)
    if WITH_X:
        v += tl.load(gx + gate * H, mask=ok, other=0.0).to(tl.float32)
    if HAS_BIAS:
        v += tl.load(b_ptr + gate * H + rj, mask=rj < H, other=0.0).to(tl.float32)[None, :]
    return v


@triton.jit
def rnn_persistent_kernel(gx_ptr, w0_ptr, w1_ptr, b0_ptr, b1_ptr, hbuf_ptr, c0_ptr, out_ptr, hn_ptr, cn_ptr,
                          bar_ptr, T, B, H, sgx_d, sgx_t, sgx_b, swn, swk, shb_d, shb_s, sc_d, sc_b,
                          so_t, so_b, shn_d, shn_b, MODE: tl.constexpr, HAS_BIAS: tl.constexpr,
                          SYNC: tl.constexpr, NJ: tl.constexpr, PRECISION: tl.constexpr,
                          BB: tl.constexpr, BJ: tl.constexpr, BK: tl.constexpr):
    # One layer, every time step, one launch: program (j, b, d) owns hidden units j*BJ.. of batch
    # rows b*BB.. in direction d (1: backwards in time). Per step it multiplies the whole previous
    # h (hbuf, ping-pong) by its rows of W_hh, adds the input projection gx, applies the cell and
    # writes its slice of h; with SYNC the NJ programs of one (b, d) then meet at a barrier (a
    # counter in bar_ptr) before the next step reads h.
    # MODE: 0 LSTM, 1 GRU, 2 RNN tanh, 3 RNN relu.
    pj = tl.program_id(0)
    pb = tl.program_id(1)
    d = tl.program_id(2)
    rb = pb * BB + tl.arange(0, BB)
    rj = pj * BJ + tl.arange(0, BJ)
    rk = tl.arange(0, BK)
    ok = (rb[:, None] < B) & (rj[None, :] < H)
    if d == 0:
        w_ptr = w0_ptr
        b_ptr = b0_ptr
    else:
        w_ptr = w1_ptr
        b_ptr = b1_ptr
    hb = hbuf_ptr + d * shb_d
    own = rb[:, None] * H + rj[None, :]
    h = tl.load(hb + own, mask=ok, other=0.0).to(tl.float32)          # h0, this program's slice
    c = tl.load(c0_ptr + d * sc_d + rb[:, None] * sc_b + rj[None, :], mask=ok, other=0.0).to(tl.float32)
    bar = bar_ptr + d * tl.num_programs(1) + pb
    for t in range(T):
        tt = t + d * (T - 1 - 2 * t)
        src = hb + (t % 2) * shb_s
        dst = hb + ((t + 1) % 2) * shb_s
        # the input side first: it does not wait on the other programs' h
        gx = gx_ptr + d.to(tl.int64) * sgx_d + tt.to(tl.int64) * sgx_t + rb[:, None] * sgx_b + rj[None, :]
        a0 = _gate_in(gx, b_ptr, 0, rj, ok, H, HAS_BIAS, True)
        if MODE <= 1:
            a1 = _gate_in(gx, b_ptr, 1, rj, ok, H, HAS_BIAS, True)
            # GRU: n = tanh(x_n + r * (h W_hnᵀ + b_hn)), its x_n apart
            a2 = _gate_in(gx, b_ptr, 2, rj, ok, H, HAS_BIAS, MODE == 0)
        if MODE == 1:
            x2 = tl.load(gx + 2 * H, mask=ok, other=0.0).to(tl.float32)
        if MODE == 0:
            a3 = _gate_in(gx, b_ptr, 3, rj, ok, H, HAS_BIAS, True)
        for k0 in range(0, H, BK):
            kk = k0 + rk
            hk = tl.load(src + rb[:, None] * H + kk[None, :], mask=(rb[:, None] < B) & (kk[None, :] < H),
                         other=0.0, cache_modifier=".cg").to(tl.float32)
            a0 = tl.dot(hk, _gate_w(w_ptr, rj, 0, kk, swn, swk, H), a0, input_precision=PRECISION)
            if MODE <= 1:
                a1 = tl.dot(hk, _gate_w(w_ptr, rj, 1, kk, swn, swk, H), a1, input_precision=PRECISION)
                a2 = tl.dot(hk, _gate_w(w_ptr, rj, 2, kk, swn, swk, H), a2, input_precision=PRECISION)
            if MODE == 0:
                a3 = tl.dot(hk, _gate_w(w_ptr, rj, 3, kk, swn, swk, H), a3, input_precision=PRECISION)
        if MODE == 0:
            c = (tl.sigmoid(a1) * c + tl.sigmoid(a0) * _tanh(a2)).to(out_ptr.dtype.element_ty).to(tl.float32)
            h = tl.sigmoid(a3) * _tanh(c)
        elif MODE == 1:
            r = tl.sigmoid(a0)
            z = tl.sigmoid(a1)
            h = (1.0 - z) * _tanh(x2 + r * a2) + z * h
        elif MODE == 2:
            h = _tanh(a0)
        else:
            h = tl.maximum(a0, 0.0)
        h = h.to(out_ptr.dtype.element_ty)
        tl.store(dst + own, h, mask=ok)
        tl.store(out_ptr + tt.to(tl.int64) * so_t + rb[:, None] * so_b + d * H + rj[None, :], h, mask=ok)
        h = h.to(tl.float32)
        if SYNC:
            # every program's h of this step is written before any program reads it
            tl.debug_barrier()
            tl.atomic_add(bar, 1, sem="release", scope="gpu")
            seen = tl.atomic_add(bar, 0, sem="acquire", scope="gpu")
            while seen < (t + 1) * NJ:
                seen = tl.atomic_add(bar, 0, sem="acquire", scope="gpu")
            tl.debug_barrier()
    tl.store(hn_ptr + d * shn_d + rb[:, None] * shn_b + rj[None, :], h.to(hn_ptr.dtype.element_ty), mask=ok)
    if MODE == 0:
        tl.store(cn_ptr + d * shn_d + rb[:, None] * shn_b + rj[None, :], c.to(cn_ptr.dtype.element_ty), mask=ok)


def rnn_linear(x, w, b, out, precision="ieee"):
    """out (M, N) = x (M, K) @ w (N, K)ᵀ + b, through any strides (b copied where not of stride 1)."""
    m, k = x.shape
    n = w.shape[0]
    bm, bn, bk = (64, 64, 32) if x.is_cuda else (max(16, min(64, triton.next_power_of_2(m))),
                                                   max(16, min(64, triton.next_power_of_2(n))),
                                                   max(16, min(64, triton.next_power_of_2(k))))
    grid = (triton.cdiv(m, bm), triton.cdiv(n, bn))
    if b is not None and b.stride(0) != 1:   # the kernel reads b[n]: a strided or expanded bias, copied
        b = b.contiguous()
    rnn_linear_kernel[grid](x, w, b if b is not None else w, out, m, n, k, *x.stride(), *w.stride(), *out.stride(),
                            HAS_BIAS=b is not None, PRECISION=precision, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk)
    return out


_GATES = {"LSTM": 4, "GRU": 3, "RNN_TANH": 1, "RNN_RELU": 1}
_MODES = {"LSTM": 0, "GRU": 1, "RNN_TANH": 2, "RNN_RELU": 3}


def persistent_plan(device, batch, hidden, dirs, precision="ieee"):
    """(BB, BJ, NB, NJ) of one persistent launch per layer: NB batch tiles of BB rows, NJ programs
    of BJ hidden units each per tile and direction, or None where they would not all be resident
    at once (more programs than the GPU has SMs, or than CUDA MPS's active-thread percentage
    leaves this process: a barrier would wait forever). BJ starts at 16
    for exact fp32 products (CUDA cores), 32 for tensor-core ones (on an H200 at KernelBench's
    6x512-step LSTM: 62 ms at 16 against 114 ms at 32 exact; 25 ms at 32 against 34 ms at 16
    tf32x3). In Triton's interpreter the programs run one after another, so one program covers
    every hidden unit."""
    bb = max(16, min(64, triton.next_power_of_2(batch)))
    nb = triton.cdiv(batch, bb)
    if device.type != "cuda":
        return bb, max(16, triton.next_power_of_2(hidden)), nb, 1
    sms = torch.cuda.get_device_properties(device).multi_processor_count
    share = os.environ.get("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "")   # under MPS, the SMs this process may use
    if share.replace(".", "", 1).isdigit():
        sms = int(sms * min(100.0, float(share)) / 100)
    for bj in (16, 32, 64, 128) if precision == "ieee" else (32, 64, 128):
        nj = triton.cdiv(hidden, bj)
        if dirs * nb * nj <= sms:
            return bb, bj, nb, nj
    return None


def rnn_seq(x, h0, c0, weights, mode, num_layers, bidirectional, batch_first, has_bias, precision="ieee",
            persistent=None):
    """nn.LSTM / nn.GRU / nn.RNN's forward: (output, h_n, c_n), c_n an empty tensor but for an
    LSTM. `weights` is the module's _flat_weights: per layer, per direction, w_ih, w_hh and
    (has_bias) b_ih, b_hh. h0 / c0: (layers x directions, B, H). `persistent` (None: wherever
    `persistent_plan` has a plan) runs each layer, both directions, as one launch over every
    time step; False, as two launches per step (the hidden projection, then the cell)."""
    if mode not in _GATES:
        raise ValueError(f"rnn_seq: unknown mode {mode}")
    seq = x.transpose(0, 1) if batch_first else x          # (T, B, I), a view
    steps, batch = seq.shape[0], seq.shape[1]
    dirs = 2 if bidirectional else 1
    hidden = h0.shape[2]
    gates = _GATES[mode]
    per = 4 if has_bias else 2
    h_n = torch.empty(h0.shape, device=x.device, dtype=h0.dtype)
    c_n = torch.empty(c0.shape, device=x.device, dtype=c0.dtype) if mode == "LSTM" else \
        torch.empty(0, device=x.device, dtype=x.dtype)
    plan = persistent_plan(x.device, batch, hidden, dirs, precision) if persistent is not False else None
    if persistent and plan is None:
        raise ValueError(f"rnn_seq: no persistent plan for batch {batch}, hidden {hidden} on {x.device}")
    layer_in = seq
    for layer in range(num_layers):
        out = torch.empty((steps, batch, dirs * hidden), device=x.device, dtype=x.dtype)
        first = layer * dirs
        layer_w = [weights[(first + d) * per:(first + d + 1) * per] for d in range(dirs)]
        gx = torch.empty((dirs, steps, batch, gates * hidden), device=x.device, dtype=torch.float32)
        feat = layer_in.shape[2]
        for d, (w_ih, _, *bias) in enumerate(layer_w):
            rnn_linear(layer_in.reshape(steps * batch, feat), w_ih, bias[0] if has_bias else None,
                       gx[d].view(steps * batch, gates * hidden), precision)
        if plan is not None:
            _layer_persistent(plan, gx, h0[first:first + dirs], c0[first:first + dirs] if mode == "LSTM" else None,
                              layer_w, mode, has_bias, out, h_n[first:first + dirs],
                              c_n[first:first + dirs] if mode == "LSTM" else None, precision)
        else:
            for d in range(dirs):
                _layer_steps(gx[d], h0[first + d], c0[first + d] if mode == "LSTM" else None, layer_w[d], mode,
                             has_bias, out, d, h_n[first + d], c_n[first + d] if mode == "LSTM" else None, precision)
        layer_in = out
    output = layer_in.transpose(0, 1) if batch_first else layer_in
    return output, h_n, c_n


def _layer_persistent(plan, gx, h0, c0, layer_w, mode, has_bias, out, h_n, c_n, precision):
    """One layer, both directions, every step: one launch of rnn_persistent_kernel. Its rows of
    W_hh are read every step (from L2): kept in registers over the steps instead, they spilled
    and ran 1.5-20x slower on an H200."""
    bb, bj, nb, nj = plan
    dirs, steps, batch, _ = gx.shape
    hidden = h0.shape[2]
    w_hh = [w[1] for w in layer_w]
    if len(w_hh) == 2 and w_hh[0].stride() != w_hh[1].stride():
        w_hh = [w.contiguous() for w in w_hh]
    b_hh = [w[3].contiguous() for w in layer_w] if has_bias else w_hh    # read as (G*H,) rows of stride 1
    hbuf = torch.empty((dirs, 2, batch, hidden), device=out.device, dtype=out.dtype)
    hbuf[:, 0].copy_(h0)
    c0 = (c0 if c0 is not None else h0).contiguous()
    c_n = c_n if c_n is not None else h_n
    bar = torch.zeros((dirs, nb), device=out.device, dtype=torch.int32)
    rnn_persistent_kernel[(nj, nb, dirs)](
        gx, w_hh[0], w_hh[-1], b_hh[0], b_hh[-1], hbuf, c0, out, h_n, c_n, bar, steps, batch, hidden,
        gx.stride(0), gx.stride(1), gx.stride(2), w_hh[0].stride(0), w_hh[0].stride(1), hbuf.stride(0),
        hbuf.stride(1), c0.stride(0), c0.stride(1), out.stride(0), out.stride(1), h_n.stride(0), h_n.stride(1),
        MODE=_MODES[mode], HAS_BIAS=has_bias, SYNC=nj > 1, NJ=nj, PRECISION=precision, BB=bb, BJ=bj,
        BK=min(64, max(16, triton.next_power_of_2(hidden))), num_warps=4)


def _layer_steps(gx, h, c, layer_w, mode, has_bias, out, d, h_n, c_n, precision):
    """One layer in direction d, two launches per step: the hidden projection, then the cell."""
    steps, batch, _ = gx.shape
    hidden = h.shape[1]
    h = h if h.stride(1) == 1 else h.contiguous()   # the cells read h[b, j] and c[b, j] with j of stride 1
    c = c if c is None or c.stride(1) == 1 else c.contiguous()
    _, w_hh, *bias = layer_w
    b_hh = bias[1] if has_bias else None
    gh = torch.empty((batch, gx.shape[2]), device=out.device, dtype=torch.float32)
    c_bufs = [torch.empty((batch, hidden), device=out.device, dtype=out.dtype) for _ in range(2)]
    block = max(16, min(128, triton.next_power_of_2(hidden)))
    order = range(steps - 1, -1, -1) if d == 1 else range(steps)
    grid = (batch, triton.cdiv(hidden, block))
    for n, t in enumerate(order):
        rnn_linear(h, w_hh, b_hh, gh, precision)
        h_out = out[t, :, d * hidden:(d + 1) * hidden]
        if mode == "LSTM":
            c_out = c_bufs[n % 2]
            lstm_cell_kernel[grid](gx[t], gh, c, h_out, c_out, batch, hidden, gx.stride(1), gh.stride(0),
                                   c.stride(0), h_out.stride(0), c_out.stride(0), BLOCK=block)
            c = c_out
        elif mode == "GRU":
            gru_cell_kernel[grid](gx[t], gh, h, h_out, batch, hidden, gx.stride(1), gh.stride(0),
                                  h.stride(0), h_out.stride(0), BLOCK=block)
        else:
            rnn_cell_kernel[grid](gx[t], gh, h_out, batch, hidden, gx.stride(1), gh.stride(0),
                                  h_out.stride(0), RELU=mode == "RNN_RELU", BLOCK=block)
        h = h_out
    h_n.copy_(h)
    if mode == "LSTM":
        c_n.copy_(c)
