"""krefine's lookup family (tools/kernels/lookup.py): nn.EmbeddingBag's and torch.cdist's fallback
ops (`aten._embedding_bag`, `aten._cdist_forward`) in Triton, against torch's own.

On cpu the cases run in Triton's interpreter in one child process; each case is its own test.
The `gpu` tests run the same cases on cuda; the slow tier compiles the kernels for sm_90.
"""
from __future__ import annotations

import ast

import pytest

from tests.kernel_cases import case_errors, compile_for_sm90

CASES = """
import json, math, sys
import torch
import torch.nn.functional as F
from tools.kernels.lookup import cdist_op, embedding_bag_op
dev = sys.argv[1]
torch.backends.cuda.matmul.allow_tf32 = False
torch.manual_seed(0)
w = torch.randn(20, 24, device=dev)
idx = torch.tensor([3, 7, 7, 0, 19, 5, 2, 11, 4], device=dev)
offsets = torch.tensor([0, 2, 2, 6], device=dev)          # bag 1 is empty
def bag(mode, **kw):
    want = F.embedding_bag(idx, w, offsets, mode=mode, **kw)
    aten = {"sum": 0, "mean": 1, "max": 2}[mode]
    got = embedding_bag_op(w, idx, offsets, False, aten, False, kw.get("per_sample_weights"),
                           kw.get("include_last_offset", False), kw.get("padding_idx", -1) if
                           kw.get("padding_idx") is not None else -1)[0]
    return (got - want).abs().max().item() if got.shape == want.shape else float("inf")
out = {}
out["embedding_bag_sum_mean_max"] = max(bag(m) for m in ("sum", "mean", "max"))
out["embedding_bag_per_sample_weights"] = bag("sum", per_sample_weights=torch.rand(9, device=dev))
out["embedding_bag_padding_idx_skipped_and_not_counted"] = max(bag(m, padding_idx=7) for m in ("sum", "mean", "max"))
last = torch.tensor([0, 2, 2, 6, 9], device=dev)
want = F.embedding_bag(idx, w, last, mode="mean", include_last_offset=True)
got = embedding_bag_op(w, idx, last, False, 1, False, None, True, -1)[0]
out["embedding_bag_include_last_offset"] = (got - want).abs().max().item() if got.shape == want.shape else 1.0
def dist(x1, x2, p):
    want = torch.cdist(x1.double(), x2.double(), p=p).float()   # the truth: torch's p=2 may use a matmul
    got = cdist_op(x1, x2, p)
    return (got - want).abs().max().item() / max(1.0, want.abs().max().item()) if got.shape == want.shape \\
        else float("inf")
a, b = torch.randn(3, 37, 20, device=dev), torch.randn(3, 29, 20, device=dev)
out["cdist_p2_batched"] = dist(a, b, 2.0)
out["cdist_p1_p3_and_inf"] = max(dist(a, b, p) for p in (1.0, 3.0, math.inf))
ints = torch.randint(0, 3, (2, 9, 5), device=dev).float()
out["cdist_p0_counts_differences"] = dist(ints, ints.flip(1), 0.0)
out["cdist_unbatched"] = dist(torch.randn(17, 6, device=dev), torch.randn(40, 6, device=dev), 2.0)
out["cdist_broadcast_batches"] = dist(torch.randn(2, 1, 5, 8, device=dev), torch.randn(4, 7, 8, device=dev), 2.0)
same = torch.randn(6, 4, device=dev)
out["cdist_identical_rows_are_zero"] = cdist_op(same, same, 2.0).diagonal().abs().max().item()
w64, a64, b64 = w.double(), a.double(), b.double()    # float64 in fp64 (before: fp32 accumulators, 1e-7 off)
got = embedding_bag_op(w64, idx, offsets, False, 1, False, None, False, -1)[0]
e_bag = (got - F.embedding_bag(idx, w64, offsets, mode="mean")).abs().max().item()
e_dist = (cdist_op(a64, b64, 1.0) - torch.cdist(a64, b64, p=1.0)).abs().max().item()
out["float64_bags_and_distances_in_fp64"] = float(got.dtype != torch.float64 or max(e_bag, e_dist) > 1e-12)
print(json.dumps(out))
"""
NAMES = ["embedding_bag_sum_mean_max", "embedding_bag_per_sample_weights",
         "embedding_bag_padding_idx_skipped_and_not_counted", "embedding_bag_include_last_offset",
         "cdist_p2_batched", "cdist_p1_p3_and_inf", "cdist_p0_counts_differences", "cdist_unbatched",
         "cdist_broadcast_batches", "cdist_identical_rows_are_zero", "float64_bags_and_distances_in_fp64"]
