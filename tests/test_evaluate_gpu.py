"""Evaluator properties that only a real GPU shows. Run on a GPU machine (`pytest -m gpu`)."""
from __future__ import annotations

from pathlib import Path

import pytest

from tools.judge import evaluate
from tools.problem import load_problem
from tools.verdict import Status

pytestmark = pytest.mark.gpu
HERE = Path(__file__).parent
OK_SRC = (HERE / "problems" / "relu_ok.py").read_text()

OOB_SRC = OK_SRC.replace("tl.store(y_ptr + offs, tl.maximum(x, 0.0), mask=m)",
                         "tl.store(y_ptr + offs + (1 << 40), tl.maximum(x, 0.0))")
# an atomic in the loop: LLVM may delete a side-effect-free infinite loop
HANG_SRC = OK_SRC.replace("    pid = tl.program_id(0)\n",
                          "    pid = tl.program_id(0)\n    while pid >= 0:\n"
                          "        tl.atomic_add(y_ptr, 0.0)\n")


@pytest.fixture(scope="module")
def relu():
    return load_problem(HERE / "problems" / "relu.py")


def test_correct_candidate_is_timed_against_both_baselines(relu):
    v = evaluate(relu, OK_SRC, device="cuda", profile=False)
    assert v.status is Status.CORRECT, v.diagnostics
    assert v.speedup_eager is not None and v.speedup_eager > 0
    assert v.timing["candidate"].n >= 20 and v.timing["eager"].n == v.timing["candidate"].n


def test_gpu_name_clocks_and_throttle_reasons_are_recorded(relu):
    v = evaluate(relu, OK_SRC, device="cuda", profile=False)
    assert v.device.get("name") and "sm_clock_mhz" in v.device and "throttle_reasons" in v.device


def test_illegal_address_is_runtime_error_and_next_candidate_is_judged_normally(relu):
    bad = evaluate(relu, OOB_SRC, device="cuda", profile=False)
    assert bad.status is Status.RUNTIME_ERROR
    assert evaluate(relu, OK_SRC, device="cuda", profile=False).status is Status.CORRECT


def test_hung_kernel_times_out_and_next_candidate_is_judged_normally(relu):
    import dataclasses
    from tools.settings import EvalSettings
    s = EvalSettings()
    s = dataclasses.replace(s, test=dataclasses.replace(s.test, compile_timeout_s=30, run_timeout_s=10))
    assert evaluate(relu, HANG_SRC, device="cuda", settings=s, profile=False).status is Status.TIMEOUT
    assert evaluate(relu, OK_SRC, device="cuda", profile=False).status is Status.CORRECT


def test_timer_counts_work_left_on_a_side_stream():
    import torch
    from tools.perf.timer import time_cuda
    a = torch.randn(4096, 4096, device="cuda")
    side = torch.cuda.Stream()

    def on_main():
        a @ a

    def on_side():
        with torch.cuda.stream(side):
            a @ a
    main_ms = min(time_cuda(on_main, warmup=3, iters=10))
    side_ms = min(time_cuda(on_side, warmup=3, iters=10))
    assert side_ms > 0.5 * main_ms


def test_profile_reports_triton_share_of_gpu_time(relu):
    v = evaluate(relu, OK_SRC, device="cuda", profile=True)
    assert v.status is Status.CORRECT
    assert v.checks["time_shares"]["triton"] > 0.5


def _timing(**kw):
    import dataclasses
    from tools.settings import EvalSettings
    s = EvalSettings()
    return dataclasses.replace(s, timing=dataclasses.replace(s.timing, **kw))


def test_a_short_forward_is_compared_by_graph_replay_with_an_interval(relu):
    v = evaluate(relu, OK_SRC, device="cuda", profile=False)
    assert v.status is Status.CORRECT, v.diagnostics
    assert v.checks["timing_measure"] == "cuda_graph" and v.checks["timing_reps"] > 1
    iv = v.speedup_interval["eager"]
    assert iv["low"] <= v.speedup_eager <= iv["high"]
    # rounds come in batches of [timing] rounds until the interval is narrow enough
    assert iv["rounds"] == v.checks["timing_rounds"] and iv["rounds"] in (5, 10, 15, 20, 25)
    assert iv["rounds"] == 25 or iv["high"] / iv["low"] - 1 <= 0.02
    # per-call figures are kept beside the measure the speedup used, and are larger
    assert v.checks["timing_per_call_ms"]["candidate"] > v.timing["candidate"].median_ms


def test_a_forward_that_cannot_be_captured_is_compared_by_batched_calls(relu):
    syncing = OK_SRC.replace("        return y\n", "        torch.cuda.synchronize()\n        return y\n", 1)
    assert syncing != OK_SRC
    v = evaluate(relu, syncing, device="cuda", profile=False)
    assert v.status is Status.CORRECT, v.diagnostics
    assert v.checks["timing_measure"] == "batched" and "candidate" in v.checks["graph_capture_failed"]


def test_the_per_call_measure_can_be_forced(relu):
    v = evaluate(relu, OK_SRC, device="cuda", settings=_timing(measure="per_call"), profile=False)
    assert v.checks["timing_measure"] == "per_call"
    assert v.timing["candidate"].median_ms == pytest.approx(v.checks["timing_per_call_ms"]["candidate"])


def test_a_later_profile_in_a_fresh_worker_counts_the_candidates_triton_kernels_as_triton(relu):
    """[eval] profile = "refined": the profile step alone, for a candidate judged earlier, runs in a
    worker that has launched nothing yet; its kernels are still Triton's, not library kernels."""
    from tools.judge.session import Judge
    with Judge(relu, device="cuda") as judge:
        v = judge.judge(OK_SRC, profile=False)
        assert v.status is Status.CORRECT, v.diagnostics
        profiled = judge.add_bottleneck(OK_SRC, v)
    assert profiled.bottleneck is not None, profiled.checks.get("profile_error")
    assert profiled.checks["time_shares"]["triton"] > 0.5
    assert "library_ops" not in profiled.flags
