"""What set-up code builds with, for tools/guards/torch_ops.py: a torch layer class or function
named in set-up is no op kept to call later when set-up only builds with it (`built_in_set_up`),
and a class nothing of which runs on the forward path derives from a torch layer for its
weights only (`set_up_only`)."""
from __future__ import annotations

import ast

from tools.guards.names import resolve
from tools.guards.regions import SETUP, _dynamic_names
from tools.guards.source import Source


def built_in_set_up(source: Source, r) -> bool:
    """The reference (a torch layer class or function, named in set-up, not called there) is
    only built with: a set-up function's parameter default, a local, a top-level name, or
    an argument of a file class's constructor that only builds with it."""
    return _set_up_default(source, r) or _set_up_local(source, r) or _set_up_global(source, r) \
        or _set_up_argument(source, r)


def _set_up_argument(source: Source, r) -> bool:
    """The reference is handed, in set-up, to the constructor of a class of the file (timm's
    `Mlp(dim, act_layer=nn.GELU)`, torchvision's `ConvBNReLU(..., norm_layer=nn.BatchNorm2d)`)
    whose `__init__` only builds with the parameter it lands in (`_only_built_with`)."""
    parents = source.parents
    node, parent = r.node, r.site.parent
    while isinstance(parent, (ast.IfExp, ast.BoolOp)) and any(node is x for x in _chosen(parent)[1:]):
        node, parent = parent, parents.get(id(parent))    # `act_layer=nn.GELU if gelu else nn.ReLU`
    keyword = parent if isinstance(parent, ast.keyword) and parent.value is node else None
    call = parents.get(id(keyword)) if keyword is not None else parent
    if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Name):
        return False
    cls = next((c for c in source.tree.body if isinstance(c, ast.ClassDef) and c.name == call.func.id), None)
    init = next((f for f in getattr(cls, "body", []) if isinstance(f, ast.FunctionDef) and f.name == "__init__"), None)
    if init is None or not init.body or any(isinstance(c, ast.ClassDef) and c.name == call.func.id and c is not cls
                                            for c in ast.walk(source.tree)):
        return False
    params = [*init.args.posonlyargs, *init.args.args][1:]   # after self
    if keyword is not None:
        name = keyword.arg if keyword.arg in {a.arg for a in [*params, *init.args.kwonlyargs]} else None
    else:
        k = next((i for i, a in enumerate(call.args) if a is node), None)
        name = params[k].arg if k is not None and k < len(params) else None
    first = next((s for s in source.sites if s.node is init.body[0]), None)
    return name is not None and first is not None and first.region == SETUP and _only_built_with(source, init, name)


def _set_up_default(source: Source, r) -> bool:
    """The reference is the default of a set-up function's parameter (`act_layer=nn.GELU` of
    an `__init__`) that the function only calls (`self.act = act_layer()`) or hands to a
    constructor (`Mlp(act_layer=act_layer)`, whose own set-up is checked the same way): a
    module built in set-up, nothing kept to call later. Handed to a call that may keep it
    (setattr, functools.partial, a container's append / update), it is kept."""
    args = r.site.parent
    if not isinstance(args, ast.arguments):
        return False
    fn = source.parents.get(id(args))
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) or not fn.body:
        return False
    body = next((s for s in source.sites if s.node is fn.body[0]), None)
    if body is None or body.region != SETUP:
        return False
    positional = [*args.posonlyargs, *args.args]
    pairs = list(zip(positional[len(positional) - len(args.defaults):], args.defaults))
    pairs += [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None]
    name = next((a.arg for a, d in pairs if d is r.node), None)
    return name is not None and _only_built_with(source, fn, name)


