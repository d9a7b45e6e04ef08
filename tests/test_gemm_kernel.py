"""krefine's GEMM family (tools/kernels/gemm.py): mm, addmm, bmm, baddbmm into a given
output, against torch in float64, on small odd shapes.

On cpu the cases run in Triton's interpreter in one child process (the interpreter needs
triton.language imported with TRITON_INTERPRET=1, which would break compiling in this
process); each case is still its own test. The `gpu` test runs the same cases on cuda.
"""
from __future__ import annotations


import pytest

from tests.kernel_cases import case_errors

CASES = """
import json, sys
import torch
from tools.kernels.gemm import gemm
dev = sys.argv[1]
torch.manual_seed(0)
def r(*s):
    return torch.randn(*s, device=dev)
def err(got, want):
    return (got.double() - want).abs().max().item() if got.shape == want.shape else float("inf")
out = {}
a, b = r(7, 19), r(19, 5)
out["mm_odd"] = err(gemm(a, b, out=torch.empty(7, 5, device=dev)), a.double() @ b.double())
x, w, bias = r(6, 12), r(10, 12), r(10)
out["addmm_linear"] = err(gemm(x, w.t(), out=torch.empty(6, 10, device=dev), bias=bias),
                          torch.nn.functional.linear(x.double(), w.double(), bias.double()))
a, b, c = r(5, 3), r(3, 4), r(5, 4)
out["alpha_beta"] = err(gemm(a, b, out=torch.empty(5, 4, device=dev), bias=c, alpha=0.5, beta=2.0),
                        0.5 * (a.double() @ b.double()) + 2 * c.double())
a, b = r(3, 6, 4), r(3, 4, 6)
o = torch.empty(3, 6, 6, device=dev).transpose(1, 2)
gemm(a, b, out=o)
out["bmm_strided_out"] = err(o, a.double() @ b.double())
a, b, bias = r(2, 17, 33), r(2, 33, 18), r(18)
out["baddbmm_broadcast"] = err(gemm(a, b, out=torch.empty(2, 17, 18, device=dev), bias=bias),
                               a.double() @ b.double() + bias.double())
a, b = r(3, 150, 70), r(3, 70, 130)
out["bmm_several_tiles"] = err(gemm(a, b, out=torch.empty(3, 150, 130, device=dev)), a.double() @ b.double())
try:
    gemm(r(3, 4), r(5, 2), out=torch.empty(3, 2, device=dev))
    out["mismatch_raises"] = 1.0
except ValueError:
    out["mismatch_raises"] = 0.0
print(json.dumps(out))
"""
NAMES = ["mm_odd", "addmm_linear", "alpha_beta", "bmm_strided_out", "baddbmm_broadcast", "bmm_several_tiles",
         "mismatch_raises"]


def _errors(device: str) -> dict:
    return case_errors(CASES, device)


@pytest.mark.parametrize("case", NAMES)
def test_the_gemm_family_matches_float64_torch_in_the_interpreter(case):
    assert _errors("cpu")[case] < 1e-4


@pytest.mark.gpu
@pytest.mark.parametrize("case", NAMES)
def test_the_gemm_family_matches_float64_torch_on_cuda(case):
    assert _errors("cuda")[case] < 1e-4
