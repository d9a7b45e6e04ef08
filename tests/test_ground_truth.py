"""The judge's rules on CUPTI's records (tools/judge/ground_truth.py), on synthetic
records: one property each. The worker's recording on a real GPU is in
tests/test_ground_truth_gpu.py."""
from __future__ import annotations

import dataclasses
from types import SimpleNamespace

from tools.judge import ground_truth
from tools.judge.record import Evaluation
from tools.settings import EvalSettings, GuardSettings
from tools.verdict import Status

SRC = '''
import triton
@triton.jit
def relu_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pass
'''
PROBE = {"ok": True, "kernels_seen": 1, "first_session_s": 0.2, "warm_session_s": 0.002}
FILL = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, std::array<char*, 1ul> >(int, at::native::FillFunctor<float>, std::array<char*, 1ul>)"
COPY = ("void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl_nocast<at::native::direct_copy_kernel_cuda"
        "(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda(float)#1}> >(int, ...)")
CAT = "void at::native::(anonymous namespace)::CatArrayBatchedCopy_contig<at::native::(anonymous namespace)::OpaqueType<4u>, unsigned int, 2, 128, 1>(...)"
GEMM = "sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas"
ADD = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul> >(...)"
RELU_IN_BYTES = 16000 * 4


def _run(device: str = "cuda", probe: dict | None = PROBE, src: str = SRC, **guards) -> Evaluation:
    settings = EvalSettings(guards=dataclasses.replace(GuardSettings(), **guards))
    judge = SimpleNamespace(footprint=SimpleNamespace(input_bytes=RELU_IN_BYTES, output_bytes=RELU_IN_BYTES))
    run = Evaluation(None, src, device, 0, settings, judge)
    ground_truth.begin(run, probe)
    return run


def _reply(kernels: dict, copies: dict | None = None, calls: int = 1, launches: dict | None = None) -> dict:
    launched = {"relu_kernel": calls} if launches is None else launches
    return {"launches": launched, "activity": {"ok": True, "kernels": kernels, "copies": copies or {},
                                               "calls": calls, "launches": launched, "record_s": 0.003}}


def test_only_the_candidates_triton_kernel_passes():
    run = _run()
    assert ground_truth.check(run, _reply({"relu_kernel": 2}, calls=2), "trial 1", timed=False) is None
    assert run.diagnostics == []


def test_fill_copy_and_cat_kernels_of_pytorch_pass():
    run = _run()
    reply = _reply({"relu_kernel": 1, FILL: 2, COPY: 1, CAT: 1})
    assert ground_truth.check(run, reply, "trial 1", timed=False) is None


def test_a_cublas_gemm_is_rejected_as_library_work():
    run = _run()
    status = ground_truth.check(run, _reply({"relu_kernel": 1, GEMM: 1}), "timing round 5", timed=True)
    assert status is Status.REJECTED and "library_ops" in run.flags
    assert run.diagnostics[0].kind == "guard:gpu_kernels" and "sm90_xmma_gemm" in run.diagnostics[0].message


def test_an_elementwise_compute_kernel_of_pytorch_is_rejected():
    run = _run()
    assert ground_truth.check(run, _reply({"relu_kernel": 1, ADD: 1}), "trial 1", timed=False) is Status.REJECTED


def test_library_kernels_are_only_flagged_when_library_ops_are_allowed():
    run = _run(allow_library_ops=True)
    assert ground_truth.check(run, _reply({"relu_kernel": 1, ADD: 1}), "trial 1", timed=False) is None
    assert "library_ops" in run.flags and run.diagnostics[0].kind == "library_ops"


def test_a_def_named_like_a_cublas_kernel_does_not_hide_the_gemm():
    src = SRC + f"\n@triton.jit\ndef {GEMM}(x):\n    pass\n"
    run = _run(src=src)
    # the candidate launched its function of that name once, the GPU ran the gemm twice
    reply = _reply({"relu_kernel": 1, GEMM: 2}, launches={"relu_kernel": 1, GEMM: 1})
    assert ground_truth.check(run, reply, "trial 1", timed=False) is Status.REJECTED


def test_a_kernel_named_after_an_undefined_function_is_library_work():
    run = _run()
    reply = _reply({"relu_kernel": 1, "some_other_kernel": 1})
    assert ground_truth.check(run, reply, "trial 1", timed=False) is Status.REJECTED


def test_no_kernel_on_the_gpu_is_rejected_although_python_counted_a_launch():
    run = _run()
    status = ground_truth.check(run, _reply({}, launches={"relu_kernel": 1}), "trial 1", timed=False)
    assert status is Status.REJECTED and "no_triton_kernel" in run.flags
    assert run.diagnostics[0].kind == "guard:no_triton_program"


def test_fewer_triton_kernels_than_recorded_calls_is_rejected():
    run = _run()
    reply = _reply({"relu_kernel": 1, FILL: 2}, calls=2)
    assert ground_truth.check(run, reply, "trial 1", timed=False) is Status.REJECTED


