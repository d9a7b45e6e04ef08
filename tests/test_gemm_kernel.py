"""krefine's GEMM family (tools/kernels/gemm.py): mm, addmm, bmm, baddbmm into a given
output, against torch in float64, on small odd shapes.

On cpu the cases run in Triton's interpreter in one child process (the interpreter needs
triton.language imported with TRITON_INTERPRET=1, which would break compiling in this
process); each case is still its own test. The `gpu` test runs the same cases on cuda.
"""
from __future__ import annotations


import pytest

from tests.kernel_cases import case_errors, compile_for_sm90

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
a, b, bias = r(600, 64), r(300, 64).t(), r(300)   # K a multiple of the tile's (no K mask); 10 row tiles: 2 groups
out["addmm_even_k_grouped"] = err(gemm(a, b, out=torch.empty(600, 300, device=dev), bias=bias),
                                  a.double() @ b.double() + bias.double())
big = (2048, 256, 1024) if dev == "cuda" else (80, 64, 48)   # cuda: 128 tiles of 128 x 128, 8 warps (H100 / H200)
errs = []
for m, k, n in (big, (1024, 256, 512)):                      # then too few 128-wide tiles to fill a GPU: 64 x 64
    a, w, bias = r(m, k), r(n, k), r(n)
    errs.append(err(gemm(a, w.t(), out=torch.empty(m, n, device=dev), bias=bias, precision="tf32x3"),
                    a.double() @ w.double().t() + bias.double()))
out["tf32x3_rule_tiles"] = max(errs)
a, b, bias = r(9, 21).double(), r(21, 6).double(), r(6).double()
for p in ("ieee", "tf32x3"):      # fp64 operands: fp64 accumulation whatever the precision asks
    got = gemm(a, b, out=torch.empty(9, 6, device=dev, dtype=torch.float64), bias=bias, precision=p)
    out[f"float64_operands_{p}"] = err(got, a @ b + bias) * 1e6 if got.dtype == torch.float64 else float("inf")
try:
    gemm(r(3, 4), r(5, 2), out=torch.empty(3, 2, device=dev))
    out["mismatch_raises"] = 1.0
except ValueError:
    out["mismatch_raises"] = 0.0
a, b, row, col = r(2, 5, 3), r(2, 3, 4), r(1, 4), r(5, 1)   # a row and a column broadcast over a batch
out["bias_row_and_column"] = max(err(gemm(a, b, out=torch.empty(2, 5, 4, device=dev), bias=t), a.double() @ b.double()
                                     + t.double()) for t in (row, col))
try:
    gemm(r(3, 4), r(4, 2), out=torch.empty(3, 2, device=dev), bias=r(3))
    out["bias_that_does_not_broadcast_raises"] = 1.0
except ValueError:
    out["bias_that_does_not_broadcast_raises"] = 0.0
x, w, bias = r(7, 40), r(11, 40), r(11)   # act='relu' into an output gemm allocates; a NaN stays NaN
x[2, 3] = float("nan")
got = gemm(x, w.t(), bias=bias, act="relu")
want = torch.relu(x.double() @ w.double().t() + bias.double())
same_nan = bool((got.isnan() == want.isnan()).all()) and bool(want.isnan().any())
out["relu_epilogue_allocated"] = err(got.nan_to_num(), want.nan_to_num()) if same_nan and got.is_contiguous() else float("inf")
try:
    gemm(r(3, 4), r(4, 2), act="gelu")
    out["unknown_activation_raises"] = 1.0
except ValueError:
    out["unknown_activation_raises"] = 0.0
