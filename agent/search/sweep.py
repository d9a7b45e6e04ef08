"""The constant sweep: variants of a candidate that change only its launch constants.

`sweep_variants(source, limit)` reads a candidate's source and returns up to `limit`
variants, each the same file with other integer literals at its Triton launch sites:

  kernel[grid](args..., XBLOCK=1024, num_warps=4, num_stages=1)

- a block size: a keyword naming a `tl.constexpr` parameter of that `@triton.jit` kernel
  (read from the kernel's def in the same source) whose name contains BLOCK (Inductor's
  XBLOCK / YBLOCK / R0_BLOCK, hand-written BLOCK_SIZE / BLOCK_M ...), at a power of two:
  x2 and /2, never above 8192 nor below 16 (below its own value if that is smaller);
- num_warps: the next value up and down in 1, 2, 4, 8, 16;
- num_stages: +1 and -1 within 1..5.

The value is an int literal in the keyword, or a name bound once, to an int literal, in
the function that launches (or, bound nowhere there, at module level): then that one
assignment changes, so every use of the name (the grid's too) stays consistent. A block
size that also divides in the launch's grid (`triton.cdiv(n, 1024)`, `n // 1024`,
`(n + 1023) // 1024`, in the subscript or in a local `grid = ...` bound once) changes
there with it; keywords whose sites overlap that way (BLOCK_M=64 and BLOCK_N=64 over
`cdiv(M, 64), cdiv(N, 64)`) change together. Inductor's `grid(xnumel)` reads XBLOCK from
the launch itself, so its numbers are sizes and are never touched.

Order is deterministic: one neighbour of each constant in turn (block sizes, then
num_warps, then num_stages; launches in source order), then the other neighbours, then
a block size and num_warps of one launch moved together; duplicates dropped. Each
variant carries `change` ("triton_poi_fused_relu_0: XBLOCK 1024->512, num_warps 4->8").

Left alone: constexprs declared in a kernel's body (`RBLOCK: tl.constexpr = 64`), other
constexpr parameters (flags, sizes, GROUP_SIZE_M: they may change what a kernel
computes), keywords a kernel's @triton.autotune / @triton.heuristics supplies (such
kernels are skipped), launch options the source does not write, non-power-of-two block
sizes. A variant never changes anything but those integer literals: each is checked
against its original (`changed_constants`) before it is returned. Whether a variant is
still correct or any faster is the judge's to say. Pure: no I/O, nothing imported or run.
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import Iterator

from agent.search.template import template_knobs
from agent.search.knobs import TileGrid, _Knob, _Site, _site
from tools.precision import with_dot_precision

PRECISION_CHANGE = "tl.dot ieee->tf32x3"
_BLOCK_NAME = re.compile("BLOCK", re.IGNORECASE)
_KIND_ORDER = ("block", "group", "warps", "stages")


@dataclass(frozen=True)
class Variant:
    source: str
    change: str                     # "kernel: XBLOCK 1024->2048, num_warps 4->8"


def sweep_variants(source: str, limit: int, *, wide: bool = False) -> list[Variant]:
    """Up to `limit` variants of `source`, each changing only launch constants or the
    precision of its exact-fp32 dots; [] when the source has none (or does not parse).
    wide: also every pair of one kernel's constants moved together (the pre-screen's
    space, agent/loop/prescreen.py), after the single moves."""
    if limit <= 0:
        return []
    try:
        ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    # 0) the bases: the source, and before it its dots at tf32x3 (tools/precision.py)
    bases = [(source, "")]
    faster_dots = with_dot_precision(source, "tf32x3")
    if faster_dots is not None:
        bases.insert(0, (faster_dots, PRECISION_CHANGE))
    # 1) the constants at every launch site, 2) the moves to try, stage by stage
    staged = [(text, change, _moves(_launch_knobs(ast.parse(text)), wide)) for text, change in bases]
    out: list[Variant] = [Variant(faster_dots, PRECISION_CHANGE)] if faster_dots is not None else []
    seen = {source, *(v.source for v in out)}
    # 3) one variant per move, checked to differ from its base only where it should
    for stage in range(3):
        for base, base_change, stages in staged:
            for move in stages[stage]:
                text = _apply(base, move)
                if text in seen:
                    continue
                _check(base, text, move)
                seen.add(text)
                out.append(Variant(text, "; ".join(filter(None, (base_change, _describe(move))))))
    return out[:limit]


def changed_constants(original: str, variant: str) -> list[tuple[int, int, object, object]] | None:
    """(line, col, old, new) for each constant that differs between the two sources, or
    None when they differ in anything but constants (or either does not parse)."""
    try:
        a, b = ast.parse(original), ast.parse(variant)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    na, nb = list(ast.walk(a)), list(ast.walk(b))
    if len(na) != len(nb) or any(type(x) is not type(y) for x, y in zip(na, nb)):
        return None
    changes = []
    for x, y in zip(na, nb):
        if isinstance(x, ast.Constant) and (type(x.value) is not type(y.value) or x.value != y.value):
            changes.append((x.lineno, x.col_offset, x.value, y.value))
            y.value = x.value
    return changes if ast.dump(a) == ast.dump(b) else None


def launch_constants(source: str) -> list[tuple[str, list[tuple[str, int]]]]:
    """Each launched kernel's launch constants the sweep can move, as (kernel, [(name,
    value)]) in source order: the launch facts a refinement prompt names."""
    try:
        knobs = _launch_knobs(ast.parse(source))
    except SyntaxError:
        return []
    out: dict[str, list[tuple[str, int]]] = {}
    for k in knobs:
        if (k.name, k.value) not in out.setdefault(k.kernel, []):
            out[k.kernel].append((k.name, k.value))
    return list(out.items())


# ---------------------------------------------------------------- reading launch sites

def _launch_knobs(tree: ast.Module) -> list[_Knob]:
    kernels = _jit_kernels(tree)
    if not kernels:
        return []
    module_bindings = _bindings(_own_nodes(tree))
    declared_global = {n for node in ast.walk(tree) if isinstance(node, (ast.Global, ast.Nonlocal)) for n in node.names}
    knobs: list[_Knob] = []
    for func in (n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))):
        if func.name in kernels:
            continue
        nodes = list(_own_nodes(func))
        local = _bindings(nodes)
        params = {a.arg for a in (*func.args.posonlyargs, *func.args.args, *func.args.kwonlyargs,
                                  *filter(None, (func.args.vararg, func.args.kwarg)))}

        def literal_of(name: str) -> ast.Constant | None:
            """The int literal `name` is bound to, once, in this function (or at module level)."""
            if name in params or name in declared_global:
                return None
            found = local[name] if name in local else module_bindings.get(name, [])
            if len(found) != 1 or not _is_int(found[0]):
                return None
            return found[0]

        for call in nodes:
            if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Subscript)
                    and isinstance(call.func.value, ast.Name) and call.func.value.id in kernels):
                continue
            kernel = call.func.value.id
            grid = _grid_expr(call.func.slice, local, params)
            for kw in call.keywords:
                knob = _knob(kernel, kw, kernels[kernel], grid, literal_of)
                if knob is not None:
                    knobs.append(knob)
    return _merge_overlapping(knobs) + template_knobs(tree, set(kernels))


def _knob(kernel: str, kw: ast.keyword, constexprs: set[str], grid: ast.AST | None, literal_of) -> _Knob | None:
    if kw.arg in ("num_warps", "num_stages"):
        kind = "warps" if kw.arg == "num_warps" else "stages"
    elif kw.arg in constexprs and _BLOCK_NAME.search(kw.arg):
        kind = "block"
    else:
        return None
    const = kw.value if _is_int(kw.value) else literal_of(kw.value.id) if isinstance(kw.value, ast.Name) else None
    if const is None:
        return None
    value = const.value
    sites = {_site(const)}
    if kind == "block" and grid is not None:
        sites |= _grid_sites(grid, value)
    return _Knob(kernel, kw.arg, kind, value, frozenset(sites))


def _grid_expr(slice_: ast.AST, local: dict[str, list], params: set[str]) -> ast.AST | None:
    """The launch's grid expression: the subscript, or what a local name in it is bound to once."""
    if isinstance(slice_, ast.Name):
        found = local.get(slice_.id, [])
        return found[0] if len(found) == 1 and found[0] is not None and slice_.id not in params else None
    return slice_


