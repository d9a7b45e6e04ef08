"""One step of a recurrence written by hand, as Inductor's post-grad graph holds it: the matchers
tools/dialect/recurrence.py chains (`step`). Each returns the step's sequence x, its time dim d and
index t, the hidden state h it reads, its weights (a node; (node, first, end) its columns of a
concatenated weight; ("rows", that, its gate chunks in PyTorch's order); None for a missing bias)
and its inner nodes, which nothing outside the step may read, or None. Reads the graph; changes
nothing.
"""
from __future__ import annotations

import operator
from dataclasses import dataclass

import torch

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

    @property
    def reads_h(self):
        return self.inner[:1]


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

    @property
    def reads_h(self):
        return self.inner[:1]


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
        order = tuple(k.args[1] for k in chunks)
        weights = tuple(None if w is None else ("rows", w, order) for w in weights)
        return _LstmStep(x, d, t, h, c, weights, order, c_new, tanh_c, (inner[0], fc))
    return None


@dataclass(frozen=True)
class _GruStep:
    x: torch.fx.Node
    d: int
    t: int
    h: torch.fx.Node
    weights: tuple          # w_ih, w_hh, b_ih, b_hh, each ("rows", weight, its chunks of PyTorch's r, z, n)
    inner: tuple            # the nodes reading h (its product, z * h), then the rest: read by nothing else
    act = "GRU"

    @property
    def key(self):
        return self.x, self.d, self.weights

    @property
    def reads_h(self):
        return self.inner[:2]


def _chunks(node, n: int, width: int):
    """(split, index) of node = getitem(split(p, width, 1), index), the split in n chunks each read once."""
    if not _is(node, operator.getitem) or len(node.users) != 1 or not _is(node.args[0], aten.split.Tensor):
        return None
    split = node.args[0]
    if split.args[1:] not in ((width, 1), (width, -1)) or len(split.users) != n or _val(split.args[0]) is None \
            or _val(split.args[0]).shape[-1] != n * width:
        return None
    return split, node.args[1]


def _gru_step(node) -> _GruStep | None:
    """h = (1 - z) * n + z * h_prev, z = sigmoid(x_z + h_z), r = sigmoid(x_r + h_r),
    n = tanh(x_n + r * h_n): nn.GRU's cell, x_* and h_* the chunks (any order) of one step's input
    and hidden products (Linears, with or without a bias), each sum and product in either order."""
    if not _is(node, aten.add.Tensor) or len(node.args) != 2 or node.kwargs or not _fp32(node) \
            or _val(node).dim() != 2:
        return None
    rows, hid = _val(node).shape

    def chunk(n):
        return _chunks(n, 3, hid)

    def sig(n, users):
        return _is(n, aten.sigmoid.default) and len(n.users) == users and len(n.args) == 1
    for keep, new in (node.args, node.args[::-1]):
        zh = _either(keep, aten.mul.Tensor, lambda n: sig(n, 2), lambda n: True)                  # z * h
        if zh is None or len(keep.users) != 1 or len(new.users) != 1:
            continue
        z, h = zh
        mn = _either(new, aten.mul.Tensor, lambda n: _is(n, aten.sub.Tensor) and n.args[0] == 1 and n.args[1] is z
                     and len(n.users) == 1, lambda n: _is(n, aten.tanh.default) and len(n.users) == 1)  # (1 - z) * n
        pre_n = _either(mn[1].args[0], aten.add.Tensor, lambda a: chunk(a) is not None,
                        lambda b: _is(b, aten.mul.Tensor) and len(b.users) == 1) if mn else None
        r_hn = _either(pre_n[1], aten.mul.Tensor, lambda n: sig(n, 1),
                       lambda n: chunk(n) is not None) if pre_n else None
        if r_hn is None or len(mn[1].args[0].users) != 1:
            continue
        (xn, _), (r, hn) = pre_n, r_hn
        sx, sh = chunk(xn)[0], chunk(hn)[0]
        idx = {"n": (chunk(xn)[1], chunk(hn)[1])}
        for gate, act in (("r", r), ("z", z)):
            pair = _either(act.args[0], aten.add.Tensor, lambda a: chunk(a) is not None and chunk(a)[0] is sx,
                           lambda b: chunk(b) is not None and chunk(b)[0] is sh)
            if pair is None or len(act.args[0].users) != 1:
                break
            idx[gate] = (chunk(pair[0])[1], chunk(pair[1])[1])
        if len(idx) != 3 or sx is sh:
            continue
        xo, ho = (tuple(idx[g][k] for g in "rzn") for k in (0, 1))
        x_part, h_part = _product(sx.args[0]), _product(sh.args[0])
        if sorted(xo) != [0, 1, 2] or sorted(ho) != [0, 1, 2] or x_part is None or h_part is None \
                or h_part[0] is not h or not _fp32(x_part[1], h_part[1]) or _val(h).shape != _val(node).shape \
                or _val(h_part[1]).shape != (3 * hid, hid) or _val(x_part[1]).shape[0] != 3 * hid \
                or any(b is not None and (not _fp32(b) or _val(b).shape != (3 * hid,)) for b in (x_part[2], h_part[2])):
            continue
        (xs, wi, bi), (_, wh, bh) = x_part, h_part
        seq = _sequence(xs, rows, _val(wi).shape[-1])
        if not seq:
            continue
        weights = tuple(None if w is None else ("rows", w, o) for w, o in ((wi, xo), (wh, ho), (bi, xo), (bh, ho)))
        return _GruStep(*seq, h, weights, (sh.args[0], keep, sx.args[0], new, mn[1], z))
    return None


def step(node):
    """The Elman, LSTM or GRU step whose new hidden state `node` is, or None."""
    return _step(node) or _lstm_step(node) or _gru_step(node)
