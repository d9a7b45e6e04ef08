"""tools/judge/numerics.py (and mismatch.py): the element + norm rule, and the tags saying how an output is wrong.

Each test builds the wrong output a buggy kernel would produce (unwritten tail, missing
scale, swapped strides, tf32 compute, ...) from a seeded reference on the CPU.
"""
from __future__ import annotations

import ast
import json
import math
from pathlib import Path

import pytest
import torch

from tools.judge import mismatch, numerics
from tools.judge.numerics import compare, tolerances
from tools import settings

FP32 = dict(atol=1e-4, rtol=1e-4, rel_l2_limit=1e-3)
HALF = dict(atol=1e-2, rtol=1e-2, rel_l2_limit=3e-2)


def randn(*shape, seed=0, dtype=torch.float32):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def tags(c) -> set[str]:
    return {t.split(":", 1)[0] for t in c.patterns}


def tf32(x: torch.Tensor) -> torch.Tensor:
    """Keep tf32's 10 mantissa bits (truncating), as a tf32 tensor core reads fp32."""
    return (x.view(torch.int32) & ~0x1FFF).view(torch.float32)


# -- the rule -----------------------------------------------------------------------


def test_identical_output_passes():
    ref = randn(32, 64)
    c = compare(ref.clone(), ref, **FP32)
    assert c.ok and c.n_bad == 0 and c.max_abs_err == 0.0 and c.rel_l2 == 0.0


def test_passing_output_has_no_patterns():
    ref = randn(32, 64)
    c = compare(ref + 1e-6, ref, **FP32)
    assert c.ok and c.patterns == () and c.first_bad_index is None


def test_fp32_reduction_reordering_passes():
    x = randn(64, 4096)
    ref = x.sum(-1)
    out = x.view(64, 64, 64).sum(-1).sum(-1)           # blocked partial sums, another order
    assert not torch.equal(out, ref)
    assert compare(out, ref, **FP32).ok


def test_fp16_rounding_passes_half_tolerances():
    ref = randn(64, 64).half()
    out = (ref.float() * (1 + 2e-3 * randn(64, 64, seed=1))).half()
    assert compare(out, ref, **HALF).ok


def test_element_rule_matches_torch_isclose():
    ref = randn(10_000)
    out = ref + 1e-4 * randn(10_000, seed=1) * 3      # many elements near the boundary
    c = compare(out, ref, **FP32)
    expected_bad = (~torch.isclose(out, ref, atol=1e-4, rtol=1e-4)).sum().item()
    assert 0 < expected_bad < 10_000 and c.n_bad == expected_bad


def test_zeros_do_not_pass_for_near_zero_reference():
    ref = 1e-6 * randn(4096)                           # every zero is within atol=1e-4
    c = compare(torch.zeros_like(ref), ref, **FP32)
    assert c.n_bad == 0 and not c.ok and c.rel_l2 == pytest.approx(1.0)


def test_zero_reference_requires_zero_output():
    ref = torch.zeros(100)
    assert compare(torch.zeros(100), ref, **FP32).ok
    c = compare(torch.full((100,), 1e-7), ref, **FP32)
    assert not c.ok and c.rel_l2 == math.inf


def test_nan_where_reference_finite_fails():
    ref = randn(8, 8)
    out = ref.clone()
    out[2, 3] = float("nan")
    c = compare(out, ref, **FP32)
    assert not c.ok and c.n_nan == 1 and "nan" in c.patterns and c.first_bad_index == (2, 3)


def test_inf_where_reference_finite_fails():
    ref = randn(8, 8)
    out = ref.clone()
    out[1, 1] = float("inf")
    c = compare(out, ref, **FP32)
    assert not c.ok and c.n_inf == 1 and "inf" in c.patterns and c.max_abs_err == math.inf


def test_nan_matching_reference_nan_passes():
    ref = randn(8, 8)
    ref[0, 0] = float("nan")
    c = compare(ref.clone(), ref, **FP32)
    assert c.ok and c.n_nan == 0


def test_finite_value_where_reference_is_nan_fails():
    ref = randn(8, 8)
    ref[4, 4] = float("nan")
    out = ref.nan_to_num(0.0)
    c = compare(out, ref, **FP32)
    assert not c.ok and c.first_bad_index == (4, 4)


