"""A convolution's bias and ReLU in its launch's epilogue (tools/dialect/conv_epilogue.py): in the
default compile `relu(convolution(x, w, b))` whose convolution nothing else reads is the
convolution without its bias, then `torch.ops.krefine.conv_bias_act`, which the converter folds
into the convolution family's launch before it (`conv_nd(x, w, b, ..., activation='relu')`); a
convolution read elsewhere keeps its ReLU as a kernel of its own.

The converter tests read a capture recorded on cpu (tests/fixtures/inductor_level3/
cpu_conv_relu_epilogue.py: `python -m tools.dialect capture PROBLEM --device cpu`); the seed then
runs in lockstep with Model in Triton's interpreter.
"""
from __future__ import annotations

import ast

import pytest

from tests.test_gemm_epilogue import _call, _post_grad_graph, _targets
from tests.test_level3_seeds import _lockstep_errors, _seed


def _launches(call: str) -> list[str]:
    return [line.strip() for line in call.splitlines() if "conv_nd(" in line or "conv_transpose_nd(" in line]


def test_a_convolution_s_bias_and_relu_are_in_its_launch():
    first = _launches(_call(_seed("conv_relu_epilogue")))[0]
    assert first.startswith("buf3 = conv_nd(buf0, buf1, arg1_1,") and "activation='relu'" in first, first


def test_a_convolution_without_a_bias_takes_its_relu_alone():
    second = _launches(_call(_seed("conv_relu_epilogue")))[1]
    assert "conv_nd(buf4, buf5, None," in second and "activation='relu'" in second, second


def test_a_convolution_read_besides_its_relu_keeps_its_relu_as_a_kernel():
    call = _call(_seed("conv_relu_epilogue"))
    third = _launches(call)[2]
    assert "activation" not in third and "triton_poi_fused_add_relu" in call, third


def test_no_bias_or_relu_kernel_is_left_after_the_fused_convolutions():
    call = _call(_seed("conv_relu_epilogue"))
    kernels = [line.split("[grid")[0].strip() for line in call.splitlines() if "[grid" in line]
    assert "conv_bias_act" not in call and not [k for k in kernels if "relu" in k and "add" not in k], kernels


def test_the_seed_with_convolution_epilogues_matches_the_model_on_three_calls(tmp_path):
    assert max(_lockstep_errors("conv_relu_epilogue", tmp_path)) < 1e-4


def _conv_relu(dtype=None):
    import torch
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU())
    return model if dtype is None else model.to(dtype)


@pytest.mark.parametrize("epilogues", [True, False])
def test_only_the_default_compile_takes_a_convolution_s_relu_into_its_launch(epilogues):
    """The templates compile (max-autotune) writes its own Triton convolution with the epilogue
    fused: the pass leaves the graph to it."""
    import torch
    from tools.dialect.recurrence import RecurrencePass
    graph = _post_grad_graph(_conv_relu(), torch.randn(2, 3, 6, 6))
    RecurrencePass(epilogues)(graph)
    assert ("krefine.conv_bias_act.default" in _targets(graph)) == epilogues
    assert ("aten.relu.default" in _targets(graph)) != epilogues


def test_the_fused_graph_keeps_a_convolution_for_inductor_to_choose_its_layouts():
    import torch
    from tools.dialect.conv_epilogue import conv_epilogue_pass
    graph = _post_grad_graph(_conv_relu(), torch.randn(2, 3, 6, 6))
    assert conv_epilogue_pass(graph) == 1
    conv = next(n for n in graph.nodes if str(n.target) == "aten.convolution.default")
    assert conv.args[2] is None and [str(u.target) for u in conv.users] == ["krefine.conv_bias_act.default"]


def test_a_bfloat16_convolution_keeps_its_relu():
    """A 16-bit output rounds between the convolution and its bias: fused, the sum would differ."""
    import torch
    from tools.dialect.conv_epilogue import conv_epilogue_pass
    graph = _post_grad_graph(_conv_relu(torch.bfloat16), torch.randn(2, 3, 6, 6, dtype=torch.bfloat16))
    assert conv_epilogue_pass(graph) == 0 and "aten.relu.default" in _targets(graph)


def test_the_op_computes_the_bias_and_relu_in_the_layout_it_was_given():
    import torch
    from tools.dialect import conv_epilogue  # noqa: F401  (registers the op)
    y = torch.randn(2, 4, 3, 3).to(memory_format=torch.channels_last)
    b = torch.randn(4)
    out = torch.ops.krefine.conv_bias_act.default(y, b, "relu")
    assert out.stride() == y.stride() and torch.equal(out, torch.relu(y + b.view(1, 4, 1, 1)))


