"""The constant sweep's knobs inside a GEMM template (agent/search/sweep.py reads launch sites).

Inductor's matmul template (`triton_tem_*`, what a max-autotune seed's GEMMs are) declares
its tile sizes in its own body and launches on a grid call() computed from them:

  def triton_tem_fused_mm_0(arg_A, arg_B, out_ptr0):
      EVEN_K : tl.constexpr = True
      BLOCK_M : tl.constexpr = 64
      BLOCK_N : tl.constexpr = 128
      BLOCK_K : tl.constexpr = 32
      GROUP_M : tl.constexpr = 8
      M = 1024
      N = 8192
      K = 8192
      ...
      grid_m = (M + BLOCK_M - 1) // BLOCK_M
      grid_n = (N + BLOCK_N - 1) // BLOCK_N
  ...
      triton_tem_fused_mm_0[1024, 1, 1](arg2_1, arg0_1, buf0, num_warps=4, num_stages=3)

`template_knobs` makes those tiles knobs: BLOCK_M and BLOCK_N (x2, /2; the grid literal
recomputed as cdiv(M, BLOCK_M) * cdiv(N, BLOCK_N)), BLOCK_K (x2, /2, never below 16; with
EVEN_K = True only to values dividing K, since the template then loads without a K mask),
GROUP_M (x2, /2 within 1..32: the order of tiles, not what they compute). Only a kernel
that matches this shape exactly (the literals, the two grid lines, one launch with the grid
(literal, 1, 1) equal to the formula) gets them; any other template keeps only its
launch's num_warps / num_stages. Pure: reads the ast, changes nothing.
"""
from __future__ import annotations

import ast

from agent.search.knobs import TileGrid, _Knob, _site

_TILES = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M")


def template_knobs(tree: ast.Module, kernels: set[str]) -> list[_Knob]:
    launches = _literal_grid_launches(tree)
    knobs: list[_Knob] = []
    for func in tree.body:
        if not (isinstance(func, ast.FunctionDef) and func.name in kernels and len(launches.get(func.name, [])) == 1):
            continue
        consts, ints, lines = _body(func)
        if not all(t in consts for t in _TILES) or not all(d in ints for d in "MNK"):
            continue
        if {"grid_m = (M + BLOCK_M - 1) // BLOCK_M", "grid_n = (N + BLOCK_N - 1) // BLOCK_N"} - lines:
            continue
        grid_node = launches[func.name][0]
        m, n, k = (ints[d].value for d in "MNK")
        bm, bn = consts["BLOCK_M"].value, consts["BLOCK_N"].value
        if grid_node.value != -(-m // bm) * -(-n // bn):
            continue
        grid = TileGrid(_site(grid_node), m, n, ("BLOCK_M", bm), ("BLOCK_N", bn))
        even_k = consts.get("EVEN_K")
        divides_k = tuple(v for v in (16, 32, 64, 128, 256) if k % v == 0) \
            if even_k is not None and even_k.value is True else ()
        if even_k is not None and even_k.value is True and not divides_k:
            divides_k = (consts["BLOCK_K"].value,)     # nothing else keeps the unmasked loads in bounds
        for name in _TILES:
            node = consts[name]
            knobs.append(_Knob(func.name, name, "group" if name == "GROUP_M" else "block", node.value,
                               frozenset({_site(node)}), grid=grid if name in ("BLOCK_M", "BLOCK_N") else None,
                               allowed=divides_k if name == "BLOCK_K" else ()))
    return knobs


def _body(func: ast.FunctionDef):
    """The kernel body's `NAME : tl.constexpr = <int|bool>` and `NAME = <int>` statements
    (names bound once in the body, at its top level), and its other lines as source."""
    consts, ints, lines, counts = {}, {}, set(), {}
    for stmt in func.body:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                counts[node.id] = counts.get(node.id, 0) + 1
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) \
                and ast.unparse(stmt.annotation) in ("tl.constexpr", "constexpr") \
                and isinstance(stmt.value, ast.Constant) and type(stmt.value.value) in (int, bool):
            consts[stmt.target.id] = stmt.value
        elif isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name) \
                and isinstance(stmt.value, ast.Constant) and type(stmt.value.value) is int:
            ints[stmt.targets[0].id] = stmt.value
        else:
            lines.add(ast.unparse(stmt))
    once = {n for n, c in counts.items() if c == 1}
    return ({k: v for k, v in consts.items() if k in once}, {k: v for k, v in ints.items() if k in once}, lines)


def _literal_grid_launches(tree: ast.Module) -> dict[str, list[ast.Constant]]:
    """kernel name -> the first literal of each `kernel[<int>, 1, 1](...)` launch; a launch of
    that kernel on any other grid makes its list unusable (two entries)."""
    found: dict[str, list] = {}
    for call in ast.walk(tree):
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Subscript)
                and isinstance(call.func.value, ast.Name)):
            continue
        dims = call.func.slice.elts if isinstance(call.func.slice, ast.Tuple) else [call.func.slice]
        plain = len(dims) == 3 and all(isinstance(d, ast.Constant) and type(d.value) is int for d in dims) \
            and dims[1].value == 1 and dims[2].value == 1
        found.setdefault(call.func.value.id, []).append(dims[0] if plain else None)
    return {k: v for k, v in found.items() if None not in v}
