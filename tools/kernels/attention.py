"""Scaled dot-product attention in Triton: softmax(Q Kᵀ · scale + mask) V, flash-attention style.

This file stands alone (torch and triton only): a seed copies its text, unchanged, into
its `ModelNew` (tools/dialect/kernelbook.py), so `best.py` carries it. What Inductor
leaves to a library kernel (`torch.ops.aten._scaled_dot_product_flash_attention`,
`_efficient_attention`, `_cudnn_attention`, and `_flash_attention_for_cpu` on cpu, from
`F.scaled_dot_product_attention` or nn.MultiheadAttention) becomes `sdpa(OP, *args, **kw)`,
which takes the op's own arguments and returns a tuple of the op's length: the output
first, in the layout the op gives it (Inductor asserts it next), the log-sum-exp second.

One program per (block of queries, batch x head) keeps a running maximum and sum of the
exponentials while it walks the keys block by block (the online softmax of
FlashAttention, Dao et al. 2022), so the Tq x Tk score matrix is never written. Masks:
`is_causal` (query i sees keys j <= i, top-left aligned as PyTorch's), a boolean mask
(True: attend) or an additive float mask, anything that broadcasts to (B, H, Tq, Tk),
read through its broadcast strides; `scale` defaults to 1/sqrt(head dim). A query whose
keys are all masked gets NaN, as a softmax over them gives (attention written by hand), or,
with `empty_rows="zero"`, zeros and a log-sum-exp of 0, as torch's cpu flash op and cuda
efficient op give (torch 2.11; its cuDNN op gives neither: `sdpa` keeps NaN there).

Layout: q (B, H, Tq, D), k (B, H, Tk, D), v (B, H, Tk, Dv), any strides, read in place.
Precision: fp32 accumulation; `tl.dot` at `precision` ("ieee" exact fp32, "tf32x3",
"tf32"); fp16 / bf16 operands are multiplied as they are (the probabilities in the
operands' dtype for P·V, as FlashAttention does) and the output cast to q's dtype.

Not covered: dropout (p > 0 is refused: a random forward has no kernel), the backward,
grouped-query heads (H of k and v must be q's), head dims above 256, a nested or
variable-length batch. One configuration per shape, chosen by rule (`attention_config`).
"""
import math

import torch
import triton
import triton.language as tl


