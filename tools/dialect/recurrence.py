"""Hand-written Elman recurrences as one recurrent op: a pass over Inductor's post-grad graph.

A model that loops over time steps itself (`hidden = tanh(self.i2h(torch.cat((x[t], hidden), 1)))`,
KernelBench level 3's 34_VanillaRNNHidden) is unrolled by Dynamo: T steps of a cat, an addmm and
a tanh, each its own launches in a seed (256 steps: 33-37 ms a forward on an H200, bound by the
host, against eager's 15). `elman_pass` finds such a chain of steps in the post-grad graph and runs
it as one `torch.ops.krefine.rnn` (tools/dialect/rnn_op.py; mode RNN_TANH or RNN_RELU, one layer),
which the converter writes as krefine's recurrent family (`rnn_seq`: the input projection of every
step at once, then one persistent launch), the concatenated weight split into its input and hidden
columns and a zero hidden bias. A step's hidden state read elsewhere (a per-step output, the last
state returned) becomes that step's slice of the op's output.

`stacked_products` then writes a cat along dim 0 of one addmm per step on consecutive slices
x[0], x[1], ... of one tensor (an output projection per step, stacked) as one addmm over x seen as
(T * B, H): the same rows in the same order.

A step: act(addmm(b, cat([select(x, d, t), h], 1), permute(W, [1, 0]))): act tanh or relu, the cat
in either order, d 0 (time first) or 1 (batch first), b of W's rows, fp32. A chain: steps t0, t0 + 1,
... of one x, W, b, act and order, each step's h the one before's output, two steps at least, whose
cat and addmm nothing else reads. Stacked layers: the pass runs again while it finds chains. Anything
else stays as it is.
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
    w: torch.fx.Node        # (H, I + H) or (H, H + I): the cat's order
    b: torch.fx.Node
    x_first: bool
    act: object
    inner: tuple            # (cat, addmm): read by nothing but the step

    @property
    def key(self):
        return self.x, self.d, self.w, self.b, self.x_first, self.act


def _is(node, target) -> bool:
    return isinstance(node, torch.fx.Node) and node.op == "call_function" and node.target == target


def _val(node):
    return node.meta.get("val") if isinstance(node, torch.fx.Node) else None


def _step(node) -> _Step | None:
    if node.op != "call_function" or node.target not in _ACTS or len(node.args) != 1:
        return None
    mm = node.args[0]
    if not _is(mm, aten.addmm.default) or len(mm.args) != 3 or mm.kwargs or len(mm.users) != 1:
        return None
    b, cat, wt = mm.args
    if not _is(cat, aten.cat.default) or len(cat.users) != 1 or not _is(wt, aten.permute.default) \
            or list(wt.args[1]) != [1, 0] or len(cat.args[0]) != 2 or (cat.args[1:] or [0])[0] not in (1, -1):
        return None
    w = wt.args[0]
    vals = [_val(n) for n in (node, b, w, *cat.args[0])]
    if any(not isinstance(v, torch.Tensor) or v.dtype != torch.float32 for v in vals):
        return None
    out, vb, vw = vals[:3]
    hid = out.shape[-1]
    if out.dim() != 2 or vb.shape != (hid,) or vw.dim() != 2 or vw.shape[0] != hid:
        return None
    for x_first in (True, False):
        xs, h = cat.args[0] if x_first else cat.args[0][::-1]
        if not _is(xs, aten.select.int) or _val(h) is None or tuple(_val(h).shape) != tuple(out.shape):
            continue
        x, d, t = xs.args
        vx = _val(x)
        if d in (0, 1) and isinstance(t, int) and 0 <= t < vx.shape[d] and vx.dim() == 3 \
                and vx.shape[1 - d] == out.shape[0] and vx.shape[2] + hid == vw.shape[1]:
            return _Step(x, d, t, h, w, b, x_first, node.target, (cat, mm))
    return None


def _chains(graph) -> list[list[torch.fx.Node]]:
    steps = {n: s for n in graph.nodes if (s := _step(n)) is not None}
    after: dict[torch.fx.Node, list[torch.fx.Node]] = {}
    for n, s in steps.items():
        prev = steps.get(s.h)
        if prev is not None and prev.key == s.key and prev.t + 1 == s.t:
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
    hid = _val(chain[0]).shape[-1]
    inp = _val(s0.x).shape[2]
    call = _caller(graph, s0.x)
    with graph.inserting_before(s0.inner[1]):
        x = s0.x
        if s0.t != 0 or n_steps != _val(x).shape[s0.d]:
            x = call(aten.slice.Tensor, x, s0.d, s0.t, s0.t + n_steps)
        cols = ((0, inp), (inp, inp + hid)) if s0.x_first else ((hid, hid + inp), (0, hid))
        w_ih, w_hh = (call(aten.clone.default, call(aten.slice.Tensor, s0.w, 1, a, z),
                            memory_format=torch.contiguous_format) for a, z in cols)
        where = dict(dtype=torch.float32, layout=torch.strided, device=_val(s0.b).device, pin_memory=False)
        b_hh = call(aten.full.default, [hid], 0.0, **where)   # post-grad: ops Inductor lowers as they are
        h0 = call(aten.unsqueeze.default, s0.h, 0)
        c0 = call(aten.empty.memory_format, [0], **where)
        res = call(torch.ops.krefine.rnn.default, x, h0, c0, [w_ih, w_hh, s0.b, b_hh], _ACTS[s0.act], 1,
                    False, s0.d == 1, True)
        out = call(operator.getitem, res, 0)
        for i, node in enumerate(chain):
            later = chain[i + 1] if i + 1 < n_steps else None
            users = [u for u in node.users if later is None or u is not steps[later].inner[0]]
            if users:
                part = call(aten.select.int, out, s0.d, i)
                for u in users:
                    u.replace_input_with(node, part)


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


def elman_pass(graph, rounds: int = 8) -> None:
    """Each chain as one recurrent op, then the stacked products. Again while chains appear: a
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


class ElmanPass(CustomGraphPass):
    """`elman_pass` as Inductor's post_grad_custom_pre_pass, with the uuid its graph cache keys on."""

    def __call__(self, graph) -> None:
        elman_pass(graph)

    def uuid(self):
        import hashlib
        return hashlib.sha256(open(__file__, "rb").read()).hexdigest()
