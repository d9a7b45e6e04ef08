"""krefine's selection family (tools/kernels/select.py): top-k and sort along one dimension,
the fallback ops Inductor leaves (`aten.topk`, `aten.sort`), against torch's own.

On cpu the cases run in Triton's interpreter in one child process; each case is still its own
test. The `gpu` tests run the same cases on cuda; the slow tier compiles the kernel for sm_90.
"""
from __future__ import annotations

import ast

import pytest

from tests.kernel_cases import case_errors, compile_for_sm90

CASES = """
import json, sys
import torch
from tools.kernels.select import topk_op, sort_op
dev = sys.argv[1]
torch.manual_seed(0)
def same(got, want):   # values and indices exactly, NaN where NaN (a wrong index or order counts)
    def eq(g, w):
        return g.shape == w.shape and g.dtype == w.dtype and bool(((g == w) | (g.isnan() & w.isnan())).all()
                                                                  if g.is_floating_point() else (g == w).all())
    return 0.0 if len(got) == len(want) and all(eq(g, w) for g, w in zip(got, want)) else 1.0
x = torch.randn(4, 7, 5, device=dev)
out = {}
out["topk_every_dim_largest_and_smallest"] = max(
    same(topk_op(x, 3, d, l), torch.topk(x, 3, d, l)) for d in (0, 1, 2, -1) for l in (True, False))
out["sort_every_dim_both_ways_stable"] = max(
    same(sort_op(x, d, s), torch.sort(x, dim=d, descending=s, stable=True)) for d in (0, 1, 2) for s in (True, False))
ties = torch.tensor([[2., 1., 2., 0., 1., 2.]], device=dev)
out["equal_keys_keep_their_order"] = max(same(sort_op(ties, -1, s), torch.sort(ties, dim=-1, descending=s, stable=True))
                                         for s in (True, False))
nan = torch.tensor([[1., float("nan"), 3., float("inf"), -float("inf"), 0.]], device=dev)
out["nan_ranks_above_every_number"] = max(same(sort_op(nan, -1, s), torch.sort(nan, dim=-1, descending=s, stable=True))
                                          for s in (True, False))
t = torch.randn(6, 9, device=dev).t()
out["strided_input"] = max(same(topk_op(t, 2, d), torch.topk(t, 2, d)) for d in (0, 1))
long = torch.randn(3, 1000, device=dev)
out["a_long_row"] = same(topk_op(long, 5), torch.topk(long, 5))
out["sort_stable_keywords"] = same(sort_op(x, stable=True, dim=1, descending=True),
                                   torch.sort(x, dim=1, descending=True, stable=True))
vocab = torch.randn(2, 20000, device=dev)   # top-k sampling over a vocabulary: past one program's row
vocab[0, 123] = float("nan")
out["a_row_past_one_program_largest"] = same(topk_op(vocab, 3), torch.topk(vocab, 3))
out["a_row_past_one_program_smallest"] = same(topk_op(vocab[1:], 4, -1, False), torch.topk(vocab[1:], 4, -1, False))
import tools.kernels.select as select_module
tied = torch.randint(0, 3, (3, 40), device=dev).float()
tied[0, 3] = float("nan")
short = topk_op(tied, 6), sort_op(tied, -1, True)
select_module.MAX_N = 16                     # the same rows through the long-row kernel: the same order
out["the_long_row_kernel_keeps_the_short_ones_order"] = max(same(topk_op(tied, 6), short[0]),
                                                             same(sort_op(tied, -1, True), short[1]))
select_module.MAX_N = 16384
h = torch.randn(3, 8, device=dev).half()
out["half_values_kept_in_their_dtype"] = same(topk_op(h, 2), torch.topk(h, 2))
y = torch.randn(2, 1, 5, 9, device=dev)[:, :, :3]   # strides (45, 45, 9, 1): dims 0 and 2 do not collapse
out["dims_that_do_not_collapse_read_from_a_copy"] = max(same(topk_op(y, 2, -1), torch.topk(y, 2, -1)),
                                                        same(sort_op(y, 0), torch.sort(y, dim=0, stable=True)))
big = torch.tensor([[2**40, 2**40 + 1000, 3, -2**63, 2**63 - 1, 7]], device=dev)   # apart by less than fp32 tells
f64 = torch.tensor([[1.0, 1 + 1e-9, 0.5, float("nan"), 1 - 1e-12]], dtype=torch.float64, device=dev)
out["int64_and_float64_keys_in_their_own_type"] = max(
    [same(topk_op(big, 4, -1, l), torch.topk(big, 4, -1, l)) for l in (True, False)] +
    [same(sort_op(f64, -1, s), torch.sort(f64, dim=-1, descending=s, stable=True)) for s in (True, False)])
zero_d = torch.tensor(2.5, device=dev)
out["a_0d_input_gives_0d_outputs"] = max(same(topk_op(zero_d, 1), torch.topk(zero_d, 1)),
                                         same(sort_op(zero_d), torch.sort(zero_d, stable=True)))
try:
    topk_op(x, 9, 1)
    out["k_past_the_dimension_refused"] = 1.0
except ValueError:
    out["k_past_the_dimension_refused"] = 0.0
print(json.dumps(out))
"""
NAMES = ["topk_every_dim_largest_and_smallest", "sort_every_dim_both_ways_stable", "equal_keys_keep_their_order",
         "nan_ranks_above_every_number", "strided_input", "a_long_row", "sort_stable_keywords",
         "half_values_kept_in_their_dtype", "k_past_the_dimension_refused", "a_row_past_one_program_largest",
         "a_row_past_one_program_smallest", "the_long_row_kernel_keeps_the_short_ones_order",
         "dims_that_do_not_collapse_read_from_a_copy", "int64_and_float64_keys_in_their_own_type",
         "a_0d_input_gives_0d_outputs"]


