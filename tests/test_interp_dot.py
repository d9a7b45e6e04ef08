"""tl.dot of bfloat16 blocks in Triton's CPU interpreter (tools/dialect/interp_dot.py): the
interpreter multiplies a bf16 block's raw uint16 bits as integers; after install the dot
is the exact float32 product of the bf16 values, as on a GPU. The families' GEMM runs here."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = textwrap.dedent('''
    import os, sys
    os.environ["TRITON_INTERPRET"] = "1"
    import torch
    from tools.dialect import interp_dot
    if sys.argv[1] == "installed":
        interp_dot.install()
    from tools.kernels.gemm import gemm
    torch.manual_seed(0)
    a = torch.randn(24, 40, dtype=torch.bfloat16)
    b = torch.randn(40, 16, dtype=torch.bfloat16)
    out = torch.empty(24, 16, dtype=torch.bfloat16)
    gemm(a, b, out=out)
    print("error", (out.float() - a.float() @ b.float()).abs().max().item())
''')


def _error(mode: str) -> float:
    done = subprocess.run([sys.executable, "-c", SCRIPT, mode], cwd=ROOT, capture_output=True, text=True,
                          timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr[-2000:]
    return float(done.stdout.split()[-1])


def test_a_bf16_gemm_in_the_interpreter_is_right_after_install():
    assert _error("installed") <= 0.125   # one bf16 step of the output (|values| < 32): its rounding


def test_a_bf16_gemm_in_the_bare_interpreter_multiplies_bit_patterns():
    # the fault install fixes: if a Triton release fixes it, this says so
    assert _error("bare") > 1e3