def _grid_sites(grid: ast.AST, value: int) -> set[_Site]:
    """Literals in the grid that divide by the block size: cdiv(n, V), n // V, (n + V-1) // V."""
    sites = set()
    for node in ast.walk(grid):
        divisor = None
        if isinstance(node, ast.Call) and len(node.args) == 2 and not node.keywords and (
                (isinstance(node.func, ast.Attribute) and node.func.attr == "cdiv")
                or (isinstance(node.func, ast.Name) and node.func.id == "cdiv")):
            divisor = node.args[1]
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.FloorDiv):
            divisor = node.right
            left = node.left
            if (_is_int(divisor) and divisor.value == value and isinstance(left, ast.BinOp)
                    and isinstance(left.op, ast.Add) and _is_int(left.right) and left.right.value == value - 1):
                sites.add(_site(left.right, offset=-1))
        if _is_int(divisor) and divisor.value == value:
            sites.add(_site(divisor))
    return sites


def _merge_overlapping(knobs: list[_Knob]) -> list[_Knob]:
    """Knobs sharing a site are one knob (two launches using one local name; two block
    sizes dividing in one grid literal), in the first one's place; a group whose kinds or
    values differ is dropped (no move could keep it consistent)."""
    merged: list[_Knob] = []
    for knob in knobs:
        overlapping = [m for m in merged if m.sites & knob.sites]
        if not overlapping:
            merged.append(knob)
            continue
        group = [*overlapping, knob]
        names = dict.fromkeys(n for k in group for n in k.name.split("+"))
        same = len({(k.kind, k.value) for k in group}) == 1
        combined = _Knob(group[0].kernel, "+".join(names), group[0].kind if same else "mixed", group[0].value,
                         frozenset().union(*(k.sites for k in group)))
        place = merged.index(overlapping[0])
        merged = [m for m in merged if m not in overlapping]
        merged.insert(place, combined)
    return [k for k in merged if k.kind != "mixed"]


