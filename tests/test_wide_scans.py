"""A cpu seed's sum and product scans in float64 (tools/dialect/inductor_wrapper.py `wide_scans`):
torch's cpu cumsum of float32 adds in float64, and a float32 scan of a row of 8192 was judged
incorrect (0.25% of elements past the fp32 tolerance where the running sum passes near zero).

The converter tests read captures recorded on cpu (tests/fixtures/inductor_level3/
cpu_long_row_cumsum.py, cpu_layernorm_cumsum.py: `python -m tools.dialect capture PROBLEM
--device cpu`); the seeds then run in lockstep with Model in Triton's interpreter.
"""
from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys

import pytest

from tests.test_counters import judged_seed
from tests.test_level3_seeds import FIXTURES, LOCKSTEP, PROBLEMS, ROOT, _seed
from tools.dialect import convert, read_capture
from tools.problem import load_problem


def _kernel(code: str, fragment: str) -> str:
    start = code.index(f"def {fragment}")
    return code[start:code.index("\n\n\n", start)]


# each call's largest error in units of the judge's fp32 tolerance (atol = rtol = 1e-4): at most 1 passes
IN_TOLERANCES = LOCKSTEP.replace("(g - w).abs().max().item()", "((g - w).abs() / (1e-4 + 1e-4 * w.abs())).max().item()")


def _tolerances(name: str, tmp_path) -> list[float]:
    (tmp_path / "seed.py").write_text(_seed(name), encoding="utf-8")
    problem = str(PROBLEMS / f"{name}.py")
    done = subprocess.run([sys.executable, "-c", IN_TOLERANCES, str(tmp_path / "seed.py"), problem],
                          capture_output=True, text=True, cwd=ROOT, timeout=300,
                          env={**os.environ, "TRITON_INTERPRET": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_cumsum_scans_float64_on_cpu():
    kernel = _kernel(_seed("long_row_cumsum"), "triton_red_fused_cumsum_0(")
    assert "tl.associative_scan((tmp2.to(tl.float64),), 1, _triton_helper_fn_add0)" in kernel


def test_the_scans_carry_over_the_row_is_float64():
    kernel = _kernel(_seed("long_row_cumsum"), "triton_red_fused_cumsum_0(")
    assert "tl.full([XBLOCK, 1], float('nan'), tl.float64)" in kernel


def test_a_long_cumsum_matches_the_cpu_model_within_the_fp32_tolerance(tmp_path):
    # a float32 scan: 82 of 32768 elements past the tolerance, 2.5e-4 where the sum passes near zero
    assert max(_tolerances("long_row_cumsum", tmp_path)) <= 1


def test_a_fused_layernorms_welford_statistics_stay_float32():
    kernel = _kernel(_seed("layernorm_cumsum"), "triton_red_fused_cumsum_native_layer_norm_0(")
    assert "tl.zeros([XBLOCK, R0_BLOCK], tl.float32)" in kernel and ".to(tl.float64),), 1," in kernel


@pytest.mark.slow
def test_the_judge_finds_a_layernorm_then_cumsum_correct_on_cpu(tmp_path):
    # beside eager directly its LayerNorm's rounding, summed over 6000, is up to twice the tolerance where a
    # sum passes near zero; against the float64 forward it is as exact as eager's (the judge's as-run rule).
    # Scanned in float32 the judge found it incorrect
    verdict = judged_seed("layernorm_cumsum", tmp_path)
    assert verdict["verdict"] == "correct", verdict.get("diagnostics")


def test_a_cuda_capture_keeps_its_float32_scan():
    # on a GPU torch's cumsum of float32 adds in float32: the seed scans as Inductor wrote it
    capture = read_capture((FIXTURES / "cpu_long_row_cumsum.py").read_text(encoding="utf-8"))
    code = convert(load_problem(PROBLEMS / "long_row_cumsum.py"), dataclasses.replace(capture, device="cuda"))
    assert "tl.associative_scan((tmp2,), 1, _triton_helper_fn_add0)" in code and "tl.float64" not in code
