"""tools/dialect/inductor_capture.py reads the autotuner's chosen launch configs while the
compiled module is still loaded: the fresh Inductor cache it compiles under clears
PyCodeCache on exit, so a read after it found no module and every seed on the H100 fell
back to Inductor's first heuristic config (47_Sum_reduction: 0.22x torch.compile)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PROBLEM = ROOT / "tests" / "dialect" / "problems" / "relu_odd.py"

# run in its own process: torch.compile leaves Inductor's compile threads in the process
# that ran it, and other tests rely on a process with no thread but the main one
_CHECK = """
import contextlib, sys
from torch._inductor import utils as inductor_utils
from tools.dialect import inductor_capture
from tools.problem import load_problem
real = getattr(inductor_utils, "fresh_cache", None) or inductor_utils.fresh_inductor_cache
state = {"open": False, "read_while_open": None}

@contextlib.contextmanager
def tracked(*args, **kwargs):
    with real(*args, **kwargs):
        state["open"] = True
        try:
            yield
        finally:
            state["open"] = False

def chosen(code):
    state["read_while_open"] = state["open"]
    return {}

inductor_utils.fresh_cache = inductor_utils.fresh_inductor_cache = tracked
inductor_capture._chosen_configs = chosen
inductor_capture.capture(load_problem(sys.argv[1]), "cpu")
print(state["read_while_open"])
"""


@pytest.mark.slow
def test_the_chosen_configs_are_read_before_the_fresh_cache_closes():
    out = subprocess.run([sys.executable, "-c", _CHECK, str(PROBLEM)], cwd=ROOT, capture_output=True, text=True,
                         timeout=300)
    assert out.stdout.strip().splitlines()[-1:] == ["True"], out.stderr[-2000:]


@pytest.mark.slow   # a live torch.compile in its own process
def test_a_cast_the_forward_makes_rounds_in_the_captured_kernel_as_eager_rounds_it(tmp_path):
    # Inductor's default keeps the fp32 value through .half().float() inside a fused kernel
    out = tmp_path / "capture.py"
    done = subprocess.run([sys.executable, "-m", "tools.dialect", "capture",
                           str(ROOT / "tests" / "dialect" / "problems" / "half_round_trip.py"), "--device", "cpu",
                           "--out", str(out)], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert ".to(tl.float16)" in out.read_text()