def _jit_kernels(tree: ast.Module) -> dict[str, set[str]]:
    """@triton.jit kernels defined in the source -> their tl.constexpr parameter names.
    A kernel with any other decorator (autotune, heuristics) is left out: those supply
    constexprs themselves."""
    kernels = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.FunctionDef) or len(node.decorator_list) != 1:
            continue
        deco = node.decorator_list[0]
        deco = deco.func if isinstance(deco, ast.Call) else deco
        if not ((isinstance(deco, ast.Attribute) and deco.attr == "jit") or (isinstance(deco, ast.Name) and deco.id == "jit")):
            continue
        args = (*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs)
        kernels[node.name] = {a.arg for a in args if _is_constexpr(a.annotation)}
    return kernels


def _is_constexpr(annotation: ast.AST | None) -> bool:
    return (isinstance(annotation, ast.Attribute) and annotation.attr == "constexpr") or \
           (isinstance(annotation, ast.Name) and annotation.id == "constexpr")


def _own_nodes(scope: ast.AST) -> Iterator[ast.AST]:
    """Nodes of a function (or module) body, not descending into nested defs, lambdas or classes."""
    stack = list(reversed(scope.body))
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        stack.extend(reversed(list(ast.iter_child_nodes(node))))


def _bindings(nodes) -> dict[str, list]:
    """name -> what each binding of it in these nodes assigns: the value of a plain
    `name = value`, None for any other binding (augmented, tuple target, for, with, import ...)."""
    found: dict[str, list] = {}

    def bind(target: ast.AST, value) -> None:
        if isinstance(target, ast.Name):
            found.setdefault(target.id, []).append(value)
        else:
            for sub in ast.walk(target):
                if isinstance(sub, ast.Name):
                    found.setdefault(sub.id, []).append(None)

    for node in nodes:
        if isinstance(node, ast.Assign):
            for target in node.targets:
                bind(target, node.value if len(node.targets) == 1 else None)
        elif isinstance(node, ast.AnnAssign):
            bind(node.target, node.value)
        elif isinstance(node, (ast.AugAssign, ast.For, ast.AsyncFor, ast.comprehension)):
            bind(node.target, None)
        elif isinstance(node, ast.NamedExpr):
            bind(node.target, None)
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            for item in node.items:
                if item.optional_vars is not None:
                    bind(item.optional_vars, None)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                found.setdefault((alias.asname or alias.name).split(".")[0], []).append(None)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found.setdefault(node.name, []).append(None)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            found.setdefault(node.name, []).append(None)
    return found


