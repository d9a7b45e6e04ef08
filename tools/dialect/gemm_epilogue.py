"""A Linear's ReLU in its product's epilogue: `torch.ops.krefine.addmm_act` in the capture.

Inductor leaves a Linear's product to cuBLAS (`extern_kernels.mm`) and writes its bias and a
following ReLU as a kernel of their own (`triton_poi_fused_addmm_relu`): two launches a layer,
and the product's output written and read again. On a network of many small layers the host
pays for every launch (3_DeepNarrowMLP: 17 products and 16 ReLUs, 1.5 ms of Python and launch
a forward on an H200 against 1.2 ms of GPU work). `epilogue_pass`, a pass over Inductor's
post-grad graph, writes each `relu(addmm(bias, x, w))` whose product nothing else reads as one
`torch.ops.krefine.addmm_act(bias, x, w, "relu")`, which Inductor leaves as a call (a fallback)
in call(); the converter writes it as krefine's GEMM family with the ReLU in its epilogue
(tools/kernels/gemm.py `gemm(x, w, bias=bias, act="relu")`): one launch a layer. Here the op
computes with torch's own kernels, only so the capture runs.

Only in the default compile: the templates compile (max-autotune) writes its own Triton
product with the epilogue fused, which this op would take from it. 2-D products with alpha =
beta = 1 only (a Linear's); a product read elsewhere too, or another activation, stays as it is.
A Linear on more than two dimensions is a product between two reshapes, `relu(reshape(addmm(bias,
reshape(x), w)))` (a transformer's feed-forward on (batch, tokens, features)): its ReLU goes into
the product and the reshape follows it, `reshape(addmm_act(...))`, elementwise the same.
"""
from __future__ import annotations

import torch

from tools.dialect.recurrence_cells import _is, _val, aten

ACTS = {aten.relu.default: "relu"}   # the activation ops taken, and the name gemm's epilogue knows each by


@torch.library.custom_op("krefine::addmm_act", mutates_args=())
def addmm_act(bias: torch.Tensor, a: torch.Tensor, b: torch.Tensor, act: str) -> torch.Tensor:
    if act != "relu":
        raise ValueError(f"krefine::addmm_act: no activation {act!r}")
    return torch.relu(torch.addmm(bias, a, b))


@addmm_act.register_fake
def _(bias, a, b, act):
    return a.new_empty((a.shape[0], b.shape[1]), dtype=torch.promote_types(a.dtype, b.dtype))


def _product(node) -> bool:
    """Is `node` a Linear's addmm(bias, x, w) (2-D, not empty, floating, alpha = beta = 1) that only
    its activation reads?"""
    if not _is(node, aten.addmm.default) or len(node.args) != 3:
        return False
    if any(node.kwargs.get(k, 1) != 1 for k in ("alpha", "beta")) or set(node.kwargs) - {"alpha", "beta"}:
        return False
    vals = [_val(n) for n in (node, *node.args)]
    return len(node.users) == 1 and all(isinstance(v, torch.Tensor) and v.dtype.is_floating_point for v in vals) \
        and vals[0].dim() == 2 and vals[0].numel() > 0   # an empty one Inductor writes no code for


# the reshapes a Linear on (..., features) puts around its 2-D product (none copies: the product is contiguous)
RESHAPES = (aten.reshape.default, aten.view.default, aten._unsafe_view.default)


def _reshaped(node) -> bool:
    """Is `node` a reshape of a node only it reads?"""
    return any(_is(node, r) for r in RESHAPES) and isinstance(node.args[0], torch.fx.Node) \
        and len(node.args[0].users) == 1 and not node.kwargs


def epilogue_pass(graph) -> int:
    """Each activation of ACTS whose input is such a product, or a reshape of one, as one
    addmm_act (then the reshape): how many were."""
    done = 0
    for node in list(graph.nodes):
        if node.op != "call_function" or node.target not in ACTS or len(node.args) != 1 or node.kwargs:
            continue
        view = node.args[0] if _reshaped(node.args[0]) and len(node.args[0].users) == 1 else None
        product = view.args[0] if view is not None else node.args[0]
        if not isinstance(product, torch.fx.Node) or not _product(product):
            continue
        with graph.inserting_before(node):
            fused = graph.call_function(torch.ops.krefine.addmm_act.default, (*product.args, ACTS[node.target]))
            out = fused if view is None else graph.call_function(view.target, (fused, *view.args[1:]))
        fused.meta.update(product.meta if view is not None else node.meta)
        if view is not None:
            out.meta.update(node.meta)
        node.replace_all_uses_with(out)
        graph.erase_node(node)
        if view is not None:
            graph.erase_node(view)
        graph.erase_node(product)
        done += 1
    return done
