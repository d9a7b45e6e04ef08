"""Model.__init__ as ModelNew takes it over (tools/dialect/kernelbook_model.py `model_new`):
its parameter defaults written as the values Python made of them, and what only the
problem's forward needed left out (a lambda, a torch function, a compiled method, a hook on a
submodule)."""
from __future__ import annotations

import ast

from tools.dialect.inductor_wrapper import call_name, dotted


def defaults_as_values(init: ast.FunctionDef, made) -> None:
    """Model.__init__'s parameter defaults written as the values Python made of them
    (`hidden=args.hidden` of an argparse at import -> `hidden=32`), where each is a literal:
    ModelNew then needs none of what computed them."""
    if getattr(made, "__qualname__", "") != "Model.__init__":
        return   # not Model's own (a decorator's wrapper, a base's)
    values = list(made.__defaults__ or ())
    defaults = init.args.defaults
    if len(values) == len(defaults):
        init.args.defaults = [_literal_node(v, d) for v, d in zip(values, defaults)]
    kw = made.__kwdefaults__ or {}
    init.args.kw_defaults = [d if d is None else _literal_node(kw.get(a.arg, d), d)
                             for a, d in zip(init.args.kwonlyargs, init.args.kw_defaults)]


def _literal_node(value, node: ast.expr) -> ast.expr:
    """`node` as it is where it is a literal already (`[]`, `-1`: a mutable default's value may
    have changed since), else the value as a literal where it is one."""
    try:
        ast.literal_eval(node)
        return node
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        pass
    text = literal_text(value) if not isinstance(value, ast.AST) else None
    return node if text is None else ast.parse(text, mode="eval").body


def literal_text(value) -> str | None:
    """Python source for a Python input value (0.5, 3, True, None, (2, 2), "mean"), or None."""
    text = repr(value)
    try:
        return text if ast.literal_eval(text) == value else None
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None


def _torch_callable(expr: ast.AST) -> bool:
    """`F.relu`, `torch.tanh`, `nn.GELU`: a torch function or class named, not called."""
    return isinstance(expr, (ast.Attribute, ast.Name)) and \
        dotted(expr).split(".")[0] in ("F", "torch", "nn", "functional")


_COMPILERS = ("torch.compile", "torch.jit.script", "torch.jit.trace")


def _plain_function(value) -> bool:
    """A function, a builtin or a functools.partial of one: no weights, nothing but a call."""
    import functools
    import types
    while isinstance(value, functools.partial):
        value = value.func
    return isinstance(value, (types.FunctionType, types.BuiltinFunctionType, types.MethodWrapperType))


def _chosen_callable(expr: ast.AST, methods=frozenset()) -> bool:
    """A torch function or class named, a lambda, one of the class's own `methods` as `self.name`
    (`self._combine = self._concat`), or one chosen among such in set-up: `F.silu if act == "silu"
    else F.relu`, `{"silu": F.silu, "relu": F.relu}[act]`, `getattr(F, act)`."""
    if isinstance(expr, ast.Lambda) or _torch_callable(expr) or isinstance(expr, ast.Attribute) and \
            isinstance(expr.value, ast.Name) and expr.value.id == "self" and expr.attr in methods:
        return True
    if isinstance(expr, ast.IfExp):
        return _chosen_callable(expr.body, methods) and _chosen_callable(expr.orelse, methods)
    if isinstance(expr, ast.Subscript) and isinstance(expr.value, ast.Dict):
        return bool(expr.value.values) and all(_chosen_callable(v, methods) for v in expr.value.values)
    return isinstance(expr, ast.Call) and dotted(expr.func) == "getattr" and len(expr.args) == 2 and \
        not expr.keywords and _torch_callable(expr.args[0])