def _is_int(node) -> bool:
    return isinstance(node, ast.Constant) and type(node.value) is int


# ---------------------------------------------------------------- moves and edits

Move = tuple[tuple[_Knob, int], ...]      # (knob, new value) for each constant that changes


def _moves(knobs: list[_Knob], wide: bool = False) -> tuple[list[Move], list[Move], list[Move]]:
    """Three stages: single changes round-robin over the constants (one neighbour each,
    then the next); per launch its first block size and num_warps moved the same way
    together; and (wide) every other pair of one kernel's constants, each neighbour of
    one with each of the other's."""
    ordered = sorted(knobs, key=lambda k: _KIND_ORDER.index(k.kind))   # stable: source order within a kind
    singles: list[Move] = []
    depth = max((len(k.neighbours()) for k in ordered), default=0)
    for i in range(depth):
        singles += [((k, k.neighbours()[i]),) for k in ordered if len(k.neighbours()) > i]
    together: list[Move] = []
    for kernel in dict.fromkeys(k.kernel for k in knobs):
        block = next((k for k in knobs if k.kernel == kernel and k.kind == "block"), None)
        warps = next((k for k in knobs if k.kernel == kernel and k.kind == "warps"), None)
        if block is None or warps is None:
            continue
        for nb, nw in zip(block.neighbours(), warps.neighbours()):
            if (nb > block.value) == (nw > warps.value):
                together.append(((block, nb), (warps, nw)))
    pairs: list[Move] = []
    for i, a in enumerate(ordered if wide else ()):
        for b in ordered[i + 1:]:
            if a.kernel == b.kernel:
                pairs += [((a, x), (b, y)) for x in a.neighbours() for y in b.neighbours()]
    return singles, together, pairs


def _grid_edits(move: Move) -> dict[_Site, int]:
    """The template grids a move changes: each recomputed from its tile sizes after the move."""
    edits = {}
    for grid in dict.fromkeys(k.grid for k, _ in move if k.grid is not None):
        value = grid.value({k.name: new for k, new in move if k.grid == grid})
        if value != grid.value({}):
            edits[grid.site] = value
    return edits


def _apply(source: str, move: Move) -> str:
    lines = source.splitlines(keepends=True)
    edits = sorted([*((site, new + site.offset) for knob, new in move for site in knob.sites),
                    *_grid_edits(move).items()],
                   key=lambda e: (e[0].line, e[0].col), reverse=True)
    for site, value in edits:
        raw = lines[site.line - 1].encode("utf-8")
        lines[site.line - 1] = (raw[:site.col] + str(value).encode() + raw[site.end_col:]).decode("utf-8")
    return "".join(lines)


def _check(original: str, variant: str, move: Move) -> None:
    """Our own guarantee, checked on every variant: only the move's integer literals differ."""
    changes = changed_constants(original, variant)
    expected = {(s.line, s.col) for knob, _ in move for s in [*knob.sites, *_grid_edits(move)]}
    if changes is None or {(line, col) for line, col, _, _ in changes} != expected \
            or not all(type(old) is int and type(new) is int for _, _, old, new in changes):
        raise AssertionError(f"sweep: a variant changed more than its launch constants ({_describe(move)})")
    compile(variant, "<sweep variant>", "exec")


def _describe(move: Move) -> str:
    """"kernel: XBLOCK 1024->2048, num_warps 4->8" (kernels in the order they change)."""
    parts: dict[str, list[str]] = {}
    for knob, new in move:
        parts.setdefault(knob.kernel, []).append(f"{knob.name} {knob.value}->{new}")
    return "; ".join(f"{kernel}: {', '.join(items)}" for kernel, items in parts.items())