@triton.jit
def attention_kernel(q_ptr, k_ptr, v_ptr, mask_ptr, o_ptr, lse_ptr,
                     sqb, sqh, sqm, sqd, skb, skh, skn, skd, svb, svh, svn, svd,
                     smb, smh, smm, smn, sob, soh, som, sod, slb, slh, slm,
                     H, TQ, TK, D, DV, scale,
                     MASK: tl.constexpr, CAUSAL: tl.constexpr, PRECISION: tl.constexpr, EMPTY_ZERO: tl.constexpr,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
                     BLOCK_DV: tl.constexpr):
    # MASK: 0 none, 1 boolean (nonzero: attend), 2 additive
    pid_m = tl.program_id(0)
    bh = tl.program_id(1)
    b = (bh // H).to(tl.int64)
    h = (bh % H).to(tl.int64)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rd = tl.arange(0, BLOCK_D)
    rdv = tl.arange(0, BLOCK_DV)
    m_ok = rm < TQ
    q = tl.load(q_ptr + b * sqb + h * sqh + rm.to(tl.int64)[:, None] * sqm + rd[None, :] * sqd,
                mask=m_ok[:, None] & (rd[None, :] < D), other=0.0)
    m_i = tl.full((BLOCK_M,), float("-inf"), tl.float32)
    l_i = tl.zeros((BLOCK_M,), tl.float32)
    acc = tl.zeros((BLOCK_M, BLOCK_DV), tl.float32)
    hi = TK
    if CAUSAL:
        hi = tl.minimum(TK, (pid_m + 1) * BLOCK_M)
    for n0 in range(0, hi, BLOCK_N):
        rn = n0 + tl.arange(0, BLOCK_N)
        n_ok = rn < TK
        k = tl.load(k_ptr + b * skb + h * skh + rn.to(tl.int64)[None, :] * skn + rd[:, None] * skd,
                    mask=n_ok[None, :] & (rd[:, None] < D), other=0.0)
        s = tl.dot(q, k, input_precision=PRECISION) * scale
        keep = m_ok[:, None] & n_ok[None, :]
        if CAUSAL:
            keep = keep & (rn[None, :] <= rm[:, None])
        if MASK == 1:
            mk = tl.load(mask_ptr + b * smb + h * smh + rm.to(tl.int64)[:, None] * smm + rn.to(tl.int64)[None, :] * smn,
                         mask=m_ok[:, None] & n_ok[None, :], other=0)
            keep = keep & (mk != 0)
        if MASK == 2:
            mk = tl.load(mask_ptr + b * smb + h * smh + rm.to(tl.int64)[:, None] * smm + rn.to(tl.int64)[None, :] * smn,
                         mask=m_ok[:, None] & n_ok[None, :], other=0.0)
            s = s + mk.to(tl.float32)
        s = tl.where(keep, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)   # no key seen yet: nothing to rescale
        alpha = tl.exp(m_i - m_safe)
        p = tl.exp(s - m_safe[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(v_ptr + b * svb + h * svh + rn.to(tl.int64)[:, None] * svn + rdv[None, :] * svd,
                    mask=n_ok[:, None] & (rdv[None, :] < DV), other=0.0)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision=PRECISION)
        m_i = m_new
    out = acc / l_i[:, None]
    lse = m_i + tl.log(l_i)
    if EMPTY_ZERO:   # a query with no key left: 0, not 0 / 0
        out = tl.where(l_i[:, None] > 0, out, 0.0)
        lse = tl.where(l_i > 0, lse, 0.0)
    tl.store(o_ptr + b * sob + h * soh + rm.to(tl.int64)[:, None] * som + rdv[None, :] * sod,
             out.to(o_ptr.dtype.element_ty), mask=m_ok[:, None] & (rdv[None, :] < DV))
    tl.store(lse_ptr + b * slb + h * slh + rm.to(tl.int64) * slm, lse, mask=m_ok)


def attention_config(d: int, dv: int, dtype) -> dict:
    """Block sizes and warps by rule, so that no tile spills registers on sm_90 (ptxas, 4
    warps): fp32 operands (dots on FMA units, or three TF32 products) take 32 queries by
    32 keys up to a head of 64, 32 by 16 up to 128, 16 by 16 beyond; 16-bit operands twice
    that on each side. tl.dot needs 16 at least on every side."""
    head = max(d, dv)
    m, n = (32, 32) if head <= 64 else (32, 16) if head <= 128 else (16, 16)
    if dtype.itemsize == 2:   # fp16 / bf16, not named: the guards flag a seed naming a 16-bit dtype
        m, n = 2 * m, 2 * n
    return {"BLOCK_M": m, "BLOCK_N": n,
            "BLOCK_D": max(16, triton.next_power_of_2(d)), "BLOCK_DV": max(16, triton.next_power_of_2(dv)),
            "num_warps": 4, "num_stages": 2}


def attention(q, k, v, attn_mask=None, is_causal=False, scale=None, out=None, precision="ieee", lse=None,
              empty_rows="nan"):
    """softmax(q kᵀ · scale + mask) v for q (B, H, Tq, D), k (B, H, Tk, D), v (B, H, Tk, Dv);
    returns (out, logsumexp (B, H, Tq) in fp32). `out` and `lse`, when given, are written through
    their own strides; else out is a (B, H, Tq, Dv) tensor in the layout flash attention gives
    ((B, Tq, H, Dv) in memory). `empty_rows`: "nan" or "zero" for a query whose keys are all masked."""
    if q.dim() != 4 or k.dim() != 4 or v.dim() != 4:
        raise ValueError(f"attention: q, k, v must be (B, H, T, D); got {q.dim()}, {k.dim()}, {v.dim()} dims")
    bsz, heads, tq, d = q.shape
    tk, dv = k.shape[2], v.shape[3]
    if tuple(k.shape[:2]) != (bsz, heads) or tuple(v.shape[:3]) != (bsz, heads, tk) or k.shape[3] != d:
        raise ValueError(f"attention: shapes q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)} do not match")
    if max(d, dv) > 256:
        raise ValueError(f"attention: head dims up to 256; got {max(d, dv)}")
    if out is None:
        out = torch.empty((bsz, tq, heads, dv), device=q.device, dtype=q.dtype).transpose(1, 2)
    if empty_rows not in ("nan", "zero"):
        raise ValueError(f"attention: empty_rows is 'nan' or 'zero'; got {empty_rows!r}")
    if lse is None:
        lse = torch.empty((bsz, heads, tq), device=q.device, dtype=torch.float32)
    kind, mask = 0, q                       # no mask: any pointer, never read
    sm = (0, 0, 0, 0)
    if attn_mask is not None:
        if attn_mask.dim() > 4:
            raise ValueError(f"attention: a mask broadcasts to (B, H, Tq, Tk); got {attn_mask.dim()} dims")
        mask = attn_mask.expand(bsz, heads, tq, tk)
        kind = 1 if mask.dtype == torch.bool else 2
        if kind == 1:
            mask = mask.view(torch.uint8)   # the same bytes: nonzero attends
        sm = mask.stride()
    scale = 1.0 / math.sqrt(d) if scale is None else float(scale)
    cfg = attention_config(d, dv, q.dtype)
    grid = (triton.cdiv(tq, cfg["BLOCK_M"]), bsz * heads)
    attention_kernel[grid](q, k, v, mask, out, lse, *q.stride(), *k.stride(), *v.stride(), *sm, *out.stride(),
                           *lse.stride(), heads, tq, tk, d, dv, scale,
                           MASK=kind, CAUSAL=bool(is_causal), PRECISION=precision, EMPTY_ZERO=empty_rows == "zero",
                           **cfg)
    return out, lse


# the library ops Inductor leaves, their positional parameters after q, k, v, and how many
# values each returns (torch/_meta_registrations.py, aten/src/ATen/native/native_functions.yaml)
_SDPA_OPS = {
    "_scaled_dot_product_flash_attention_for_cpu": (("dropout_p", "is_causal"), 2),
    "_scaled_dot_product_flash_attention": (("dropout_p", "is_causal", "return_debug_mask"), 9),
    "_scaled_dot_product_efficient_attention": (("attn_bias", "compute_log_sumexp", "dropout_p", "is_causal"), 4),
    "_scaled_dot_product_cudnn_attention": (("attn_bias", "compute_log_sumexp", "dropout_p", "is_causal",
                                             "return_debug_mask"), 9),
}


def sdpa(op, q, k, v, *args, precision="ieee", **kwargs):
    """`torch.ops.aten.<op>.default(q, k, v, *args, **kwargs)` computed by `attention`: a
    tuple of the op's length, (output, logsumexp, None, ...), each laid out as the op's meta
    function lays it out (Inductor's code reads them so): flash and efficient attention write
    (B, Tq, H, Dv) in memory, cuDNN's and the cpu op's follow q; the log-sum-exp is (B, H, Tq),
    the cpu op's (B, Tq, H) in memory, efficient's padded to 32 queries, cuDNN's (B, H, Tq, 1). A query
    whose keys are all masked: zeros and a log-sum-exp of 0 from the cpu and efficient ops (torch 2.11's
    measured on an H200), NaN from the others."""
    if op not in _SDPA_OPS:
        raise ValueError(f"sdpa: unknown op {op}")
    names, n_out = _SDPA_OPS[op]
    given = dict(zip(names, args))
    given.update(kwargs)
    if float(given.get("dropout_p", 0.0) or 0.0) != 0.0:
        raise ValueError(f"sdpa: dropout_p={given['dropout_p']} is random; no kernel reproduces it")
    mask = given.get("attn_bias", given.get("attn_mask"))
    bsz, heads, tq, d = q.shape
    dv = v.shape[3]
    cpu, lse, lse_out = op == "_scaled_dot_product_flash_attention_for_cpu", None, None
    if cpu and dv == d:
        out = torch.empty_like(q)   # its meta: empty_like(query)
    elif op == "_scaled_dot_product_cudnn_attention" or cpu:
        if dv == d:   # torch's alloc_with_matching_layout
            out = torch.empty_like(q.transpose(1, 2)).transpose(1, 2)
        else:
            order = sorted(range(4), key=lambda i: -q.stride(i))   # q's dims, outermost first
            shape = [(bsz, heads, tq, dv)[i] for i in order]
            out = torch.empty(shape, device=q.device, dtype=q.dtype).permute(*[order.index(i) for i in range(4)])
    else:
        out = torch.empty((bsz, tq, heads, dv), device=q.device, dtype=q.dtype).transpose(1, 2)
    if cpu:
        lse = lse_out = torch.empty((bsz, tq, heads), device=q.device, dtype=torch.float32).transpose(1, 2)
    elif op == "_scaled_dot_product_efficient_attention":
        lse_out = torch.empty((bsz, heads, -(-tq // 32) * 32 if given.get("compute_log_sumexp") else 0),
                              device=q.device, dtype=torch.float32)
        lse = lse_out[:, :, :tq] if lse_out.shape[2] else None
    o, lse = attention(q, k, v, attn_mask=mask, is_causal=bool(given.get("is_causal", False)),
                       scale=given.get("scale"), out=out, precision=precision, lse=lse,
                       empty_rows="zero" if cpu or op == "_scaled_dot_product_efficient_attention" else "nan")
    lse = lse.unsqueeze(-1) if op == "_scaled_dot_product_cudnn_attention" else lse if lse_out is None else lse_out
    return (o, lse) + (None,) * (n_out - 2)
