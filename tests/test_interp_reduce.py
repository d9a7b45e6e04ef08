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
