"""A candidate's source as the guards read it, and the helpers they share.

Covers `Finding` (what a guard reports), `Source` (the parsed tree with every node's
region, resolved references, imports and aliases, the names that are the candidate's
own objects or parameters: `parse_source`, once per candidate)
and the small helpers every guard family uses (the source text of a node, a path under
a list of prefixes, the first finding to report). Decides nothing: the guards
(tools/guards/suite.py's STATIC_GUARDS) do.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass
from types import MappingProxyType
from typing import Iterable, Iterator, Mapping

from tools.guards.names import WATCHED_BUILTINS, collect_aliases, literal_getattr, module_bindings, resolve
from tools.guards.own_objects import own_names
from tools.guards.regions import DEAD, Site, library_holders, walk_regions


@dataclass(frozen=True)
class Finding:
    guard: str            # which guard: "torch_compute", "monkeypatch", ...
    message: str          # one sentence a small model can act on
    line: int | None      # 1-based line in the candidate
    reject: bool          # True: verdict "rejected"; False: only a flag
    flag: str             # added to the verdict's flags


@dataclass(frozen=True)
class Ref:
    """A maximal dotted chain (`torch.nn.functional.relu`, `F.relu`, `getattr(torch, "mm")`)
    and every full path it can name after following imports and aliases."""
    node: ast.AST
    paths: tuple[str, ...]
    called: bool
    site: Site


@dataclass(frozen=True)
class Source:
    src: str
    tree: ast.Module
    lines: tuple[str, ...]
    sites: tuple[Site, ...]                      # every node, in document order
    refs: tuple[Ref, ...]                        # resolved chains and builtins
    imports: tuple[tuple[str, ast.AST], ...]     # ("torch.nn.functional", node) per imported name
    aliases: Mapping[str, tuple[str, ...]]       # local name -> dotted paths it is bound to
    self_attrs: Mapping[str, tuple[str, ...]]    # self.X -> dotted paths
    library_names: frozenset[str]                # names / self attrs holding torch.nn compute modules
    methods: Mapping[str, frozenset[str]]        # class name -> names of its methods
    module_names: frozenset[str]                 # names bound at module level (imports, defs too)
    op_namespaces: frozenset[str]                # "mylib" of torch.library ops the file defines ("mylib::op")
    own: frozenset[int]                          # ids of Name nodes that are the candidate's own objects
    params: frozenset[int]                       # ids of Name nodes that are a parameter, not own
    parents: Mapping[int, ast.AST]               # id(node) -> the node it sits in


def parse_source(src: str) -> Source | None:
    """Parse and precompute the facts the guards share; None when it does not parse."""
    try:
        tree = ast.parse(src)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    module_names = module_bindings(tree)
    unbound = frozenset(WATCHED_BUILTINS - module_names)
    aliases, self_attrs, imports = collect_aliases(tree, unbound)
    sites = walk_regions(tree, aliases, self_attrs, unbound)
    parents = {id(s.node): s.parent for s in sites}
    refs = []
    for s in sites:
        n = s.node
        if not (isinstance(n, (ast.Name, ast.Attribute)) or literal_getattr(n)):
            continue
        if isinstance(n, (ast.Name, ast.Attribute)) and not isinstance(n.ctx, ast.Load):
            continue
        p = parents.get(id(n))
        if isinstance(p, ast.Attribute) or (literal_getattr(p) and p.args[0] is n):
            continue   # not the whole chain
        paths = resolve(n, aliases, self_attrs, unbound)
        if paths:
            refs.append(Ref(n, paths, isinstance(p, ast.Call) and p.func is n, s))
    methods = {c.name: frozenset(f.name for f in c.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)))
               for c in ast.walk(tree) if isinstance(c, ast.ClassDef)}
    namespaces = {c.value.split("::")[0] for c in ast.walk(tree) if isinstance(c, ast.Constant)
                  and isinstance(c.value, str) and "::" in c.value} - {"aten", "prims"}
    autograd = frozenset(id(c) for c in ast.walk(tree) if isinstance(c, ast.ClassDef) and any(
        p in ("torch.autograd.Function", "torch.autograd.function.Function")
        for b in c.bases for p in resolve(b, aliases, self_attrs, unbound)))
    own, params = own_names(tree, parents, autograd, lambda n: bool(resolve(n, aliases, self_attrs, unbound)))
    return Source(src=src, tree=tree, lines=tuple(src.splitlines()), sites=tuple(sites),
                  refs=tuple(refs), imports=imports, aliases=aliases, self_attrs=self_attrs,
                  library_names=library_holders(tree, sites, aliases, self_attrs, unbound),
                  methods=MappingProxyType(methods), module_names=frozenset(module_names),
                  op_namespaces=frozenset(namespaces), own=own, params=params, parents=MappingProxyType(parents))


def spell(source: Source, node: ast.AST, limit: int = 60) -> str:
    text = ast.get_source_segment(source.src, node) or ""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def under(path: str, prefixes: Iterable[str]) -> str | None:
    """The first prefix that `path` is, or lies under (component-wise; 'os.spawn*' is a
    plain string prefix)."""
    for pre in prefixes:
        if pre.endswith("*"):
            if path.startswith(pre[:-1]):
                return pre[:-1]
        elif path == pre or path.startswith(pre + "."):
            return pre
    return None


def path_hits(source: Source, prefixes: Iterable[str], with_imports: bool = True,
              skip_dead: bool = False) -> Iterator[tuple[str, ast.AST]]:
    prefixes = tuple(prefixes)
    if with_imports:
        for path, node in source.imports:
            if under(path, prefixes):
                yield path, node
    for r in source.refs:
        if skip_dead and r.site.region == DEAD:
            continue
        for p in r.paths:
            if under(p, prefixes):
                yield p, r.node
                break


def first(findings: Iterable[Finding]) -> Finding | None:
    """The finding to report: a rejecting one before a flag, then the earliest line."""
    return min(findings, key=lambda f: (not f.reject, f.line or 0), default=None)


def line_of(node: ast.AST) -> int | None:
    return getattr(node, "lineno", None)


def fn_name(site: Site) -> str:
    f = site.func
    return getattr(f, "name", "a lambda") if f is not None else "module code"
