"""tools/dialect/conv_rewrite.py: transposed, 1-D and dilated convolutions rewritten as
the 2-D / 3-D undilated convolutions Inductor has a Triton template for, exactly; depthwise
ones as a sum over the kernel's taps (pointwise work, no convolution left)."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx

from tools.dialect.conv_rewrite import template_decompositions

CONV = torch.ops.aten.convolution.default

# (dims, transposed, c_in, c_out, kernel, stride, padding, dilation, output_padding, groups)
CASES = [
    (2, True, 4, 6, 3, 2, 1, 1, 1, 1),
    (2, True, 4, 6, (3, 5), (2, 3), (1, 2), (2, 1), (1, 0), 2),
    (2, True, 4, 6, 3, 2, 3, 1, 0, 1),                    # padding beyond the kernel: cropped
    (2, True, 8, 8, 4, 4, 1, 1, 3, 8),                    # depthwise, output_padding = stride - 1
    (1, True, 6, 4, 5, 3, 2, 2, 1, 2),
    (3, True, 4, 6, (3, 5, 3), (2, 1, 2), (1, 2, 0), (1, 1, 2), (1, 0, 1), 2),
    (1, False, 4, 8, 3, 3, 2, 4, 0, 4),
    (2, False, 4, 6, (3, 5), 1, (2, 4), (2, 3), 0, 1),
    # depthwise: one input channel per group (channel multiplier 1 or 2)
    (2, False, 4, 4, 3, 1, 1, 1, 0, 4),
    (2, False, 3, 6, (3, 7), (2, 1), (1, 3), (1, 2), 0, 3),
    (3, False, 3, 3, 3, 2, 1, 1, 0, 3),
]


def _depthwise(case) -> bool:
    """Whether the convolution the rewrite finally sees is depthwise (a transposed one
    becomes a convolution with its channels swapped per group)."""
    nd, transposed, c_in, c_out, k, s, p, d, op, g = case
    return g == (c_out if transposed else c_in) and (c_in if transposed else c_out) % g == 0 \
        and (c_in // g if transposed else 1) == 1


def _args(case):
    nd, transposed, c_in, c_out, k, s, p, d, op, g = case
    k, s, p, d, op = ([*v] if isinstance(v, tuple) else [v] * nd for v in (k, s, p, d, op))
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(2, c_in, *[7 + i for i in range(nd)], dtype=torch.float64, generator=gen)
    shape = (c_in, c_out // g, *k) if transposed else (c_out, c_in // g, *k)
    w = torch.randn(*shape, dtype=torch.float64, generator=gen)
    b = torch.randn(c_out, dtype=torch.float64, generator=gen)
    return (x, w, b), (s, p, d, transposed, op, g)


def _traced(case):
    tensors, (s, p, d, tr, op, g) = _args(case)
    gm = make_fx(lambda x, w, b: CONV(x, w, b, s, p, d, tr, op, g),
                 decomposition_table=template_decompositions())(*tensors)
    return gm, tensors, CONV(*tensors, s, p, d, tr, op, g)


@pytest.mark.parametrize("case", CASES)
def test_the_rewrite_computes_the_same_convolution(case):
    gm, tensors, expected = _traced(case)
    torch.testing.assert_close(gm(*tensors), expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("case", CASES)
def test_only_convolutions_with_a_triton_template_are_left(case):
    gm, _, _ = _traced(case)
    convs = [n for n in gm.graph.nodes if n.target == CONV]
    assert all(not n.args[6] and list(n.args[5]) == [1] * (n.args[1].meta["val"].dim() - 2)
               and n.args[1].meta["val"].dim() >= 4 for n in convs)
    assert bool(convs) != _depthwise(case)   # a depthwise one leaves none: a sum over its taps


def test_a_depthwise_kernel_with_more_taps_than_the_limit_stays_a_convolution():
    from tools.dialect.conv_rewrite import MAX_TAPS
    k = int(MAX_TAPS ** 0.5) + 1
    gm, _, _ = _traced((2, False, 2, 2, k, 1, k // 2, 1, 0, 2))
    assert [n.target for n in gm.graph.nodes if n.op == "call_function"] == [CONV]


def test_a_convolution_the_template_takes_is_left_as_it_is():
    gm, _, _ = _traced((2, False, 4, 6, 3, 2, 1, 1, 0, 2))
    [conv] = [n for n in gm.graph.nodes if n.target == CONV]
    assert [n.target for n in gm.graph.nodes if n.op == "call_function"] == [CONV]
    assert list(conv.args[3]) == [2, 2] and conv.args[8] == 2


def _compile_fx_sees(monkeypatch, what) -> list:
    """What `what()` was when the capture called compile_fx, without and with templates."""
    from tools.dialect import inductor_capture
    from tools.problem import load_problem
    seen = []

    def fake_compile_fx(gm, example_inputs, **kwargs):
        seen.append(what(kwargs))
        raise RuntimeError("stop here")
    monkeypatch.setattr("torch._inductor.compile_fx.compile_fx", fake_compile_fx)
    problem = load_problem(Path(__file__).parent / "problems" / "relu.py")
    for templates in (False, True):
        with pytest.raises(ValueError, match="stop here"):
            inductor_capture.capture(problem, "cpu", templates=templates)
    return seen


def test_the_template_compile_gets_the_rewrites_and_the_default_compile_does_not(monkeypatch):
    assert _compile_fx_sees(monkeypatch, lambda kw: CONV in (kw.get("decompositions") or {})) == [False, True]


def test_a_cpu_compile_traces_attention_as_matmuls_and_a_softmax(monkeypatch):
    flags = _compile_fx_sees(monkeypatch, lambda kw: (torch.backends.cuda.flash_sdp_enabled(),
                                                      torch.backends.cuda.math_sdp_enabled()))
    assert flags == [(False, True), (False, True)]


def test_on_cuda_only_the_template_compile_traces_attention_as_matmuls():
    from tools.dialect.inductor_capture import attention_as_matmuls
    assert [attention_as_matmuls("cuda", t) for t in (False, True)] == [False, True]


@pytest.mark.parametrize("kernel,stride,padding", [(3, 2, 1), ((3, 2, 3), (1, 2, 2), (1, 0, 1)), (2, None, 0)])
def test_3d_average_pooling_is_the_depthwise_convolution_with_a_uniform_kernel(kernel, stride, padding):
    x = torch.rand(2, 3, 7, 8, 9, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    pool = torch.nn.AvgPool3d(kernel, stride, padding)
    gm = make_fx(pool, decomposition_table=template_decompositions())(x)
    assert [n.target for n in gm.graph.nodes if n.op == "call_function"
            and "avg_pool" in str(n.target)] == []
    torch.testing.assert_close(gm(x), pool(x), rtol=1e-12, atol=1e-12)


def test_average_pooling_that_does_not_count_the_padding_is_left_as_it_is():
    x = torch.rand(2, 3, 7, 8, 9, dtype=torch.float64)
    gm = make_fx(torch.nn.AvgPool3d(3, 2, 1, count_include_pad=False),
                 decomposition_table=template_decompositions())(x)
    assert any("avg_pool3d" in str(n.target) for n in gm.graph.nodes)


DEPTHWISE_PROBLEM = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(8, 8, (3, 5), stride=2, padding=1, groups=8)

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.randn(2, 8, 33, 35)]


def get_init_inputs():
    return []
'''


@pytest.mark.slow
def test_a_depthwise_convolution_seeds_as_triton_kernels_alone(tmp_path):
    # the template compile in its own process (Inductor's compile threads outlive it)
    import subprocess
    import sys
    from tools.dialect.inductor_capture import read_capture
    from tools.dialect.kernelbook import convert
    from tools.problem import load_problem
    path, out = tmp_path / "depthwise.py", tmp_path / "capture.py"
    path.write_text(DEPTHWISE_PROBLEM)
    done = subprocess.run([sys.executable, "-m", "tools.dialect", "capture", str(path), "--device", "cpu",
                           "--templates", "--out", str(out)], cwd=Path(__file__).resolve().parents[1],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    src = convert(load_problem(path), read_capture(out.read_text()))
    assert "@triton.jit" in src and "extern_kernels" not in src and "convolution(" not in src
