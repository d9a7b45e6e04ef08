"""Which names in a candidate provably stand for its own objects, and which are parameters.

A name is the candidate's own when the file shows what it is bound to:

- `self`/`cls`, the first parameter of a method (not a staticmethod) that is never
  rebound there and that only Python binds: the method's name is never read off
  anything but `self`, `super()` or a library class, nor spelled as a string
  (`ModelNew.helper(torch, ...)` would hand it a module);
- the `ctx` of a torch.autograd.Function's static forward/backward, on the same terms;
- a module-level class of the file that nothing else binds, without a metaclass;
- a name bound only to instances of such a class (`cfg = Cfg()`), when the class and its
  own bases define no `__new__`.

Everything else (a helper's parameter, even one named `self`; an imported module; a
call's result) is someone else's: what the guards on setattr, attribute stores and
computed getattr need to know (tools/guards/tampering.py). Used to build a Source;
finds nothing by itself. Not covered: objects reached through attributes or containers
(`self.cfg`, `objs[0]`) never count as own.
"""
from __future__ import annotations

import ast
from typing import Callable, Iterator

_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
_AUTOGRAD_STATIC = frozenset(("forward", "backward", "setup_context", "jvp", "vjp"))


def own_names(tree: ast.Module, parents: dict[int, ast.AST], autograd: frozenset[int],
              is_library: Callable[[ast.AST], bool]) -> tuple[frozenset[int], frozenset[int]]:
    """(ids of Name nodes that are the candidate's own objects, ids of Name nodes that are
    a parameter of the function binding them and not own). `autograd`: ids of ClassDefs
    deriving from torch.autograd.Function; `is_library(node)`: does it name an import?"""
    rebound = _rebound_methods(tree, is_library)
    classes = _own_classes(tree)
    instances = _own_instances(tree, classes)
    own, params = set(), set()
    # each function's parameters and stores, walked once (a converted seed's call() has
    # tens of thousands of names: walking it again for each one took hours)
    param_memo: dict[int, set[str]] = {}
    store_memo: dict[int, set[str]] = {}

    def params_of(fn: ast.AST) -> set[str]:
        if id(fn) not in param_memo:
            param_memo[id(fn)] = set(_params(fn))
        return param_memo[id(fn)]

    def stores_of(fn: ast.AST) -> set[str]:
        if id(fn) not in store_memo:
            store_memo[id(fn)] = _stores(fn)
        return store_memo[id(fn)]
    for n in ast.walk(tree):
        if not isinstance(n, ast.Name):
            continue
        binder = _binder(n, parents, lambda fn: n.id in params_of(fn) or n.id in stores_of(fn))
        if binder is None:   # module level
            if n.id in classes or n.id in instances:
                own.add(id(n))
        elif n.id not in params_of(binder[0]):
            if n.id in instances:
                own.add(id(n))
        elif _receiver(*binder, autograd, rebound) == n.id and n.id not in stores_of(binder[0]):
            own.add(id(n))
        else:
            params.add(id(n))
    return frozenset(own), frozenset(params)


def _params(fn: ast.AST) -> list[str]:
    a = fn.args
    return [x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg) if x is not None]


def _stores(fn: ast.AST) -> set[str]:
    """Names a function body binds or declares global/nonlocal, nested defs included (a
    closure's `nonlocal self` rebinds the method's self)."""
    out = set()
    for n in ast.walk(fn):
        if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
            out.add(n.id)
        elif isinstance(n, (ast.Global, ast.Nonlocal)):
            out.update(n.names)
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            out.update((a.asname or a.name).split(".")[0] for a in n.names)
    return out


def _binder(name: ast.Name, parents: dict[int, ast.AST], binds) -> tuple[ast.AST, ast.AST | None] | None:
    """(the innermost function binding `name` (`binds(fn)`: as a parameter or a store),
    that function's parent); None at module level."""
    node = parents.get(id(name))
    while node is not None:
        if isinstance(node, _FUNCS) and binds(node):
            return node, parents.get(id(node))
        node = parents.get(id(node))
    return None


