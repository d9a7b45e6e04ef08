"""The guards on ModelNew doing its own work in Triton: a kernel, no fallback, no Model.

`check_triton_kernel` rejects a file that defines no @triton.jit kernel,
`check_fallback` a try/except whose handler runs other code when the kernel fails (or
a `return` in `finally`), `check_reference_model` a candidate that subclasses, calls or
imports the reference Model or its input makers. Whether a kernel really ran is a run
time fact: the judge's trials check it.
"""
from __future__ import annotations

import ast

from tools.guards.names import JIT_DECORATORS, is_jit
from tools.guards.regions import DEAD
from tools.guards.source import Finding, Source, line_of
from tools.settings import GuardSettings


def check_fallback(source: Source, settings: GuardSettings) -> Finding | None:
    """A try/except whose handler does work (falls back when the kernel fails)."""
    import_errors = {"ImportError", "ModuleNotFoundError"}
    for s in source.sites:
        n = s.node
        if not isinstance(n, (ast.Try, getattr(ast, "TryStar", ast.Try))) or s.region == DEAD or not n.handlers:
            continue
        if s.func is None and s.cls is None and all(isinstance(b, (ast.Import, ast.ImportFrom)) for b in n.body):
            names = [x.id for h in n.handlers if h.type is not None
                     for x in ast.walk(h.type) if isinstance(x, ast.Name)]
            if names and set(names) <= import_errors:
                continue   # try: import x / except ImportError: the usual optional import
        for h in n.handlers:
            if _handler_does_work(h):
                return Finding("fallback", f"the try/except at line {n.lineno} runs other code when the "
                               "kernel fails; remove it and let errors surface.", line_of(h), True, "fallback")
    for s in source.sites:   # `return` in `finally` swallows any exception: a handler in disguise
        if isinstance(s.node, ast.Try) and s.region != DEAD and \
                any(isinstance(x, ast.Return) for b in s.node.finalbody for x in ast.walk(b)):
            return Finding("fallback", f"the `return` in the finally block of line {s.node.lineno} hides the "
                           "kernel's errors; return after the try instead.", line_of(s.node), True, "fallback")
    return None


def _handler_does_work(handler: ast.ExceptHandler) -> bool:
    for stmt in handler.body:
        if isinstance(stmt, (ast.Pass, ast.Raise, ast.Continue, ast.Break)):
            continue
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
            continue
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and isinstance(stmt.value, ast.Constant):
            continue   # n_sm = 108
        return True
    return False


def check_reference_model(source: Source, settings: GuardSettings) -> Finding | None:
    """Subclassing, calling or importing the reference Model (or its input makers)."""
    defined = {n.name for n in source.tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    for path, node in source.imports:
        name = path.split(".")[-1]
        if name in ("Model", "get_inputs", "get_init_inputs") or path.split(".")[0] == "__main__":
            return Finding("reference_model", f"importing `{name}` reaches for the reference "
                           "implementation; ModelNew must compute on its own.", line_of(node), True, "reference_model")
    for s in source.sites:
        n = s.node
        if s.region == DEAD or not isinstance(n, (ast.Name, ast.Attribute)) or not isinstance(n.ctx, ast.Load):
            continue
        name = n.id if isinstance(n, ast.Name) else n.attr
        if name == "Model" or (name in ("get_inputs", "get_init_inputs") and name not in defined
                               and isinstance(n, ast.Name)):
            how = "subclasses" if isinstance(s.parent, ast.ClassDef) and n in s.parent.bases else "uses"
            return Finding("reference_model", f"ModelNew {how} the reference `{name}`; implement the "
                           "computation yourself in Triton kernels.", line_of(n), True, "reference_model")
    return None


def check_triton_kernel(source: Source, settings: GuardSettings) -> Finding | None:
    """A candidate must define at least one @triton.jit kernel."""
    for s in source.sites:
        if isinstance(s.node, (ast.FunctionDef, ast.AsyncFunctionDef)) and \
                is_jit(s.node, source.aliases, source.self_attrs, frozenset()):
            return None
    for r in source.refs:
        if r.called and any(p.startswith("triton.") and p.split(".")[-1] in JIT_DECORATORS for p in r.paths):
            return None   # kernel = triton.jit(fn)
    return Finding("no_triton_kernel", "the file defines no @triton.jit kernel; write the forward's work as "
                   "a Triton kernel and launch it with kernel[grid](...).", None, True, "no_triton_kernel")