def test_inf_of_wrong_sign_fails():
    ref = randn(16)
    ref[3] = float("inf")
    out = ref.clone()
    out[3] = float("-inf")
    assert not compare(out, ref, **FP32).ok


def test_integer_outputs_compare_exactly():
    ref = torch.arange(100)
    out = ref.clone()
    out[7] += 1
    atol, rtol, limit = tolerances(torch.int64, settings.TrialSettings())
    assert compare(ref.clone(), ref, atol=atol, rtol=rtol, rel_l2_limit=limit).ok
    assert compare(out, ref, atol=atol, rtol=rtol, rel_l2_limit=limit).n_bad == 1


def test_int64_values_past_float64s_53_bits_compare_exactly():
    # compared in float64, t + 1 near 2**60 read as t: a 64-bit hash wrong everywhere was correct
    ref = torch.randint(2**60, 2**61, (16,), generator=torch.Generator().manual_seed(0))
    atol, rtol, limit = tolerances(torch.int64, settings.TrialSettings())
    got = compare(ref + 1, ref, atol=atol, rtol=rtol, rel_l2_limit=limit)
    assert not got.ok and got.n_bad == 16 and got.max_abs_err == 1.0


def test_shape_mismatch_is_reported_not_raised():
    c = compare(randn(10), randn(12), **FP32)
    assert not c.ok and c.patterns == ("shape",)


def test_first_bad_index_is_multidimensional():
    ref = randn(3, 4, 5)
    out = ref.clone()
    out[2, 1, 4] += 1.0
    out[2, 3, 0] += 1.0
    c = compare(out, ref, **FP32)
    assert c.first_bad_index == (2, 1, 4)
    assert c.first_bad_values == (pytest.approx(ref[2, 1, 4].item() + 1.0),
                                  pytest.approx(ref[2, 1, 4].item()))


def test_tolerances_follow_dtype():
    s = settings.TrialSettings(atol_fp32=1e-4, atol_half=1e-2, rel_l2_fp32=1e-3, rel_l2_half=3e-2)
    assert tolerances(torch.float32, s) == (1e-4, 1e-4, 1e-3)
    assert tolerances(torch.float16, s) == (1e-2, 1e-2, 3e-2)
    assert tolerances(torch.bfloat16, s) == (1e-2, 1e-2, 3e-2)


def test_chunked_path_matches_unchunked():
    ref = randn(40, 250)
    out = ref.clone()
    out.view(-1)[9_300:] = 0                           # tail spans several 1000-chunks
    out[3, 7] = float("nan")
    one = compare(out, ref, **FP32).to_json()
    many = compare(out, ref, **FP32, chunk_numel=1000).to_json()
    floats = ("max_abs_err", "max_rel_err", "rel_l2")
    assert {k: v for k, v in many.items() if k not in floats} == \
           {k: v for k, v in one.items() if k not in floats}
    assert all(many[k] == pytest.approx(one[k], rel=1e-9) for k in floats)


# -- the patterns ---------------------------------------------------------------------


def test_all_zero_output_is_tagged_all_zero():
    ref = randn(64, 64)
    assert "all_zero" in compare(torch.zeros_like(ref), ref, **FP32).patterns


def test_unwritten_tail_is_tagged_tail():
    ref = randn(16, 1024)
    out = ref.clone()
    out.view(-1)[15_616:] = 0                          # last partial block of 1024 not stored
    c = compare(out, ref, **FP32)
    assert tags(c) == {"tail"} and "flat index >= 15616" in c.describe()


def test_unwritten_tail_of_relu_output_is_tagged_tail():
    ref = torch.relu(randn(5000))                      # half the tail is right by luck
    out = ref.clone()
    out[4000:] = 0
    assert tags(compare(out, ref, **FP32)) == {"tail"}


def test_short_grid_is_described_as_too_few_blocks():
    ref = randn(8192)
    out = ref.clone()
    out[1024:] = 0                                     # only the first program ran
    c = compare(out, ref, **FP32)
    assert "tail" in c.patterns and "too few blocks" in c.describe()


def test_every_other_row_wrong_is_tagged_axis_not_tail():
    ref = randn(16, 1024)
    out = ref.clone()
    out[1::2] *= 2
    assert compare(out, ref, **FP32).patterns == ("axis:0:every:2:from:1",)