def _set_up_local(source: Source, r) -> bool:
    """The reference is what a set-up function assigns to a local, as it is, bound by
    functools.partial or picked at once from a literal table (`norm_layer = nn.BatchNorm2d` when
    none was given, torchvision's `partial(nn.BatchNorm2d, eps=1e-3)`, `cls = {"lstm": nn.LSTM,
    "gru": nn.GRU}[cell]`), or a use of such a local or of a parameter, and the function only
    calls it or hands it to a constructor (`_only_built_with`); a table's pick called at once
    (`{...}[cell](4, 8)`) is built then."""
    node, parent, fn = r.node, r.site.parent, r.site.func
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
        return _only_built_with(source, fn, node.id)   # a use of such a local or parameter (`if norm_layer is None`)
    parents = source.parents
    if isinstance(parent, ast.Call) and parent.args and parent.args[0] is node and _callee(parent) == "partial":
        node, parent = parent, parents.get(id(parent))
        if isinstance(parent, ast.Call) and parent.func is node:   # `partial(nn.LayerNorm, eps=1e-6)(dim)`: built now
            return True
    table = parents.get(id(parent))
    if isinstance(parent, (ast.Dict, ast.List, ast.Tuple)) and any(node is x for x in getattr(
            parent, "values", getattr(parent, "elts", ()))) and isinstance(table, ast.Subscript) and table.value is parent:
        node, parent = table, parents.get(id(table))   # picked from the literal table at once
        if isinstance(parent, ast.Call) and parent.func is node:   # and built now
            return True
    while isinstance(parent, (ast.IfExp, ast.BoolOp)) and any(node is x for x in _chosen(parent)[1:]):
        node, parent = parent, parents.get(id(parent))   # timm's `norm_layer or partial(nn.LayerNorm, eps=1e-6)`
    return isinstance(parent, ast.Assign) and len(parent.targets) == 1 and isinstance(parent.targets[0], ast.Name) \
        and any(x is node for x in _chosen(parent.value)) and _only_built_with(source, fn, parent.targets[0].id)


def _set_up_global(source: Source, r) -> bool:
    """The reference is, as it is, bound by functools.partial or as an item of a dict, list or
    tuple, the value of a top-level name (`Conv = partial(nn.Conv2d, kernel_size=3)`, `ACTS =
    {"gelu": nn.GELU}`) that the file only calls in set-up functions (`Conv(c, 8)`,
    `ACTS[name]()`) and never names by a string or rebinds, in a file that looks up no name by
    a computed string: layers built in set-up, nothing kept to call later."""
    parents = source.parents
    node, parent = r.node, r.site.parent
    if isinstance(parent, ast.Call) and parent.args and parent.args[0] is node and _callee(parent) == "partial":
        node, parent = parent, parents.get(id(parent))
    elif any(node is x for x in getattr(parent, "values", getattr(parent, "elts", ()))) and \
            isinstance(parent, (ast.Dict, ast.List, ast.Tuple)):
        node, parent = parent, parents.get(id(parent))
    if not (isinstance(parent, ast.Assign) and any(parent is x for x in source.tree.body) and len(parent.targets) == 1
            and isinstance(parent.targets[0], ast.Name) and parent.value is node) or _dynamic_names(source.tree):
        return False
    name, calls = parent.targets[0].id, 0
    for s in source.sites:
        n = s.node
        if isinstance(n, ast.Constant) and n.value == name:
            return False
        if not isinstance(n, ast.Name) or n.id != name or n is parent.targets[0]:
            continue
        if isinstance(n.ctx, ast.Store) or s.region != SETUP or not isinstance(s.func, (ast.FunctionDef,
                                                                                          ast.AsyncFunctionDef)):
            return False
        p = s.parent   # called, or an item of it called
        if isinstance(p, ast.Subscript) and p.value is n:
            n, p = p, parents.get(id(p))
        if not (isinstance(p, ast.Call) and p.func is n):
            return False
        calls += 1
    return calls > 0


def _callee(call: ast.Call) -> str:
    """The name a call calls: `partial` of functools.partial(...), `f` of f(...)."""
    return call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", "")


def _only_built_with(source: Source, fn: ast.AST, name: str, depth: int = 1) -> bool:
    """Every use of local `name` in `fn` builds with it: a call, an argument of a call that
    keeps nothing (`_KEEPERS`), a test against None, an assignment of it again (or of it or
    another choice, `name = name or nn.LayerNorm`); or, once,
    `self.x = name` where every read of self.x is such a use in set-up code (torchvision's
    `self._norm_layer`, read in `_make_layer`)."""
    handed, calls, tests, stored = set(), set(), set(), []
    for n in ast.walk(fn):
        if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name) and \
                n.targets[0].id == name:   # chosen again: `norm_layer = norm_layer or nn.LayerNorm`
            tests |= {id(x) for x in _chosen(n.value) if isinstance(x, ast.Name) and x.id == name}
        if isinstance(n, ast.Call):
            calls.add(id(n.func))
            if _callee(n) not in _KEEPERS:   # the argument itself, or a choice of it (`x if c else None`)
                for a in [*n.args, *(k.value for k in n.keywords)]:
                    handed |= {id(x) for x in _chosen(a)}
        elif isinstance(n, ast.Compare) and len(n.ops) == 1 and isinstance(n.ops[0], (ast.Is, ast.IsNot)) and \
                isinstance(n.comparators[0], ast.Constant) and n.comparators[0].value is None:
            tests.add(id(n.left))
        elif isinstance(n, ast.Assign) and isinstance(n.value, ast.Name) and n.value.id == name and \
                len(n.targets) == 1 and isinstance(n.targets[0], ast.Attribute) and \
                isinstance(n.targets[0].value, ast.Name) and n.targets[0].value.id == "self":
            stored.append(n)
    uses = [n for st in fn.body for n in ast.walk(st) if isinstance(n, ast.Name) and n.id == name]
    kept = {id(a.value) for a in stored}
    if not all(isinstance(n.ctx, ast.Store) or id(n) in calls | handed | tests | (kept if depth else set())
               for n in uses):
        return False
    return all(_self_attr_built_with(source, a.targets[0].attr) for a in stored) if stored else True