def test_a_host_round_trip_of_the_input_is_rejected():
    run = _run()
    copies = {"DtoH": {"count": 1, "bytes": RELU_IN_BYTES}, "HtoD": {"count": 1, "bytes": RELU_IN_BYTES}}
    status = ground_truth.check(run, _reply({"relu_kernel": 1}, copies), "trial 1", timed=False)
    assert status is Status.REJECTED and "host_compute" in run.flags
    assert run.diagnostics[0].kind == "guard:host_transfer"


def test_small_host_copies_pass():
    run = _run()
    copies = {"DtoH": {"count": 3, "bytes": 12}, "HtoD": {"count": 1, "bytes": 256}}
    assert ground_truth.check(run, _reply({"relu_kernel": 1}, copies), "trial 1", timed=False) is None


def test_device_to_device_copies_and_memsets_pass_whatever_their_size():
    run = _run()
    copies = {"DtoD": {"count": 2, "bytes": 1 << 30}, "Memset": {"count": 1, "bytes": 1 << 30}}
    assert ground_truth.check(run, _reply({"relu_kernel": 1}, copies), "trial 1", timed=False) is None


def test_the_host_limit_grows_with_the_smaller_of_inputs_and_outputs():
    assert ground_truth.host_limit_bytes(64_000, 64_000) == ground_truth.HOST_FLOOR_BYTES
    assert ground_truth.host_limit_bytes(1 << 30, 4 << 20) == (4 << 20) // 100


def test_a_failed_recording_after_a_working_probe_is_tampering():
    run = _run()
    reply = {"launches": {"relu_kernel": 1}, "activity": {"ok": False, "error": "Profiler is already enabled"}}
    assert ground_truth.check(run, reply, "trial 2", timed=False) is Status.REJECTED
    assert "tampering" in run.flags and run.diagnostics[0].kind == "guard:gpu_activity"


def test_what_was_seen_is_summed_in_checks():
    run = _run()
    ground_truth.check(run, _reply({"relu_kernel": 2, FILL: 1}, {"DtoH": {"count": 1, "bytes": 4}}, calls=2),
                       "trial 1", timed=False)
    ground_truth.check(run, _reply({"relu_kernel": 1}, {"DtoH": {"count": 1, "bytes": 4}}), "timing round 5",
                       timed=True)
    seen = run.checks["gpu_activity"]
    assert seen["kernels"]["relu_kernel"] == 3 and seen["copies"] == [{"kind": "DtoH", "bytes": 8, "count": 2}]
    assert seen["calls_profiled"] == 2 and seen["timed_calls_profiled"] == 1


def test_cpu_says_in_words_that_nothing_is_recorded():
    run = _run(device="cpu", probe=None)
    assert run.checks["gpu_activity"].startswith("not available on cpu")
    assert not ground_truth.recording(run) and not ground_truth.probing(run)


def test_a_probe_that_saw_nothing_leaves_the_candidate_unjudged_by_these_rules():
    run = _run(probe={"ok": False, "error": "CUPTI_ERROR_INSUFFICIENT_PRIVILEGES"})
    assert "not available" in run.checks["gpu_activity"]
    assert ground_truth.check(run, _reply({"relu_kernel": 1, GEMM: 1}), "trial 1", timed=False) is None


def test_the_setting_switches_recording_off():
    run = _run(gpu_ground_truth=False)
    assert run.checks["gpu_activity"].startswith("off") and not ground_truth.probing(run)


def test_old_triton_signature_suffixes_still_name_the_candidates_kernel():
    run = _run()
    assert ground_truth.check(run, _reply({"relu_kernel_0d1d2de": 1}), "trial 1", timed=False) is None


class _TimingWorker:
    """Answers time requests like the worker: an activity record only when asked."""

    def __init__(self):
        self.asked = []

    def request(self, header, timeout_s):
        self.asked.append(bool(header.get("activity")))
        reply = {"ok": True, "samples_ms": [0.01] * header["iters"], "launches": 30, "calls": 30, "outputs": []}
        if header.get("activity"):
            reply["activity"] = {"ok": True, "kernels": {"relu_kernel": 1}, "copies": {}, "calls": 1,
                                 "launches": {"relu_kernel": 1}, "record_s": 0.002}
        return reply, b""


def test_only_the_last_round_of_a_batch_is_recorded_and_checked(monkeypatch):
    from tools.judge import time_phase
    monkeypatch.setattr(time_phase, "recheck_timed_outputs", lambda *a: None)
    run, worker = _run(), _TimingWorker()
    rounds = {"eager": [], "candidate": []}
    status = time_phase._one_batch(run, worker, 1, "per_call", 1, {"eager": lambda warm: [0.02]}, rounds)
    assert status is None and worker.asked == [False] * (run.settings.timing.rounds - 1) + [True]
    assert run.checks["gpu_activity"]["timed_calls_profiled"] == 1