def _fold(call_text: str) -> str:
    """call()'s statements after the op, the op folded into the launch before it."""
    from tools.dialect.families import _conv_bias_act_launch
    stmts = ast.parse(call_text).body
    body, op, rest = stmts[:1], stmts[1], stmts[2:]
    return "\n".join(ast.unparse(s) for s in [*body, _conv_bias_act_launch(op, body, rest), *rest])


def test_a_convolution_buffer_reused_later_gets_a_buffer_of_its_own():
    """call() reuses buf2's memory for buf9 after the op: buf9 must not be buf3's memory."""
    text = _fold("buf2 = conv_nd(x, w, None, stride=(1, 1), precision='ieee')\n"
                 "buf3 = torch.ops.krefine.conv_bias_act.default(buf2, b, 'relu')\n"
                 "buf9 = buf2; del buf2  # reuse\n")
    assert text.splitlines()[0] == "buf3 = conv_nd(x, w, b, stride=(1, 1), precision='ieee', activation='relu')"
    assert text.splitlines()[1] == "buf2 = empty_strided_cuda(buf3.size(), buf3.stride(), buf3.dtype)"


def test_a_convolution_buffer_only_deleted_later_names_the_fused_output():
    text = _fold("buf2 = conv_nd(x, w, None, precision='ieee')\n"
                 "buf3 = torch.ops.krefine.conv_bias_act.default(buf2, b, 'relu')\ndel buf2\n")
    assert text.splitlines()[1] == "buf2 = buf3"


def test_an_op_whose_input_is_no_convolution_launch_is_refused_with_its_reason():
    with pytest.raises(ValueError, match="not a convolution launch without a bias"):
        _fold("buf2 = gemm(a, b, precision='ieee')\nbuf3 = torch.ops.krefine.conv_bias_act.default(buf2, b, 'relu')\n")


def test_a_transposed_and_a_1d_convolution_take_their_bias_and_relu_too():
    launches = _launches(_call(_seed("convt_relu_epilogue")))
    assert len(launches) == 2 and all("activation='relu'" in line for line in launches), launches
    assert "conv_transpose_nd(buf0, buf1, arg1_1, stride=(2, 2)" in launches[0], launches[0]
    assert "conv_nd(buf5, arg3_1, arg4_1, stride=(1,)" in launches[1], launches[1]


def test_the_seed_of_a_transposed_and_a_1d_convolution_with_epilogues_matches_the_model(tmp_path):
    assert max(_lockstep_errors("convt_relu_epilogue", tmp_path)) < 1e-4


def test_a_bias_the_forward_computes_stays_out_of_the_launch_and_its_relu_a_kernel():
    """StyleGAN's `bias * lr_mul`: Inductor may write the bias's kernel after a bias-less convolution's,
    which would then read it before it is made; the plain convolution after it still takes its own."""
    launches = _launches(_call(_seed("computed_bias_conv_relu")))
    assert len(launches) == 2 and "activation" not in launches[0] and "activation='relu'" in launches[1], launches


def test_the_seed_of_a_computed_bias_matches_the_model_on_three_calls(tmp_path):
    assert max(_lockstep_errors("computed_bias_conv_relu", tmp_path)) < 1e-4


def test_the_pass_takes_no_convolution_whose_bias_the_graph_computes():
    import torch
    from tools.dialect.conv_epilogue import conv_epilogue_pass

    class Scaled(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv2d(3, 4, 3)

        def forward(self, x):
            return torch.relu(torch.nn.functional.conv2d(x, self.conv.weight, self.conv.bias * 0.5))

    graph = _post_grad_graph(Scaled(), torch.randn(2, 3, 6, 6))
    assert conv_epilogue_pass(graph) == 0 and "aten.relu.default" in _targets(graph)


def test_a_bias_made_after_the_launch_is_refused_not_read_before_it_is_made():
    with pytest.raises(ValueError, match=r"bias \(buf3\) is made after its launch"):
        _fold("buf2 = conv_nd(x, w, None, precision='ieee')\n"
              "buf4 = torch.ops.krefine.conv_bias_act.default(buf2, buf3, 'relu')\n"
              "buf3 = empty_strided_cuda((8,), (1,), torch.float32)\ndel buf2\n")
