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
try:
    sdpa("_scaled_dot_product_flash_attention", q, k, v, 0.1)
    out["dropout_refused"] = 1.0
except ValueError:
    out["dropout_refused"] = 0.0
print(json.dumps(out))
"""
NAMES = ["plain_odd", "causal_several_blocks", "bool_mask_broadcast", "additive_mask_and_scale", "strided_inputs",
         "logsumexp", "sdpa_efficient_causal", "sdpa_cpu_scale_kwarg", "sdpa_flash_layout",
         "sdpa_cudnn_layout_follows_q", "dropout_refused"]


def _errors(device: str) -> dict:
    return case_errors(CASES, device)


@pytest.mark.parametrize("case", NAMES)
def test_the_attention_family_matches_float64_torch_in_the_interpreter(case):
    assert _errors("cpu")[case] < 1e-4


@pytest.mark.gpu
@pytest.mark.parametrize("case", NAMES)
def test_the_attention_family_matches_float64_torch_on_cuda(case):
    assert _errors("cuda")[case] < 1e-4