def _self_attr_built_with(source: Source, attr: str) -> bool:
    """self.<attr> is read, every read in set-up code and building with it: called, or put
    in a local that `_only_built_with` (no further self attribute); never named by a string
    (getattr(self, "attr") is a read this cannot follow). Stored and never read: kept."""
    reads = 0
    for s in source.sites:
        n = s.node
        if isinstance(n, ast.Constant) and n.value == attr:
            return False
        if not (isinstance(n, ast.Attribute) and n.attr == attr and isinstance(n.ctx, ast.Load)):
            continue
        reads += 1
        if s.region != SETUP or not isinstance(s.func, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return False
        p = s.parent   # called, or put in a local that only builds with it
        if not ((isinstance(p, ast.Call) and p.func is n) or (
                isinstance(p, ast.Assign) and p.value is n and len(p.targets) == 1 and
                isinstance(p.targets[0], ast.Name) and _only_built_with(source, s.func, p.targets[0].id, depth=0))):
            return False
    return reads > 0


def _chosen(expr: ast.AST) -> list[ast.AST]:
    """`expr` and what it evaluates to as a whole: the branches of a conditional, the
    operands of `and` / `or` (not a lambda, a container or a call's result)."""
    if isinstance(expr, ast.IfExp):
        return [expr, *_chosen(expr.body), *_chosen(expr.orelse)]
    if isinstance(expr, ast.BoolOp):
        return [expr, *(x for v in expr.values for x in _chosen(v))]
    return [expr]


# calls that may keep what they are handed, to call later
_KEEPERS = frozenset(("setattr", "__setattr__", "partial", "append", "extend", "insert", "update", "setdefault",
                      "add", "register_forward_hook", "register_forward_pre_hook", "register_module",
                      "add_module", "apply"))


def set_up_only(source: Source, cls: ast.ClassDef) -> bool:
    """A class nothing of which runs on the forward path: its forward only raises (a seed's
    ConvBNReLU(nn.Sequential), carried for its weights) or is set-up code (a Features(nn.Sequential)
    only set-up calls, on a dummy input), every other method is set-up code,
    and its body holds nothing else but constants, so no layer's forward it derives from is
    reachable."""
    region = {id(s.node): s.region for s in source.sites}
    forward = None
    for m in cls.body:
        if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if m.name == "forward":
                forward = m
            elif m.decorator_list or region.get(id(m.body[0])) != SETUP:
                return False
        elif not (isinstance(m, (ast.Expr, ast.Assign, ast.AnnAssign)) and isinstance(m.value, ast.Constant)):
            return False   # a docstring or a constant, nothing else
    body = [x for x in getattr(forward, "body", [])
            if not (isinstance(x, ast.Expr) and isinstance(x.value, ast.Constant))]
    if forward is None or forward.decorator_list or not body or not (
            (len(body) == 1 and isinstance(body[0], ast.Raise)) or region.get(id(body[0])) == SETUP):
        return False   # its forward only raises, or only set-up runs it (tools/guards/regions.py `_called_only_in`)
    # and the class is only built, in set-up (`ConvBNReLU(...)`), or derived from: never handed
    # on (`super(C, self.c).forward(x)` in a forward would reach the layer's own)
    for s in source.sites:
        n = s.node
        if isinstance(n, ast.Name) and n.id == cls.name and isinstance(n.ctx, ast.Load) and not (
                (s.region == SETUP and isinstance(s.parent, ast.Call) and
                 (s.parent.func is n or _partial_of(source, s.parent, n))) or
                (isinstance(s.parent, ast.ClassDef) and n in s.parent.bases)):
            return False
    return True


def _partial_of(source: Source, call: ast.Call, name: ast.Name) -> bool:
    """`functools.partial(C, ...)`, C its first argument (EfficientNet-PyTorch's `partial(Conv2dStaticSamePadding,
    image_size=...)`): what it makes builds C when called, as C(...) does; nothing else reaches C's layer."""
    return bool(call.args) and call.args[0] is name and \
        "functools.partial" in resolve(call.func, source.aliases, source.self_attrs, frozenset())
