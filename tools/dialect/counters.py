"""A forward's counter increments as one op: `torch.ops.krefine.add_one_` in the capture.

A training-mode BatchNorm adds one to its `num_batches_tracked` at every forward; Inductor's
post-grad graph has each as `copy_(counter, add(counter, 1))`, which it writes as a one-element
kernel launched on its own: a launch a BatchNorm, about a microsecond of GPU and tens of host
(ResNet-101: 104 of its forward's 565 launches). `counter_pass`, over the post-grad graph, takes
every such increment of a one-element integer input that nothing else reads and writes them as
one `torch.ops.krefine.add_one_([counter, ...])` at the end of the graph (where the copies were),
which Inductor leaves as a call; the converter writes it as krefine's counter kernel
(tools/kernels/counters.py `add_one`): one launch for every 16 counters. Here the op computes
with torch, only so the capture runs. Fewer than two increments are left as they are.
"""
from __future__ import annotations

import torch

from tools.dialect.recurrence_cells import _is, _val, aten


@torch.library.custom_op("krefine::add_one_", mutates_args=("counters",))
def add_one_(counters: list[torch.Tensor]) -> None:
    for c in counters:
        c.add_(1)


def _increment(node):
    """The counter `node` (a `copy_(counter, add(counter, 1))`) adds one to, else None: a
    one-element integer input that the add alone reads."""
    if not _is(node, aten.copy_.default) or len(node.args) != 2 or node.kwargs:
        return None
    counter, add = node.args
    val = _val(counter)
    if not (isinstance(counter, torch.fx.Node) and counter.op == "placeholder" and _is(add, aten.add.Tensor)
            and add.args == (counter, 1) and not add.kwargs and len(add.users) == 1
            and isinstance(val, torch.Tensor) and val.numel() == 1 and not val.dtype.is_floating_point
            and not val.dtype.is_complex and val.dtype != torch.bool):
        return None
    return counter


def counter_pass(graph) -> int:
    """Every increment of a counter input as one add_one_ before the graph's output (where
    its copies were): how many; none where fewer than two."""
    found = [(node, counter) for node in graph.nodes if (counter := _increment(node)) is not None]
    counters = [c for _, c in found]
    if len(found) < 2 or len(set(counters)) != len(counters):
        return 0
    output = next(n for n in reversed(graph.nodes) if n.op == "output")
    with graph.inserting_before(output):
        bump = graph.call_function(torch.ops.krefine.add_one_.default, (counters,))
    bump.meta["val"] = None
    for node, _ in found:
        add = node.args[1]
        graph.erase_node(node)
        graph.erase_node(add)
    return len(found)