print(json.dumps(out))
"""
NAMES = ["mm_odd", "addmm_linear", "alpha_beta", "bmm_strided_out", "baddbmm_broadcast", "bmm_several_tiles",
         "addmm_even_k_grouped", "tf32x3_rule_tiles", "float64_operands_ieee", "float64_operands_tf32x3", "mismatch_raises", "bias_row_and_column",
         "bias_that_does_not_broadcast_raises", "relu_epilogue_allocated", "unknown_activation_raises"]


def _errors(device: str) -> dict:
    return case_errors(CASES, device)


@pytest.mark.parametrize("case", NAMES)
def test_the_gemm_family_matches_float64_torch_in_the_interpreter(case):
    assert _errors("cpu")[case] < 1e-4


@pytest.mark.gpu
@pytest.mark.parametrize("case", NAMES)
def test_the_gemm_family_matches_float64_torch_on_cuda(case):
    assert _errors("cuda")[case] < 1e-4


@pytest.mark.slow
@pytest.mark.parametrize("block_mn, block_k, warps, stages", [(128, 64, 8, 3), (128, 32, 8, 3), (64, 64, 4, 3)])
def test_the_tensor_core_tiles_compile_for_sm90_within_its_shared_memory(block_mn, block_k, warps, stages):
    """gemm_config's tf32x3 tiles compiled for an H100/H200: 64-deep within the 227 KiB a block
    may take there, 32-deep within the 99 KiB of any GPU since Ampere."""
    import tools.kernels.gemm as gemm
    ints = ["M", "N", "K", "sab", "sam", "sak", "sbb", "sbk", "sbn", "sxb", "sxm", "sxn", "scb", "scm", "scn"]
    consts = {"HAS_BIAS": True, "PRECISION": "tf32x3", "DOUBLE": False, "BLOCK_M": block_mn, "BLOCK_N": block_mn,
              "BLOCK_K": block_k, "GROUP_M": 8, "EVEN_K": True, "ACT": "none"}
    sig = {"a_ptr": "*fp32", "b_ptr": "*fp32", "bias_ptr": "*fp32", "c_ptr": "*fp32", **{n: "i32" for n in ints},
           "alpha": "fp32", "beta": "fp32", **{c: "constexpr" for c in consts}}
    kernel = compile_for_sm90(gemm.gemm_kernel, sig, consts, num_warps=warps, num_stages=stages)
    assert 0 < kernel.metadata.shared <= (227 if block_k == 64 else 99) << 10, kernel.metadata.shared


def test_fp32_tensor_core_products_take_128_wide_tiles_of_8_warps_where_they_fill_the_gpu():
    from tools.kernels.gemm import gemm_config
    h200 = dict(sms=132, smem=232448)
    assert gemm_config(65536, 2304, 768, "cuda", "tf32x3", **h200) == (128, 128, 64, 8, 3)
    assert gemm_config(128, 16384, 16384, "cuda", "tf32", **h200) == (128, 128, 64, 8, 3)    # 128 tiles: 97% of 132
    assert gemm_config(65536, 2304, 768, "cuda", "tf32x3", sms=108, smem=166912) == (128, 128, 32, 8, 3)   # A100


def test_fp32_tensor_core_products_too_small_to_fill_the_gpu_take_64_wide_tiles_64_deep_on_hopper():
    from tools.kernels.gemm import gemm_config
    h200 = dict(sms=132, smem=232448)
    assert gemm_config(1024, 1024, 8192, "cuda", "tf32x3", **h200) == (64, 64, 64, 4, 3)   # 64 tiles of 128
    assert gemm_config(8, 256, 256, "cuda", "tf32x3", **h200) == (16, 64, 64, 4, 3)
    assert gemm_config(1024, 1024, 32, "cuda", "tf32x3", **h200) == (64, 64, 32, 4, 4)    # K too short for 64
    assert gemm_config(1024, 1024, 8192, "cuda", "tf32x3", sms=108, smem=166912) == (64, 64, 32, 4, 4)   # A100


def test_exact_and_16_bit_products_keep_the_4_warp_rule():
    import torch
    from tools.kernels.gemm import gemm_config
    assert gemm_config(65536, 2304, 768, "cuda", "ieee", sms=132, smem=232448) == (128, 128, 32, 4, 3)
    assert gemm_config(65536, 2304, 768, "cuda", "tf32x3", torch.float16, 132, 232448) == (128, 128, 32, 4, 3)


@pytest.mark.slow
@pytest.mark.parametrize("dtype, precision, act", [("fp32", "tf32x3", "relu"), ("fp64", "ieee", "none")])
def test_the_gemm_kernel_compiles_for_sm90(dtype, precision, act):
    import tools.kernels.gemm as gemm
    ints = ["M", "N", "K", "sab", "sam", "sak", "sbb", "sbk", "sbn", "sxb", "sxm", "sxn", "scb", "scm", "scn"]
    sig = {"a_ptr": f"*{dtype}", "b_ptr": f"*{dtype}", "bias_ptr": f"*{dtype}", "c_ptr": f"*{dtype}",
           **{n: "i32" for n in ints}, "alpha": "fp32", "beta": "fp32", **{c: "constexpr" for c in (
               "HAS_BIAS", "PRECISION", "DOUBLE", "BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M", "EVEN_K", "ACT")}}
    consts = {"HAS_BIAS": True, "PRECISION": precision, "DOUBLE": dtype == "fp64",
              "BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "GROUP_M": 8, "EVEN_K": dtype == "fp32", "ACT": act}
    assert compile_for_sm90(gemm.gemm_kernel, sig, consts, num_warps=4, num_stages=3).asm["ptx"]


def test_an_out_holding_one_element_for_several_is_refused():
    import torch
    from tools.kernels.gemm import gemm
    with pytest.raises(ValueError, match="one element for several"):
        gemm(torch.randn(3, 4, 5), torch.randn(3, 5, 6), out=torch.empty(1, 4, 6).expand(3, 4, 6))
