"""The module's own state, as the worker sees it: facts for tools/judge/state_check.py.

ModelNew's named parameters and buffers are fingerprinted when it is built (op_load,
op_reset); `op_state` answers, for the names the judge gives (Model's) and every
parameter of ModelNew's, which ModelNew's calls have changed since, which of Model's
are missing, and, where Model's forward changes an entry itself (BatchNorm's running
statistics in training mode), that entry's values after calls on the judge's inputs
from a ModelNew built afresh. Also the global random generators' states (`rng_states`),
which the watch (tools/sandbox/watch.py) compares around each call. Read through
torch.nn.Module's own functions, as tools/sandbox/ownership.py reads them; the judge
decides what the facts mean.
"""
from __future__ import annotations

from tools.sandbox import channel
from tools.sandbox.outputs import fingerprint


def named_tensors(model) -> dict:
    """{name: tensor} of `model`'s parameters and buffers (non-persistent ones too), through
    torch.nn.Module's functions; {} when `model` is not a module."""
    import torch
    if not isinstance(model, torch.nn.Module):
        return {}
    found = [*torch.nn.Module.named_parameters(model), *torch.nn.Module.named_buffers(model)]
    return {name: t for name, t in found if type(t) in (torch.Tensor, torch.nn.Parameter)}


def fingerprints(tensors: dict) -> dict:
    """{name: fingerprint} for each tensor that has values (a lazy or meta one has none)."""
    import torch
    prints = {}
    for name, t in tensors.items():
        if isinstance(t, torch.nn.parameter.UninitializedTensorMixin) or t.is_meta:
            continue
        prints[name] = fingerprint(t)
    return prints


def rng_states() -> list:
    """The global random generators' states: the CPU one's, and each CUDA device's once CUDA
    is initialized (torch.manual_seed and every draw change them)."""
    import torch
    states = [torch._C.default_generator.get_state()]
    if torch.cuda.is_initialized():
        states += [g.get_state() for g in torch.cuda.default_generators]
    return states


def same_states(a: list, b: list) -> bool:
    """rng_states' answers (and any other state beside them, by ==) alike."""
    import torch
    return len(a) == len(b) and all(torch.equal(x, y) if isinstance(x, torch.Tensor) else x == y
                                    for x, y in zip(a, b))


def same_print(a, b) -> bool:
    import torch
    return a is not None and b is not None and a.device == b.device and bool(torch.equal(a, b))


class StateOps:
    """Worker's op_state (tools/sandbox/worker.py)."""
    _built_state: dict = {}

    def note_built(self) -> None:
        """Called as ModelNew is built: what its calls are measured against."""
        self._built_state = fingerprints(named_tensors(self.model))

    def op_state(self, h: dict):
        import torch
        names, changed = list(h.get("names") or []), list(h.get("changed") or [])
        if h.get("seeds"):   # Model's forward changes its state: a fresh ModelNew, called as the judge says
            reply, _ = self.op_reset({})
            if not reply.get("ok"):
                return reply, b""
            for seed in h["seeds"]:
                try:
                    self._forward(self._inputs(int(seed)))
                except BaseException as e:
                    return self.describe_error(e, "forward"), b""
        own = named_tensors(self.model)
        # Model's entries its forward leaves as they are, and every parameter of ModelNew's
        held = [n for n in own if n not in changed and (n in names or isinstance(own[n], torch.nn.Parameter))]
        now = fingerprints({n: own[n] for n in held})
        drifted = [n for n, p in now.items() if n in self._built_state and not same_print(p, self._built_state[n])]
        kept = [n for n in changed if n in own]
        specs, views = channel.pack_tensors([own[n] for n in kept])
        return {"ok": True, "drifted": drifted, "missing": [n for n in changed if n not in own],
                "values": kept, "outputs": specs}, views
