"""Recurrences written by hand as one recurrent op: a pass over Inductor's post-grad graph.

A model that loops over time steps itself (`hidden = tanh(self.i2h(torch.cat((x[t], hidden), 1)))`,
KernelBench level 3's 34_VanillaRNNHidden; an LSTM cell of Linears and chunks) is unrolled by
Dynamo: T steps of products and pointwise ops, each its own launches in a seed (256 Elman steps:
33-37 ms a forward on an H200, bound by the host, against eager's 15). `recurrence_pass` finds each chain
of such steps in the post-grad graph and runs it as one `torch.ops.krefine.rnn` (tools/dialect/rnn_op.py;
mode RNN_TANH, RNN_RELU or LSTM, one layer), which the converter writes as krefine's recurrent family
(`rnn_seq`: the input projection of every step at once, then one persistent launch): a concatenated
weight split into its input and hidden columns, a missing bias as zeros, an LSTM's gate rows put in
PyTorch's i, f, g, o order. A step's hidden state read elsewhere (a per-step output, the last state
returned) becomes that step's slice of the op's output; an LSTM's last cell state, its c_n.

`stacked_products` then writes a cat along dim 0 of one addmm per step on consecutive slices
x[0], x[1], ... of one tensor (an output projection per step, stacked) as one addmm over x seen as
(T * B, H): the same rows in the same order.

A step's pre-activation: cat([select(x, d, t), h], 1) Wᵀ + b (the cat in either order), or
x_t W_ihᵀ [+ b_ih] + h W_hhᵀ [+ b_hh] (two Linears, addmm or mm, the sum in either order); d 0 (time
first) or 1 (batch first); fp32. An Elman step: tanh or relu of it. An LSTM step: its four chunks
(split along dim 1, any order) as sigmoid i, f, o and tanh g, c_new = f * c + i * g, h = o * tanh(c_new),
each product and sum in either order. A chain: steps t0, t0 + 1, ... of one x, the same weights and
cell, each step's h (and c) the one before's, two steps at least, whose inner nodes nothing else reads
(an LSTM's intermediate cell states neither). Stacked layers: the pass runs again while it finds
chains. Anything else (a GRU by hand, peepholes, a cell whose weights change per step) stays as it is.
"""
from __future__ import annotations

import operator
from dataclasses import dataclass

import torch
from torch.fx.node import map_arg

aten = torch.ops.aten
_ACTS = {aten.tanh.default: "RNN_TANH", aten.relu.default: "RNN_RELU"}


@dataclass(frozen=True)
class _Step:
    x: torch.fx.Node        # the whole sequence
    d: int                  # its time dim: 0 or 1
    t: int                  # this step's index along it
    h: torch.fx.Node        # the hidden state the step reads
    weights: tuple          # w_ih, w_hh, b_ih, b_hh: a node, (node, first, end) its columns, or None (a zero bias)
    act: object
    inner: tuple            # the nodes from h to the step's output (the one reading h first), read by nothing else

    @property
    def key(self):
        return self.x, self.d, self.weights, self.act


def _is(node, target) -> bool:
    return isinstance(node, torch.fx.Node) and node.op == "call_function" and node.target == target


def _val(node):
    return node.meta.get("val") if isinstance(node, torch.fx.Node) else None


def _fp32(*nodes) -> bool:
    return all(isinstance(_val(n), torch.Tensor) and _val(n).dtype == torch.float32 for n in nodes)


def _product(node):
    """(input, weight, bias or None) of addmm(b, input, permute(w, [1, 0])) or mm(input, permute(w, [1, 0]))
    that only one node reads, else None."""
    if not isinstance(node, torch.fx.Node) or len(node.users) != 1 or node.kwargs:
        return None
    if _is(node, aten.addmm.default) and len(node.args) == 3:
        b, inp, wt = node.args
    elif _is(node, aten.mm.default) and len(node.args) == 2:
        (inp, wt), b = node.args, None
    else:
        return None
    if not _is(wt, aten.permute.default) or list(wt.args[1]) != [1, 0]:
        return None
    return inp, wt.args[0], b


def _sequence(xs, rows: int, width: int):
    """(x, d, t) of xs = select(x, d, t): step t of a 3-D x, time on dim d (0 or 1), `rows` a batch of `width`."""
    if not _is(xs, aten.select.int):
        return None
    x, d, t = xs.args
    vx = _val(x)
    if d in (0, 1) and isinstance(t, int) and isinstance(vx, torch.Tensor) and vx.dim() == 3 and 0 <= t < vx.shape[d] \
            and vx.shape[1 - d] == rows and vx.shape[2] == width:
        return x, d, t
    return None


