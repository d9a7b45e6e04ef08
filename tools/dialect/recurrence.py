"""Recurrences written by hand as one recurrent op: a pass over Inductor's post-grad graph.

A model that loops over time steps itself (`hidden = tanh(self.i2h(torch.cat((x[t], hidden), 1)))`,
KernelBench level 3's 34_VanillaRNNHidden; an LSTM or GRU cell of Linears and chunks) is unrolled
by Dynamo: T steps of products and pointwise ops, each its own launches in a seed (256 Elman steps:
33-37 ms a forward on an H200, bound by the host, against eager's 15). `recurrence_pass` finds each
chain of such steps (recurrence_cells.py matches one) in the post-grad graph and runs it as one
`torch.ops.krefine.rnn` (tools/dialect/rnn_op.py; mode RNN_TANH, RNN_RELU, LSTM or GRU, one layer),
which the converter writes as krefine's recurrent family (`rnn_seq`: the input projection of every
step at once, then one persistent launch): a concatenated weight split into its input and hidden
columns, a missing bias as zeros, an LSTM's or GRU's gate rows put in PyTorch's order (i, f, g, o;
r, z, n). A step's hidden state read elsewhere (a per-step output, the last state returned)
becomes that step's slice of the op's output; an LSTM's last cell state, its c_n.

`stacked_products` then writes a cat along dim 0 of one addmm per step on consecutive slices
x[0], x[1], ... of one tensor (an output projection per step, stacked) as one addmm over x seen as
(T * B, H): the same rows in the same order.

A step's pre-activation: cat([select(x, d, t), h], 1) Wᵀ + b (the cat in either order), or
x_t W_ihᵀ [+ b_ih] + h W_hhᵀ [+ b_hh] (two Linears, addmm or mm, the sum in either order); d 0 (time
first) or 1 (batch first); fp32. An Elman step: tanh or relu of it. An LSTM step: its four chunks
(split along dim 1, any order) as sigmoid i, f, o and tanh g, c_new = f * c + i * g, h = o * tanh(c_new),
each product and sum in either order. A GRU step: nn.GRU's cell, h = (1 - z) * n + z * h_prev with
z, r = sigmoid(x_* + h_*) and n = tanh(x_n + r * h_n), of the input's and the hidden state's own
products' chunks (any order). A chain: steps t0, t0 + 1, ... of one x, the same weights and
cell, each step's h (and c) the one before's, two steps at least, whose inner nodes nothing else reads
(an LSTM's intermediate cell states neither). Stacked layers: the pass runs again while it finds
chains. Anything else (a GRU resetting h before its product, peepholes, a cell whose weights change per
step) stays as it is.
"""
from __future__ import annotations

import functools
import operator

import torch
from torch.fx.node import map_arg

from tools.dialect.recurrence_cells import _ACTS, _GruStep, _LstmStep, _is, _val, aten, step


def _linked(prev, s) -> bool:
    """Is step `s` the one after `prev` in a chain: same sequence, weights and cell, the next index,
    reading prev's h (and c: an LSTM's c_new read by nothing but its own tanh and the next step)?"""
    if prev.key != s.key or prev.t + 1 != s.t:
        return False
    return not isinstance(s, _LstmStep) or s.c is prev.c_new and len(prev.c_new.users) == 2 \
        and s.inner[1] in prev.c_new.users


def _chains(graph) -> list[tuple[list[torch.fx.Node], dict]]:
    """Each chain of two steps or more, in order, with the steps found (node -> its step)."""
    steps = {}
    for n in graph.nodes:
        s = step(n)
        if s is not None:
            steps[n] = s
    after: dict[torch.fx.Node, list[torch.fx.Node]] = {}
    for n, s in steps.items():
        prev = steps.get(s.h)
        if prev is not None and _linked(prev, s):
            after.setdefault(s.h, []).append(n)
    chains, taken = [], set()
    followers = {v[0] for v in after.values() if len(v) == 1}
    for n in steps:
        if n in taken or n in followers:
            continue                              # a later step of some chain: its head starts it
        chain = [n]
        while len(after.get(chain[-1], [])) == 1:
            chain.append(after[chain[-1]][0])
        taken.update(chain)
        if len(chain) >= 2:
            chains.append((chain, steps))
    return chains


