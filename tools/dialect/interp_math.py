"""libdevice in a delivered kernel: what runs in Triton's interpreter outside krefine.

A kernel that calls `libdevice.erf` or `libdevice.rsqrt` (Inductor's GELU, a norm) runs on
a GPU, and in krefine's own cpu worker (interp_libdevice.py installs libdevice there), but
not in a bare `TRITON_INTERPRET=1` interpreter, where every libdevice stub returns None
(`AttributeError: 'NoneType' object has no attribute 'dtype'`). `in_the_interpreter(source)`
makes the text a user takes away run wherever Triton runs, where that is honest:

  * a libdevice call whose `tl` function computes the same thing is written with it:
    floor, ceil, fma and the correctly rounded div are exact on both sides; erf and
    rsqrt are Triton's own ops (NumPy in the interpreter). sqrt stays libdevice's: Inductor
    writes an fp64 square root as `libdevice.sqrt` (torch.triu_indices' lowering, a
    forward in double), and `tl.sqrt_rn` takes fp32 only. The rewritten text is
    what is judged (tools/dialect/portable.py runs this before judging), so its results
    are checked on the judge's device like any other candidate's;
  * any other libdevice call (tanh, pow, log1p, ...) stays, and the line that imports
    libdevice says so: `# needs a GPU: libdevice.tanh is not in Triton's interpreter`;
    `gpu_only(source)` names them (krefine export says it too).

Idempotent; a source that does not parse comes back unchanged. Not covered: libdevice
reached through a name this module cannot see bound (an attribute of another object).
"""
from __future__ import annotations

import ast

from tools.dialect.source_edits import Edits

# libdevice function -> the triton.language function that computes the same
SAME_IN_TL = {"erf": "erf", "rsqrt": "rsqrt", "floor": "floor", "ceil": "ceil", "fma": "fma", "div_rn": "div_rn"}
_LIBDEVICE = ("triton.language.extra.libdevice", "triton.language.extra.cuda.libdevice")
NOTE = "  # needs a GPU: "


def in_the_interpreter(source: str) -> str:
    """`source` with SAME_IN_TL's libdevice calls written with `tl`, the others named on
    the libdevice import's line as needing a GPU."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return source
    names, tl = _bound(tree)
    uses = list(_uses(tree, names))
    edits = Edits(source)
    if tl is not None:
        for node in uses:
            if node.attr in SAME_IN_TL:
                edits.replace(node, f"{tl}.{SAME_IN_TL[node.attr]}")
    out = source if edits.empty() else edits.apply()
    return _noted(out)


def calls(source: str) -> set[str]:
    """Every libdevice function `source` calls."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return set()
    names, _ = _bound(tree)
    return {node.attr for node in _uses(tree, names)}


def cpu_missing(source: str, device: str = "cpu") -> None:
    """ValueError naming the libdevice functions `source` calls that krefine's CPU worker
    (interp_libdevice.py) cannot run, for a seed made for the CPU (its judge would fail on
    them at run time)."""
    if device != "cpu":
        return
    from tools.dialect.interp_libdevice import _TABLE   # NumPy: only when a seed is made
    missing = sorted(name for name in calls(source) if name not in _TABLE)
    if missing:
        raise ValueError(f"{', '.join(f'libdevice.{m}' for m in missing)}: not in krefine's CPU interpreter; "
                         "seed the problem on a GPU (--device cuda)")


def gpu_only(source: str) -> list[str]:
    """The libdevice functions `source` calls that Triton's interpreter lacks."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    names, _ = _bound(tree)
    return sorted({node.attr for node in _uses(tree, names)})


def _noted(source: str) -> str:
    """The GPU note on the line that imports libdevice (or its first use), as it is now."""
    lines = source.splitlines(keepends=True)
    tree = ast.parse(source)
    names, _ = _bound(tree)
    wanted = gpu_only(source)
    at = [n.end_lineno for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))
          and any(_module_of(n, a) in _LIBDEVICE for a in n.names)]
    at = at or [u.end_lineno for u in _uses(tree, names)]
    for i, line in enumerate(lines):   # an earlier note goes: the calls may have changed
        if NOTE in line:
            lines[i] = line.split(NOTE)[0] + ("\n" if line.endswith("\n") else "")
    if wanted and at:
        i = min(at) - 1
        end = "\n" if lines[i].endswith("\n") else ""
        calls = ", ".join(f"libdevice.{w}" for w in wanted)
        lines[i] = (lines[i].rstrip("\n") + f"{NOTE}{calls} {'is' if len(wanted) == 1 else 'are'} not in "
                    "Triton's interpreter (TRITON_INTERPRET=1)" + end)
    return "".join(lines)


def _module_of(stmt: ast.stmt, alias: ast.alias) -> str:
    if isinstance(stmt, ast.ImportFrom):
        return f"{stmt.module}.{alias.name}"
    return alias.name


def _bound(tree: ast.Module) -> tuple[set[str], str | None]:
    """(names bound to a libdevice module, the name bound to triton.language)."""
    names, tl = set(), None
    for stmt in ast.walk(tree):
        if not isinstance(stmt, (ast.Import, ast.ImportFrom)):
            continue
        for a in stmt.names:
            module = _module_of(stmt, a)
            if module in _LIBDEVICE and (a.asname or isinstance(stmt, ast.ImportFrom)):
                names.add(a.asname or a.name)
            elif module == "triton.language" and (a.asname or isinstance(stmt, ast.ImportFrom)):
                tl = tl or a.asname or a.name
    return names, tl


def _uses(tree: ast.Module, names: set[str]):
    """`libdevice.f` attribute reads: on a bound name, or a dotted path ending in .libdevice."""
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load)):
            continue
        base = node.value
        if isinstance(base, ast.Name) and base.id in names:
            yield node
        elif isinstance(base, ast.Attribute) and base.attr == "libdevice" and _root(base) in ("tl", "triton"):
            yield node


def _root(node: ast.AST) -> str:
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else ""