def _step(node) -> _Step | None:
    if node.op != "call_function" or node.target not in _ACTS or len(node.args) != 1 or not _fp32(node) \
            or _val(node).dim() != 2:
        return None
    rows, hid = _val(node).shape
    found = _gates(node.args[0], rows, hid)
    if found is None or _val(found[3]).shape != _val(node).shape:
        return None
    x, d, t, h, weights, inner = found
    return _Step(x, d, t, h, weights, node.target, inner)


def _gates(pre, rows: int, width: int):
    """(x, d, t, h, (w_ih, w_hh, b_ih, b_hh), inner) of a step's pre-activation `pre` of `width` columns:
    x_t W_ihᵀ [+ b_ih] + h W_hhᵀ [+ b_hh] (the sum in either order) or cat([x_t, h]) Wᵀ + b (either order);
    `inner`: its nodes, the one reading h first. None for anything else."""
    if _is(pre, aten.add.Tensor) and len(pre.args) == 2 and not pre.kwargs and len(pre.users) == 1:
        for px, ph in (pre.args, pre.args[::-1]):
            x_part, h_part = _product(px), _product(ph)
            if x_part is None or h_part is None or not _fp32(x_part[1], h_part[0], h_part[1]):
                continue
            (xs, wi, bi), (h, wh, bh) = x_part, h_part
            seq = _sequence(xs, rows, _val(wi).shape[-1])
            hid = _val(h).shape[-1] if _val(h) is not None and _val(h).dim() == 2 else -1
            if seq and _val(h).shape[0] == rows and _val(wh).shape == (width, hid) and _val(wi).shape[0] == width \
                    and all(b is None or _fp32(b) and _val(b).shape == (width,) for b in (bi, bh)):
                return (*seq, h, (wi, wh, bi, bh), (ph, px, pre))
        return None
    part = _product(pre)
    if part is None or part[2] is None or not _is(part[0], aten.cat.default):
        return None
    cat, w, b = part
    if len(cat.users) != 1 or len(cat.args[0]) != 2 or (cat.args[1:] or [0])[0] not in (1, -1) \
            or not _fp32(w, b, *cat.args[0]) or _val(b).shape != (width,) or _val(w).dim() != 2 \
            or _val(w).shape[0] != width:
        return None
    for x_first in (True, False):
        xs, h = cat.args[0] if x_first else cat.args[0][::-1]
        if _val(h) is None or _val(h).dim() != 2 or _val(h).shape[0] != rows:
            continue
        hid = _val(h).shape[1]
        inp = _val(w).shape[1] - hid
        seq = _sequence(xs, rows, inp)
        if seq:
            cols = ((w, 0, inp), (w, inp, inp + hid)) if x_first else ((w, hid, hid + inp), (w, 0, hid))
            return (*seq, h, (*cols, b, None), (cat, pre))
    return None


@dataclass(frozen=True)
class _LstmStep:
    x: torch.fx.Node
    d: int
    t: int
    h: torch.fx.Node
    c: torch.fx.Node        # the cell state the step reads
    weights: tuple          # as _Step's, rows in the model's gate order
    order: tuple            # the chunks (0-3 of the gates) of PyTorch's i, f, g, o
    c_new: torch.fx.Node
    tanh_c: torch.fx.Node   # the step's own tanh(c_new)
    inner: tuple            # the nodes reading h, then c first: read by nothing else (c_new aside)

    @property
    def key(self):
        return self.x, self.d, self.weights, self.order


def _either(node, target, test_a, test_b):
    """(a, b) of node = target(a, b) or target(b, a) with test_a(a) and test_b(b), else None."""
    if not _is(node, target) or len(node.args) != 2 or node.kwargs:
        return None
    for a, b in (node.args, node.args[::-1]):
        if test_a(a) and test_b(b):
            return a, b
    return None


