"""Reading names in a candidate's AST: every dotted path a chain of names can stand for.

Covers resolving `torch.nn.functional.relu`, `F.relu` and `getattr(torch, "mm")` to full
paths through imports and aliases (`x = torch.mm`, `self.f = F.relu`, class-level
bindings, aliases of aliases), each in its canonical form (`os.sys.modules` is
`sys.modules`: tools/guards/modules.py), imported names too, the builtins the guards watch when nothing shadows them
at module level, and two readings of a path: an nn compute layer, a Triton jit
decorator. Used to build a Source (tools/guards/source.py); finds nothing by itself.
"""
from __future__ import annotations

import ast
from types import MappingProxyType
from typing import Iterator

from tools.guards.modules import canonical


def words(s: str) -> frozenset[str]:
    return frozenset(s.split())


WATCHED_BUILTINS = words("eval exec compile __import__ getattr setattr delattr open globals vars "
                         "locals breakpoint type id hash")


JIT_DECORATORS = words("jit autotune heuristics")


# a torch.nn attribute that is a container or init helper, not a compute layer
_NN_CONTAINERS = words("Module ModuleList ModuleDict Parameter ParameterList ParameterDict Buffer")


def _chain(node: ast.AST) -> tuple[ast.AST, list[str]] | None:
    """(root, [attr, ...]) for `a.b.c` and `getattr(a, "b")`; None for anything else."""
    parts: list[str] = []
    while True:
        if isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        elif literal_getattr(node):
            parts.append(node.args[1].value)
            node = node.args[0]
        elif isinstance(node, ast.Name):
            return node, parts[::-1]
        else:
            return None


def literal_getattr(node: ast.AST) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr"
            and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str))


def resolve(node: ast.AST, aliases, self_attrs, unbound: frozenset[str]) -> tuple[str, ...]:
    """Every canonical path (tools/guards/modules.py) the chain `node` can name."""
    paths = (c for p in _resolve_raw(node, aliases, self_attrs, unbound) for c in canonical(p))
    return tuple(dict.fromkeys(paths))


def _resolve_raw(node: ast.AST, aliases, self_attrs, unbound: frozenset[str]) -> tuple[str, ...]:
    got = _chain(node)
    if got is None:
        return ()
    root, parts = got
    if root.id in ("self", "cls") and parts and parts[0] in self_attrs:
        return tuple(".".join([p, *parts[1:]]) for p in self_attrs[parts[0]])
    if root.id in aliases:
        return tuple(".".join([p, *parts]) for p in aliases[root.id])
    if root.id in unbound and root.id in WATCHED_BUILTINS:
        return (".".join(["builtins", root.id, *parts]),)
    return ()


def module_bindings(tree: ast.Module) -> set[str]:
    """Names bound at module level (not inside defs or classes). Only these shadow a
    builtin everywhere: a parameter named `open` somewhere must not blind the guards
    to open() elsewhere."""
    names, todo = set(), list(tree.body)
    while todo:
        n = todo.pop()
        if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
            names.add(n.id)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(n.name)
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in n.names)
        if not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            todo.extend(ast.iter_child_nodes(n))
    return names


def collect_aliases(tree: ast.Module, unbound: frozenset[str]):
    aliases: dict[str, set[str]] = {}
    self_attrs: dict[str, set[str]] = {}
    imports: list[tuple[str, ast.AST]] = []
    for n in ast.walk(tree):
        if isinstance(n, ast.Import):
            for a in n.names:
                imports.extend((c, n) for c in canonical(a.name))
                if a.asname:
                    aliases.setdefault(a.asname, set()).add(a.name)
                else:
                    top = a.name.split(".")[0]
                    aliases.setdefault(top, set()).add(top)
        elif isinstance(n, ast.ImportFrom):
            mod = "." * n.level + (n.module or "")
            for a in n.names:
                full = f"{mod}.{a.name}" if mod else a.name
                imports.extend((c, n) for c in canonical(full))
                if a.name != "*":
                    aliases.setdefault(a.asname or a.name, set()).add(full)
    pairs = []   # (target, value) of simple bindings: x = torch.mm, self.f = F.relu
    for n in ast.walk(tree):
        if isinstance(n, ast.Assign):
            for t in n.targets:
                pairs.extend(_unpack(t, n.value))
        elif isinstance(n, (ast.AnnAssign, ast.NamedExpr)) and n.value is not None:
            pairs.extend(_unpack(n.target, n.value))
    for _ in range(4):   # aliases of aliases
        changed = False
        for target, value in pairs:
            paths = resolve(value, aliases, self_attrs, unbound)
            if not paths:
                continue
            if isinstance(target, ast.Name):
                table, key = aliases, target.id
            elif (isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name)
                  and target.value.id in ("self", "cls")):
                table, key = self_attrs, target.attr
            else:
                continue
            before = len(table.get(key, ()))
            table.setdefault(key, set()).update(paths)
            changed |= len(table[key]) != before
        if not changed:
            break
    # class-level `act = torch.relu` is reached through self.act
    for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
        for stmt in cls.body:
            if isinstance(stmt, ast.Assign):
                for t in stmt.targets:
                    if isinstance(t, ast.Name):
                        paths = resolve(stmt.value, aliases, self_attrs, unbound)
                        if paths:
                            self_attrs.setdefault(t.id, set()).update(paths)
    freeze = lambda d: MappingProxyType({k: tuple(sorted(v)) for k, v in d.items()})  # noqa: E731
    return freeze(aliases), freeze(self_attrs), tuple(imports)


