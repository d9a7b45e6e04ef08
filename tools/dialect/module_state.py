"""What a module holds besides what torch.compile's graph reads as inputs: tensors that
are neither parameters nor buffers, Python values (tools/dialect/inductor_capture.py
follows both from call to call, or names why it cannot), and state no capture can hold;
and the check that a compiled graph's outputs have the eager forward's shapes.
"""
from __future__ import annotations

import collections
import itertools
import numbers
import types


def _attributes(model):
    """(dotted path, value) of every attribute each of `model`'s modules holds in its __dict__."""
    for prefix, module in model.named_modules():
        for name, value in vars(module).items():
            yield (f"{prefix}.{name}" if prefix else name), value


def _items(value) -> list:
    """What a list, tuple or dict holds (its values); nothing for anything else."""
    return list(value.values()) if isinstance(value, dict) else list(value) if isinstance(value, (list, tuple)) else []


def plain_tensor_attributes(model) -> dict:
    """Tensors a module holds that are neither parameters nor buffers (`self.h0 =
    torch.randn(...)`), by dotted path: module.to() does not move them and state_dict does
    not hold them, but the forward reads them (and may overwrite them)."""
    import torch
    return {path: v for path, v in _attributes(model)
            if isinstance(v, torch.Tensor) and not isinstance(v, torch.nn.Parameter)}


_SCALARS = (bool, int, float, complex, str, bytes, type(None), numbers.Number)   # Number: NumPy's scalars


class Items(tuple):
    """A container's kind and length, as python_values records it beside its items."""
    def __repr__(self):
        return f"a Python {self[0]} of {self[1]} item{'' if self[1] == 1 else 's'}"


class Held(int):
    """A tensor inside a container or a plain object, by identity (the forward may replace it)."""
    def __repr__(self):
        return "a tensor"


def python_values(model, module=None) -> dict:
    """The Python values the forward could read and change, by path as the problem's code
    names them: numbers, strings and booleans each module holds (`self.calls`,
    `self.bn.training`), and inside its lists, tuples, dicts and plain objects
    (`self.steps[0]`, `self.cfg['scale']`, `self.state.temp`), with each container's
    length; and, given the problem's `module`, its globals likewise (`STEP`). Tensors and
    modules are left to the capture's other checks. A step counter the forward advances
    is state no captured graph carries: Dynamo writes its value into the graph."""
    import torch
    internal = set(vars(torch.nn.Module()))
    home = (module.__name__ if module is not None else None, "types", "argparse")
    out: dict = {}
    for path, v in _attributes(model):
        if (name := path.rpartition(".")[2]) not in internal or name == "training":
            _leaves(f"self.{path}", v, out, 0, set(), home)
    for name, v in (vars(module).items() if module is not None else ()):
        if not name.startswith("__") and _plain(v, home):
            _leaves(name, v, out, 0, set(), home)
        own_class = isinstance(v, type) and v.__module__ == module.__name__
        if own_class:   # `type(self).step += 1`
            for attr, x in vars(v).items():
                if not attr.startswith("__") and _plain(x, home):
                    _leaves(f"class {name}.{attr}", x, out, 0, set(), home)
        for fn in [v, *(vars(v).values() if own_class else ())]:
            if isinstance(fn, types.FunctionType) and fn.__module__ == module.__name__:   # `def f(state={})`
                for i, x in enumerate(fn.__defaults__ or ()):
                    if _plain(x, home) and not isinstance(x, _SCALARS):
                        _leaves(f"{fn.__qualname__}.__defaults__[{i}]", x, out, 0, set(), home)
    return out


def numpy_held(model, graph_inputs, sources) -> str | None:
    """The reason, when a graph input no name of Model's reaches has the shape of a NumPy array
    Model's modules hold (`x * torch.from_numpy(self.w)`: Dynamo hands the array in as a tensor,
    which converting by shape could take for another tensor of that shape)."""
    arrays = {(f"{prefix}." if prefix else "") + name: v for prefix, m in model.named_modules()
              for name, v in vars(m).items() if type(v).__module__ == "numpy" and getattr(v, "ndim", 0) >= 1}
    shapes = {tuple(t.shape) for t, s in zip(graph_inputs, sources) if s is None and hasattr(t, "shape")}
    path = next((p for p, v in arrays.items() if tuple(v.shape) in shapes), None)
    return None if path is None else (
        f"the forward reads self.{path}, a NumPy array Model holds, which torch.compile hands in as a tensor no "
        f"name of Model's reaches; hold it as a buffer (self.register_buffer('{path.rpartition('.')[2]}', "
        "torch.from_numpy(...)) in __init__) and read that")


