"""A kernel's integer argument as a loop bound in Triton's CPU interpreter
(tools/dialect/interp_index.py): Triton 3.6 converts it with `int(array)`, which NumPy 2.4
refuses; after install the loop runs on any Triton. The interpreter of Triton 3.6 is
rebuilt here by putting its conversion back over the installed Triton's."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy
import pytest

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = textwrap.dedent('''
    import os, sys
    os.environ["TRITON_INTERPRET"] = "1"
    import torch, triton, triton.language as tl
    from triton.runtime import interpreter
    from tools.dialect import interp_index

    newest = interpreter._patch_lang_tensor
    def triton_3_6(tensor, scope):   # Triton 3.6's interpreter.py: int(self.handle.data)
        newest(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data))
    interpreter._patch_lang_tensor = triton_3_6
    if sys.argv[1] == "installed":
        interp_index.install()

    @triton.jit
    def row_sum(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        acc = tl.zeros([BLOCK], tl.float32)
        for off in tl.range(0, n, BLOCK):
            idx = off + tl.arange(0, BLOCK)
            acc += tl.load(x_ptr + idx, mask=idx < n, other=0.0)
        tl.store(out_ptr, tl.sum(acc, 0))

    x = torch.arange(1000, dtype=torch.float32)
    out = torch.empty(1)
    row_sum[(1,)](x, out, 1000, BLOCK=128)
    print("sum", out.item())
''')


def _run(mode: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", SCRIPT, mode], cwd=ROOT, capture_output=True, text=True,
                          timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT)})


def test_a_runtime_loop_bound_runs_on_triton_3_6s_interpreter_once_installed():
    got = _run("installed")
    assert got.returncode == 0 and "sum 499500.0" in got.stdout, got.stderr[-2000:]


@pytest.mark.skipif(tuple(int(p) for p in numpy.__version__.split(".")[:2]) < (2, 4),
                    reason="NumPy before 2.4 only warns on int() of a one-element array")
def test_without_install_triton_3_6s_interpreter_fails_on_a_runtime_loop_bound():
    got = _run("plain")
    assert got.returncode != 0 and "only 0-dimensional arrays" in got.stderr, (got.stdout, got.stderr[-2000:])
