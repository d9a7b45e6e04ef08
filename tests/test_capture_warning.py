"""A forward that warns or prints, or that Dynamo traces twice, is still captured as one graph
(tools/dialect/inductor_capture.py):
level 2's 28_BMM_InstanceNorm_Sum_ResidualAdd_Multiply got no seed, "torch.compile failed: Unsupported:
Attempted to call function marked as skipped ... `_warnings.warn`"; a print of a shape, "Dynamo does not
know how to trace builtin operator `print`"; a 0-dim float64 input, "torch.compile produced 1 output modules;
expected one graph" (the try Dynamo restarted was counted as a graph); a forward decorated with
@torch.no_grad(), "No module named 'krefine_problem_...'" (Dynamo imports the module its globals name)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PROBLEM = ROOT / "tests" / "dialect" / "problems" / "instancenorm_warns.py"
PRINTS = ROOT / "tests" / "problems" / "level3" / "print_in_forward.py"
RESTARTS = ROOT / "tests" / "problems" / "level3" / "float64_scalar_input.py"
NO_GRAD = ROOT / "tests" / "problems" / "level3" / "no_grad_forward.py"

# its own process: torch.compile leaves Inductor's compile threads in the process that ran it
_CAPTURE = """
import sys
from tools.dialect.inductor_capture import capture
from tools.problem import load_problem
cap = capture(load_problem(sys.argv[1]), "cpu")
print("captured", len(cap.code) > 0)
"""

_SEED = """
import sys
from tools.dialect.seedcache import cached_seed
from tools.judge import evaluate
from tools.problem import load_problem
from tools.settings import EvalSettings, TrialSettings
problem, device = load_problem(sys.argv[1]), sys.argv[2]
src = cached_seed(problem, device, None, "train")
verdict = evaluate(problem, src, device=device, profile=False,
                   settings=EvalSettings(test=TrialSettings(trials=2, gpu_cross_compile=False)))
print("verdict", verdict.status.value)
"""


def _python(code: str, *args: str, problem: Path = PROBLEM) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code, str(problem), *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=600)


@pytest.mark.slow
def test_a_forward_that_warns_is_captured_as_one_graph():
    out = _python(_CAPTURE)
    assert out.stdout.strip().splitlines()[-1:] == ["captured True"], out.stderr[-2000:]


@pytest.mark.slow
def test_the_seed_of_a_forward_that_warns_is_judged_correct():
    out = _python(_SEED, "cpu")
    assert out.stdout.strip().splitlines()[-1:] == ["verdict correct"], out.stderr[-2000:]


@pytest.mark.gpu
def test_the_seed_of_a_forward_that_warns_is_judged_correct_on_the_gpu():
    out = _python(_SEED, "cuda")
    assert out.stdout.strip().splitlines()[-1:] == ["verdict correct"], out.stderr[-2000:]


@pytest.mark.slow
def test_a_forward_that_prints_is_captured_as_one_graph():
    out = _python(_CAPTURE, problem=PRINTS)
    assert out.stdout.strip().splitlines()[-1:] == ["captured True"], out.stderr[-2000:]


@pytest.mark.slow
def test_a_forward_dynamo_traces_twice_is_captured_as_one_graph():
    out = _python(_CAPTURE, problem=RESTARTS)
    assert out.stdout.strip().splitlines()[-1:] == ["captured True"], out.stderr[-2000:]


@pytest.mark.slow
def test_a_forward_decorated_with_no_grad_is_captured_as_one_graph():
    out = _python(_CAPTURE, problem=NO_GRAD)
    assert out.stdout.strip().splitlines()[-1:] == ["captured True"], out.stderr[-2000:]


@pytest.mark.slow
def test_a_cpu_capture_does_not_say_its_kernels_will_not_be_executable():
    out = _python(_CAPTURE, problem=PRINTS)   # they run in Triton's interpreter
    assert out.stdout.strip().splitlines()[-1:] == ["captured True"], out.stderr[-2000:]
    assert "Could not find an active CPU backend" not in out.stderr