@pytest.mark.parametrize("case", NAMES)
def test_the_selection_family_matches_torch_in_the_interpreter(case):
    assert case_errors(CASES, "cpu")[case] == 0.0


@pytest.mark.gpu
@pytest.mark.parametrize("case", NAMES)
def test_the_selection_family_matches_torch_on_cuda(case):
    assert case_errors(CASES, "cuda")[case] == 0.0


def _launch(line: str) -> str:
    from tools.dialect.families import _select_launch
    return ast.unparse(_select_launch(ast.parse(line).body[0]))


def test_a_topk_fallback_becomes_the_family_call_with_the_ops_arguments():
    assert _launch("buf5 = torch.ops.aten.topk.default(buf4, 2, -1, True, True)") == \
        "buf5 = topk_op(buf4, 2, -1, True, True, precision='ieee')"


def test_a_stable_sort_fallback_keeps_its_keywords():
    assert _launch("buf1 = torch.ops.aten.sort.stable(buf0, stable=True, dim=1, descending=False)") == \
        "buf1 = sort_op(buf0, stable=True, dim=1, descending=False, precision='ieee')"


@pytest.mark.slow
@pytest.mark.parametrize("ptr, keys", [("*fp32", 0), ("*fp64", 1), ("*i64", 2)])
def test_the_selection_kernel_compiles_for_sm90(ptr, keys):
    import tools.kernels.select as select
    sig = {"x_ptr": ptr, "val_ptr": ptr, "idx_ptr": "*i64", "n": "i32", "k": "i32", "inner": "i32",
           "x_so": "i32", "x_sn": "i32", "x_si": "i32", "LARGEST": "constexpr", "BLOCK_N": "constexpr",
           "KEYS": "constexpr"}
    assert compile_for_sm90(select.select_kernel, sig, {"LARGEST": False, "BLOCK_N": 1024, "KEYS": keys}).asm["ptx"]


@pytest.mark.slow
def test_the_long_row_selection_kernel_compiles_for_sm90():
    import tools.kernels.select as select
    sig = {"x_ptr": "*fp32", "val_ptr": "*fp32", "idx_ptr": "*i64", "n": "i32", "k": "i32", "inner": "i32",
           "x_so": "i32", "x_sn": "i32", "x_si": "i32", "LARGEST": "constexpr", "CHUNK": "constexpr"}
    assert compile_for_sm90(select.select_long_kernel, sig, {"LARGEST": False, "CHUNK": select.LONG_CHUNK}).asm["ptx"]
