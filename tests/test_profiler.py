"""tools/perf/ (profiler, ncu, roofline, bottleneck, summary): breakdown, resources, ncu
parsing, roofline, classification. CPU tests read outputs recorded on an H100 (tests/fixtures/profiler/);
GPU tests (marked gpu) check that kernels of known character get their class."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tools.perf import bottleneck, profiler, summary
from tools.perf import roofline as rl
from tools.perf.ncu import ncu_command, parse_ncu_csv
from tools.perf.profiles import profile_for

FIX = Path(__file__).parent / "fixtures" / "profiler"
H100 = profile_for("NVIDIA H100 80GB HBM3")


def _kernel(name, us, grid, *, threads=128, regs=16, kind="triton", calls=1, shared=0):
    return {"name": name, "calls": calls, "total_us": us, "mean_us": us / calls, "kind": kind,
            "grid_blocks": grid, "block_threads": threads, "n_regs": regs, "shared": shared}


def _summary(cost, time_ms, kernels, host_ms=None, resources=(), ncu_rows=()):
    return summary.summarize(profile=H100, cost=cost, time_ms=time_ms, host_ms=host_ms,
                             forward={"kernels": kernels, "resources": list(resources)},
                             ncu_rows=list(ncu_rows))


# -- kernel kinds and shares -----------------------------------------------------------

@pytest.mark.parametrize("name,kind", [
    ("add_kernel", "triton"),
    ("add_kernel_0d1d2d3", "triton"),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
     "std::array<char*, 1ul> >(int, at::native::FillFunctor<float>, std::array<char*, 1ul>)", "memory"),
    ("void at::native::(anonymous namespace)::CatArrayBatchedCopy<float, unsigned int, 2, 128, 1>", "memory"),
    ("Memset (Device)", "memory"),
    ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1", "library"),
    ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float>>", "library"),
])
def test_kernel_name_sorts_into_triton_library_or_memory(name, kind):
    assert profiler.kernel_kind(name, {"add_kernel"}) == kind


def test_candidate_kernel_named_like_a_copy_still_counts_as_triton():
    assert profiler.kernel_kind("copy_kernel", {"copy_kernel"}) == "triton"


def test_time_shares_sum_to_one_by_kind():
    b = [_kernel("k", 30.0, 1), _kernel("gemm", 60.0, 1, kind="library"),
         _kernel("fill", 10.0, 1, kind="memory")]
    assert profiler.time_shares(b) == pytest.approx({"triton": 0.3, "library": 0.6, "memory": 0.1})


def test_time_shares_of_empty_breakdown_are_zero():
    assert profiler.time_shares([]) == {"triton": 0.0, "library": 0.0, "memory": 0.0}


# -- occupancy ---------------------------------------------------------------------------

def test_occupancy_is_limited_by_registers_when_they_run_out():
    occ = profiler.occupancy(n_regs=255, threads=256, shared=0, profile=H100)
    assert occ["occupancy_limit"] == "registers" and occ["blocks_per_sm"] == 1


def test_occupancy_is_limited_by_shared_memory_of_a_pipelined_tile():
    occ = profiler.occupancy(n_regs=32, threads=128, shared=160 * 1024, profile=H100)
    assert occ["occupancy_limit"] == "shared memory" and occ["blocks_per_sm"] == 1


def test_light_kernel_reaches_full_occupancy():
    assert profiler.occupancy(n_regs=32, threads=256, shared=0, profile=H100)["occupancy"] == 1.0


# -- resources from Triton's caches ---------------------------------------------------------

def _fake_jit(n_regs=40, ptx="mma.sync.aligned.m16n8k16"):
    from collections import namedtuple
    from types import SimpleNamespace
    md = namedtuple("KernelMetadata", "shared num_warps num_stages")(16384, 4, 3)
    kernel = SimpleNamespace(name="mm_kernel", metadata=md, n_regs=n_regs, n_spills=0,
                             asm={"ptx": ptx})
    # Triton 3.x: device_caches[device] = (kernel_cache, ..., target, backend, binder)
    return SimpleNamespace(device_caches={0: ({"key": kernel}, {}, None, None, None)})


def test_kernel_resources_reads_compiled_variants_through_an_autotuner_wrapper():
    from types import SimpleNamespace
    autotuned = SimpleNamespace(fn=_fake_jit())
    (row,) = profiler.kernel_resources([autotuned], H100)
    assert (row["name"], row["n_regs"], row["shared"], row["num_warps"], row["num_stages"]) == \
        ("mm_kernel", 40, 16384, 4, 3)
    assert row["occupancy_limit"] is not None


def test_kernel_resources_sees_tensor_cores_in_the_ptx():
    assert profiler.kernel_resources([_fake_jit()])[0]["tensor_cores"] is True
    assert profiler.kernel_resources([_fake_jit(ptx="fma.rn.f32")])[0]["tensor_cores"] is False


def test_kernel_resources_skips_objects_that_are_not_triton_kernels():
    assert profiler.kernel_resources([object(), len]) == []


# -- ptxas on a CPU-compiled kernel -------------------------------------------------------

def _sm90_ptx():
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    sys.path.insert(0, str(FIX))
    from known_kernels import add_kernel
    src = ASTSource(fn=add_kernel, signature={"x": "*fp32", "y": "*fp32", "out": "*fp32",
                                              "n": "i32", "BLOCK": "constexpr"},
                    constexprs={"BLOCK": 1024})
    return triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": 4}).asm["ptx"]


def test_ptxas_reports_registers_of_a_cpu_compiled_sm90_kernel():
    r = profiler.ptxas_resources(_sm90_ptx())
    assert r["name"] == "add_kernel" and r["arch"] == "sm_90a"
    assert 8 <= r["n_regs"] <= 255 and r["n_spills"] == 0


def test_ptxas_error_is_returned_not_raised():
    r = profiler.ptxas_resources(".version 8.7\n.target sm_90a\n.address_size 64\n garbage")
    assert "error" in r


# -- roofline ----------------------------------------------------------------------------

def test_problem_cost_counts_matmul_flops_on_meta_tensors():
    import torch
    class MM(torch.nn.Module):
        def forward(self, a, b):
            return a @ b
    a = torch.empty(1024, 512, device="meta", dtype=torch.bfloat16)
    b = torch.empty(512, 256, device="meta", dtype=torch.bfloat16)
    cost = rl.problem_cost(MM(), [a, b])
    assert cost["flops"] == 2 * 1024 * 512 * 256
    assert cost["bytes"] == 2 * (1024 * 512 + 512 * 256 + 1024 * 256)
    assert cost["dtype"] == "bf16"


def test_problem_cost_counts_parameters_as_bytes():
    import torch
    lin = torch.nn.Linear(256, 128).to("meta")
    cost = rl.problem_cost(lin, [torch.empty(32, 256, device="meta")])
    assert cost["bytes"] == 4 * (32 * 256 + 32 * 128 + 256 * 128 + 128)


def test_problem_cost_still_counts_bytes_when_the_flop_counter_fails(monkeypatch):
    import torch
    import torch.utils.flop_counter as fc
    class Broken(fc.FlopCounterMode):
        def __enter__(self):
            raise RuntimeError("cannot trace")
    monkeypatch.setattr(fc, "FlopCounterMode", Broken)
    cost = rl.problem_cost(torch.nn.ReLU(), [torch.empty(1024, device="meta")])
    assert (cost["flops"], cost["bytes"], cost["flops_source"]) == (0, 8192, "unavailable")


def test_roofline_names_memory_limit_for_an_elementwise_problem():
    r = rl.roofline({"flops": 0, "bytes": 3350 * 10**6}, 2.0, H100, "fp32")
    assert r["limit"] == "memory"
    assert r["min_time_ms"] == pytest.approx(1.0)
    assert r["achieved_fraction"] == pytest.approx(0.5)


def test_roofline_names_compute_limit_for_a_large_matmul():
    r = rl.roofline({"flops": 2 * 8192**3, "bytes": 3 * 2 * 8192**2}, 2.0, H100, "bf16")
    assert r["limit"] == "compute" and r["arith_intensity"] > r["ridge_intensity"]


def test_roofline_floor_for_fp32_uses_tf32_tensor_peak():
    r = rl.roofline({"flops": 2 * 4096**3, "bytes": 1}, 1.0, H100, "fp32")
    assert r["floor_ms"] < r["min_time_ms"] / 5


def test_roofline_without_time_has_no_fraction():
    assert rl.roofline({"flops": 1, "bytes": 1}, None, H100, "fp32")["achieved_fraction"] is None


def test_ncu_flops_replace_zero_torch_flops_of_elementwise_work():
    cost = rl.refine_cost({"flops": 0, "bytes": 100}, [{"flops": 5e6, "dram_bytes_read": 60,
                                                         "dram_bytes_write": 90}])
    assert cost["flops"] == 5_000_000 and cost["flops_source"] == "ncu"
    assert cost["dram_bytes_measured"] == 150 and cost["bytes"] == 100


# -- classification rules (synthetic figures) ------------------------------------------------

def test_kernel_idle_most_of_the_forward_is_launch_bound():
    b = _summary({"flops": 0, "bytes": 49152}, 0.012, [_kernel("add_kernel", 2.1, 4)], host_ms=0.02)
    assert b["class"] == "launch-bound"
    assert any("GPU busy 18%" in e for e in b["evidence"])


def test_several_tiny_launches_get_a_fuse_hint():
    ks = [_kernel(n, 2.0, 4) for n in ("a", "b", "c")]
    b = _summary({"flops": 0, "bytes": 49152}, 0.03, ks, host_ms=0.04)
    assert b["class"] == "launch-bound" and b["hints"][0].startswith("fuse the 3 launches")


def test_streaming_kernel_near_dram_peak_is_memory_bound():
    b = _summary({"flops": 0, "bytes": 512 << 20}, 0.19, [_kernel("copy", 180, 16384, threads=256)],
                 host_ms=0.03)
    assert b["class"] == "memory-bound" and b["roofline_fraction"] == pytest.approx(0.84, abs=0.01)


def test_matmul_at_half_the_tensor_peak_is_compute_bound():
    b = _summary({"flops": 2 * 4096**3, "bytes": 3 * 32 << 20, "dtype": "bf16"}, 0.25,
                 [_kernel("mm", 240, 512, threads=256, regs=168)], host_ms=0.02)
    assert b["class"] == "compute-bound"


def test_fp32_fma_matmul_past_half_cuda_core_peak_is_compute_bound_with_tl_dot_hint():
    res = [{"name": "mm", "n_regs": 128, "n_spills": 0, "shared": 0, "num_warps": 4,
            "num_stages": 3, "tensor_cores": False}]
    b = _summary({"flops": 2 * 4096**3, "bytes": 3 * 64 << 20, "dtype": "fp32"}, 3.5,
                 [_kernel("mm", 3490, 4096, regs=128)], host_ms=0.02, resources=res)
    assert b["class"] == "compute-bound" and "tf32x3" in b["hints"][0]


def test_few_programs_on_many_sms_is_latency_bound_with_idle_sms():
    b = _summary({"flops": 0, "bytes": 64 << 20}, 0.115, [_kernel("row_sum", 110, 8)], host_ms=0.02)
    assert b["class"] == "latency-bound"
    assert b["evidence"][0] == "grid of 8 blocks on 132 SMs: 124 SMs idle"
    assert b["hints"][0].startswith("launch more programs")


def test_spilling_kernel_gets_a_register_pressure_hint():
    res = [{"name": "k", "n_regs": 255, "n_spills": 64, "shared": 0, "num_warps": 8,
            "num_stages": 3, "tensor_cores": False}]
    b = _summary({"flops": 0, "bytes": 64 << 20}, 1.0, [_kernel("k", 990, 4096, threads=256, regs=255)],
                 host_ms=0.02, resources=res)
    assert b["class"] == "latency-bound"
    assert any("spills 256 bytes" in e for e in b["evidence"])
    assert any("register pressure" in h for h in b["hints"])


def test_ncu_dram_above_60_percent_makes_memory_bound_whatever_the_roofline():
    ncu = [{"name": "k", "duration_us": 500.0, "dram_pct": 85.0, "sm_pct": 20.0,
            "dram_bytes_read": 3 * (64 << 20), "dram_bytes_write": 64 << 20}]
    b = _summary({"flops": 0, "bytes": 128 << 20}, 0.5, [_kernel("k", 495, 8192)], host_ms=0.02,
                 ncu_rows=ncu)
    assert b["class"] == "memory-bound"
    assert b["evidence"][0] == "DRAM at 85% of 3350 GB/s peak"
    assert any("2.0x the minimum bytes" in h for h in b["hints"])


def test_ncu_with_no_unit_busy_makes_latency_bound():
    ncu = [{"name": "k", "duration_us": 100.0, "dram_pct": 12.0, "sm_pct": 9.0}]
    b = _summary({"flops": 0, "bytes": 64 << 20}, 0.11, [_kernel("k", 100, 8)], host_ms=0.02,
                 ncu_rows=ncu)
    assert b["class"] == "latency-bound"
    assert "DRAM at 12% and SM at 9% of peak: no ceiling is near" in b["evidence"]


def test_roofline_fraction_is_present_whenever_a_gpu_time_is():
    b = _summary({"flops": 0, "bytes": 1 << 20}, 0.05, [])
    assert b["roofline_fraction"] == pytest.approx(rl.roofline({"flops": 0, "bytes": 1 << 20},
                                                               0.05, H100)["achieved_fraction"])


def test_summary_without_gpu_time_is_a_static_estimate_without_fraction():
    b = _summary({"flops": 2 * 4096**3, "bytes": 3 * 32 << 20, "dtype": "bf16"}, None, [])
    assert b["class"] == "compute-bound" and b["roofline_fraction"] is None
    assert b["evidence"][0].startswith("no GPU timing")


def test_hints_are_at_most_two_and_evidence_at_most_three():
    ks = [_kernel(n, 2.0, 4, kind=k) for n, k in (("a", "triton"), ("b", "library"), ("c", "memory"))]
    b = _summary({"flops": 0, "bytes": 4096}, 0.03, ks, host_ms=0.05)
    assert len(b["hints"]) <= 2 and len(b["evidence"]) <= 3


def test_describe_gives_two_to_four_short_lines():
    b = _summary({"flops": 0, "bytes": 64 << 20}, 0.115, [_kernel("row_sum", 110, 8)], host_ms=0.02)
    lines = bottleneck.describe(b).splitlines()
    assert 2 <= len(lines) <= 4 and lines[0].startswith("Bottleneck: latency-bound")
    assert b["summary"] == bottleneck.describe(b)


def test_describe_of_no_bottleneck_is_empty():
    assert bottleneck.describe(None) == ""


def test_bottleneck_is_json_serialisable():
    b = _summary({"flops": 0, "bytes": 49152}, 0.012, [_kernel("add_kernel", 2.1, 4)], host_ms=0.02)
    assert json.loads(json.dumps(b)) == b


def test_judge_side_names_are_importable_from_the_perf_room():
    from tools.perf import classify, describe, problem_cost, summarize
    assert (classify, describe, problem_cost, summarize) == \
        (bottleneck.classify, bottleneck.describe, rl.problem_cost, summary.summarize)


# -- ncu command --------------------------------------------------------------------------

def test_ncu_command_never_locks_clocks_and_filters_by_nvtx_push_pop_range():
    cmd = ncu_command(["python", "w.py"], ncu="/x/ncu", log_file="/t/log.csv")
    assert cmd[0] == "/x/ncu" and cmd[-2:] == ["python", "w.py"]
    assert cmd[cmd.index("--clock-control") + 1] == "none"
    assert cmd[cmd.index("--nvtx-include") + 1] == "krefine.candidate/"
    assert {"SpeedOfLight", "MemoryWorkloadAnalysis", "Occupancy", "LaunchStats"} <= \
        {cmd[i + 1] for i, a in enumerate(cmd) if a == "--section"}
    assert cmd[cmd.index("--page") + 1] == "raw" and "--csv" in cmd
    assert cmd[cmd.index("--log-file") + 1] == "/t/log.csv"


def test_nvtx_range_with_a_slash_is_refused_since_ncu_cannot_select_it():
    # recorded on the H200: "krefine/candidate/" profiled no kernel (ncu_no_kernels.log)
    with pytest.raises(ValueError, match="krefine.candidate"):
        ncu_command(["python"], nvtx_range="krefine/candidate")


def test_parse_ncu_csv_of_text_without_a_report_is_empty():
    assert parse_ncu_csv("==PROF== Disconnected\nhello\n") == []


# -- outputs recorded on an H200 (tests/fixtures/profiler/h200/, see cases.json) -----------

REC = FIX / "h200"
H200 = profile_for("NVIDIA H200")
RECORDED = json.loads((REC / "cases.json").read_text())["cases"]


def _recorded_breakdown(case):
    trace = json.loads((REC / f"trace_{case}.json").read_text())
    return profiler.breakdown_from_trace(trace, set(RECORDED[case]["triton_names"]), iters=3)


def _recorded_ncu(case):
    return parse_ncu_csv((REC / f"ncu_{case}.csv").read_text())


def _recorded_summary(case, with_ncu):
    rec = RECORDED[case]
    return summary.summarize(profile=H200, cost=rec["cost"], time_ms=rec["time_ms"], host_ms=rec["host_ms"],
                             forward={"kernels": _recorded_breakdown(case), "resources": rec["resources"]},
                             ncu_rows=_recorded_ncu(case) if with_ncu else ())


def test_recorded_trace_sorts_chain_kernels_into_three_triton_one_library_one_memory():
    b = _recorded_breakdown("chain")
    assert profiler.launch_counts(b) == {"triton": 3, "library": 1, "memory": 1}
    assert {r["name"] for r in b if r["kind"] == "memory"} == {"Memcpy DtoD (Device -> Device)"}


def test_triton_names_given_as_a_callable_are_read_after_the_forwards(monkeypatch):
    """A worker that has launched nothing before the profile request records its launches
    during the profiled forwards: the names are read then, not before."""
    import torch
    import torch.profiler as tp
    trace = json.loads((REC / "trace_chain.json").read_text())

    class FakeProfile:
        def __init__(self, activities): pass
        def __enter__(self): return self
        def __exit__(self, *exc): return False
        def export_chrome_trace(self, path): Path(path).write_text(json.dumps(trace))
    monkeypatch.setattr(tp, "profile", FakeProfile)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: None)
    launched: set[str] = set()
    rows = profiler.kernel_breakdown(lambda: launched.update(RECORDED["chain"]["triton_names"]), (),
                                     triton_names=lambda: set(launched))
    assert profiler.launch_counts(rows) == {"triton": 3, "library": 1, "memory": 1}


def test_recorded_trace_counts_launches_per_forward_not_per_profile():
    assert [r["calls"] for r in _recorded_breakdown("copy")] == [1]


def test_recorded_trace_reads_launch_geometry_and_registers():
    (row,) = _recorded_breakdown("copy")
    assert (row["grid_blocks"], row["block_threads"], row["n_regs"]) == (16384, 256, 28)


def test_recorded_ncu_csv_reads_duration_dram_and_occupancy_in_base_units():
    (row,) = _recorded_ncu("copy")
    assert row["name"] == "copy_kernel"
    assert row["duration_us"] == pytest.approx(130.784)
    assert row["dram_pct"] == pytest.approx(81.52)
    assert row["dram_bytes_read"] == 268_452_096
    assert row["achieved_occupancy_pct"] == pytest.approx(79.82)
    assert (row["grid_blocks"], row["block_threads"], row["n_regs"]) == (16384, 256, 28)


def test_recorded_ncu_counts_fma_flops_of_an_fp32_matmul_exactly():
    (row,) = _recorded_ncu("matmul_fp32")
    assert row["flops"] == 2 * 2048**3


def test_recorded_ncu_reports_tensor_pipe_of_a_bf16_dot():
    (row,) = _recorded_ncu("matmul_bf16")
    assert row["tensor_pct"] == pytest.approx(76.04)
    assert row["occupancy_limit"] in ("registers", "shared memory")


def test_recorded_ncu_profiles_only_kernels_not_memcpys_in_the_range():
    assert len(_recorded_ncu("chain")) == 4


def test_recorded_ncu_log_with_no_kernels_parses_to_nothing():
    assert parse_ncu_csv((REC / "ncu_no_kernels.log").read_text()) == []


def test_recorded_profiler_and_ncu_agree_on_kernel_time():
    for case in ("copy", "matmul_bf16", "small_grid", "matmul_fp32"):
        (k,) = _recorded_breakdown(case)
        (n,) = _recorded_ncu(case)
        assert k["mean_us"] == pytest.approx(n["duration_us"], rel=0.1), case


def test_recorded_summary_dram_figure_agrees_with_ncu():
    b = _recorded_summary("copy", with_ncu=True)
    from_profiler = b["kernel_roofline_fraction"] * 100          # minimum bytes over kernel time
    assert from_profiler == pytest.approx(b["ncu"]["dram_pct"], abs=5)


@pytest.mark.parametrize("case", sorted(RECORDED))
def test_recorded_case_gets_the_class_seen_on_the_gpu_without_ncu(case):
    assert _recorded_summary(case, with_ncu=False)["class"] == RECORDED[case]["class"]


@pytest.mark.parametrize("case", sorted(RECORDED))
def test_recorded_case_gets_the_same_class_with_ncu(case):
    assert _recorded_summary(case, with_ncu=True)["class"] == RECORDED[case]["class"]


def test_recorded_chain_with_ncu_says_how_many_times_the_minimum_bytes_it_moves():
    b = _recorded_summary("chain", with_ncu=True)
    assert any("2.5x the minimum bytes" in e for e in b["evidence"])
    assert b["hints"][0].startswith("fuse the 5 kernels")


def test_recorded_fp32_fma_matmul_is_told_to_use_tensor_cores():
    b = _recorded_summary("matmul_fp32", with_ncu=False)
    assert any("no tensor-core instructions" in e for e in b["evidence"])
    assert "tf32x3" in b["hints"][0]


# -- GPU: kernels of known character --------------------------------------------------------

def _bottleneck_on_gpu(case_name):
    sys.path.insert(0, str(FIX))
    from known_kernels import CASES
    from tools.perf.profiles import gpu_profile
    from tools.perf.timer import time_cuda, time_host
    case = CASES[case_name]
    inputs = case.make_inputs("cuda")
    fwd = lambda: case.forward(*inputs)  # noqa: E731
    times = sorted(time_cuda(fwd, warmup=5, iters=20))
    forward = profiler.profile_forward(case.forward, inputs, triton_names=case.triton_names,
                                       jit_functions=case.jit_functions)
    cost = rl.problem_cost(case.reference().cuda(), inputs)
    return summary.summarize(profile=gpu_profile(0), cost=cost, time_ms=times[len(times) // 2],
                             forward=forward, host_ms=time_host(fwd, iters=20))


@pytest.mark.gpu
def test_large_copy_is_memory_bound_on_gpu():
    b = _bottleneck_on_gpu("copy")
    assert b["class"] == "memory-bound", bottleneck.describe(b)


@pytest.mark.gpu
def test_large_bf16_dot_is_compute_bound_on_gpu():
    b = _bottleneck_on_gpu("matmul_bf16")
    assert b["class"] == "compute-bound", bottleneck.describe(b)
    assert b["kernels"][0]["tensor_cores"] is True


@pytest.mark.gpu
def test_tiny_elementwise_is_launch_bound_on_gpu():
    b = _bottleneck_on_gpu("tiny")
    assert b["class"] == "launch-bound", bottleneck.describe(b)


@pytest.mark.gpu
def test_one_program_per_row_is_latency_bound_on_gpu():
    b = _bottleneck_on_gpu("small_grid")
    assert b["class"] == "latency-bound", bottleneck.describe(b)