def _lstm_step(node) -> _LstmStep | None:
    """h = o * tanh(c_new), c_new = f * c + i * g, i f o sigmoids and g a tanh of the four chunks of
    one step's gates (split along dim 1), each product and sum in either order."""
    sig = lambda n: _is(n, aten.sigmoid.default) and len(n.users) == 1   # noqa: E731
    found = _either(node, aten.mul.Tensor, sig, lambda n: _is(n, aten.tanh.default) and len(n.users) == 1)
    if found is None or not _fp32(node) or _val(node).dim() != 2:
        return None
    o, tanh_c = found
    c_new = tanh_c.args[0]
    fc_ig = _either(c_new, aten.add.Tensor, lambda n: _is(n, aten.mul.Tensor) and len(n.users) == 1,
                    lambda n: _is(n, aten.mul.Tensor) and len(n.users) == 1)
    for fc, ig in (fc_ig, fc_ig[::-1]) if fc_ig else ():
        i_g = _either(ig, aten.mul.Tensor, sig, lambda n: _is(n, aten.tanh.default) and len(n.users) == 1)
        f_c = _either(fc, aten.mul.Tensor, sig, lambda n: True)
        if i_g is None or f_c is None:
            continue
        (i, g), (f, c) = i_g, f_c
        chunks = [n.args[0] for n in (i, f, g, o)]
        split = chunks[0].args[0] if _is(chunks[0], operator.getitem) else None
        rows, hid = _val(node).shape
        if not _is(split, aten.split.Tensor) or split.args[1:] not in ((hid, 1), (hid, -1)) or len(split.users) != 4 \
                or any(not _is(k, operator.getitem) or k.args[0] is not split or len(k.users) != 1 for k in chunks) \
                or sorted(k.args[1] for k in chunks) != [0, 1, 2, 3] or _val(c) is None \
                or _val(c).shape != _val(node).shape:
            continue
        gates = _gates(split.args[0], rows, 4 * hid)
        if gates is None or _val(gates[3]).shape != _val(node).shape:
            continue
        x, d, t, h, weights, inner = gates
        return _LstmStep(x, d, t, h, c, weights, tuple(k.args[1] for k in chunks), c_new, tanh_c, (inner[0], fc))
    return None


def _linked(prev, s) -> bool:
    """Is step `s` the one after `prev` in a chain: same sequence, weights and cell, the next index,
    reading prev's h (and c: an LSTM's c_new read by nothing but its own tanh and the next step)?"""
    if prev.key != s.key or prev.t + 1 != s.t:
        return False
    return not isinstance(s, _LstmStep) or s.c is prev.c_new and len(prev.c_new.users) == 2 \
        and s.inner[1] in prev.c_new.users


def _chains(graph) -> list[list[torch.fx.Node]]:
    steps = {}
    for n in graph.nodes:
        s = _step(n) or _lstm_step(n)
        if s is not None:
            steps[n] = s
    after: dict[torch.fx.Node, list[torch.fx.Node]] = {}
    for n, s in steps.items():
        prev = steps.get(s.h)
        if prev is not None and _linked(prev, s):
            after.setdefault(s.h, []).append(n)
    chains, taken = [], set()
    for n in steps:
        if n in taken or any(n in v and len(v) == 1 for v in after.values()):
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
    hid = _val(chain[0]).shape[-1]
    call = _caller(graph, s0.x)
    with graph.inserting_before(s0.inner[-1] if not lstm else _last_of(graph, s0.inner)):   # after every input
        x = s0.x
        if s0.t != 0 or n_steps != _val(x).shape[s0.d]:
            x = call(aten.slice.Tensor, x, s0.d, s0.t, s0.t + n_steps)
        where = dict(dtype=torch.float32, layout=torch.strided, device=_val(s0.h).device, pin_memory=False)
        rows = (4 if lstm else 1) * hid

        def source(spec):   # a weight as the op takes it: contiguous, an LSTM's gates in i, f, g, o order
            if spec is None:
                return call(aten.full.default, [rows], 0.0, **where)   # post-grad: ops Inductor lowers as they are
            if isinstance(spec, tuple):
                spec = call(aten.slice.Tensor, spec[0], 1, spec[1], spec[2])
            if lstm and s0.order != (0, 1, 2, 3):
                return call(aten.cat.default, [call(aten.slice.Tensor, spec, 0, k * hid, (k + 1) * hid)
                                               for k in s0.order])
            if _val(spec).is_contiguous():
                return spec
            return call(aten.clone.default, spec, memory_format=torch.contiguous_format)
        weights = [source(spec) for spec in s0.weights]
        h0 = call(aten.unsqueeze.default, s0.h, 0)
        c0 = call(aten.unsqueeze.default, s0.c, 0) if lstm else call(aten.empty.memory_format, [0], **where)
        res = call(torch.ops.krefine.rnn.default, x, h0, c0, weights, "LSTM" if lstm else _ACTS[s0.act], 1, False,
                   s0.d == 1, True)
        out = call(operator.getitem, res, 0)
        for i, node in enumerate(chain):
            later = chain[i + 1] if i + 1 < n_steps else None
            users = [u for u in node.users if later is None or u is not steps[later].inner[0]]
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
    """Each chain (Elman or LSTM) as one recurrent op, then the stacked products. Again while chains appear: a
    second layer's steps read the first's output once that is the op's, slice by slice."""
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


class RecurrencePass(CustomGraphPass):
    """`recurrence_pass` as Inductor's post_grad_custom_pre_pass, with the uuid its graph cache keys on."""

    def __call__(self, graph) -> None:
        recurrence_pass(graph)

    def uuid(self):
        import hashlib
        return hashlib.sha256(open(__file__, "rb").read()).hexdigest()
