"""tools/dialect/conv_rewrite.py: transposed, 1-D and dilated convolutions rewritten as
the 2-D / 3-D undilated convolutions Inductor has a Triton template for, exactly."""
from __future__ import annotations

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
]


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
    assert convs and all(not n.args[6] and list(n.args[5]) == [1] * (n.args[1].meta["val"].dim() - 2)
                         and n.args[1].meta["val"].dim() >= 4 for n in convs)


def test_a_convolution_the_template_takes_is_left_as_it_is():
    gm, _, _ = _traced((2, False, 4, 6, 3, 2, 1, 1, 0, 2))
    [conv] = [n for n in gm.graph.nodes if n.target == CONV]
    assert [n.target for n in gm.graph.nodes if n.op == "call_function"] == [CONV]
    assert list(conv.args[3]) == [2, 2] and conv.args[8] == 2


def test_the_template_compile_gets_the_rewrites_and_the_default_compile_does_not(monkeypatch):
    from tools.dialect import inductor_capture
    from tools.problem import load_problem
    from pathlib import Path
    seen = []

    def fake_compile_fx(gm, example_inputs, **kwargs):
        seen.append(CONV in (kwargs.get("decompositions") or {}))
        raise RuntimeError("stop here")
    monkeypatch.setattr("torch._inductor.compile_fx.compile_fx", fake_compile_fx)
    problem = load_problem(Path(__file__).parent / "problems" / "relu.py")
    for templates in (False, True):
        with pytest.raises(ValueError, match="stop here"):
            inductor_capture.capture(problem, "cpu", templates=templates)
    assert seen == [False, True]