def _caller(graph, like: torch.fx.Node):
    """call(target, *args, **kwargs): a node of `target`, its meta val computed from its inputs'
    in the graph's fake mode (that of `like`'s val)."""
    import contextlib
    fake = getattr(_val(like), "fake_mode", None)

    def call(target, *args, **kwargs):
        node = graph.call_function(target, args, kwargs)
        fargs, fkwargs = map_arg((args, kwargs), _val)
        if target is operator.getitem:
            node.meta["val"] = fargs[0][fargs[1]]
        else:
            with fake if fake is not None else contextlib.nullcontext():
                node.meta["val"] = target(*fargs, **fkwargs)
        return node
    return call


def _rewrite(graph, chain, steps) -> None:
    s0, n_steps = steps[chain[0]], len(chain)
    lstm = isinstance(s0, _LstmStep)
    mode = "LSTM" if lstm else "GRU" if isinstance(s0, _GruStep) else _ACTS[s0.act]
    hid = _val(chain[0]).shape[-1]
    call = _caller(graph, s0.x)
    with graph.inserting_before(_last_of(graph, s0.inner)):   # after every input of the first step
        x = s0.x
        if s0.t != 0 or n_steps != _val(x).shape[s0.d]:
            x = call(aten.slice.Tensor, x, s0.d, s0.t, s0.t + n_steps)
        where = dict(dtype=torch.float32, layout=torch.strided, device=_val(s0.h).device, pin_memory=False)
        rows = {"LSTM": 4, "GRU": 3}.get(mode, 1) * hid

        def source(spec):   # a weight as the op takes it: contiguous, its gate rows in PyTorch's order
            if spec is None:
                return call(aten.full.default, [rows], 0.0, **where)   # post-grad: ops Inductor lowers as they are
            order = None
            if isinstance(spec, tuple) and isinstance(spec[0], str):   # ("rows", weight, its chunks' order)
                _, spec, order = spec
            if isinstance(spec, tuple):
                spec = call(aten.slice.Tensor, spec[0], 1, spec[1], spec[2])
            if order is not None and order != tuple(range(len(order))):
                return call(aten.cat.default, [call(aten.slice.Tensor, spec, 0, k * hid, (k + 1) * hid)
                                               for k in order])
            if _val(spec).is_contiguous():
                return spec
            return call(aten.clone.default, spec, memory_format=torch.contiguous_format)
        weights = [source(spec) for spec in s0.weights]
        h0 = call(aten.unsqueeze.default, s0.h, 0)
        c0 = call(aten.unsqueeze.default, s0.c, 0) if lstm else call(aten.empty.memory_format, [0], **where)
        res = call(torch.ops.krefine.rnn.default, x, h0, c0, weights, mode, 1, False, s0.d == 1, True)
        out = call(operator.getitem, res, 0)
        for i, node in enumerate(chain):
            later = steps[chain[i + 1]] if i + 1 < n_steps else None
            users = [u for u in node.users if later is None or u not in later.reads_h]
            if users:
                part = call(aten.select.int, out, s0.d, i)
                for u in users:
                    u.replace_input_with(node, part)
        if lstm:   # the last cell state read beyond its own step: the op's c_n
            last = steps[chain[-1]]
            users = [u for u in last.c_new.users if u is not last.tanh_c]
            if users:
                c_n = call(aten.select.int, call(operator.getitem, res, 2), 0, 0)
                for u in users:
                    u.replace_input_with(last.c_new, c_n)


def _last_of(graph, nodes):
    """The last of `nodes` in the graph's order: inserting before it comes after the others' inputs."""
    order = {n: i for i, n in enumerate(graph.nodes)}
    return max(nodes, key=order.__getitem__)


