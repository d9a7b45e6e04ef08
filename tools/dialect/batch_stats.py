"""A training-mode BatchNorm's statistics as one op: `torch.ops.krefine.batch_stats(_)` in the capture.

A BatchNorm in training mode takes its batch's mean and variance per channel, and updates its
running mean and variance with them. Inductor's post-grad graph holds this as `var_mean(x, [0, 2,
...], correction=0, keepdim=True)`, then `copy_(running, mean * m + running * (1 - m))` for the
running mean and the same, with the variance times n / (n - 1), for the running variance. On a
GPU Inductor writes the statistics as a split reduction of three kernels, the last of which also
updates the running statistics: three launches a BatchNorm before the one that normalizes
(MobileNetV1: 81 of its forward's 145). On a network of small layers each launch is tens of
microseconds of host, and the GPU waits on it.

`batch_stats_pass`, over the post-grad graph, writes each such var_mean of a float32 input as
`torch.ops.krefine.batch_stats_(x, running_mean, running_var, m, n / (n - 1))` where both running
updates are found in that form (their buffers read by nothing else), else as
`torch.ops.krefine.batch_stats(x)`; Inductor leaves either as a call, the converter writes it as
krefine's batch-statistics kernel (tools/kernels/batchnorm.py `batch_stats`): one launch for the
statistics and the running update. The normalize-and-activate stays Inductor's own kernel. Here
the ops compute with torch, only so the capture runs. Other reductions, another dtype, or an
update of another form (momentum=None's cumulative average) stay as they are.
"""
from __future__ import annotations

import operator

import torch

from tools.dialect.recurrence_cells import _is, _val, aten


def _var_mean(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    var, mean = torch.var_mean(x, [0, *range(2, x.dim())], correction=0, keepdim=True)
    return var.contiguous(), mean.contiguous()


def _fake_stats(x, *_):
    shape = (1, x.shape[1], *[1] * (x.dim() - 2))
    return x.new_empty(shape), x.new_empty(shape)


@torch.library.custom_op("krefine::batch_stats", mutates_args=(), tags=(torch.Tag.flexible_layout,))
def batch_stats(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return _var_mean(x)


@torch.library.custom_op("krefine::batch_stats_", mutates_args=("running_mean", "running_var"),
                         tags=(torch.Tag.flexible_layout,))
def batch_stats_(x: torch.Tensor, running_mean: torch.Tensor, running_var: torch.Tensor, momentum: float,
                 unbias: float) -> tuple[torch.Tensor, torch.Tensor]:
    var, mean = _var_mean(x)
    running_mean.copy_(mean.reshape(-1) * momentum + running_mean * (1.0 - momentum))
    running_var.copy_(var.reshape(-1) * unbias * momentum + running_var * (1.0 - momentum))
    return var, mean


batch_stats.register_fake(_fake_stats)
batch_stats_.register_fake(_fake_stats)


def _stats(node):
    """(x, var, mean) of a BatchNorm's `var_mean(x, [0, 2, ...], correction=0, keepdim=True)` over a
    float32 input of 2 to 5 dims, fewer than 2**30 values a channel (the kernel counts rows in int32;
    var, mean: its getitems, None where unread), else None."""
    if not _is(node, aten.var_mean.correction) or len(node.args) != 2:
        return None
    x, dims = node.args
    val = _val(x)
    if not isinstance(val, torch.Tensor) or val.dtype != torch.float32 or not 2 <= val.dim() <= 5 \
            or val.numel() == 0 or val.numel() // val.shape[1] >= 2**30 \
            or node.kwargs != {"correction": 0, "keepdim": True} or list(dims or ()) != [0, *range(2, val.dim())]:
        return None
    items = {u.args[1]: u for u in node.users if _is(u, operator.getitem)}
    if len(items) != len(node.users):
        return None
    return x, items.get(0), items.get(1)


def _scaled(node, by):
    """The node `node` reads as `node * by` (a mul by a Python number), else None."""
    if _is(node, aten.mul.Tensor) and len(node.args) == 2 and not node.kwargs and isinstance(node.args[1], float):
        return node.args[0] if by is None or node.args[1] == by else None
    return None


def _ema(copy, stat, unbiased: bool):
    """(running, momentum, unbias, nodes) where `copy` is `copy_(running, add(stat' * m, running * (1 - m)))`,
    stat' being squeeze(stat) (times unbias where `unbiased`), each inner node read once, and
    `running` a graph input nothing else reads; else None."""
    if not _is(copy, aten.copy_.default) or len(copy.args) != 2 or copy.kwargs:
        return None
    running, add = copy.args
    if running.op != "placeholder" or not _is(add, aten.add.Tensor) or len(add.args) != 2 or add.kwargs:
        return None
    for new, old in (add.args, add.args[::-1]):
        if not (isinstance(new, torch.fx.Node) and isinstance(old, torch.fx.Node)):
            continue
        m = new.args[1] if _scaled(new, None) is not None else None
        if m is None or _scaled(old, 1.0 - m) is not running:
            continue
        inner, unbias = _scaled(new, m), 1.0
        if unbiased:
            unbias = inner.args[1] if _scaled(inner, None) is not None else None
            inner_nodes = [inner]
            inner = _scaled(inner, None)
        else:
            inner_nodes = []
        if unbias is None or not _is(inner, aten.squeeze.dims) or inner.args[0] is not stat:
            continue
        nodes = [copy, add, new, old, *inner_nodes]   # the squeeze may have other readers: kept for them
        if set(running.users) != {copy, old} or any(len(n.users) != 1 for n in nodes[1:]):
            continue
        return running, m, unbias, nodes + [inner]
    return None


def batch_stats_pass(graph) -> int:
    """Each BatchNorm's statistics (and running update, where found) as one op: how many."""
    copies = [n for n in graph.nodes if _is(n, aten.copy_.default)]
    done = 0
    for node in list(graph.nodes):
        found = _stats(node)
        if found is None:
            continue
        x, var, mean = found
        update = None
        if var is not None and mean is not None:
            means = [e for c in copies if (e := _ema(c, mean, False)) is not None]
            variances = [e for c in copies if (e := _ema(c, var, True)) is not None]
            if len(means) == 1 and len(variances) == 1 and means[0][1] == variances[0][1] \
                    and means[0][0] is not variances[0][0]:
                update = means[0], variances[0]
        with graph.inserting_before(node):
            if update is None:
                op = graph.call_function(torch.ops.krefine.batch_stats.default, (x,))
            else:
                (rm, m, _, _), (rv, _, unbias, _) = update
                op = graph.call_function(torch.ops.krefine.batch_stats_.default, (x, rm, rv, m, unbias))
            new = [graph.call_function(operator.getitem, (op, i)) for i in (0, 1)]
        op.meta["val"] = node.meta.get("val")
        for old, item in zip((var, mean), new):
            item.meta.update(old.meta if old is not None else {})
            if old is not None:
                old.replace_all_uses_with(item)
        for _, _, _, nodes in update or ():
            copies.remove(nodes[0])
            for n in nodes:   # the copy first, then what it read, each read by nothing else now
                if not n.users:
                    graph.erase_node(n)
        for old in (var, mean):
            if old is not None:
                graph.erase_node(old)
        graph.erase_node(node)
        for item in new:
            if not item.users:
                graph.erase_node(item)
        done += 1
    return done