def test_last_columns_wrong_is_tagged_axis():
    ref = randn(8, 32, 96)
    out = ref.clone()
    out[..., -32:] = 0                                 # column mask drops the last block
    assert compare(out, ref, **FP32).patterns == ("axis:2:last:32",)


def test_half_scale_is_tagged_constant_factor():
    ref = randn(64, 64)
    assert compare(0.5 * ref, ref, **FP32).patterns == ("constant_factor:0.5",)


def test_constant_offset_is_tagged_offset():
    ref = randn(64, 64)
    assert compare(ref + 0.25, ref, **FP32).patterns == ("offset:0.25",)


def test_transposed_matrix_is_tagged_transposed():
    ref = randn(64, 64)
    c = compare(ref.t().contiguous(), ref, **FP32)
    assert c.patterns == ("transposed",) and c.permutation == (1, 0)


def test_transposed_layout_of_rectangular_matrix_is_tagged_transposed():
    ref = randn(48, 80)
    out = ref.t().contiguous().view(48, 80)            # stored with swapped strides
    assert compare(out, ref, **FP32).patterns == ("transposed",)


def test_tf32_like_error_is_reduced_precision():
    a, b = randn(128, 512, seed=1), randn(512, 128, seed=2)
    ref = (a.double() @ b.double()).float()
    c = compare(tf32(a) @ tf32(b), ref, **FP32)
    assert not c.ok and c.patterns == ("reduced_precision",)
    assert 'input_precision="ieee"' in c.describe()


def test_reduced_precision_is_not_tagged_on_half_outputs():
    ref = randn(64, 64).half()
    out = (ref.float() * 1.05).half()                  # wrong by 5%: over half tolerance
    assert "reduced_precision" not in compare(out, ref, **HALF).patterns


@pytest.mark.parametrize("rate", [0.002, 0.05, 0.5])
def test_random_errors_are_tagged_scattered(rate):
    ref = randn(64, 256)
    out = ref.clone()
    out[torch.rand(64, 256, generator=torch.Generator().manual_seed(3)) < rate] += 1.0
    assert compare(out, ref, **FP32).patterns == ("scattered",)


# -- the report ---------------------------------------------------------------------


def _wrong_outputs():
    ref = randn(16, 1024)
    tail = ref.clone()
    tail.view(-1)[15_616:] = float("nan")
    rows = ref.clone()
    rows[::3] = 0
    return ref, [tail, rows, 0.5 * ref, torch.zeros_like(ref), ref + 1.0, ref.flip(0),
                 1e-6 * ref]


def test_describe_stays_short():
    ref, outs = _wrong_outputs()
    texts = [compare(out, ref, **FP32).describe() for out in outs]
    assert all(len(t) <= 400 and 1 <= t.count("\n") + 1 <= 3 for t in texts)


def test_to_json_is_strict_json():
    ref, outs = _wrong_outputs()
    for out in outs:
        json.dumps(compare(out, ref, **FP32).to_json(), allow_nan=False)


def test_numerics_imports_only_torch_the_stdlib_and_its_mismatch_module():
    for module in (numerics, mismatch):
        tree = ast.parse(Path(module.__file__).read_text())
        runtime = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
        names = {a.name if isinstance(n, ast.Import) else n.module or "" for n in runtime for a in n.names}
        roots = {name.split(".")[0] for name in names - {"tools.judge.mismatch"}}
        assert roots <= {"__future__", "torch", "itertools", "math", "re", "dataclasses", "typing"}, module.__name__


# --- describe(): the hint first, cut only between lines or clauses (issue 20)

def test_describe_puts_the_hint_before_the_figures():
    ref = randn(16, 1024)
    out = ref.clone()
    out.view(-1)[15_616:] = 0
    first = compare(out, ref, **FP32).describe().splitlines()[0]
    assert "flat index >= 15616" in first and not first.startswith("wrong values")


def test_fit_text_keeps_whole_lines_then_whole_clauses():
    lines = ["a" * 30, "first clause; second clause that is long; third"]
    text = numerics.fit_text(lines, 30 + 1 + len("first clause; second"))
    assert text == "a" * 30 + "\nfirst clause"