def stacked_products(graph) -> int:
    """cat([addmm(b, select(x, 0, t), wt) for t in 0..T-1], 0) -> addmm(b, x.view(T * B, H), wt)."""
    done = 0
    for cat in [n for n in graph.nodes if _is(n, aten.cat.default)]:
        parts = cat.args[0]
        if (cat.args[1:] or [0])[0] != 0 or len(parts) < 2 or not all(
                _is(p, aten.addmm.default) and len(p.args) == 3 and not p.kwargs and _is(p.args[1], aten.select.int)
                for p in parts):
            continue
        b, sel, wt = parts[0].args
        x = sel.args[0]
        vx = _val(x)
        if vx is None or vx.dim() != 3 or len(parts) != vx.shape[0] or any(
                p.args[0] is not b or p.args[2] is not wt and not _same_permute(p.args[2], wt) or
                p.args[1].args[0] is not x or tuple(p.args[1].args[1:]) != (0, t) for t, p in enumerate(parts)):
            continue
        call = _caller(graph, x)
        with graph.inserting_before(cat):
            rows = call(aten.reshape.default, x, [vx.shape[0] * vx.shape[1], vx.shape[2]])
            whole = call(aten.addmm.default, b, rows, wt)
        cat.replace_all_uses_with(whole)
        done += 1
    return done


def _same_permute(a, b) -> bool:
    return _is(a, aten.permute.default) and _is(b, aten.permute.default) and a.args[0] is b.args[0] \
        and list(a.args[1]) == list(b.args[1])


def recurrence_pass(graph, rounds: int = 8) -> None:
    """Each chain (Elman, LSTM or GRU) as one recurrent op, then the stacked products. Again while
    chains appear: a second layer's steps read the first's output once that is the op's, slice by slice."""
    found = False
    for _ in range(rounds):
        chains = _chains(graph)
        for chain, steps in chains:
            _rewrite(graph, chain, steps)
        if not chains:
            break
        found = True
        graph.eliminate_dead_code()
    if found:
        stacked_products(graph)
        graph.eliminate_dead_code()
        graph.lint()


try:
    from torch._inductor.custom_graph_pass import CustomGraphPass
except ImportError:        # an older torch: a plain function (Inductor then skips its FX graph cache)
    CustomGraphPass = object


@functools.cache
def _code_hash() -> str:   # read once a process
    import hashlib
    from pathlib import Path
    here = Path(__file__).parent
    code = b"".join((here / f).read_bytes() for f in ("recurrence.py", "recurrence_cells.py", "gemm_epilogue.py",
                                                      "conv_epilogue.py", "counters.py", "batch_stats.py",
                                                      "cat_chain.py"))
    return hashlib.sha256(code).hexdigest()


class RecurrencePass(CustomGraphPass):
    """`recurrence_pass` as Inductor's post_grad_custom_pre_pass, then the counter increments as one
    op (tools/dialect/counters.py), each BatchNorm's statistics as one (tools/dialect/batch_stats.py) and
    a cat that repeats an earlier one's inputs from it (tools/dialect/cat_chain.py), then (`epilogues`)
    a Linear's ReLU in its product's epilogue
    (tools/dialect/gemm_epilogue.py: after the recurrences, whose cells it would otherwise take) and a
    convolution's bias and ReLU in its launch's (tools/dialect/conv_epilogue.py),
    with the uuid its graph cache keys on: the passes' code and its matchers', and whether the
    epilogues ran."""

    def __init__(self, epilogues: bool = False):
        self.epilogues = epilogues

    def __call__(self, graph) -> None:
        from tools.dialect.batch_stats import batch_stats_pass
        from tools.dialect.cat_chain import cat_chain_pass
        from tools.dialect.counters import counter_pass
        recurrence_pass(graph)
        counter_pass(graph)   # BatchNorms' num_batches_tracked, one launch for all (tools/dialect/counters.py)
        batch_stats_pass(graph)   # and their statistics, one launch each (tools/dialect/batch_stats.py)
        cat_chain_pass(graph)   # a DenseNet's growing cats, each from the last (tools/dialect/cat_chain.py)
        if self.epilogues:
            from tools.dialect.conv_epilogue import conv_epilogue_pass
            from tools.dialect.gemm_epilogue import epilogue_pass
            epilogue_pass(graph)
            conv_epilogue_pass(graph)

    def uuid(self):
        return f"{_code_hash()}-{int(self.epilogues)}"