def drop_forward_helpers(init: ast.FunctionDef, kept: list[ast.stmt], instance=None) -> bool:
    """`self.mlpf = lambda x: ...` in __init__ (minGPT's block) is the problem's forward's
    helper: the seed's forward never calls it, and set-up nothing else reads it (by name or
    string) does not need it either; it is left out, as the forward is (a lambda running
    torch modules is work the guards would refuse). So are `self.act = F.relu`, a torch
    function kept for the forward, and `self._f = torch.compile(self._inner)`, the forward
    compiled, or one chosen in set-up (`_chosen_callable`); given the built module (`instance`),
    any attribute that holds a plain function there (`self.act = ACT2FN[act]`, a module-level
    table's F.gelu), not a module or a tensor; and `self._combine = self._concat`, a method of
    the class's own chosen for the forward (what only it reached goes too: set_up_members
    again). Whether anything was left out."""
    def names(nodes):
        out = set()
        for n in (x for node in nodes for x in ast.walk(node)):
            if isinstance(n, ast.Attribute):
                out.add(n.attr)
            elif isinstance(n, ast.Name):
                out.add(n.id)
            elif isinstance(n, ast.Constant) and isinstance(n.value, str):
                out.add(n.value)
        return out
    dropped = False
    methods = {m.name for m in kept if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))}
    for stmt in list(init.body):
        target = stmt.targets[0] if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 else None
        if not (isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self"):
            continue
        if not (_chosen_callable(stmt.value, methods) or _plain_function(getattr(instance, target.attr, None)) or
                (isinstance(stmt.value, ast.Call) and dotted(stmt.value.func) in _COMPILERS)):
            continue
        rest = [n for n in init.body if n is not stmt] + kept
        if target.attr not in names(rest):
            init.body.remove(stmt)
            dropped = True
    hooks = []   # `self.a.register_forward_hook(...)`, its handle kept or not: captured with the forward, which calls self.a
    for stmt in list(init.body):
        holder, _, hook = call_name(stmt).rpartition(".")
        handle = stmt.targets[0] if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 else None
        if isinstance(stmt, ast.Expr) or handle is not None and \
                (handle.attr if isinstance(handle, ast.Attribute) else getattr(handle, "id", "")) not in \
                names([n for n in init.body if n is not stmt] + kept):
            if hook in ("register_forward_hook", "register_forward_pre_hook") and holder.startswith("self."):
                init.body.remove(stmt)
                hooks.append(stmt)
    for stmt in list(init.body):   # and the hook's own def, which nothing else names now
        if hooks and isinstance(stmt, ast.FunctionDef) and stmt.name in names(hooks) and \
                stmt.name not in names([n for n in init.body if n is not stmt] + kept):
            init.body.remove(stmt)
    dropped = dropped or bool(hooks)
    if not init.body:
        init.body.append(ast.Pass())
    return dropped


def conditional_bindings(node: ast.stmt, namespace: dict | None) -> dict[str, ast.stmt]:
    """Names a top-level `if` or `try` binds (`try: from torch.nn import RMSNorm as Norm /
    except ImportError: ...`), each written as the value the problem's module holds now: an
    import of the module or class it is, a literal, or the file's own def of that name in the
    statement. A seed carries these, not the branch (KernelBench's static checker reads any
    try/except as a possible fallback). A value none of these can write is left out. An
    `if TYPE_CHECKING:` block's imports are carried as they are (annotations name them)."""
    import types
    if isinstance(node, ast.If) and ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING"):
        return {(a.asname or a.name).split(".")[0]: n for n in node.body if isinstance(n, (ast.Import, ast.ImportFrom))
                for a in n.names}    # what annotations name: importable, only not imported at run time
    if namespace is None or not isinstance(node, (ast.If, ast.Try)):
        return {}
    own: dict[str, list] = {}
    names: set[str] = set()
    todo = list(ast.iter_child_nodes(node))
    while todo:
        n = todo.pop()
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            own.setdefault(n.name, []).append(n)
            names.add(n.name)
            continue
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            names.add(n.id)
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in n.names)
        todo.extend(ast.iter_child_nodes(n))
    out = {}
    for name in sorted(names):
        if name not in namespace:
            continue
        v = namespace[name]
        home = namespace.get("__name__")
        if isinstance(v, types.ModuleType):
            text = f"import {v.__name__}" if v.__name__ == name else f"import {v.__name__} as {name}"
        elif getattr(v, "__module__", None) == home and len(own.get(name, [])) == 1:
            out[name] = own[name][0]
            continue
        elif isinstance(v, (type, types.FunctionType)) and getattr(v, "__module__", home) != home and \
                "." not in v.__qualname__ and "<" not in v.__qualname__:
            text = f"from {v.__module__} import {v.__qualname__}" + (f" as {name}" if v.__qualname__ != name else "")
        elif isinstance(v, (bool, int, float, str, type(None))) and literal_text(v) is not None:
            text = f"{name} = {literal_text(v)}"
        else:
            continue
        out[name] = ast.parse(text).body[0]
    return out


def lazy_annotations(tree: ast.Module) -> bool:
    """Whether the file has `from __future__ import annotations`; if so, the annotations of
    every function's signature in `tree` are written as the strings the future import makes of
    them (a seed carries no future import: `dims: Sequence[int]` would be evaluated there, and
    need what only `if TYPE_CHECKING:` imported). A class attribute's annotation stays an
    expression (a dataclass looks a string up in sys.modules, where an exec'd seed is not);
    `conditional_bindings` carries the TYPE_CHECKING imports it may name. In place."""
    if not any(isinstance(n, ast.ImportFrom) and n.module == "__future__" and any(a.name == "annotations"
                                                                                  for a in n.names)
               for n in tree.body):
        return False
    for n in ast.walk(tree):   # a class's or the module's own annotations stay (a dataclass reads them)
        if isinstance(n, ast.arg) and n.annotation is not None:
            n.annotation = ast.Constant(ast.unparse(n.annotation))
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.returns is not None:
            n.returns = ast.Constant(ast.unparse(n.returns))
    return True


def top_level_assignment(node: ast.stmt) -> tuple[set[str], set[str]]:
    """(names a top-level assignment binds, names it changes): `A, B = ...` binds A and B; `X.__new__.__defaults__ =
    ...` (EfficientNet-PyTorch's namedtuple defaults), `X[k] = v` and `X += v` change X, so they go with X's binding
    rather than stand for it."""
    bound, changed = set(), set()
    todo = [node.target] if isinstance(node, (ast.AnnAssign, ast.AugAssign)) else list(node.targets)
    while todo:
        t = todo.pop()
        if isinstance(t, (ast.Tuple, ast.List)):
            todo += t.elts
        elif isinstance(t, ast.Starred):
            todo.append(t.value)
        elif isinstance(t, ast.Name):
            (changed if isinstance(node, ast.AugAssign) else bound).add(t.id)
        elif _root(t) is not None:   # an attribute or a subscript of a name (of a call's: nothing the file names)
            changed.add(_root(t))
    return bound, changed


def _root(t: ast.AST) -> str | None:
    while isinstance(t, (ast.Attribute, ast.Subscript)):
        t = t.value
    return t.id if isinstance(t, ast.Name) else None
