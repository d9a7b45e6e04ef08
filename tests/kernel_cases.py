"""A kernel family's cases run in one child process: in Triton's interpreter on cpu
(triton.language must be imported with TRITON_INTERPRET=1, which would break compiling in
the test process), as they are on cuda. The child prints one JSON object, case -> error.
Nothing here is product code."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@lru_cache(maxsize=None)
def case_errors(cases: str, device: str) -> dict:
    """`cases` (a Python program taking the device as argv[1]) run once per device."""
    env = {**os.environ, "TRITON_INTERPRET": "1"} if device == "cpu" else dict(os.environ)
    done = subprocess.run([sys.executable, "-c", cases, device], capture_output=True, text=True, cwd=ROOT,
                          env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def compile_for_sm90(fn, signature: dict, constants: dict, **options):
    """`fn` (a @triton.jit kernel) compiled for sm_90 by this machine's ptxas, no GPU needed:
    what a GPU-only compile error would stop. Skips where this Triton has no ASTSource /
    GPUTarget, or where the process runs Triton's interpreter (`fn` is then no JITFunction)."""
    import pytest
    triton = pytest.importorskip("triton")
    try:
        from triton.backends.compiler import GPUTarget
        from triton.compiler import ASTSource
    except ImportError:
        pytest.skip("this Triton has no ASTSource / GPUTarget")
    if not hasattr(fn, "fn"):
        pytest.skip("TRITON_INTERPRET is set in this process")
    return triton.compile(ASTSource(fn, signature, constants), target=GPUTarget("cuda", 90, 32),
                          options=options or {"num_warps": 4})
