"""krefine's scatter family (tools/kernels/scatter.py): `aten.scatter_reduce_.two`, the in-place
scatter Inductor's cpu backend leaves to PyTorch, against torch's own.

On cpu the cases run in Triton's interpreter in one child process; each case is its own test.
The `gpu` tests run the same cases on cuda; the slow tier compiles the kernels for sm_90.
"""
from __future__ import annotations

import ast

import pytest

from tests.kernel_cases import case_errors, compile_for_sm90

CASES = """
import json, sys
import torch
from tools.kernels.scatter import scatter_reduce_op_
dev = sys.argv[1]
torch.manual_seed(0)
def err(dim, reduce, include_self, shape=(4, 6, 5), index_shape=(4, 3, 5)):
    out = torch.randn(shape, device=dev)
    src = torch.randn(index_shape, device=dev)
    index = torch.randint(0, shape[dim], index_shape, device=dev)
    want = out.clone().scatter_reduce_(dim, index, src, reduce, include_self=include_self)
    got = scatter_reduce_op_(out.clone(), dim, index, src, reduce=reduce, include_self=include_self)
    return (got - want).abs().max().item()
out = {}
out["sum_along_every_dim"] = max(err(d, "sum", True, index_shape=(3, 4, 2)) for d in (0, 1, 2, -1))
out["sum_without_self"] = max(err(d, "sum", False, index_shape=(3, 4, 2)) for d in (0, 1, 2))
out["amax_and_amin_with_and_without_self"] = max(err(1, r, s) for r in ("amax", "amin") for s in (True, False))
out["one_dimension"] = err(0, "sum", True, shape=(7,), index_shape=(20,))
base = torch.zeros(3, 8, device=dev)
src = torch.randn(3, 8, device=dev)
wide = torch.randn(3, 10, device=dev)       # src wider than index: only index's positions count
idx = torch.randint(0, 8, (3, 8), device=dev)
out["src_wider_than_index"] = (scatter_reduce_op_(base.clone(), 1, idx, wide, "sum") -
                               base.clone().scatter_reduce_(1, idx, wide[:, :8].contiguous(), "sum")).abs().max().item()
t = torch.randn(8, 3, device=dev).t()        # strided out, as a view
want = t.clone().scatter_add_(1, idx, src)
got = t.clone()
scatter_reduce_op_(got, 1, idx, src, "sum")
out["strided_out_updated_in_place"] = (got - want).abs().max().item()
dst = torch.randint(0, 9, (40,), device=dev)    # a graph's degree count: ones scattered into int64
deg = torch.zeros(9, dtype=torch.long, device=dev)
got = scatter_reduce_op_(deg.clone(), 0, dst, torch.ones_like(dst), "sum")
out["int64_degree_count_exact"] = float(not torch.equal(got, deg.clone().scatter_add_(0, dst, torch.ones_like(dst))))
ints = torch.randint(-50, 50, (3, 8), device=dev, dtype=torch.int32)
out["int32_amax_and_amin_without_self_exact"] = float(not all(torch.equal(
    scatter_reduce_op_(ints.clone(), 1, idx, ints.flip(1), r, include_self=False),
    ints.clone().scatter_reduce_(1, idx, ints.flip(1), r, include_self=False)) for r in ("amax", "amin")))
out["mean_with_and_without_self"] = max(err(d, "mean", s, index_shape=(3, 4, 2)) for d in (0, 2) for s in (True, False))
longs = torch.randint(-20, 20, (9, 8), device=dev)     # torch floors an integer mean: -2.5 -> -3
at = torch.randint(0, 5, (9, 8), device=dev)
out["int64_mean_floored_with_and_without_self"] = float(not all(torch.equal(
    scatter_reduce_op_(torch.full((5, 8), 3, dtype=torch.long, device=dev), 0, at, longs, "mean", include_self=s),
    torch.full((5, 8), 3, dtype=torch.long, device=dev).scatter_reduce_(0, at, longs, "mean", include_self=s))
    for s in (True, False)))
one, i0, two = torch.tensor(1.0, device=dev), torch.tensor(0, device=dev), torch.tensor(2.0, device=dev)
out["zero_dim_tensors"] = max((scatter_reduce_op_(one.clone(), 0, i0, two, r) -
                               one.clone().scatter_reduce_(0, i0, two, r)).abs().item() for r in ("sum", "amax", "mean"))
try:
    scatter_reduce_op_(base.clone(), 1, idx, src, "prod")
    out["prod_refused_with_the_reason"] = 1.0
except ValueError as e:
    out["prod_refused_with_the_reason"] = 0.0 if "no atomic form" in str(e) else 1.0
print(json.dumps(out))
"""
NAMES = ["sum_along_every_dim", "sum_without_self", "amax_and_amin_with_and_without_self", "one_dimension",
         "src_wider_than_index", "strided_out_updated_in_place", "prod_refused_with_the_reason",
         "int64_degree_count_exact", "int32_amax_and_amin_without_self_exact", "mean_with_and_without_self",
         "int64_mean_floored_with_and_without_self", "zero_dim_tensors"]
