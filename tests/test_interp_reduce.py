"""tl.reduce with a combine function in Triton's CPU interpreter, on whole blocks
(tools/dialect/interp_reduce.py): the same values as Triton's element loop, NaN kept,
argmax ties to the earlier index, and a scalar-only combine function still works."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = textwrap.dedent('''
    import os, sys
    os.environ["TRITON_INTERPRET"] = "1"
    import torch, triton, triton.language as tl
    from tools.dialect import interp_reduce
    if sys.argv[1] == "pairwise":
        interp_reduce.install()

    @triton.jit
    def maximum(a, b):
        mask = (a > b) | (a != a)
        return tl.where(mask, a, b)

    @triton.jit
    def argmax_combine(v1, i1, v2, i2):
        gt = (v1 > v2) | ((v1 == v2) & (i1 < i2))
        return tl.where(gt, v1, v2), tl.where(gt, i1, i2)

    @triton.jit
    def k(x_ptr, o_ptr, oi_ptr, R: tl.constexpr, C: tl.constexpr):
        r = tl.arange(0, R)[:, None]
        c = tl.arange(0, C)[None, :]
        x = tl.load(x_ptr + r * C + c)
        tl.store(o_ptr + tl.arange(0, R), tl.reduce(x, 1, maximum))
        v, i = tl.reduce((x, tl.broadcast_to(c, [R, C])), 1, argmax_combine)
        tl.store(oi_ptr + tl.arange(0, R), i)

    x = torch.randn(4, 64, generator=torch.Generator().manual_seed(0))
    x[1, 7] = float("nan")
    x[2, 3] = x[2, 40] = 9.0          # a tie: the earlier index wins
    o, oi = torch.empty(4), torch.empty(4, dtype=torch.int32)
    k[(1,)](x, o, oi, R=4, C=64)
    print(o.tolist(), oi.tolist())
    from triton.runtime import interpreter
    print(getattr(interpreter.ReduceOps.generic_reduce, "_krefine_pairwise", False))
''')


def _run(mode: str) -> str:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", SCRIPT, mode], capture_output=True, text=True, env=env,
                          timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip()


@pytest.mark.slow
def test_pairwise_reduce_gives_what_tritons_element_loop_gives():
    pairwise, loop = _run("pairwise").splitlines(), _run("loop").splitlines()
    assert (pairwise[1], loop[1]) == ("True", "False")   # the pairwise path is the one that ran
    assert pairwise[0] == loop[0]


def test_pairwise_reduce_keeps_nan_and_the_earlier_index_of_a_tie():
    values, index = _run("pairwise").splitlines()[0].split("] [")
    assert "nan" in values.split(",")[1]
    assert index.rstrip("]").split(", ")[2] == "3"


NOT_SCRIPT = textwrap.dedent('''
    import os, sys
    os.environ["TRITON_INTERPRET"] = "1"
    import torch, triton, triton.language as tl
    from tools.dialect import interp_reduce
    interp_reduce.install()

    @triton.jit
    def maximum_with_index(a_value, a_index, b_value, b_index):   # Inductor's, `not` and all
        mask = a_value > b_value
        equal = a_value == b_value
        a_isnan = a_value != a_value
        b_isnan = b_value != b_value
        mask |= a_isnan & (not b_isnan)
        equal |= a_isnan & b_isnan
        mask |= equal & (a_index < b_index)
        return tl.where(mask, a_value, b_value), tl.where(mask, a_index, b_index)

    @triton.jit
    def k(x_ptr, oi_ptr, C: tl.constexpr):
        c = tl.arange(0, C)
        _, i = tl.reduce((tl.load(x_ptr + c), c), 0, maximum_with_index)
        tl.store(oi_ptr, i)

    x = torch.tensor([float("nan"), 2.0, -3.0, 0.5, 1.0, 1.0, 1.0, 1.0])
    oi = torch.empty(1, dtype=torch.int32)
    k[(1,)](x, oi, C=8)
    print(oi.item(), torch.argmax(x).item())
''')


def test_a_combine_function_that_takes_a_values_truth_reduces_element_by_element():
    """`not b_isnan` of a block is one answer for the whole block in the interpreter: such a
    combine function (Inductor's argmax with NaN) goes to Triton's loop, which gets NaN's index."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", NOT_SCRIPT], capture_output=True, text=True, env=env,
                          timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["0", "0"]
