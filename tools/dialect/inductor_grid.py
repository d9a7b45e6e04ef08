"""The launch-grid helpers torch <= 2.6 had in torch._inductor.runtime.triton_heuristics.

KernelBook's code (torch 2.5's Inductor output) launches kernels with `grid(xnumel)`
and its relatives: functions of the launch meta (the kernel's constexprs such as XBLOCK)
returning the (x, y, z) grid. torch 2.7 replaced them with launcher-side GridExpr
classes (pytorch PRs #147583, #148305), so importing them fails. These are the same
functions, rewritten from their documented behaviour; tools/dialect/portable.py copies
their source into a candidate that imports them. They compute only integers.
"""
from __future__ import annotations

MAX_Y_GRID = 65535   # CUDA's limit on gridDim.y (and z)


def _cdiv(n: int, d: int) -> int:
    return -(n // -d)


def grid(*numels):
    """torch <= 2.6's `grid(xnumel)`, `grid(ynumel, xnumel)`, `grid(znumel, ynumel, xnumel)`:
    a function of the launch meta giving (x, y, z) blocks. x is xnumel / XBLOCK (1 when
    absent); y and z are divided by YBLOCK / ZBLOCK when given; a y above 65535 spills
    into z when there is no z."""
    if not 1 <= len(numels) <= 3:
        raise AssertionError(f"invalid size for numels {len(numels)}")
    xnumel, ynumel, znumel = (tuple(reversed(numels)) + (None, None))[:3]

    def dim(numel, block):
        return 1 if numel is None else numel if block is None else _cdiv(numel, block)

    def grid_fn(meta):
        x = dim(xnumel, meta.get("XBLOCK", 1))
        y = dim(ynumel, meta.get("YBLOCK"))
        if znumel is None:
            z = max(1, _cdiv(y, MAX_Y_GRID))
            return x, _cdiv(y, z), z
        if y > MAX_Y_GRID:
            raise AssertionError(f"Generated y grid beyond 2^16 ({y}) not supported with z dimension present")
        return x, y, dim(znumel, meta.get("ZBLOCK"))

    grid_fn.grid_fn_str = f"grid{numels}"
    return grid_fn


def split_scan_grid(xnumel, rnumel):
    """torch <= 2.6: one row per y block, the scanned dimension split over x."""
    def grid_fn(meta):
        assert meta.get("XBLOCK", 1) == 1
        return _cdiv(rnumel, meta.get("RBLOCK", 1)), xnumel, 1

    grid_fn.grid_fn_str = f"split_scan_grid({xnumel}, {rnumel})"
    return grid_fn


def cooperative_reduction_grid(xnumel):
    """torch 2.6: RSPLIT blocks cooperate on each x block."""
    def grid_fn(meta):
        return meta["RSPLIT"], _cdiv(xnumel, meta.get("XBLOCK", 1)), 1

    grid_fn.grid_fn_str = f"cooperative_reduction_grid({xnumel})"
    return grid_fn


def maybe_cooperative_reduction_grid(xnumel):
    """torch 2.6: the cooperative grid when the config has RSPLIT, else grid(xnumel)."""
    coop, normal = cooperative_reduction_grid(xnumel), grid(xnumel)

    def grid_fn(meta):
        return coop(meta) if "RSPLIT" in meta else normal(meta)

    grid_fn.grid_fn_str = f"maybe_cooperative_reduction_grid({xnumel})"
    return grid_fn


def grid_combo_kernels(*numels, num_kernels, min_blocks, is_sequential, default_meta=None):
    """torch 2.5/2.6: the grid of a combo kernel running `num_kernels` sub-kernels, their
    x blocks interleaved (round robin, at least `min_blocks`) or laid end to end
    (sequential; the last numel lists each sub-kernel's xnumel, <= 0 meaning that many
    fixed blocks)."""
    def widest(n):
        return max(max(n), 0) if isinstance(n, (list, tuple)) else n

    if is_sequential:
        kernel_grid = grid(*[widest(n) for n in numels[:-1]], 1024)
    else:
        kernel_grid = grid(*[widest(n) for n in numels])
        if isinstance(numels[-1], (list, tuple)):
            fixed = max(-min(numels[-1]), 0) * num_kernels
            assert min_blocks is None or min_blocks == fixed, f"inconsistent min_blocks {min_blocks}"
            min_blocks = fixed
        assert min_blocks is not None, "min_blocks must be a number"

    def round_robin(meta):
        x, y, z = kernel_grid(meta)
        return max(num_kernels * x, min_blocks), y, z

    def sequential(meta):
        _, y, z = kernel_grid(meta)
        return sum(-n if n <= 0 else _cdiv(n, meta.get("XBLOCK", 1)) for n in numels[-1]), y, z

    fn = sequential if is_sequential else round_robin
    return fn(default_meta) if default_meta is not None else fn
