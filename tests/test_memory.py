"""GPU memory in the judge (tools/judge/memory.py) on CPU: lean sessions keep no copies,
whose an allocation failure is, the judge's own failures retried then exit 3, and the
judge service's eviction of idle sessions. The GPU side (peaks against KernelBench's
floor) is benchmarks/kb_memory.py; the red-team suite is judged lean too
(tests/test_exploits.py)."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch

from tools import settings as cfg
from tools.errors import EvaluatorError
from tools.judge import memory
from tools.judge.record import Evaluation
from tools.sandbox.outputs import fingerprint
from tools.verdict import Status

EXPLOITS = Path(__file__).parent / "exploits"
GIB = 1 << 30


def _lean_settings(lean: bool = True) -> cfg.EvalSettings:
    return cfg.EvalSettings(test=dataclasses.replace(cfg.TrialSettings(), trials=2, lean_memory_mib=0 if lean else 256),
                            timing=dataclasses.replace(cfg.TimingSettings(), compile_baseline=False))


# --- fingerprints: the lean worker's check that inputs were not written ---------------

def test_a_fingerprint_is_equal_for_an_untouched_tensor():
    x = torch.randn(1000, 37)
    assert torch.equal(fingerprint(x), fingerprint(x.clone()))


def test_a_fingerprint_changes_when_one_element_changes():
    x = torch.randn(4097)
    before = fingerprint(x)
    x[4096] += 1e-6
    assert not torch.equal(fingerprint(x), before)


def test_a_fingerprint_changes_when_two_elements_swap_places():
    x = torch.arange(100, dtype=torch.float32)
    before = fingerprint(x)
    x[[3, 70]] = x[[70, 3]]
    assert not torch.equal(fingerprint(x), before)


def test_a_fingerprint_reads_odd_sized_and_strided_tensors():
    odd = torch.randint(0, 255, (7,), dtype=torch.uint8)
    strided = torch.randn(10, 10).t()
    assert fingerprint(odd).shape[1] == 2 and torch.equal(fingerprint(strided), fingerprint(strided.clone()))


# --- whose fault an allocation failure is -------------------------------------------

def _oom_run(held_gib: float, tried_gib: float, allowance_floor_gib: float = 4.0):
    fp = memory.Footprint(int(allowance_floor_gib * GIB / 2), 0, int(allowance_floor_gib * GIB), ())
    judge = type("J", (), {"footprint": fp, "dev": "cpu"})()
    run = Evaluation(None, "", "cuda", 0, cfg.EvalSettings(), judge)
    reply = {"ok": False, "error_type": "OutOfMemoryError", "gpu_reserved_bytes": int(held_gib * GIB),
             "message": f"CUDA out of memory. Tried to allocate {tried_gib:.2f} GiB. GPU 0 has ..."}
    return run, reply


def test_an_allocation_failure_beyond_the_allowance_is_the_candidates_own():
    run, reply = _oom_run(held_gib=3.0, tried_gib=40.0)
    memory.attribute_candidate_oom(run, reply)
    assert [d.kind for d in run.diagnostics] == ["out_of_memory"] and run.checks["oom"]["candidate_asked_gib"] > 40


def test_an_allocation_failure_within_the_allowance_is_the_judges_shortage():
    run, reply = _oom_run(held_gib=2.0, tried_gib=1.0)
    with pytest.raises(memory.JudgeOutOfMemory):
        memory.attribute_candidate_oom(run, reply)
    assert not run.diagnostics


def test_tritons_shared_memory_limit_is_not_an_allocation_failure():
    reply = {"ok": False, "kind": "triton_compile", "error_type": "OutOfResources",
             "message": "out of resource: shared memory, Required: 262144"}
    assert not memory.reply_is_oom(reply)
    assert memory.reply_is_oom({"ok": False, "error_type": "OutOfMemoryError", "message": "CUDA out of memory."})


def test_torchs_message_gives_the_failed_allocations_size():
    assert memory.tried_bytes("CUDA out of memory. Tried to allocate 2.50 GiB. GPU 0 has") == int(2.5 * GIB)
    assert memory.tried_bytes("no size here") == 0


# --- the judge's own failures: relieved, retried once, then exit 3 -------------------

class _Pressure:
    def __init__(self):
        self.relieved = 0
        self.dev = "cpu"

    def relieve_memory(self):
        self.relieved += 1


def test_the_judges_own_allocation_failure_is_retried_after_relieving_memory():
    judge, calls = _Pressure(), []

    def step():
        calls.append(1)
        if len(calls) == 1:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 8.00 GiB")
        return "ok"
    assert memory.retry_oom(judge, "the reference", step) == "ok" and judge.relieved == 1


def test_a_second_allocation_failure_of_the_judge_is_an_evaluator_error():
    judge = _Pressure()

    def step():
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 8.00 GiB")
    with pytest.raises(EvaluatorError, match="ran out of GPU memory in the judge"):
        memory.retry_oom(judge, "the reference", step)


def test_other_failures_of_a_judge_step_pass_through_unretried():
    judge = _Pressure()
    with pytest.raises(ValueError):
        memory.retry_oom(judge, "x", lambda: (_ for _ in ()).throw(ValueError("not memory")))
    assert judge.relieved == 0


# --- lean sessions -------------------------------------------------------------------

def _problem(name: str = "relu"):
    from tools.problem import load_problem
    return load_problem(EXPLOITS / "problems" / f"{name}.py")


def test_a_lean_session_keeps_no_reference_after_a_candidate():
    from tools.judge import Judge
    with Judge(_problem(), device="cpu", settings=_lean_settings()) as judge:
        v = judge.judge((EXPLOITS / "ok_relu.py").read_text(), profile=False)
        assert v.status is Status.CORRECT and judge.lean
        assert judge._refs == {} and judge._last_ref is None
    assert v.checks["memory"]["lean"] is True


def test_a_small_session_is_not_lean_and_caches_its_references():
    from tools.judge import Judge
    with Judge(_problem(), device="cpu", settings=_lean_settings(lean=False)) as judge:
        v = judge.judge((EXPLOITS / "ok_relu.py").read_text(), profile=False)
        assert v.status is Status.CORRECT and not judge.lean and len(judge._refs) == 2
    assert v.checks["memory"]["lean"] is False and v.checks["memory"]["input_gib"] >= 0


def test_a_lean_second_call_sees_new_values_in_the_first_calls_storage(monkeypatch):
    from tools.judge import evaluate, ownership
    # the kernel-less forward (tools/judge/ownership.py) runs before the trial its secret
    # seeds pick; before trial 1, its freed inputs' block may come back to trial 1's first
    # call, which then gets a stale answer itself (still incorrect, but not the call this
    # test is about): it runs before the last trial here, so trial 1 starts clean
    monkeypatch.setattr(ownership, "off_trial", lambda seeds: len(seeds) - 1)
    v = evaluate(_problem(), (EXPLOITS / "cache_by_data_ptr.py").read_text(), device="cpu",
                 settings=_lean_settings(), profile=False)
    assert v.status is Status.INCORRECT
    assert any("second call, with new values in the same input tensors" in d.message for d in v.diagnostics)


def test_a_judge_shortage_during_a_candidate_judges_it_again(monkeypatch):
    from tools.judge import Judge, pipeline
    real, calls = pipeline._judge, []

    def short_once(run, name, profile):
        calls.append(1)
        if len(calls) == 1:
            raise memory.JudgeOutOfMemory("other sessions hold the GPU")
        return real(run, name, profile)
    monkeypatch.setattr(pipeline, "_judge", short_once)
    with Judge(_problem(), device="cpu", settings=_lean_settings()) as judge:
        relieved = []
        judge.memory_pressure = lambda j: relieved.append(j)
        v = judge.judge((EXPLOITS / "ok_relu.py").read_text(), profile=False)
    assert v.status is Status.CORRECT and v.checks["judged_again_after"] == "other sessions hold the GPU"
    assert relieved == [judge]


def test_a_judge_shortage_twice_is_an_evaluator_failure_not_a_verdict(monkeypatch):
    from tools.judge import Judge, pipeline

    def always_short(run, name, profile):
        raise memory.JudgeOutOfMemory("other sessions hold the GPU")
    monkeypatch.setattr(pipeline, "_judge", always_short)
    with Judge(_problem(), device="cpu", settings=_lean_settings()) as judge:
        with pytest.raises(EvaluatorError):
            judge.judge((EXPLOITS / "ok_relu.py").read_text(), profile=False)


def test_a_problems_input_bytes_come_from_the_meta_pass():
    assert _problem().input_bytes == 16 * 1000 * 4


# --- the judge service keeps what fits ---------------------------------------------

class _FakeJudge:
    device, gpu_index = "cpu", 0

    def __init__(self, *args, **kwargs):
        self.closed = False

    def close(self):
        self.closed = True


def _service_with(monkeypatch, *busy: int):
    """A service whose cache keeps one session per entry of `busy` (its users)."""
    from tools.judge.service import Service
    from tools.judge.pool import SessionKey
    monkeypatch.setattr("tools.judge.pool.Judge", _FakeJudge)
    svc = Service("cpu", 0, 60.0, {})
    svc.cache.keep = None   # all of them, whatever MAX_SESSIONS says
    judges = []
    for i, b in enumerate(busy):
        s, _ = svc.cache.acquire(SessionKey(f"p{i}", None, "cpu"), lambda: None)
        if not b:
            svc.release(s)
        judges.append(s.judge)
    return svc, judges


def test_memory_pressure_evicts_idle_sessions_but_not_busy_ones_or_the_asking_one(monkeypatch):
    svc, (idle, busy, asking) = _service_with(monkeypatch, 0, 1, 0)
    assert svc.cache.evict_idle(keep=asking) == 1
    assert idle.closed and not busy.closed and not asking.closed and len(svc.cache.sessions()) == 2


def test_the_service_hooks_its_sessions_to_its_eviction(tmp_path):
    from tools.judge.service import Service
    svc = Service("cpu", 0, 60.0, {})
    session, _ = svc.session(str(EXPLOITS / "problems" / "relu.py"), _lean_settings())
    try:
        assert session.judge.memory_pressure == svc.cache.evict_idle
    finally:
        svc.release(session)
        svc.close()