def _unpack(target: ast.AST, value: ast.AST) -> Iterator[tuple[ast.AST, ast.AST]]:
    if isinstance(target, (ast.Tuple, ast.List)) and isinstance(value, (ast.Tuple, ast.List)) \
            and len(target.elts) == len(value.elts):
        for t, v in zip(target.elts, value.elts):
            yield from _unpack(t, v)
    else:
        yield target, value


def is_layer(path: str) -> bool:
    parts = path.split(".")
    return (path.startswith("torch.nn.") and parts[-1][:1].isupper()
            and parts[-1] not in _NN_CONTAINERS and "init" not in parts)


def is_jit(fn: ast.AST, aliases, self_attrs, unbound) -> bool:
    for d in getattr(fn, "decorator_list", ()):
        target = d.func if isinstance(d, ast.Call) else d
        for p in resolve(target, aliases, self_attrs, unbound):
            if p.startswith("triton.") and p.split(".")[-1] in JIT_DECORATORS:
                return True
    return False


_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
_COMPS = (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)


def global_loads(tree: ast.AST) -> set[int]:
    """ids of the Name loads under `tree` that reach a module-level binding: not a parameter
    or a name assigned in an enclosing function, lambda or comprehension (`def __init__(self,
    drop_path=0.1)` reads its parameter, not a top-level `def drop_path`). A default, a
    decorator or an annotation is read where the function is defined, so in the outer scope."""
    out: set[int] = set()

    def visit(node: ast.AST, shadowed: frozenset) -> None:
        if isinstance(node, _FUNCS):
            a = node.args
            outer = [*a.defaults, *[d for d in a.kw_defaults if d is not None]]
            if not isinstance(node, ast.Lambda):
                outer += [*node.decorator_list, *([node.returns] if node.returns else []),
                          *[x.annotation for x in _params(a) if x.annotation is not None]]
            for x in outer:
                visit(x, shadowed)
            inner = shadowed | _locals(node)
            for x in (node.body if isinstance(node.body, list) else [node.body]):
                visit(x, inner)
            return
        if isinstance(node, _COMPS):
            targets = frozenset(n.id for g in node.generators for n in ast.walk(g.target) if isinstance(n, ast.Name))
            for i, g in enumerate(node.generators):
                visit(g.iter, shadowed if i == 0 else shadowed | targets)
                for c in g.ifs:
                    visit(c, shadowed | targets)
            for x in ([node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]):
                visit(x, shadowed | targets)
            return
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id not in shadowed:
            out.add(id(node))
        for child in ast.iter_child_nodes(node):
            visit(child, shadowed)

    visit(tree, frozenset())
    return out


def _params(a: ast.arguments) -> list[ast.arg]:
    return [*a.posonlyargs, *a.args, *a.kwonlyargs, *([a.vararg] if a.vararg else []), *([a.kwarg] if a.kwarg else [])]


def _locals(fn) -> frozenset:
    """The names a function binds in its own scope: its parameters and what its body assigns,
    imports or defines (not inside a nested function or class), less those it declares global."""
    names = {p.arg for p in _params(fn.args)}
    declared: set[str] = set()
    todo = list(fn.body) if isinstance(fn.body, list) else [fn.body]
    while todo:
        n = todo.pop()
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(n.name)
            continue
        if isinstance(n, (ast.Lambda, *_COMPS)):
            continue
        if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
            names.add(n.id)
        elif isinstance(n, ast.ExceptHandler) and n.name:
            names.add(n.name)
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in n.names)
        elif isinstance(n, ast.Global):
            declared.update(n.names)
        elif isinstance(n, ast.NamedExpr) and isinstance(n.target, ast.Name):
            names.add(n.target.id)
        todo.extend(ast.iter_child_nodes(n))
    return frozenset(names - declared)
