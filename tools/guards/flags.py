"""The two flag-only guards: reduced precision and output caching.

`check_reduced_precision` flags fp16/bf16/tf32 math (an fp32 problem computed so passes
only where eager is as inexact: [eval] precision, tools/judge/accuracy.py, whose rule the
judge appends to the message), a `tl.dot` with no precision given included: on an NVIDIA GPU
its fp32 operands are TF32, while Triton's interpreter (the CPU judge) computes it
exactly, so only the flag tells a CPU verdict what a GPU would run. `check_caching`
flags a forward that keeps results between calls (returns state held on self or in a
global, looks inputs up in such a store, keys it by shape or pointer, or is wrapped in
functools.cache). Neither rejects: fresh inputs per trial make a cache fail anyway, and
precision shows in the comparison (on a GPU).
"""
from __future__ import annotations

import ast

from tools.guards.names import resolve, words
from tools.guards.regions import DEAD, FORWARD, Site
from tools.guards.source import Finding, Source, line_of, path_hits, spell
from tools.precision import dot_sites
from tools.settings import GuardSettings

_HALF_PATHS = ("torch.float16", "torch.half", "torch.bfloat16", "torch.float8*", "triton.language.float16",
               "triton.language.bfloat16", "triton.language.float8*", "torch.autocast", "torch.cuda.amp",
               "torch.amp")


# tl.dot precisions that keep fp32-level accuracy: IEEE fp32, and tf32x3 (three TF32
# tensor-core products, the split of each operand's low bits kept)
FP32_DOT = ("ieee", "tf32x3")


def check_reduced_precision(source: Source, settings: GuardSettings) -> Finding | None:
    """Flag only: fp16/bf16/plain TF32 math, whose error (~1e-3 relative) an fp32 problem's
    tolerance may not hold; tf32x3 and IEEE dots are fp32-accurate and not flagged. The
    judge's precision policy, not this flag, decides."""
    def flag(node, what):
        return Finding("reduced_precision", f"`{what}` computes in reduced precision (fp16/bf16/TF32, about 1e-3 "
                       "relative error); the judge's precision policy decides whether it passes. For tensor cores "
                       'at fp32 accuracy use tl.dot(a, b, input_precision="tf32x3").', line_of(node), False,
                       "reduced_precision")
    for path, node in path_hits(source, _HALF_PATHS, with_imports=False, skip_dead=True):
        return flag(node, spell(source, node))
    for s in source.sites:
        n = s.node
        if s.region == DEAD:
            continue
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in ("half", "bfloat16"):
            return flag(n, spell(source, n))
        if isinstance(n, ast.keyword) and ((n.arg == "input_precision" and isinstance(n.value, ast.Constant)
                                            and str(n.value.value).lower() not in FP32_DOT)
                                           or (n.arg == "allow_tf32" and isinstance(n.value, ast.Constant)
                                               and n.value.value is True)):
            return flag(n.value, spell(source, n.value))
    dead = {id(s.node) for s in source.sites if s.region == DEAD}
    sites = [d for d in dot_sites(source.tree) if d.precision in ("tf32", "default") and id(d.call) not in dead]
    site = min(sites, key=lambda d: (d.call.lineno, d.call.col_offset), default=None)
    if site is None:
        return None
    if site.precision == "tf32":   # a name bound to a literal in the kernel, read as that literal
        return flag(site.call, spell(source, site.call))
    return Finding("reduced_precision", f"`{spell(source, site.call)}` gives no input_precision: a tl.dot of fp32 "
                   "operands runs as TF32 on NVIDIA GPUs (about 1e-3 relative error), though Triton's interpreter "
                   'on CPU computes it exactly; input_precision="tf32x3" (tensor cores) or "ieee" keep fp32 '
                   "accuracy. The judge's precision policy decides.", line_of(site.call), False,
                   "reduced_precision")


_KEY_ATTRS = words("data_ptr shape size stride _version untyped_storage storage_offset")