TOLERANCE = 1e-5


@pytest.mark.parametrize("case", NAMES)
def test_the_lookup_family_matches_torch_in_the_interpreter(case):
    assert case_errors(CASES, "cpu")[case] < TOLERANCE


@pytest.mark.gpu
@pytest.mark.parametrize("case", NAMES)
def test_the_lookup_family_matches_torch_on_cuda(case):
    assert case_errors(CASES, "cuda")[case] < TOLERANCE


def _launch(line: str, rest: str = "") -> str:
    from tools.dialect.families import _lookup_launch
    return ast.unparse(_lookup_launch(ast.parse(line).body[0], ast.parse(rest).body))


def test_an_embedding_bag_fallback_becomes_the_family_call_with_the_ops_arguments():
    assert _launch("buf1 = torch.ops.aten._embedding_bag.default(arg0_1, arg1_1, buf0, False, 1)",
                   "buf2 = buf1[0]\ndel buf1") == \
        "buf1 = embedding_bag_op(arg0_1, arg1_1, buf0, False, 1, precision='ieee')"


def test_an_embedding_bag_whose_other_outputs_call_reads_is_refused_with_the_reason():
    with pytest.raises(ValueError, match="read beyond its output"):
        _launch("buf1 = torch.ops.aten._embedding_bag.default(arg0_1, arg1_1, buf0, False, 1)",
                "buf2 = buf1[0]\nbuf3 = buf1[1]")


def test_a_cdist_fallback_becomes_the_family_call():
    assert _launch("buf1 = torch.ops.aten._cdist_forward.default(buf0, arg2_1, 2.0, None)") == \
        "buf1 = cdist_op(buf0, arg2_1, 2.0, None, precision='ieee')"


@pytest.mark.slow
@pytest.mark.parametrize("kernel", ["embedding_bag_kernel", "cdist_kernel"])
@pytest.mark.parametrize("fp", ["fp32", "fp64"])
def test_the_lookup_kernels_compile_for_sm90(kernel, fp):
    import tools.kernels.lookup as lookup
    if kernel == "embedding_bag_kernel":
        sig = {"w_ptr": f"*{fp}", "idx_ptr": "*i64", "off_ptr": "*i64", "psw_ptr": f"*{fp}", "out_ptr": f"*{fp}",
               "n_idx": "i32", "n_bags": "i32", "dim": "i32", "padding_idx": "i32", "w_sr": "i32", "out_sr": "i32",
               "MODE": "constexpr", "HAS_PSW": "constexpr", "LAST_OFFSET": "constexpr", "BLOCK": "constexpr"}
        consts = {"MODE": 1, "HAS_PSW": False, "LAST_OFFSET": False, "BLOCK": 64}
    else:
        sig = {"a_ptr": f"*{fp}", "b_ptr": f"*{fp}", "out_ptr": f"*{fp}", "P": "i32", "R": "i32", "M": "i32", "p": "fp32",
               **{n: "i32" for n in ("a_sb", "a_sp", "a_sm", "b_sb", "b_sr", "b_sm", "o_sb", "o_sp", "o_sr")},
               "NORM": "constexpr", "BLOCK_P": "constexpr", "BLOCK_R": "constexpr", "BLOCK_M": "constexpr"}
        consts = {"NORM": 4, "BLOCK_P": 16, "BLOCK_R": 16, "BLOCK_M": 16}
    assert compile_for_sm90(getattr(lookup, kernel), sig, consts).asm["ptx"]
