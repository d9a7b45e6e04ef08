"""The worker's CUPTI records on a real GPU (tools/sandbox/activity.py) and the judge's
reading of them (tools/judge/ground_truth.py): what Triton's, PyTorch's and cuBLAS's
kernels, copies and graph replays look like there. Run on a GPU machine; the
rules themselves are tested on synthetic records in tests/test_ground_truth.py."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from tools.judge import ground_truth
from tools.sandbox.activity import Recorder, probe, replay_graph
from tools.sandbox.outputs import poisoned_allocations
from tools.verdict import Status

pytestmark = pytest.mark.gpu
EXPLOITS = Path(__file__).parent / "exploits"


def _kernel():
    import triton
    import triton.language as tl

    @triton.jit
    def gt_probe_kernel(x_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=mask) + 1.0, mask=mask)
    return gt_probe_kernel


def _record(fn, calls: int = 1) -> dict:
    rec = Recorder(SimpleNamespace(launches={}), True)
    with rec.record(calls=calls):
        fn()
    facts = rec.facts()
    assert facts["ok"], facts
    return facts


def _kinds(facts: dict, own=("gt_probe_kernel",)) -> dict:
    return ground_truth.classify(facts["kernels"], frozenset(own), {})


def test_the_probe_sees_a_kernel():
    assert probe()["ok"]


def test_triton_names_the_cuda_kernel_after_the_function():
    import torch
    k, x = _kernel(), torch.zeros(4096, device="cuda")
    k[(4,)](x, x.numel(), BLOCK=1024)   # compiled outside the record
    facts = _record(lambda: k[(4,)](x, x.numel(), BLOCK=1024))
    assert facts["kernels"] == {"gt_probe_kernel": 1}


def test_an_empty_grid_leaves_no_kernel_record():
    import torch
    k, x = _kernel(), torch.zeros(4096, device="cuda")
    k[(4,)](x, x.numel(), BLOCK=1024)
    assert _record(lambda: k[(0,)](x, x.numel(), BLOCK=1024))["kernels"] == {}


def test_a_torch_matmul_is_library_work():
    import torch
    a = torch.randn(256, 256, device="cuda")
    a @ a
    kinds = _kinds(_record(lambda: a @ a))
    assert kinds and set(kinds.values()) == {"library"}, kinds


def test_an_elementwise_compute_op_is_library_work():
    import torch
    a = torch.randn(4096, device="cuda")
    kinds = _kinds(_record(lambda: a * (a > 0)))
    assert kinds and set(kinds.values()) == {"library"}, kinds


def test_pytorch_data_movement_is_data():
    import torch
    a = torch.randn(64, 100, device="cuda")

    def moves():
        with poisoned_allocations():   # the trials' NaN-filled torch.empty
            torch.empty(1000, device="cuda")
            torch.empty_like(a, dtype=torch.int32)
        torch.zeros(1000, device="cuda")
        torch.full((10,), 3.0, device="cuda")
        a.t().contiguous()
        a.to(torch.float16)
        a.to(torch.bfloat16)
        a.clone()
        torch.cat([a, a], dim=1)
        torch.stack([a, a])
        torch.arange(100, device="cuda")
    kinds = _kinds(_record(moves))
    assert kinds and set(kinds.values()) == {"data"}, kinds


def test_copies_to_and_from_the_host_are_recorded_with_their_bytes():
    import torch
    a = torch.randn(16000, device="cuda")
    facts = _record(lambda: a.cpu().cuda())
    assert facts["copies"]["DtoH"]["bytes"] == 64000 and facts["copies"]["HtoD"]["bytes"] == 64000


def test_a_graph_replay_is_recorded_kernel_by_kernel():
    import torch
    from tools.perf.timer import capture_cuda_graph
    k, x = _kernel(), torch.zeros(4096, device="cuda")
    graph = capture_cuda_graph(lambda: k[(4,)](x, x.numel(), BLOCK=1024), warmup=1, reps_per_graph=3)
    try:
        facts = _record(lambda: replay_graph(graph), calls=3)
    finally:
        graph.close()
    assert facts["kernels"].get("gt_probe_kernel") == 3, facts["kernels"]


@pytest.fixture(scope="module")
def judge_case():
    """judge_case(name): a red-team file judged on cuda as tests/test_exploits.py does,
    in one session per problem, closed afterwards."""
    from test_exploits import CASES, _problem, _settings
    from tools.judge import Judge
    sessions = {}

    def judge(name: str):
        case = next(c for c in CASES if c.name == name)
        if case.problem not in sessions:
            sessions[case.problem] = Judge(_problem(case.problem), device="cuda", settings=_settings(case, "cuda"))
        return sessions[case.problem].judge(case.src, candidate_name="candidate.py", profile=False)
    yield judge
    for j in sessions.values():
        j.close()


def test_an_honest_candidate_is_recorded_in_trials_and_timed_calls(judge_case):
    v = judge_case("ok_relu")
    seen = v.checks["gpu_activity"]
    assert v.status is Status.CORRECT, v.diagnostics
    assert seen["kernels"].get("relu_kernel", 0) >= 3 and seen["calls_profiled"] >= 3
    assert seen["timed_calls_profiled"] >= 1


def test_a_library_op_only_on_timed_calls_is_caught_after_the_timing_rounds(judge_case):
    v = judge_case("r2_gpu_timed_only_library")
    assert v.status is Status.REJECTED and any(d.kind == "guard:gpu_kernels" and "timing round" in d.message
                                               for d in v.diagnostics), v.diagnostics
