"""A convolution's bias and ReLU in its launch's epilogue: `torch.ops.krefine.conv_bias_act` in the capture.

Inductor leaves a convolution to cuDNN (`extern_kernels.convolution`) without its bias, and writes
the bias and a following ReLU as a kernel of their own (`triton_poi_fused_convolution_relu`), in
place on the convolution's output: two launches a layer, and the output written, read and written
again. 11_VGG16 at batch 10 moves 1.1 GB that way a forward (0.4 ms of an H200's 3.2), and its host
pays for 13 launches more. `conv_epilogue_pass`, over Inductor's post-grad graph, writes each
`relu(convolution(x, w, b, ...))` whose convolution nothing else reads as
`conv_bias_act(convolution(x, w, None, ...), b, "relu")`. The convolution stays an
`aten.convolution` (Inductor keeps choosing its layouts, channels-last on a GPU, by the
convolutions it sees); `krefine::conv_bias_act`, tagged flexible_layout, takes the output in
whatever layout Inductor gave it and returns one alike, and Inductor leaves it as a call
(a fallback) in call(). The converter (tools/dialect/families.py `_conv_bias_act_launch`) puts
the bias and the ReLU into the launch before it, `conv_nd(x, w, b, ..., activation='relu')`
(tools/kernels/conv.py's epilogue): one launch a layer. Here the op computes with torch, only
so the capture runs.

float32 and float64 only: there the fused sum is the same as the two kernels' (the
convolution's sum, then + bias, in the output's dtype), bit for bit; a 16-bit output rounds
between the two, so it stays as it is. Only in the default compile: the templates compile
(max-autotune) writes its own Triton convolution with the epilogue fused. A convolution read
elsewhere too, another activation, or a bias the forward computes (StyleGAN's `bias * lr_mul`, a
BatchNorm folded in the forward: Inductor may write its kernel after the bias-less convolution's,
and the launch would read it before it is made) stays as it is.
"""
from __future__ import annotations

from typing import Optional

import torch

from tools.dialect.recurrence_cells import _is, _val, aten

ACTS = {aten.relu.default: "relu"}   # the activation ops taken, and the name conv_nd's epilogue knows each by


@torch.library.custom_op("krefine::conv_bias_act", mutates_args=(), tags=(torch.Tag.flexible_layout,))
def conv_bias_act(y: torch.Tensor, bias: Optional[torch.Tensor], act: str) -> torch.Tensor:
    if act != "relu":
        raise ValueError(f"krefine::conv_bias_act: no activation {act!r}")
    out = torch.empty_like(y)   # y's layout, as the fake says
    return out.copy_(torch.relu(y if bias is None else y + bias.reshape(1, -1, *[1] * (y.dim() - 2))))


@conv_bias_act.register_fake
def _(y, bias, act):
    return torch.empty_like(y)


def _convolution(node) -> bool:
    """Is `node` a convolution (any transposed, groups; a float32 or float64 output with elements; no bias or
    one the graph is given) that only its activation reads?"""
    if not _is(node, aten.convolution.default) or len(node.args) != 9 or node.kwargs or len(node.users) != 1:
        return False
    y = _val(node)
    bias = node.args[2]   # a parameter or an input: one the forward computes (bias * lr_mul) may be scheduled after
    return isinstance(y, torch.Tensor) and y.dtype in (torch.float32, torch.float64) and y.numel() > 0 \
        and 3 <= y.dim() <= 5 and (bias is None or isinstance(bias, torch.fx.Node) and bias.op == "placeholder")


def conv_epilogue_pass(graph) -> int:
    """Each activation of ACTS whose input is such a convolution as conv_bias_act of the
    convolution without its bias: how many were."""
    done = 0
    for node in list(graph.nodes):
        if node.op != "call_function" or node.target not in ACTS or len(node.args) != 1 or node.kwargs:
            continue
        conv = node.args[0]
        if not isinstance(conv, torch.fx.Node) or not _convolution(conv):
            continue
        x, w, bias, *rest = conv.args
        with graph.inserting_before(node):
            bare = graph.call_function(aten.convolution.default, (x, w, None, *rest))
            fused = graph.call_function(torch.ops.krefine.conv_bias_act.default, (bare, bias, ACTS[node.target]))
        bare.meta.update(conv.meta)
        fused.meta.update(node.meta)
        node.replace_all_uses_with(fused)
        graph.erase_node(node)
        graph.erase_node(conv)
        done += 1
    return done
