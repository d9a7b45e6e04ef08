"""krefine's attention family (tools/kernels/attention.py): softmax(Q Kᵀ · scale + mask) V
against torch in float64, on small odd shapes, and `sdpa`, which stands in for the library
attention ops Inductor leaves (their arguments, their output layout).

On cpu the cases run in Triton's interpreter in one child process (the interpreter needs
triton.language imported with TRITON_INTERPRET=1); each case is still its own test. The
`gpu` tests run the same cases on cuda and compile the kernel for sm_90.
"""
from __future__ import annotations


import pytest

from tests.kernel_cases import case_errors

CASES = """
import json, math, sys
import torch
from tools.kernels.attention import attention, sdpa
dev = sys.argv[1]
torch.manual_seed(0)
def r(*s):
    return torch.randn(*s, device=dev)
def ref(q, k, v, mask=None, causal=False, scale=None):
    q, k, v = q.double(), k.double(), v.double()
    s = (q @ k.transpose(-2, -1)) * (1 / math.sqrt(q.shape[-1]) if scale is None else scale)
    if causal:
        s = s.masked_fill(~torch.ones(s.shape[-2:], dtype=torch.bool, device=dev).tril(), float("-inf"))
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else s + mask.double()
    return torch.softmax(s, -1) @ v
def err(got, want):
    return (got.double() - want).abs().max().item() if got.shape == want.shape else float("inf")
out = {}
q, k, v = r(2, 3, 7, 5), r(2, 3, 11, 5), r(2, 3, 11, 6)
out["plain_odd"] = err(attention(q, k, v)[0], ref(q, k, v))
q, k, v = r(1, 2, 70, 16), r(1, 2, 70, 16), r(1, 2, 70, 16)
out["causal_several_blocks"] = err(attention(q, k, v, is_causal=True)[0], ref(q, k, v, causal=True))
q, k, v = r(2, 2, 9, 8), r(2, 2, 9, 8), r(2, 2, 9, 8)
m = torch.rand(9, 9, device=dev) > 0.3
m[:, 0] = True
out["bool_mask_broadcast"] = err(attention(q, k, v, attn_mask=m)[0], ref(q, k, v, mask=m))
a = r(2, 1, 9, 9)
out["additive_mask_and_scale"] = err(attention(q, k, v, attn_mask=a, scale=0.3)[0], ref(q, k, v, mask=a, scale=0.3))
x = r(2, 6, 3, 4)   # (B, T, H, D) in memory, as a projection's view gives q, k, v
qt = x.transpose(1, 2)
out["strided_inputs"] = err(attention(qt, qt, qt)[0], ref(qt, qt, qt))
o, lse = attention(q, k, v)
want_lse = torch.logsumexp((q.double() @ k.double().transpose(-2, -1)) / math.sqrt(8), -1)
out["logsumexp"] = err(lse, want_lse)
res = sdpa("_scaled_dot_product_efficient_attention", q, k, v, None, False, 0.0, True)
out["sdpa_efficient_causal"] = err(res[0], ref(q, k, v, causal=True)) + (len(res) != 4)
res = sdpa("_scaled_dot_product_flash_attention_for_cpu", q, k, v, 0.0, False, scale=0.5)
out["sdpa_cpu_scale_kwarg"] = err(res[0], ref(q, k, v, scale=0.5)) + (len(res) != 2)
want = torch.empty(2, 9, 2, 8).transpose(1, 2).stride()
out["sdpa_flash_layout"] = float(sdpa("_scaled_dot_product_flash_attention", q, k, v)[0].stride() != want)
qc = r(2, 9, 2, 8).permute(0, 2, 1, 3)
out["sdpa_cudnn_layout_follows_q"] = float(sdpa("_scaled_dot_product_cudnn_attention", qc, k, v, None, False)[0].stride()
                                           != qc.stride())
CPU_OP = "_scaled_dot_product_flash_attention_for_cpu"
o, lse = sdpa(CPU_OP, q, k, v)   # q contiguous: the op's output follows it, its log-sum-exp is (B, Tq, H) in memory
want_lse = torch.empty(2, 9, 2).transpose(1, 2).stride()
out["sdpa_cpu_layouts_follow_q"] = err(o, ref(q, k, v)) + float(o.stride() != q.stride() or lse.stride() != want_lse)
if dev == "cpu":   # the op itself, where it runs
    o_t, lse_t = getattr(torch.ops.aten, CPU_OP)(q, k, v)
    out["sdpa_cpu_layouts_follow_q"] += float(o.stride() != o_t.stride() or lse.stride() != lse_t.stride())
a = torch.zeros(9, 9, device=dev)
a[4] = float("-inf")   # query 4 sees no key
o, lse = sdpa(CPU_OP, q, k, v, attn_mask=a)
keep = torch.arange(9, device=dev) != 4
out["sdpa_cpu_empty_row_is_zero"] = err(o[:, :, keep], ref(q, k, v, mask=a)[:, :, keep]) + \
    o[:, :, 4].abs().max().item() + lse[:, :, 4].abs().max().item()
if dev == "cpu":
    o_t, lse_t = getattr(torch.ops.aten, CPU_OP)(q, k, v, attn_mask=a)
    out["sdpa_cpu_empty_row_is_zero"] += err(o, o_t.double()) + err(lse, lse_t.double())
EFF_OP = "_scaled_dot_product_efficient_attention"
ab = torch.empty(2, 2, 9, 12, device=dev)[..., :9]   # rows of 12: the cuda op takes a bias of aligned rows
ab.copy_(a.expand(2, 2, 9, 9))
o, lse = sdpa(EFF_OP, q, k, v, ab, True)[:2]
out["sdpa_efficient_empty_row_is_zero"] = err(o[:, :, keep], ref(q, k, v, mask=a)[:, :, keep]) + \
    o[:, :, 4].abs().max().item() + lse[:, :, 4].abs().max().item()
if dev == "cuda":   # the op itself, where it runs (torch 2.11: zeros and a log-sum-exp of 0)
    o_t, lse_t = getattr(torch.ops.aten, EFF_OP)(q, k, v, ab, True)[:2]
    out["sdpa_efficient_empty_row_is_zero"] += err(o, o_t.double()) + err(lse[:, :, :9], lse_t[:, :, :9].double())
out["attention_empty_row_is_nan"] = float(not bool(attention(q, k, v, attn_mask=a)[0][:, :, 4].isnan().all()))
res = sdpa("_scaled_dot_product_efficient_attention", q, k, v, None, True)
out["sdpa_efficient_lse_padded_to_32"] = float(tuple(res[1].shape) != (2, 2, 32)) + \
    err(res[1][:, :, :9], torch.logsumexp((q.double() @ k.double().transpose(-2, -1)) / math.sqrt(8), -1))
res = sdpa("_scaled_dot_product_cudnn_attention", q, k, v, None, True)
out["sdpa_cudnn_lse_shape"] = float(tuple(res[1].shape) != (2, 2, 9, 1))
try:
    sdpa("_scaled_dot_product_flash_attention", q, k, v, 0.1)
    out["dropout_refused"] = 1.0
except ValueError:
    out["dropout_refused"] = 0.0
print(json.dumps(out))
"""
NAMES = ["plain_odd", "causal_several_blocks", "bool_mask_broadcast", "additive_mask_and_scale", "strided_inputs",
         "logsumexp", "sdpa_efficient_causal", "sdpa_cpu_scale_kwarg", "sdpa_flash_layout",
         "sdpa_cudnn_layout_follows_q", "sdpa_cpu_layouts_follow_q", "sdpa_cpu_empty_row_is_zero",
         "sdpa_efficient_empty_row_is_zero", "attention_empty_row_is_nan", "sdpa_efficient_lse_padded_to_32", "sdpa_cudnn_lse_shape", "dropout_refused"]


