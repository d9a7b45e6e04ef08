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
