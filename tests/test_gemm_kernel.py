"""krefine's GEMM family (tools/kernels/gemm.py) in Triton's interpreter: mm, addmm, bmm,
baddbmm into a given output, against torch in float64, on small odd shapes."""
from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402
import torch  # noqa: E402

from tools.kernels.gemm import gemm  # noqa: E402


def _close(got, want):
    assert got.shape == want.shape
    assert torch.allclose(got.double(), want.double(), atol=1e-4, rtol=1e-4)


def test_mm_of_odd_shapes_matches_torch():
    a, b = torch.randn(7, 19), torch.randn(19, 5)
    _close(gemm(a, b, out=torch.empty(7, 5)), a.double() @ b.double())


def test_addmm_with_a_transposed_weight_and_a_row_bias_matches_linear():
    x, w, bias = torch.randn(6, 12), torch.randn(10, 12), torch.randn(10)
    got = gemm(x, w.t(), out=torch.empty(6, 10), bias=bias)
    _close(got, torch.nn.functional.linear(x.double(), w.double(), bias.double()))


def test_alpha_and_beta_scale_the_product_and_the_bias():
    a, b, c = torch.randn(5, 3), torch.randn(3, 4), torch.randn(5, 4)
    _close(gemm(a, b, out=torch.empty(5, 4), bias=c, alpha=0.5, beta=2.0), 0.5 * (a.double() @ b.double()) + 2 * c)


def test_bmm_writes_through_the_output_s_strides():
    a, b = torch.randn(3, 6, 4), torch.randn(3, 4, 6)
    out = torch.empty(3, 6, 6).transpose(1, 2)          # a column-major output
    gemm(a, b, out=out)
    _close(out, a.double() @ b.double())


def test_baddbmm_broadcasts_its_bias_over_the_batch():
    a, b, bias = torch.randn(2, 17, 33), torch.randn(2, 33, 18), torch.randn(18)
    _close(gemm(a, b, out=torch.empty(2, 17, 18), bias=bias), a.double() @ b.double() + bias.double())


def test_mismatched_inner_dimensions_are_a_value_error():
    with pytest.raises(ValueError):
        gemm(torch.randn(3, 4), torch.randn(5, 2), out=torch.empty(3, 2))