def _receiver(fn: ast.AST, parent: ast.AST | None, autograd: frozenset[int], rebound: frozenset[str]) -> str | None:
    """The parameter of `fn` that only Python or torch binds to the candidate's own object."""
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) or not isinstance(parent, ast.ClassDef) \
            or fn.name in rebound:
        return None
    positional = [*fn.args.posonlyargs, *fn.args.args]
    static = any((isinstance(d, ast.Name) and d.id == "staticmethod") or
                 (isinstance(d, ast.Attribute) and d.attr == "staticmethod") for d in fn.decorator_list)
    if not positional or (static and not (id(parent) in autograd and fn.name in _AUTOGRAD_STATIC)):
        return None
    return positional[0].arg


def _rebound_methods(tree: ast.Module, is_library: Callable[[ast.AST], bool]) -> frozenset[str]:
    """Names that may reach a method unbound: read as an attribute of anything but `self`,
    `super()` or a library class (`nn.Module.__init__(self)` is torch's method), read as a
    bare name, or spelled as a string."""
    out = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Load):
            v = n.value
            if (isinstance(v, ast.Name) and v.id == "self") or \
                    (isinstance(v, ast.Call) and isinstance(v.func, ast.Name) and v.func.id == "super") or is_library(v):
                continue
            out.add(n.attr)
        elif isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
            out.add(n.id)
        elif isinstance(n, ast.Constant) and isinstance(n.value, str):
            out.add(n.value)
    return frozenset(out)


def _own_classes(tree: ast.Module) -> frozenset[str]:
    """Module-level classes without a metaclass that nothing else binds, anywhere (a
    `global` in a function could rebind one)."""
    bound = list(_module_bindings(tree))
    declared = {x for n in ast.walk(tree) if isinstance(n, ast.Global) for x in n.names}
    return frozenset(s.name for s in tree.body if isinstance(s, ast.ClassDef) and not s.keywords
                     and bound.count(s.name) == 1 and s.name not in declared)


def _module_bindings(tree: ast.Module) -> Iterator[str]:
    """Every module-level binding, once per binding (not inside defs or classes)."""
    todo = list(tree.body)
    while todo:
        n = todo.pop()
        if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
            yield n.id
        elif isinstance(n, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            yield n.name
            continue
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            yield from ((a.asname or a.name).split(".")[0] for a in n.names)
        if not isinstance(n, ast.Lambda):
            todo.extend(ast.iter_child_nodes(n))


def _own_instances(tree: ast.Module, classes: frozenset[str]) -> frozenset[str]:
    """Names every binding of which, anywhere in the file, is `name = OwnClass(...)` of a
    class whose instances are its own: no `__new__`, bases only object or such classes."""
    defs = {s.name: s for s in tree.body if isinstance(s, ast.ClassDef) and s.name in classes}
    plain: set[str] = set()
    for _ in range(len(defs) + 1):   # bases before subclasses, in any order of definition
        plain |= {name for name, c in defs.items()
                  if not any(isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)) and f.name == "__new__"
                             for f in c.body)
                  and all(isinstance(b, ast.Name) and (b.id == "object" or b.id in plain) for b in c.bases)}
    made = {id(t) for n in ast.walk(tree) if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call)
            and isinstance(n.value.func, ast.Name) and n.value.func.id in plain
            for t in n.targets if isinstance(t, ast.Name)}
    good: dict[str, bool] = {}
    for n in ast.walk(tree):
        if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
            good[n.id] = good.get(n.id, True) and id(n) in made
        elif isinstance(n, ast.arg):
            good[n.arg] = False
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            good.update({(a.asname or a.name).split(".")[0]: False for a in n.names})
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Global, ast.Nonlocal)):
            good.update({x: False for x in getattr(n, "names", [getattr(n, "name", None)])})
    return frozenset(k for k, v in good.items() if v)
