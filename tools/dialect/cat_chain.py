"""A concatenation that repeats an earlier one's inputs takes that earlier result instead.

A DenseNet block concatenates every feature so far at each layer (`features.append(new);
x = torch.cat(features, 1)`): layer k's cat has k + 1 inputs, the first k of them exactly
layer k - 1's. Inductor writes a cat of more than 8 realized inputs as one copy per input
into the new buffer, so a block of 48 layers launches about 1,200 copies a forward, a layer's
new feature copied once into every later cat (DenseNet-201 on an H200 at 08e3d70: 765 of its
forward's 1,433 launches). `cat_chain_pass`, over the post-grad graph, writes
`cat([a, b, ..., y, z], d)` as `cat([cat_ab..y, z], d)` where an earlier
`cat([a, b, ..., y], d)` of the same inputs in the same order exists: the same bytes in the
same places (a cat is a copy, and concatenation associates), two inputs a layer instead of
k + 1, and as many bytes moved as before. The longest such earlier cat is taken.

Left as they are: a cat whose inputs differ in dtype (type promotion) or are not all tensors
of one rank, a prefix cat whose result something writes into (an in-place op or `copy_`, on it or
on a view of it), and a cat whose prefix cat comes later in the graph.
"""
from __future__ import annotations

import torch

from tools.dialect.recurrence_cells import _is, _val, aten


def _inputs(node):
    """(dim, inputs) of an `aten.cat` of fx nodes of one dtype and rank, dim made non-negative; else None."""
    if not _is(node, aten.cat.default) or node.kwargs or not 1 <= len(node.args) <= 2:
        return None
    tensors, dim = node.args[0], node.args[1] if len(node.args) == 2 else 0
    vals = [_val(t) for t in tensors] if isinstance(tensors, (list, tuple)) else []
    if len(vals) < 2 or not all(isinstance(t, torch.fx.Node) for t in tensors) or \
            not all(isinstance(v, torch.Tensor) for v in vals) or not isinstance(dim, int):
        return None
    rank, dtype = vals[0].dim(), vals[0].dtype
    if rank == 0 or any(v.dim() != rank or v.dtype != dtype for v in vals):
        return None
    return dim % rank, tuple(tensors)


def _mutated(node) -> bool:
    """Whether a user of `node` may write into it: `node` passed to an argument its schema marks
    written (`Tensor(a!)`), or to a view (`Tensor(a)`) something writes into, or a user that is no
    ATen op (assume the worst); the graph's output only reads. (Inductor's post-grad graph is
    functional but for its inputs' updates and custom ops that say what they mutate.)"""
    for user in node.users:
        if user.op == "output":
            continue
        schema = getattr(user.target, "_schema", None)
        if user.op != "call_function" or schema is None:
            return True
        named = {**dict(zip((a.name for a in schema.arguments), user.args)), **user.kwargs}
        for arg in schema.arguments:
            value = named.get(arg.name)
            if arg.alias_info is None or not any(v is node for v in (value if isinstance(value, (list, tuple))
                                                                     else [value])):
                continue
            if arg.alias_info.is_write or _mutated(user):   # written, or a view of it written
                return True
    return False


def cat_chain_pass(graph) -> int:
    """Every cat of 3+ inputs whose leading 2+ are an earlier cat's, in order, written as
    cat([that cat, the rest]): how many."""
    seen: dict[tuple, torch.fx.Node] = {}   # (dim, inputs as first written) -> the cat
    changed = 0
    for node in list(graph.nodes):
        got = _inputs(node) if node.op == "call_function" else None
        if got is None:
            continue
        dim, tensors = got
        for m in range(len(tensors) - 1, 1, -1):
            earlier = seen.get((dim, tensors[:m]))
            if earlier is not None and not _mutated(earlier):
                node.args = ([earlier, *tensors[m:]], dim)
                changed += 1
                break
        seen.setdefault((dim, tensors), node)
    return changed