def _errors(device: str) -> dict:
    return case_errors(CASES, device)


@pytest.mark.parametrize("case", NAMES)
def test_the_attention_family_matches_float64_torch_in_the_interpreter(case):
    assert _errors("cpu")[case] < 1e-4


@pytest.mark.gpu
@pytest.mark.parametrize("case", NAMES)
def test_the_attention_family_matches_float64_torch_on_cuda(case):
    assert _errors("cuda")[case] < 1e-4


@pytest.mark.slow
@pytest.mark.parametrize("mask, empty_zero", [(0, False), (2, True)])
def test_the_attention_kernel_compiles_for_sm90(mask, empty_zero):
    from tests.kernel_cases import compile_for_sm90
    from tools.kernels.attention import attention_kernel
    ints = ("sqb sqh sqm sqd skb skh skn skd svb svh svn svd smb smh smm smn sob soh som sod slb slh slm "
            "H TQ TK D DV").split()
    sig = {**{p: "*fp32" for p in ("q_ptr", "k_ptr", "v_ptr", "mask_ptr", "o_ptr", "lse_ptr")},
           **{p: "i32" for p in ints}, "scale": "fp32",
           **{p: "constexpr" for p in ("MASK", "CAUSAL", "PRECISION", "EMPTY_ZERO", "BLOCK_M", "BLOCK_N", "BLOCK_D",
                                       "BLOCK_DV")}}
    kernel = compile_for_sm90(attention_kernel, sig, {"MASK": mask, "CAUSAL": False, "PRECISION": "ieee",
                                                      "EMPTY_ZERO": empty_zero, "BLOCK_M": 64, "BLOCK_N": 32,
                                                      "BLOCK_D": 64, "BLOCK_DV": 64})
    assert ".entry attention_kernel" in kernel.asm["ptx"]


def test_a_mask_of_more_than_four_dims_is_refused_in_one_line():
    import torch
    from tools.kernels.attention import attention
    q = torch.randn(1, 2, 4, 8)
    with pytest.raises(ValueError, match="a mask broadcasts to"):
        attention(q, q, q, attn_mask=torch.ones(1, 1, 1, 4, 4, dtype=torch.bool))