def numpy_scalars_as_python(model, module) -> None:
    """NumPy scalars Model's modules hold (`self.scale = np.sqrt(d)`), or a class of the problem's
    file does, set to the Python numbers they equal, before the capture: Dynamo lifts a NumPy
    scalar to a graph input no tensor of Model's is (no seed), and a Python number to the constant
    it is. python_values, read after this, still names one the forward changes."""
    def scalars(holder):
        return [(name, v.item()) for name, v in list(vars(holder).items())
                if type(v).__module__ == "numpy" and hasattr(v, "item") and getattr(v, "ndim", 1) == 0]
    for m in model.modules():
        for name, v in scalars(m):
            object.__setattr__(m, name, v)
    for cls in {c for m in model.modules() for c in type(m).__mro__ if module is not None and
                c.__module__ == module.__name__}:
        for name, v in scalars(cls):
            setattr(cls, name, v)


def _plain(v, home: tuple) -> bool:
    """A value python_values looks into: a scalar, a container, or a plain object of a class
    the problem's file defines (a config dataclass), a SimpleNamespace or an argparse
    Namespace; not a library's object (a logger's cache changes as it logs)."""
    if isinstance(v, _SCALARS + (list, tuple, dict, set, frozenset, collections.deque)):
        return True
    return hasattr(v, "__dict__") and not isinstance(v, type) and type(v).__module__ in home


def _leaves(path: str, v, out: dict, depth: int, seen: set, home: tuple) -> None:
    import torch
    if isinstance(v, _SCALARS):
        out[path] = v
        return
    if isinstance(v, torch.Tensor) and depth:   # a module's own tensor attributes: the capture follows them
        out[path] = Held(id(v))
        return
    if depth > 3 or id(v) in seen or not _plain(v, home):
        return
    seen = seen | {id(v)}
    if isinstance(v, (list, tuple, collections.deque)):
        out[path] = Items((type(v).__name__, len(v)))
        for i, x in enumerate(itertools.islice(v, 256)):
            _leaves(f"{path}[{i}]", x, out, depth + 1, seen, home)
    elif isinstance(v, dict):
        out[path] = Items(("dict", len(v)))
        for k, x in list(v.items())[:256]:
            if isinstance(k, _SCALARS):
                _leaves(f"{path}[{k!r}]", x, out, depth + 1, seen, home)
    elif isinstance(v, (set, frozenset)):
        out[path] = Items((type(v).__name__, len(v)))
    else:
        for name, x in vars(v).items():
            _leaves(f"{path}.{name}", x, out, depth + 1, seen, home)


_WRITES = frozenset("append extend insert update add clear appendleft".split())


def unread(model, module, source: str) -> set[str]:
    """The roots of python_values' paths nothing in the problem's code reads: an attribute of
    a module class of the file's that no `.<name>` load (or string) names, a global no
    name load reads (`self.last_shape = x.shape`, a count only incremented: writing them changes
    no output). A torch layer's attributes (`self.bn.momentum`) are read by its forward."""
    import ast

    import torch
    tree = ast.parse(source)
    parent = {id(c): n for n in ast.walk(tree) for c in ast.iter_child_nodes(n)}

    def written(n) -> bool:   # `self.log.append(y)` or `self.cache[k] = v`: a write, not a read
        up = parent.get(id(n))
        if isinstance(up, ast.Subscript) and isinstance(up.ctx, ast.Store):
            return True
        call = parent.get(id(up))
        return isinstance(up, ast.Attribute) and up.attr in _WRITES and isinstance(call, ast.Call) \
            and call.func is up and isinstance(parent.get(id(call)), ast.Expr)
    loads = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Load)
             and not written(n)}    # on any object, not only `self.` (an alias `m = self` reads as well)
    loads |= {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and not written(n)}
    out = {name for name in (vars(module) if module is not None else ()) if name not in names}
    out |= {f"class {name}.{attr}" for name, v in (vars(module).items() if module is not None else ())
            if isinstance(v, type) and v.__module__ == module.__name__ for attr in vars(v) if attr not in loads}
    for prefix, m in model.named_modules():   # a torch layer, or a class of the file's deriving one, reads its own
        if not any(c.__module__.startswith("torch.") for c in type(m).__mro__ if c not in (torch.nn.Module, object)):
            out |= {f"self.{prefix}.{n}" if prefix else f"self.{n}" for n in vars(m) if n not in loads}
    return out