def test_fit_text_never_ends_inside_a_clause():
    lines = ["hint: the grid covers too few blocks (use triton.cdiv)", "wrong values: 10 of 100 elements; max abs err 3"]
    for limit in range(len(lines[0]), len("\n".join(lines)) + 1):
        text = numerics.fit_text(lines, limit)
        tail = text.splitlines()[-1]
        assert tail in (lines[0], "wrong values", "wrong values: 10 of 100 elements", lines[1]), (limit, tail)


def test_a_constant_factor_everywhere_is_not_also_an_axis_pattern():
    g = torch.Generator().manual_seed(0)
    ref = torch.randn(4, 2049, generator=g)
    ref[:, :4] = 1e-7          # too small for the factor to leave the tolerance there
    cmp = compare(ref * 1.001, ref, atol=1e-4, rtol=1e-4, rel_l2_limit=1e-4)
    assert [p.split(":")[0] for p in cmp.patterns] == ["constant_factor"]


# -- a reference that is rounding noise: against_truth ------------------------------


def _centered_means(rows=16, n=1000, seed=0):
    """(ref, out, truth): the row means of x - mean(x), 0 in exact arithmetic; ref and out
    are two float32 orders of summation, truth the same formula in float64."""
    x = torch.rand(rows, n, generator=torch.Generator().manual_seed(seed)) * 4 + 1
    ref = (x - x.mean(dim=1, keepdim=True)).mean(dim=1)
    rev = x.flip(1)
    out = ((rev - rev.sum(dim=1, keepdim=True) / n).cumsum(dim=1)[:, -1] / n).to(torch.float32)
    xd = x.double()
    truth = (xd - xd.mean(dim=1, keepdim=True)).mean(dim=1)
    return ref, out, truth


def test_a_reference_of_rounding_noise_passes_against_its_float64_truth():
    ref, out, truth = _centered_means()
    c = compare(out, ref, **FP32)
    assert c.norm_only and c.rel_l2 > 0.1                    # the float32 rule alone rejects it
    d = numerics.against_truth(c, out, ref, lambda: [truth])
    assert d.ok and d.patterns == () and d.reference_error["ok"] is True


def test_zeros_still_fail_against_truth_where_the_signal_is_real():
    truth = 1e-6 * randn(4096, dtype=torch.float64)          # below atol, far above float32's error
    ref = truth.to(torch.float32)
    zeros = torch.zeros_like(ref)
    d = numerics.against_truth(compare(zeros, ref, **FP32), zeros, ref, lambda: [truth])
    assert not d.ok and d.reference_error["out_l2_err"] > 1e6 * d.reference_error["ref_l2_err"]


def test_an_output_noisier_than_the_floor_fails_and_the_message_names_float64():
    ref, out, truth = _centered_means()
    off = out + 5e-6                                          # within atol, far above the noise
    d = numerics.against_truth(compare(off, ref, **FP32), off, ref, lambda: [truth])
    assert not d.ok and "float64" in d.describe() and "rel_l2" in tags(d)


def test_against_truth_leaves_element_failures_alone():
    ref, out, truth = _centered_means()
    bad = out.clone()
    bad[3] = 1.0
    c = compare(bad, ref, **FP32)
    assert numerics.against_truth(c, bad, ref, lambda: [truth]) is c


def test_without_a_truth_the_norm_rule_stands():
    ref, out, _ = _centered_means()
    d = numerics.against_truth(compare(out, ref, **FP32), out, ref, lambda: None)
    assert not d.ok and d.reference_error["precision"] is None


def test_rounding_that_fails_only_near_zero_is_not_called_an_indexing_bug():
    """A long fp32 scan beside a more exact one (torch's CPU cumsum adds in float64): rounding-size
    errors everywhere, elements off only where the running sum crosses zero. It fails the
    elementwise rule, and the message says rounding near zero, not "a stride ... is wrong"."""
    ref = (60 * torch.linspace(-1, 1, 4099)).repeat(3, 1)
    c = compare(ref + 3e-4, ref, **FP32)
    assert not c.ok and c.patterns == ("near_zero",)
    assert "fail only where the reference is near zero" in c.describe() and "stride" not in c.describe()


def test_a_wrong_index_of_a_smooth_output_is_still_an_axis_pattern():
    ref = (60 * torch.linspace(-1, 1, 4099)).repeat(3, 1)
    out = ref.clone()
    out[:, 2040:2060] = ref[:, 2060:2080]              # a window read 20 places on
    assert compare(out, ref, **FP32).patterns == ("axis:1:range:2040:2060",)
