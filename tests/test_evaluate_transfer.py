"""How outputs reach the judge: the pipe on cpu, a judge-owned CUDA IPC buffer on cuda."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from tools import settings as cfg
from tools.judge import evaluate
from tools.problem import load_problem
from tools.verdict import Status

HERE = Path(__file__).parent
OK_SRC = (HERE / "problems" / "relu_ok.py").read_text()
# right everywhere but the last element: only the comparison can tell
OFF_BY_ONE_SRC = OK_SRC.replace("tl.store(y_ptr + offs, tl.maximum(x, 0.0), mask=m)",
                                "tl.store(y_ptr + offs, tl.maximum(x, 0.0), mask=m & (offs < n - 1))")


def _fast(transfer: str = "auto") -> cfg.EvalSettings:
    test = dataclasses.replace(cfg.TrialSettings(), trials=2, output_transfer=transfer)
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


# --- the judge's side of the IPC offer, with the driver and the worker stood in for -----

class _FakeStaging:
    def __init__(self, nbytes, device_index):
        import torch
        self.tensor, self.handle, self.freed = torch.zeros(nbytes, dtype=torch.uint8), b"\0" * 64, False

    def free(self):
        self.freed = True


class _FakeWorker:
    def __init__(self, run, honest=True):
        self.run, self.honest = run, honest

    def request(self, header, timeout_s):
        import torch
        buf = self.run.staging.tensor
        seen = buf[:256].tolist()
        if self.honest:
            buf[256:512].copy_(torch.arange(255, -1, -1, dtype=torch.uint8))
        return {"ok": True, "probe": seen}, b""


def _offer(monkeypatch, relu, honest):
    import torch
    from tools.judge import compile_phase, record
    from tools.sandbox import cudaipc
    monkeypatch.setattr(cudaipc, "Staging", _FakeStaging)
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda i=0: (1 << 34, 1 << 34))
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: None)
    run = record.Evaluation(relu, OK_SRC, "cuda", 0, _fast())
    compile_phase._offer_staging(run, _FakeWorker(run, honest), [torch.zeros(16, 1000)])
    return run


def test_a_proven_ipc_buffer_carries_the_outputs(monkeypatch, relu):
    run = _offer(monkeypatch, relu, honest=True)
    assert run.checks["output_transfer"] == "cuda_ipc" and run.staged is run.staging.tensor


def test_a_failed_probe_keeps_the_pipe_and_the_buffer_until_the_worker_is_gone(monkeypatch, relu):
    run = _offer(monkeypatch, relu, honest=False)
    assert run.checks["output_transfer"].startswith("pipe (CUDA IPC probe failed")
    assert run.staged is None and run.staging is not None and not run.staging.freed