def check_caching(source: Source, settings: GuardSettings) -> Finding | None:
    """Flag only: forward keeps results between calls: returns state held on self or in
    a global, looks inputs up in such a store (`key in self.cache`), keys it by shape or
    pointer, or is wrapped in functools.cache. Fresh inputs per trial make it fail anyway."""
    by_func: dict[int, list[Site]] = {}
    for s in source.sites:
        if s.region == FORWARD and s.func is not None:
            by_func.setdefault(id(s.func), []).append(s)
        if isinstance(s.node, (ast.FunctionDef, ast.AsyncFunctionDef)) and s.region != DEAD:
            for d in s.node.decorator_list:
                for p in resolve(d.func if isinstance(d, ast.Call) else d, source.aliases, source.self_attrs, frozenset()):
                    if p in ("functools.lru_cache", "functools.cache"):
                        return _caching(d, "@" + p.split(".")[-1])
    for sites in by_func.values():
        globals_ = {x for s in sites if isinstance(s.node, ast.Global) for x in s.node.names}
        held = lambda e: _persistent(e, globals_, source.module_names)  # noqa: E731
        keyed = lambda e: any((isinstance(x, ast.Attribute) and x.attr in _KEY_ATTRS) or  # noqa: E731
                              (isinstance(x, ast.Call) and isinstance(x.func, ast.Name) and x.func.id in ("id", "hash"))
                              for x in ast.walk(e))
        stores = any(isinstance(s.node, (ast.Attribute, ast.Subscript, ast.Name)) and
                     isinstance(s.node.ctx, ast.Store) and held(s.node) for s in sites)
        # locals that alias held state: prev = self.ready if ... else ...
        aliases = {t.id for s in sites if isinstance(s.node, ast.Assign) and _branches_held(s.node.value, held)
                   for t in s.node.targets if isinstance(t, ast.Name)}
        for s in sites:
            n = s.node
            if isinstance(n, ast.Return) and n.value is not None and (
                    held(n.value) or (isinstance(n.value, ast.Name) and n.value.id in aliases)):
                return _caching(n, spell(source, n))
            if isinstance(n, ast.Compare):
                sides = [n.left, *n.comparators]
                if any(isinstance(op, (ast.In, ast.NotIn)) for op in n.ops) and held(n.comparators[-1]):
                    return _caching(n, spell(source, n))
                if stores and any(held(x) for x in sides) and any(keyed(x) for x in sides):
                    return _caching(n, spell(source, n))
            if isinstance(n, ast.Subscript) and held(n.value) and keyed(n.slice):
                return _caching(n, spell(source, n))
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and held(n.func.value) and \
                    n.func.attr in ("get", "setdefault", "__setitem__", "__getitem__") and n.args and keyed(n.args[0]):
                return _caching(n, spell(source, n))
    return None


def _branches_held(expr: ast.AST, held) -> bool:
    """Is `expr`, or one branch of it (x if c else y, a or b), held state?"""
    if isinstance(expr, ast.IfExp):
        return _branches_held(expr.body, held) or _branches_held(expr.orelse, held)
    if isinstance(expr, ast.BoolOp):
        return any(_branches_held(v, held) for v in expr.values)
    return held(expr)


def _persistent(expr: ast.AST, globals_: set[str], module_names: frozenset[str]) -> bool:
    """Does `expr` name state that outlives the call: self.x, self.x[k], a global?"""
    if isinstance(expr, ast.Name):
        return expr.id in globals_
    while isinstance(expr, (ast.Attribute, ast.Subscript)):
        expr = expr.value
        if isinstance(expr, ast.Name):
            return expr.id in ("self", "cls") or expr.id in globals_ or expr.id in module_names
    return False


def _caching(node, what) -> Finding:
    return Finding("caching", f"`{what}` keeps results between forward calls; recompute the output from "
                   "the inputs on every call.", line_of(node), False, "caching")
