"""The sweep's vocabulary (agent/search/sweep.py, agent/search/template.py): an integer
literal in a source (`_Site`), a launch constant and every literal that moves with it
(`_Knob`), and a GEMM template's grid computed from its tiles (`TileGrid`)."""
from __future__ import annotations

import ast
from dataclasses import dataclass

MAX_BLOCK = 8192
MIN_BLOCK = 16
MAX_GROUP = 32
WARPS = (1, 2, 4, 8, 16)
MIN_STAGES, MAX_STAGES = 1, 5


@dataclass(frozen=True)
class _Site:
    """One integer literal in the source; it holds the constant's value plus `offset`
    (the 1023 of `(n + 1023) // 1024` has offset -1)."""
    line: int
    col: int                        # utf-8 byte offsets, as ast gives them
    end_col: int
    offset: int = 0


@dataclass(frozen=True)
class _Knob:
    """One launch constant: every site that must change with it, and its current value."""
    kernel: str
    name: str                       # "XBLOCK", "num_warps", or "BLOCK_M+BLOCK_N" when merged
    kind: str                       # "block" | "warps" | "stages"
    value: int
    sites: frozenset[_Site]
    grid: "TileGrid | None" = None  # a template's launch grid, computed from its tile sizes
    allowed: tuple[int, ...] = ()   # when set, the only values a move may give it

    def neighbours(self) -> list[int]:
        v = self.value
        if self.kind in ("block", "group"):
            if v < 1 or v & (v - 1):
                return []
            low, high = (min(MIN_BLOCK, v), MAX_BLOCK) if self.kind == "block" else (1, MAX_GROUP)
            return [n for n in (v * 2, v // 2) if low <= n <= high and n != v
                    and (not self.allowed or n in self.allowed)]
        if self.kind == "warps":
            if v not in WARPS:
                return []
            i = WARPS.index(v)
            return [WARPS[j] for j in (i + 1, i - 1) if 0 <= j < len(WARPS)]
        return [n for n in (v + 1, v - 1) if MIN_STAGES <= n <= MAX_STAGES]


@dataclass(frozen=True)
class TileGrid:
    """A GEMM template's fixed launch grid, (cdiv(M, BLOCK_M) * cdiv(N, BLOCK_N), 1, 1):
    the literal at `site` is recomputed whenever either tile size moves."""
    site: _Site
    m: int
    n: int
    tile_m: tuple[str, int]         # the knobs' names and current values
    tile_n: tuple[str, int]

    def value(self, moved: dict[str, int]) -> int:
        tm, tn = (moved.get(name, v) for name, v in (self.tile_m, self.tile_n))
        return -(-self.m // tm) * -(-self.n // tn)


def _site(node: ast.Constant, offset: int = 0) -> _Site:
    return _Site(node.lineno, node.col_offset, node.end_col_offset, offset)