def changed_value(before: dict, after: dict, followed=frozenset(), unread_roots=frozenset()) -> str | None:
    """What the forward changed of `before` (python_values before the call), said as the
    reason no seed can follow it; None when nothing changed. `followed`: paths that now hold
    a module's own tensor, which the capture follows as state (`self.h = None`, then a tensor);
    `unread_roots` (`unread`): what changes there changes no output."""
    def read(p: str) -> bool:
        return not any(p == r or p.startswith((r + ".", r + "[")) for r in unread_roots)
    path = next((p for p, v in before.items() if p not in followed and read(p) and
                 (p not in after or after[p] != v or type(after[p]) is not type(v))), None)
    if path is None:
        return None
    v = before[path]
    if isinstance(v, Held):
        return (f"the forward replaces {path}, a tensor held in a Python container or object, not a parameter or "
                "buffer of Model, so no seed can follow it from call to call; hold it in Model as a buffer "
                "(self.register_buffer)")
    what = repr(v) if isinstance(v, (Items, Held)) or v is None else f"a Python {type(v).__name__}, {v!r}"
    where = path if path.startswith("self.") else f"the class attribute {path[6:]}" if path.startswith("class ") \
        else f"the global {path} of the problem's module"
    return (f"the forward changes {where} ({what} before the call): Inductor's graph holds its value at the "
            "capture as a constant, so no seed can follow it from call to call; keep such state in a tensor "
            "buffer (self.register_buffer)")


def _same_inputs(module, inputs, seed: int) -> None:
    """get_inputs() drawn again under seed + 1 (on the meta device where it can be; for real where
    it holds Python values or is small): a Python value or a tensor's shape that changes is named."""
    import torch

    from tools.problem import seeded
    python = any(not isinstance(x, torch.Tensor) for x in inputs)
    small = sum(x.numel() * x.element_size() for x in inputs if isinstance(x, torch.Tensor)) < (256 << 20)
    for k in range(1, 5 if python else 2):   # a drawn bool matches one other draw half the time
        try:
            with torch.device("meta"):   # tensors cost nothing there
                again = seeded(module.get_inputs, seed + k)
        except Exception:   # a number read from a drawn tensor (int(torch.randint(...))): drawn for real
            try:
                again = seeded(module.get_inputs, seed + k) if python or small else None
            except Exception:   # no other draw to compare with: the seed's own checks stay (kernelbook_model)
                again = None
        _same_draws(inputs, again or ())


def _same_draws(inputs, again) -> None:
    import torch
    for i, (x, y) in enumerate(zip(inputs, again)):
        if isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor) and x.shape != y.shape:
            raise ValueError(f"get_inputs() item {i} has another shape under another seed ({tuple(x.shape)}, then "
                             f"{tuple(y.shape)}): a seed's sizes are fixed when it is made, while each call draws "
                             "its own; draw inputs of one shape (pad variable lengths, pass the lengths)")
        if not isinstance(x, torch.Tensor) and type(x) is type(y) and repr(x) != repr(y):
            raise ValueError(f"get_inputs() item {i} is a Python {type(x).__name__} that changes with the seed "
                             f"({x!r}, then {y!r}): a seed holds it fixed, as Inductor writes it into its kernels, "
                             "while each call draws its own; pass it as a tensor (torch.tensor(...))")


def check_capturable(model, inputs=(), module=None, seed: int = 0) -> None:
    """ValueError naming what no seed can follow, before compiling: tensors inside a list or
    dict input (a seed's call() takes tensors and Python values), a Python value or a tensor
    shape of get_inputs() that another seed changes (`module`'s, drawn again under seed + 1: a
    timestep drawn as an int, which Inductor writes into its kernels; audio of a drawn length), a recurrent layer's dropout
    between layers in training mode (random), and a training BatchNorm with momentum=None,
    whose running statistics are a cumulative average, 1 / num_batches_tracked read as a
    Python float, which Dynamo cannot trace (its error names a line of torch's batchnorm.py,
    not the model's), a lazy layer never called (its weights are drawn in the forward), and
    a forward hook on Model itself."""
    import torch
    for i, x in enumerate(inputs):
        if any(isinstance(t, torch.Tensor) for t in _items(x)):
            raise ValueError(f"get_inputs() item {i} is a {type(x).__name__} of tensors; a seed takes tensors and "
                             "Python values as its inputs: pass each tensor as an input of its own")
    if module is not None:
        _same_inputs(module, inputs, seed)
    hooks = [kind for kind in ("_forward_pre_hooks", "_forward_hooks") if getattr(model, kind, None)]
    if hooks:   # torch.compile compiles them apart from the forward: a second graph, which no seed joins
        raise ValueError(f"Model registers a forward {'pre-' if hooks[0] == '_forward_pre_hooks' else ''}hook on "
                         "itself, which torch.compile compiles apart from its forward; write what it does into "
                         "the forward (a hook on a submodule is captured with the forward)")
    for path, m in model.named_modules():
        if getattr(m, "has_uninitialized_params", lambda: False)():   # nn.LazyLinear and kin, never called
            raise ValueError(f"self.{path or 'model'} is a {type(m).__name__} whose parameters are drawn at its first "
                             "call, in the forward: random numbers no kernel can match; give it its input size")
        if isinstance(m, torch.nn.RNNBase) and m.training and m.dropout and m.num_layers > 1:
            # torch's decomposition drops it (its _rnn_helper's test never holds): the graph would be eval's
            raise ValueError(f"self.{path} ({type(m).__name__}) has dropout={m.dropout} between its layers in "
                             "training mode: random numbers no kernel can match; judge in eval mode "
                             "(--set eval.module_mode=eval)")
        if isinstance(m, torch.nn.modules.batchnorm._BatchNorm) and m.training and m.track_running_stats \
                and m.momentum is None:
            raise ValueError(f"self.{path or 'model'} is a {type(m).__name__} with momentum=None, a cumulative "
                             "average of its running statistics (1 / num_batches_tracked, a Python float) that "
                             "torch.compile cannot capture; give it a momentum, or judge in eval mode "
                             "(--set eval.module_mode=eval)")


