"""Where each node of a candidate sits: what runs per forward call, once, or never.

"The forward path" is every function body except `__init__` and the functions only
`__init__` calls (`_setup_methods`: its helper methods and the functions it defines): helpers called from forward do its work as much as
forward itself. Module level, class bodies, `__init__` and those methods are set-up, where
torch may build and initialise weights; an autograd
backward nobody calls is set-up too. @triton.jit bodies are their own region. Top-level
defs nothing refers to (a pasted reference `Model`, `get_inputs`) never run and are
skipped. Also which names and self attributes hold torch.nn compute modules. Used to
build a Source (tools/guards/source.py); finds nothing by itself.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass

from tools.guards.names import global_loads, is_jit, is_layer, resolve

# where a node sits: what runs per forward call, what runs once, what never runs
SETUP, FORWARD, JIT, DEAD = "setup", "forward", "jit", "dead"


@dataclass(frozen=True)
class Site:
    node: ast.AST
    parent: ast.AST | None
    region: str
    func: ast.AST | None          # innermost def or lambda
    cls: ast.ClassDef | None      # innermost class


def _dead_defs(tree: ast.Module) -> set[int]:
    """Top-level defs nothing refers to (a pasted reference Model, get_inputs): their
    bodies never run, so torch code in them does no work. Referencing one by name, by
    string (getattr, globals) or decorating it keeps it alive."""
    loads: dict[str, list[ast.AST]] = {}
    strings = set()
    glob = global_loads(tree)      # a parameter or local of the same name is no reference
    for n in ast.walk(tree):
        if isinstance(n, ast.Name) and id(n) in glob:
            loads.setdefault(n.id, []).append(n)
        elif isinstance(n, ast.Attribute):
            loads.setdefault(n.attr, []).append(n)
        elif isinstance(n, ast.Constant) and isinstance(n.value, str):
            strings.add(n.value)
    dead = set()
    for d in tree.body:
        if not isinstance(d, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        if d.name == "ModelNew" or d.decorator_list or d.name in strings:
            continue
        if isinstance(d, ast.ClassDef) and d.keywords:
            continue
        inside = {id(x) for x in ast.walk(d)}
        if all(id(x) in inside for x in loads.get(d.name, ())):
            dead.add(id(d))
    return dead


def _setup_methods(tree: ast.Module, parent_of: dict, layer_call, plain_decorator=lambda d: False) -> set[int]:
    """Functions that run only while the module is built: a method every reference to
    which, anywhere in the file, is a call `self.name(...)` made in set-up code (`__init__`
    or another such function: a ResNet's `_make_layer`), and a function defined inside
    set-up code or at top level every reference to which is a call `name(...)` made in
    set-up code (a MobileNet's `conv_bn` inside `__init__`, a UNet file's `block`; at top
    level only where the file looks up no name by a computed string); a method handed to
    `self.apply(...)` in set-up counts as called there (ConvNeXt's `_init_weights`). A reference of any
    other kind (stored, returned, a string, a call from forward or from a lambda) keeps a
    function on the forward path."""
    funcs = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    # a top-level function too (a UNet file's `def block(i, o): return nn.Sequential(...)`), unless
    # the file reaches names by computed strings, where a call could hide from this count
    top = set() if _dynamic_names(tree) else {id(d) for d in tree.body
                                              if isinstance(d, (ast.FunctionDef, ast.AsyncFunctionDef))}
    owner: dict[int, int] = {}          # node -> the function whose own code it is
    for f in funcs:
        for x in _own_nodes(f):
            owner.setdefault(id(x), id(f))
    refs: dict[str, list[tuple[ast.AST, ast.AST]]] = {}
    for n in ast.walk(tree):
        for child in ast.iter_child_nodes(n):
            name = child.attr if isinstance(child, ast.Attribute) else child.id if isinstance(child, ast.Name) \
                else child.value if isinstance(child, ast.Constant) and isinstance(child.value, str) else None
            if name is not None:
                refs.setdefault(name, []).append((child, n))
    # a function's own names (its parameters, what it assigns): the same name there is not a top-level def
    local_names = {id(f): ({a.arg for a in ast.walk(f.args) if isinstance(a, ast.arg)} |
                           {x.id for x in _own_nodes(f) if isinstance(x, ast.Name) and isinstance(x.ctx, ast.Store)}) -
                   {g for x in _own_nodes(f) if isinstance(x, (ast.Global, ast.Nonlocal)) for g in x.names}
                   for f in funcs} if top else {}     # read only for a top-level function
    methods = {id(m): m for c in ast.walk(tree) if isinstance(c, ast.ClassDef)
               for m in c.body if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))}
    setup = {i for i, m in methods.items() if m.name == "__init__"}
    # a torch layer's constructor calls reset_parameters: an override in a class deriving one, which
    # nothing in the file names (a call from the forward would), is set-up (a ZeroBiasLinear(nn.Linear))
    setup |= {id(m) for c in ast.walk(tree) if isinstance(c, ast.ClassDef)
              and any(layer_call(ast.Call(func=b, args=[], keywords=[])) for b in c.bases)
              for m in c.body if isinstance(m, ast.FunctionDef) and m.name in _LAYER_INIT_HOOKS
              and not m.decorator_list and not refs.get(m.name)}

    def called_in_setup(r: ast.AST, parent: ast.AST, method: bool) -> bool:
        if method and not (isinstance(r, ast.Attribute) and isinstance(r.value, ast.Name) and r.value.id == "self"):
            return False
        if not method and not (isinstance(r, ast.Name) and isinstance(r.ctx, ast.Load)):
            return False
        # called, or handed alone to `self.apply(...)`, which calls it on each submodule there and keeps nothing
        applied = isinstance(parent, ast.Call) and isinstance(parent.func, ast.Attribute) and \
            parent.func.attr == "apply" and isinstance(parent.func.value, ast.Name) and \
            parent.func.value.id == "self" and parent.args == [r] and not parent.keywords
        # or handed to a torch layer's constructor (`activation=sq_relu`), which runs it only in its own forward
        ctor = parent_of.get(id(parent)) if isinstance(parent, ast.keyword) else parent
        handed = not method and layer_call(ctor) and r is not ctor.func
        return isinstance(parent, ast.Call) and (parent.func is r or applied) and owner.get(id(r)) in setup or \
            handed and owner.get(id(r)) in setup
    classes = [] if _dynamic_names(tree) or any(
        isinstance(n, ast.Attribute) and n.attr in _REFLECTIVE and owner.get(id(n)) not in setup and not (
            isinstance(n.value, ast.Call) and getattr(n.value.func, "id", "") == "super")   # super().forward
        for n in ast.walk(tree)) else _own_classes(tree)
    grew = True
    while grew:
        grew = False
        for c in classes:   # a module class whose instances only set-up calls: its forward is set-up
            forward = next((m for m in c.body if isinstance(m, ast.FunctionDef) and m.name == "forward"), None)
            if forward is not None and id(forward) not in setup and _called_only_in(c, setup, owner, refs, parent_of):
                setup.add(id(forward))
                grew = True
        for f in funcs:
            if id(f) in setup or not all(plain_decorator(d) for d in f.decorator_list):
                continue   # a decorator may keep the function to call later; torch.no_grad() only wraps it
            method = id(f) in methods
            if not method and owner.get(id(f)) not in setup and id(f) not in top:   # set-up code's, a method's
                continue
            uses = [(r, parent) for r, parent in refs.get(f.name, []) if r is not f and not (
                id(f) in top and isinstance(r, ast.Name) and f.name in local_names.get(owner.get(id(r)), ()))
                and not (owner.get(id(r)) == id(f) and isinstance(parent, ast.Call) and parent.func is r)]   # recursion
            if uses and all(called_in_setup(r, parent, method) for r, parent in uses):
                setup.add(id(f))
                grew = True
    return {i for i in setup if not (i in methods and methods[i].name == "__init__")}


# decorators that only wrap the function (a grad mode, a cache of its results), keeping nothing
# anyone else could call: a set-up helper decorated so stays set-up
_PLAIN_DECORATORS = frozenset(("torch.no_grad", "torch.inference_mode", "torch.enable_grad", "torch.autograd.no_grad",
                               "torch.autograd.grad_mode.no_grad", "torch.autograd.grad_mode.inference_mode",
                               "functools.lru_cache", "functools.cache"))


# the methods a torch layer's __init__ calls on itself (nn.Linear, nn.Conv2d, nn.MultiheadAttention)
_LAYER_INIT_HOOKS = frozenset(("reset_parameters", "_reset_parameters"))


# what reaches a module's submodules without naming them, outside set-up (`for m in self.children()`)
_REFLECTIVE = frozenset(("children", "named_children", "modules", "named_modules", "_modules", "apply", "__dict__",
                         "__getattr__", "__getattribute__", "_call_impl", "__call__", "forward"))


def _own_classes(tree: ast.Module) -> list[ast.ClassDef]:
    """The file's top-level classes but ModelNew that no class derives from, undecorated."""
    bases = {ast.unparse(b).rpartition(".")[2] for c in ast.walk(tree) if isinstance(c, ast.ClassDef) for b in c.bases}
    return [c for c in tree.body if isinstance(c, ast.ClassDef) and c.name != "ModelNew" and not c.decorator_list
            and c.name not in bases]


def _called_only_in(cls: ast.ClassDef, setup: set[int], owner, refs, parent_of) -> bool:
    """Every instance of `cls` is built in set-up as `self.X = cls(...)`, and self.X is called
    only there (a dummy call sizing a head); elsewhere self.X is only read through for data
    (`self.X.conv.weight`, `self.X[0].weight`), never called, handed on or stored, and no string
    names cls or X."""
    attrs, called = set(), 0
    for r, parent in refs.get(cls.name, []):
        if not (isinstance(r, ast.Name) and isinstance(parent, ast.Call) and parent.func is r and
                owner.get(id(r)) in setup):
            return False   # named as anything but a call in set-up (a string, a base, handed on)
        assign = parent_of.get(id(parent))
        if not (isinstance(assign, ast.Assign) and assign.value is parent and len(assign.targets) == 1 and
                _self_attribute(assign.targets[0])):
            return False
        attrs.add(assign.targets[0].attr)
    for attr in attrs:
        for r, parent in refs.get(attr, []):
            if isinstance(r, ast.Name):
                continue   # a local of the same name
            if not _self_attribute(r):
                return False   # a string, or another object's attribute of that name
            top = r   # self.X.conv.weight, self.X[0].weight
            while isinstance(parent_of.get(id(top)), (ast.Attribute, ast.Subscript)) and parent_of[id(top)].value is top:
                top = parent_of[id(top)]
                if isinstance(top, ast.Attribute) and top.attr in _REFLECTIVE:
                    return False   # self.X.forward, self.X.__call__: the forward, reached by another name
            up = parent_of.get(id(top))
            in_setup = owner.get(id(r)) in setup
            if in_setup and top is r and (isinstance(up, ast.Call) and up.func is r or isinstance(r.ctx, ast.Store)):
                called += isinstance(up, ast.Call) and up.func is r
                continue   # self.X = cls(...), self.X(dummy)
            if top is r or isinstance(r.ctx, ast.Store) or (not in_setup and isinstance(up, ast.Call) and
                                                            up.func is top):
                return False   # handed on, stored, rebound, or run from the forward
    return called > 0   # and set-up runs it: a class only built keeps its forward where it was


def _self_attribute(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self"


_DYNAMIC_CALLS = {"globals", "vars", "locals", "eval", "exec", "__import__"}


def _dynamic_names(tree: ast.Module) -> bool:
    """Does the file look names up by computed strings: globals() / vars() / eval / exec,
    a `__dict__` or `sys.modules`, getattr with a name that is not a literal (setattr and hasattr
    on self store and test, `setattr(self, f"fc{i}", ...)`, and reach nothing)?"""
    called = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    for n in ast.walk(tree):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name):
            if n.func.id in _DYNAMIC_CALLS or (n.func.id in ("getattr", "setattr", "hasattr") and not (
                    len(n.args) > 1 and isinstance(n.args[1], ast.Constant)) and not (
                    n.func.id != "getattr" and n.args and isinstance(n.args[0], ast.Name) and n.args[0].id == "self")):
                return True   # storing or testing on self by a computed name reaches nothing; reading may
        # sys.modules, a dict; not `self.modules()`, a module's own submodules (the weight-init loop)
        if isinstance(n, ast.Attribute) and (n.attr in ("__dict__", "__globals__", "__builtins__") or
                                             (n.attr == "modules" and id(n) not in called)):
            return True
    return False


def _own_nodes(fn: ast.AST):
    """The nodes of `fn`'s body that run when it runs: not those of a def, lambda or class
    inside it (a lambda __init__ stores runs later, when forward calls it)."""
    todo = list(ast.iter_child_nodes(fn))
    while todo:
        n = todo.pop()
        yield n
        if not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            todo.extend(ast.iter_child_nodes(n))


def walk_regions(tree: ast.Module, aliases, self_attrs, unbound) -> list[Site]:
    dead = _dead_defs(tree)
    parent_of = {id(c): n for n in ast.walk(tree) for c in ast.iter_child_nodes(n)}

    def layer_call(node) -> bool:   # nn.TransformerEncoderLayer(...): a torch layer's constructor
        return isinstance(node, ast.Call) and any(is_layer(p) for p in resolve(node.func, aliases, self_attrs, unbound))

    def plain_decorator(d) -> bool:   # @torch.no_grad() on a weight-init helper: the call as it was, without grad
        if isinstance(d, ast.Name) and d.id in ("staticmethod", "classmethod") and d.id not in aliases:
            return True   # torchvision's `@staticmethod def depthwise_conv(...)`: bound otherwise, still counted
        return any(p in _PLAIN_DECORATORS for p in resolve(d.func if isinstance(d, ast.Call) else d, aliases, self_attrs,
                                                      unbound))
    setup_methods = _setup_methods(tree, parent_of, layer_call, plain_decorator)
    backward_used = any(isinstance(n, ast.Attribute) and n.attr == "backward" and isinstance(n.ctx, ast.Load)
                        for n in ast.walk(tree))
    sites: list[Site] = []
    stack: list[tuple[ast.AST, ast.AST | None, str, ast.AST | None, ast.ClassDef | None, bool]] = \
        [(s, tree, SETUP, None, None, False) for s in reversed(tree.body)]
    while stack:
        node, parent, region, func, cls, dead_cls = stack.pop()
        sites.append(Site(node, parent, region, func, cls))
        children: list[tuple[ast.AST, str, ast.AST | None, ast.ClassDef | None, bool]] = []
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if region in (JIT, DEAD):
                inner = region
            elif is_jit(node, aliases, self_attrs, unbound):
                inner = JIT
            elif id(node) in dead or dead_cls:
                inner = DEAD
            elif (isinstance(parent, ast.ClassDef) and node.name == "__init__") or id(node) in setup_methods:
                inner = SETUP
            elif (isinstance(parent, ast.ClassDef) and node.name == "backward" and not backward_used
                  and any("autograd" in p for b in parent.bases
                          for p in resolve(b, aliases, self_attrs, unbound))):
                inner = SETUP   # autograd backward: not on the evaluated forward path
            else:
                inner = FORWARD
            children += [(d, region, func, cls, False) for d in node.decorator_list]
            children += [(node.args, inner, node, cls, False)]
            children += [(s, inner, node, cls, False) for s in node.body]
            if node.returns is not None:
                children.append((node.returns, region, func, cls, False))
        elif isinstance(node, ast.Lambda):   # set-up's when set-up hands it to a torch layer (`activation=lambda x: ...`)
            handed = isinstance(parent, ast.keyword) or (layer_call(parent) and node in parent.args)
            inner = region if region in (JIT, DEAD) or (region == SETUP and handed and layer_call(
                parent_of.get(id(parent)) if isinstance(parent, ast.keyword) else parent)) else FORWARD
            children = [(c, inner, node, cls, False) for c in ast.iter_child_nodes(node)]
        elif isinstance(node, ast.ClassDef):
            is_dead = id(node) in dead
            children = [(c, region, func, cls, False) for c in (*node.decorator_list, *node.bases, *node.keywords)]
            children += [(s, region, func, node, is_dead) for s in node.body]
        else:
            children = [(c, region, func, cls, False) for c in ast.iter_child_nodes(node)]
        for c, r, f, k, dc in reversed(children):
            stack.append((c, node, r, f, k, dc))
    return sites


def library_holders(tree: ast.Module, sites, aliases, self_attrs, unbound) -> frozenset[str]:
    """Names and self attributes holding torch.nn compute modules (nn.Conv2d(...), a
    Sequential or ModuleList of them, an instance of a class of the file deriving from one),
    and loop variables running over them."""
    layer_classes: set[str] = set()    # class C(nn.Conv2d), class D(C): their instances are layers
    classes = [c for c in ast.walk(tree) if isinstance(c, ast.ClassDef) and c.bases]
    for _ in range(3):
        layer_classes |= {c.name for c in classes if any(
            (isinstance(b, ast.Name) and b.id in layer_classes) or
            any(is_layer(p) for p in resolve(b, aliases, self_attrs, unbound)) for b in c.bases)}

    def layer_class(expr: ast.AST) -> bool:   # nn.Conv2d, a file's layer class, partial(nn.Conv2d, ...)
        if isinstance(expr, ast.Call) and expr.args and getattr(expr.func, "attr", getattr(expr.func, "id", "")) == \
                "partial":
            return layer_class(expr.args[0])
        return (isinstance(expr, ast.Name) and expr.id in layer_classes | factories) or \
            any(is_layer(p) for p in resolve(expr, aliases, self_attrs, unbound))
    # names bound to a layer class or a partial of one (`Conv = partial(nn.Conv2d, ...)`), and to a
    # dict, list or tuple holding one (`ACTS = {"gelu": nn.GELU}`): what calling them builds is a layer
    factories: set[str] = set()
    containers: set[str] = set()
    for _ in range(2):
        for s in sites:
            n = s.node
            if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name):
                items = getattr(n.value, "values", getattr(n.value, "elts", None))
                if layer_class(n.value):
                    factories.add(n.targets[0].id)
                elif isinstance(n.value, (ast.Dict, ast.List, ast.Tuple)) and any(layer_class(x) for x in items):
                    containers.add(n.targets[0].id)

    def holds_layer(expr: ast.AST) -> bool:
        # nn.Conv2d(...), nn.ModuleList([...]), [nn.Linear(...) for ...]; not
        # nn.Parameter(nn.Linear(...).weight), which keeps only a weight
        if isinstance(expr, ast.Call):
            paths = resolve(expr.func, aliases, self_attrs, unbound)
            f = expr.func.value if isinstance(expr.func, ast.Subscript) else None
            if any(is_layer(p) for p in paths) or (isinstance(expr.func, ast.Name) and expr.func.id in
                                                   layer_classes | factories) or \
                    (isinstance(f, ast.Name) and f.id in containers):
                return True
            container = any(p.split(".")[-1] in ("ModuleList", "ModuleDict") for p in paths) or \
                (isinstance(expr.func, ast.Name) and expr.func.id in ("list", "tuple", "dict"))
            return container and any(holds_layer(a) for a in (*expr.args, *(k.value for k in expr.keywords)))
        if isinstance(expr, (ast.List, ast.Tuple, ast.Set)):
            return any(holds_layer(e) for e in expr.elts)
        if isinstance(expr, ast.Dict):
            return any(holds_layer(v) for v in expr.values)
        if isinstance(expr, (ast.ListComp, ast.GeneratorExp, ast.SetComp)):
            return holds_layer(expr.elt)
        if isinstance(expr, ast.DictComp):
            return holds_layer(expr.value)
        if isinstance(expr, ast.IfExp):
            return holds_layer(expr.body) or holds_layer(expr.orelse)
        return False
    found: set[str] = set()
    for s in sites:
        n = s.node
        if isinstance(n, (ast.Assign, ast.AnnAssign)) and n.value is not None and holds_layer(n.value):
            for t in getattr(n, "targets", None) or [n.target]:
                for leaf in ast.walk(t):
                    if isinstance(leaf, ast.Name) and isinstance(leaf.ctx, ast.Store):
                        found.add(leaf.id)
                    elif isinstance(leaf, ast.Attribute) and isinstance(leaf.ctx, ast.Store):
                        found.add("self." + leaf.attr)
        elif (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
              and n.func.attr in ("add_module", "register_module") and len(n.args) >= 2
              and isinstance(n.args[0], ast.Constant) and holds_layer(n.args[1])):
            found.add(f"self.{n.args[0].value}")
        elif (isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "setattr"
              and len(n.args) >= 3 and isinstance(n.args[1], ast.Constant) and holds_layer(n.args[2])):
            found.add(f"self.{n.args[1].value}")
    for _ in range(2):   # `for layer in self.layers:` and `blk = self.blocks[0]`
        for s in sites:
            n = s.node
            if isinstance(n, (ast.For, ast.comprehension)) and _mentions(n.iter, found):
                found.update(x.id for x in ast.walk(n.target) if isinstance(x, ast.Name))
            elif isinstance(n, ast.Assign) and isinstance(n.value, (ast.Subscript, ast.Attribute, ast.Name)) \
                    and _mentions(n.value, found, shallow=True):
                found.update(t.id for t in n.targets if isinstance(t, ast.Name))
    return frozenset(found)


def holder(node: ast.AST) -> str | None:
    """'self.X' for self.X, 'name' for a bare name: how library_holders spells holders."""
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
        return "self." + node.attr
    if isinstance(node, ast.Name):
        return node.id
    return None


def _mentions(expr: ast.AST, holders: set[str] | frozenset[str], shallow: bool = False) -> bool:
    if shallow:
        while isinstance(expr, ast.Subscript):
            expr = expr.value
        return holder(expr) in holders
    return any(holder(x) in holders for x in ast.walk(expr))
