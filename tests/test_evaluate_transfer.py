"""How outputs reach the judge: the pipe on cpu, a judge-owned CUDA IPC buffer on cuda."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from tools import settings as cfg
from tools.evaluate import evaluate
from tools.problem import load_problem
from tools.verdict import Status

HERE = Path(__file__).parent
OK_SRC = (HERE / "problems" / "relu_ok.py").read_text()
# right everywhere but the last element: only the comparison can tell
OFF_BY_ONE_SRC = OK_SRC.replace("tl.store(y_ptr + offs, tl.maximum(x, 0.0), mask=m)",
                                "tl.store(y_ptr + offs, tl.maximum(x, 0.0), mask=m & (offs < n - 1))")


def _fast(transfer: str = "auto") -> cfg.EvalSettings:
    test = dataclasses.replace(cfg.TestSettings(), trials=2, output_transfer=transfer)
    timing = dataclasses.replace(cfg.TimingSettings(), warmup=2, rounds=2, iters_per_round=5,
                                 compile_baseline=False)
    return cfg.EvalSettings(test=test, timing=timing)


@pytest.fixture(scope="module")
def relu():
    return load_problem(HERE / "problems" / "relu.py")


def test_off_by_one_variant_really_differs():
    assert OFF_BY_ONE_SRC != OK_SRC


def test_cpu_outputs_come_through_the_pipe(relu):
    v = evaluate(relu, OK_SRC, device="cpu", settings=_fast(), profile=False)
    assert v.status is Status.CORRECT and v.checks["output_transfer"] == "pipe"


@pytest.mark.gpu
def test_cuda_outputs_come_through_the_ipc_buffer(relu):
    v = evaluate(relu, OK_SRC, device="cuda", settings=_fast(), profile=False)
    assert v.status is Status.CORRECT, v.diagnostics
    assert v.checks["output_transfer"] == "cuda_ipc"


@pytest.mark.gpu
def test_wrong_output_is_caught_through_the_ipc_buffer(relu):
    v = evaluate(relu, OFF_BY_ONE_SRC, device="cuda", settings=_fast(), profile=False)
    assert v.checks["output_transfer"] == "cuda_ipc"
    assert v.status is Status.INCORRECT and "diff:tail" in v.flags


@pytest.mark.gpu
def test_pipe_setting_turns_ipc_off(relu):
    v = evaluate(relu, OK_SRC, device="cuda", settings=_fast("pipe"), profile=False)
    assert v.status is Status.CORRECT and v.checks["output_transfer"].startswith("pipe")
