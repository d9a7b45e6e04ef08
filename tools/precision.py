"""The precision of a kernel's `tl.dot` calls: read it, and rewrite it.

fp32 operands reach a tensor core only as TF32 (10 mantissa bits). Triton's
`tl.dot(a, b, input_precision=...)` says how:

  "ieee"    no tensor core: exact fp32 products (slow: the CUDA cores do it);
  "tf32x3"  three TF32 products (hi*hi + hi*lo + lo*hi of each operand split in two),
            ~fp32 accuracy on the tensor cores: typically 2-5x faster than "ieee";
  "tf32"    one TF32 product: ~1e-3 relative error, what KernelBench's fp32 tolerance
            (1e-4) usually rejects; also what a `tl.dot` with no precision given does
            with fp32 operands on a GPU (Triton's default) and `allow_tf32=True`.

Whether a kernel at a given precision is correct is never decided here: the judge
compares its outputs at the problem's tolerance. `dot_precisions` reports what a source
uses (verdict checks, the model's prompt); `with_dot_precision` is the search's move
(the sweep and the seed portfolio): every exact-fp32 dot of a source set to another
precision, nothing else in the file changed. Pure: ast only, nothing imported or run.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass

PRECISIONS = ("ieee", "tf32x3", "tf32")
EXACT = "ieee"
_TL = ("tl", "triton.language", "language")


@dataclass(frozen=True)
class DotSite:
    """One `tl.dot` call: its precision and where its precision keyword is (or would go)."""
    precision: str                          # "ieee" | "tf32x3" | "tf32" | "default" | "computed"
    keyword: ast.keyword | None             # the allow_tf32= / input_precision= keyword, if any
    call: ast.Call


def dot_sites(tree: ast.AST) -> list[DotSite]:
    """Every `tl.dot(...)` call in `tree`, with its precision: a literal keyword, or a name
    bound once to a literal in the function that calls it (Inductor's templates declare
    `ALLOW_TF32 : tl.constexpr = False` in the kernel's body)."""
    sites = []
    for func in [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)] + [tree]:
        bound = _literals(func)
        for call in _own_calls(func):
            if not _is_dot(call):
                continue
            kws = {k.arg: k for k in call.keywords if k.arg in ("input_precision", "allow_tf32")}
            if len(kws) > 1:
                sites.append(DotSite("computed", None, call))
                continue
            kw = next(iter(kws.values()), None)
            value = None if kw is None else _value(kw.value, bound)
            if kw is None:
                which = "default"
            elif kw.arg == "input_precision":
                which = value.lower() if isinstance(value, str) else "computed"
            else:
                which = ("tf32" if value else EXACT) if isinstance(value, bool) else "computed"
            sites.append(DotSite(which, kw, call))
    return sites


def dot_precisions(tree: ast.AST) -> dict[str, int]:
    """How many `tl.dot` calls use each precision: "ieee", "tf32x3", "tf32", "default"
    (none given: TF32 for fp32 operands on a GPU, exact in Triton's interpreter) or
    "computed" (not a literal). For the verdict's checks and the prompt; decides nothing."""
    counts: dict[str, int] = {}
    for site in dot_sites(tree):
        counts[site.precision] = counts.get(site.precision, 0) + 1
    return counts


def with_dot_precision(source: str, precision: str, *, only: str = EXACT) -> str | None:
    """`source` with every `tl.dot` whose precision is `only` (exact fp32, by default) set
    to `input_precision="<precision>"` (an `allow_tf32=` keyword is replaced, a dot with
    none gets one); None when the source has no such dot or does not parse. Nothing but
    those keywords changes."""
    if precision not in PRECISIONS:
        raise ValueError(f"unknown dot precision {precision!r} (one of {', '.join(PRECISIONS)})")
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    targets = [s for s in dot_sites(tree) if s.precision == only]
    if not targets:
        return None
    lines = source.splitlines(keepends=True)
    text = f'input_precision="{precision}"'
    edits = []                                  # (line, start col, end col, text), utf-8 offsets
    for site in targets:
        if site.keyword is not None:
            kw = site.keyword
            edits.append((kw.lineno, kw.col_offset, kw.end_lineno, kw.end_col_offset, text))
        else:                                   # after the last argument
            last = (site.call.args + [k.value for k in site.call.keywords])[-1]
            edits.append((last.end_lineno, last.end_col_offset, last.end_lineno, last.end_col_offset, ", " + text))
    for line, col, end_line, end_col, new in sorted(edits, reverse=True):
        head = lines[line - 1].encode("utf-8")[:col]
        tail = lines[end_line - 1].encode("utf-8")[end_col:]
        lines[line - 1:end_line] = [(head + new.encode() + tail).decode("utf-8")]
    out = "".join(lines)
    _check(source, out, len(targets), precision)
    return out


def _check(before: str, after: str, n: int, precision: str) -> None:
    """Our own guarantee: the dots changed, and nothing else."""
    a, b = ast.parse(before), ast.parse(after)
    moved = [s for s in dot_sites(b) if s.precision == precision]
    if len(moved) < n:
        raise AssertionError("with_dot_precision: a dot kept its precision")
    for tree in (a, b):
        for site in dot_sites(tree):
            site.call.keywords = [k for k in site.call.keywords if k.arg not in ("input_precision", "allow_tf32")]
    if ast.dump(a) != ast.dump(b):
        raise AssertionError("with_dot_precision: more than the dots' precision changed")


def _is_dot(call: ast.Call) -> bool:
    f = call.func
    return isinstance(f, ast.Attribute) and f.attr == "dot" and ast.unparse(f.value) in _TL


def _own_calls(scope: ast.AST):
    """Calls in a function's body (the module's: outside any function), not in nested defs."""
    stack = list(scope.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        if isinstance(node, ast.Call):
            yield node
        stack.extend(ast.iter_child_nodes(node))


def _literals(scope: ast.AST) -> dict[str, object]:
    """Names bound exactly once in the scope (not nested defs), to a bool / str literal."""
    found: dict[str, list] = {}
    stack = list(scope.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            if node is not scope and hasattr(node, "name"):
                found.setdefault(node.name, []).append(None)
            continue
        if isinstance(node, ast.Assign):
            for t in node.targets:
                for n in ast.walk(t):
                    if isinstance(n, ast.Name):
                        found.setdefault(n.id, []).append(node.value if t is n and len(node.targets) == 1 else None)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            found.setdefault(node.target.id, []).append(node.value)
        elif isinstance(node, (ast.AugAssign, ast.For, ast.NamedExpr)):
            for n in ast.walk(node.target):
                if isinstance(n, ast.Name):
                    found.setdefault(n.id, []).append(None)
        stack.extend(ast.iter_child_nodes(node))
    if isinstance(scope, ast.FunctionDef):     # a parameter is never a literal
        for a in (*scope.args.posonlyargs, *scope.args.args, *scope.args.kwonlyargs):
            found.setdefault(a.arg, []).append(None)
    return {k: v[0].value for k, v in found.items()
            if len(v) == 1 and isinstance(v[0], ast.Constant) and isinstance(v[0].value, (bool, str))}


def _value(node: ast.AST, bound: dict[str, object]):
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        return bound.get(node.id)
    return None