def unregistered(model) -> dict[int, str]:
    """{id: "self.layers"} of the tensors of modules a module holds in a plain Python list,
    tuple or dict attribute: not registered, so no name reaches them (nn.ModuleList would)."""
    import torch
    registered = {id(t) for t in [*model.parameters(), *model.buffers()]}
    out = {}
    for path, value in _attributes(model):
        for m in _items(value):
            if isinstance(m, torch.nn.Module):
                out.update({id(t): f"self.{path}, a plain Python {type(value).__name__}"
                            for t in [*m.parameters(), *m.buffers()] if id(t) not in registered})
    return out


def plain_held(held: str, failed: bool = False) -> str:
    return (f"{'torch.compile failed beside' if failed else 'the forward runs'} modules of {held}: their parameters "
            "are not registered (nn.ModuleList / nn.ModuleDict would register them, and move them with the model), "
            "so no seed can name them")


def reads_self(source: str, name: str) -> bool:
    """Does the problem's code read `self.<name>` (not only store it)?"""
    import ast
    return any(isinstance(n, ast.Attribute) and n.attr == name and isinstance(n.ctx, ast.Load)
               and isinstance(n.value, ast.Name) and n.value.id == "self" for n in ast.walk(ast.parse(source)))


def stored_before_read(model, inputs, path: str) -> bool:
    """Is self.<path> stored before it is read (hasattr and getattr are reads) in the next call of
    `model`'s eager forward, run on the model as the capture's call left it (the capture has
    read what it needs of it; a hook's closure stores into this model, not a copy)? Then no value
    carries from one call to the next (RevIN's mean, set in its "norm" call and read in its
    "denorm" call of the same forward)."""
    import torch
    owner_path, _, name = path.rpartition(".")
    owner = model.get_submodule(owner_path) if owner_path else model
    events: list[str] = []
    cls = type(owner)

    class Watched(cls):
        def __getattribute__(self, attr):
            if attr == name:
                events.append("read")
            return super().__getattribute__(attr)

        def __setattr__(self, attr, value):
            if attr == name:
                events.append("store")
            super().__setattr__(attr, value)
    owner.__class__ = Watched
    try:
        with torch.no_grad():
            model(*inputs)
    finally:
        owner.__class__ = cls
    return events[:1] == ["store"]


def eager_outputs(model, inputs) -> list | None:
    """A copy of `model`'s eager forward on `inputs`, flat (the model's own state untouched);
    None where the model cannot be copied or the copy's forward raises (nothing to compare)."""
    import copy

    import torch
    try:
        with torch.no_grad():
            out = copy.deepcopy(model)(*inputs)
    except Exception:
        return None
    return list(out) if isinstance(out, (tuple, list)) else [out]


def misshapen_outputs(want: list, got: list) -> list[str]:
    """Outputs of a compiled graph (`got`) shaped otherwise than the eager forward's (`want`)."""
    import torch
    if len(want) != len(got):
        return []
    return [f"output {k} the shape {tuple(g.shape)} where the forward gives {tuple(w.shape)}"
            for k, (w, g) in enumerate(zip(want, got))
            if isinstance(w, torch.Tensor) and isinstance(g, torch.Tensor) and w.shape != g.shape]


def tensor_form(t) -> str:
    return f"{tuple(t.shape)}, {str(t.dtype).replace('torch.', '')}"
