"""Recurrent layers in Triton: nn.LSTM, nn.GRU and nn.RNN (tanh / relu), several layers, either
direction, as per-step matrix products with the gates fused into one kernel.

This file stands alone (torch and triton only): a seed copies its text, unchanged, into its
`ModelNew` (tools/dialect/kernelbook.py), so `best.py` carries it. A recurrent module of the
problem is compiled as one call `torch.ops.krefine.rnn` (tools/dialect/rnn_op.py) instead of
being unrolled step by step into the graph (a 6-layer LSTM over 512 steps is 3,072 steps:
torch.compile of it ran past any seed budget); the converter writes that call as
`rnn_seq(...)` here.

Per layer and direction: the input projection of every step at once, x W_ihᵀ + b_ih
(`rnn_linear_kernel`, one launch), then per step the hidden projection h W_hhᵀ + b_hh and
the cell (`*_cell_kernel`: the gates, the new state written into the output sequence and
the state buffers), PyTorch's gate order and equations (nn.LSTM: i, f, g, o; nn.GRU: r, z,
n with r applied to the hidden projection's n part). fp32 accumulation; `tl.dot` at
`precision` ("ieee" exact fp32, "tf32x3", "tf32").

Not covered: projections (proj_size), dropout between layers (random in training mode),
packed sequences, the backward. Launches per step: two per layer and direction (the
hidden projection and the cell), not one persistent kernel.
"""
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


def rnn_linear(x, w, b, out, precision="ieee"):
    """out (M, N) = x (M, K) @ w (N, K)ᵀ + b, through any strides."""
    m, k = x.shape
    n = w.shape[0]
    bm, bn, bk = (64, 64, 32) if x.is_cuda else (max(16, min(64, triton.next_power_of_2(m))),
                                                   max(16, min(64, triton.next_power_of_2(n))),
                                                   max(16, min(64, triton.next_power_of_2(k))))
    grid = (triton.cdiv(m, bm), triton.cdiv(n, bn))
    rnn_linear_kernel[grid](x, w, b if b is not None else w, out, m, n, k, *x.stride(), *w.stride(), *out.stride(),
                            HAS_BIAS=b is not None, PRECISION=precision, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk)
    return out


_GATES = {"LSTM": 4, "GRU": 3, "RNN_TANH": 1, "RNN_RELU": 1}


def rnn_seq(x, h0, c0, weights, mode, num_layers, bidirectional, batch_first, has_bias, precision="ieee"):
    """nn.LSTM / nn.GRU / nn.RNN's forward: (output, h_n, c_n), c_n an empty tensor but for an
    LSTM. `weights` is the module's _flat_weights: per layer, per direction, w_ih, w_hh and
    (has_bias) b_ih, b_hh. h0 / c0: (layers x directions, B, H)."""
    if mode not in _GATES:
        raise ValueError(f"rnn_seq: unknown mode {mode}")
    seq = x.transpose(0, 1) if batch_first else x          # (T, B, I), a view
    steps, batch = seq.shape[0], seq.shape[1]
    dirs = 2 if bidirectional else 1
    hidden = h0.shape[2]
    gates = _GATES[mode]
    per = 4 if has_bias else 2
    h_n = torch.empty_like(h0)
    c_n = torch.empty_like(c0) if mode == "LSTM" else torch.empty(0, device=x.device, dtype=x.dtype)
    block = max(16, min(128, triton.next_power_of_2(hidden)))
    layer_in = seq
    for layer in range(num_layers):
        out = torch.empty((steps, batch, dirs * hidden), device=x.device, dtype=x.dtype)
        for d in range(dirs):
            w_ih, w_hh, *bias = weights[(layer * dirs + d) * per:(layer * dirs + d + 1) * per]
            b_ih, b_hh = bias if has_bias else (None, None)
            feat = layer_in.shape[2]
            gx = torch.empty((steps, batch, gates * hidden), device=x.device, dtype=torch.float32)
            rnn_linear(layer_in.reshape(steps * batch, feat), w_ih, b_ih, gx.view(steps * batch, gates * hidden),
                       precision)
            gh = torch.empty((batch, gates * hidden), device=x.device, dtype=torch.float32)
            idx = layer * dirs + d
            h = h0[idx]
            c = c0[idx] if mode == "LSTM" else None
            c_bufs = [torch.empty((batch, hidden), device=x.device, dtype=x.dtype) for _ in range(2)]
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
            h_n[idx].copy_(h)
            if mode == "LSTM":
                c_n[idx].copy_(c)
        layer_in = out
    output = layer_in.transpose(0, 1) if batch_first else layer_in
    return output, h_n, c_n