TOLERANCE = 1e-5   # a sum's order of additions is the atomics'


@pytest.mark.parametrize("case", NAMES)
def test_the_scatter_family_matches_torch_in_the_interpreter(case):
    assert case_errors(CASES, "cpu")[case] < TOLERANCE


@pytest.mark.gpu
@pytest.mark.parametrize("case", NAMES)
def test_the_scatter_family_matches_torch_on_cuda(case):
    assert case_errors(CASES, "cuda")[case] < TOLERANCE


def test_an_in_place_scatter_reduce_fallback_becomes_the_family_call_with_the_ops_arguments():
    from tools.dialect.families import _scatter_launch
    stmt = ast.parse("aten.scatter_reduce_.two(buf1, 1, arg3_1, buf2, reduce='sum', include_self=True)").body[0]
    assert ast.unparse(_scatter_launch(stmt)) == \
        "scatter_reduce_op_(buf1, 1, arg3_1, buf2, reduce='sum', include_self=True, precision='ieee')"


@pytest.mark.parametrize("given", ["reduce='prod', include_self=True", "'prod'"])
def test_a_scatter_reduce_the_family_has_no_form_for_is_refused_when_the_seed_is_made(given):
    """Before: the seed was made, and raised the first time it ran."""
    from tools.dialect.families import _scatter_launch
    stmt = ast.parse(f"aten.scatter_reduce_.two(buf1, 0, arg3_1, buf2, {given})").body[0]
    with pytest.raises(ValueError, match=r"reduce='prod': krefine's scatter family has no atomic form"):
        _scatter_launch(stmt)


@pytest.mark.slow
@pytest.mark.parametrize("kernel", ["scatter_reduce_kernel", "scatter_fill_kernel", "scatter_count_kernel",
                                    "scatter_mean_kernel", "zero_kernel"])
def test_the_scatter_kernels_compile_for_sm90(kernel):
    import tools.kernels.scatter as scatter
    ints = ["n", "n1", "n2", "n3", "o0", "o1", "o2", "o3", "t0", "t1", "t2", "t3"]
    if kernel == "scatter_reduce_kernel":
        ints[4:4] = ["s0", "s1", "s2", "s3"]
        sig = {"out_ptr": "*fp32", "idx_ptr": "*i64", "src_ptr": "*fp32", **{n: "i64" for n in ints},
               "DIM": "constexpr", "REDUCE": "constexpr", "BLOCK": "constexpr"}
        consts = {"DIM": 2, "REDUCE": 1, "BLOCK": 256}
    elif kernel == "scatter_fill_kernel":
        sig = {"out_ptr": "*i64", "idx_ptr": "*i64", **{n: "i64" for n in ints}, "value": "i64",
               "DIM": "constexpr", "BLOCK": "constexpr"}
        consts = {"DIM": 3, "BLOCK": 256}
    elif kernel == "scatter_count_kernel":
        sig = {"cnt_ptr": "*fp32", "idx_ptr": "*i64", **{n: "i64" for n in ints}, "DIM": "constexpr", "BLOCK": "constexpr"}
        consts = {"DIM": 1, "BLOCK": 256}
    elif kernel == "scatter_mean_kernel":   # an integer mean: floored
        sig = {"out_ptr": "*i64", "cnt_ptr": "*fp32", **{n: "i64" for n in ints[:8]}, "BLOCK": "constexpr"}
        consts = {"BLOCK": 256}
    else:
        sig, consts = {"ptr": "*fp32", "n": "i64", "BLOCK": "constexpr"}, {"BLOCK": 256}
    assert compile_for_sm90(getattr(scatter, kernel), sig, consts).asm["ptx"]
