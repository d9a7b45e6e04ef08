"""Roofline: the least work a problem needs and how near a measured time comes to it.

Covers `problem_cost` (FLOPs counted by torch's FlopCounterMode over the reference
forward; bytes = inputs + outputs + parameters, each moved once, the least DRAM traffic
any implementation needs), `refine_cost` (Nsight Compute's counters folded in) and
`roofline` (which ceiling limits the problem on a GPU profile, and the fraction of it a
time reaches). Runs in the judge, over the trusted reference model; never runs
candidate code. The bottleneck class is tools/perf/bottleneck.py's, the verdict's
summary tools/perf/summary.py's.
"""
from __future__ import annotations

from typing import Any, Iterable

from tools.perf.profiles import GpuProfile

# torch dtype name -> the compute dtype whose peak bounds the problem. fp32 problems are
# bounded by the CUDA-core peak, not tf32: KernelBench's fp32 tolerance (1e-4) is beyond
# tf32 in general, so a correct fp32 kernel mostly runs on CUDA cores. `floor_ms` below
# uses tf32 instead, as the lowest time any correct kernel could plausibly reach.
_COMPUTE_DTYPE = {"float32": "fp32", "float": "fp32", "float64": "fp64", "double": "fp64",
                  "bfloat16": "bf16", "float16": "fp16", "half": "fp16",
                  "float8_e4m3fn": "fp8", "float8_e5m2": "fp8"}
_FASTEST_CORRECT = {"fp32": "tf32"}


def compute_dtype(dtype: Any) -> str:
    """"fp32" | "bf16" | "fp16" | "fp8" | "fp64" for a torch dtype or its name."""
    name = str(dtype).removeprefix("torch.")
    if name in ("fp32", "tf32", "bf16", "fp16", "fp8", "fp64"):
        return name
    return _COMPUTE_DTYPE.get(name, "fp32")


def _tensors(obj) -> Iterable:
    import torch
    if isinstance(obj, torch.Tensor):
        yield obj
    elif isinstance(obj, (list, tuple)):
        for o in obj:
            yield from _tensors(o)
    elif isinstance(obj, dict):
        for o in obj.values():
            yield from _tensors(o)


def _nbytes(tensors) -> int:
    seen, total = set(), 0
    for t in tensors:
        if t.device.type == "meta":   # no addresses: each meta tensor counts once
            key = id(t)
        else:                         # the same tensor passed twice is read once
            key = (t.untyped_storage().data_ptr(), t.data_ptr(), tuple(t.shape))
        if key in seen:
            continue
        seen.add(key)
        total += t.numel() * t.element_size()
    return total


def problem_cost(model, inputs) -> dict:
    """{"flops", "bytes", "dtype", "flops_source"} of one reference forward.

    Works on any device, meta included (pass a model moved to "meta" and meta inputs to
    cost a large problem for nothing). FlopCounterMode counts matmul, conv, attention and
    their kin; elementwise and reduction work counts 0 (refine_cost fills that in from
    ncu). The dtype is that of the largest floating input or parameter.
    """
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    flops, source = None, "flop_counter"
    try:
        counter = FlopCounterMode(display=False)
        with torch.no_grad(), counter:
            out = model(*inputs)
        flops = int(counter.get_total_flops())
    except Exception:   # an op the counter cannot trace: bytes still bound the roofline
        with torch.no_grad():
            out = model(*inputs)
        flops, source = 0, "unavailable"
    params = list(model.parameters()) + list(model.buffers())
    ins, outs = list(_tensors(list(inputs))), list(_tensors(out))
    floats = [t for t in ins + params if t.is_floating_point()]
    dtype = max(floats, key=lambda t: t.numel()).dtype if floats else torch.float32
    return {"flops": flops,
            "bytes": _nbytes(ins) + _nbytes(outs) + _nbytes(params),
            "dtype": compute_dtype(dtype),
            "flops_source": source}


def refine_cost(cost: dict, ncu_rows: list[dict]) -> dict:
    """The cost with ncu's counters folded in, when ncu ran.

    FLOPs: ncu counts executed fp add/mul/fma on CUDA cores; it misses tensor-core work,
    so its figure replaces torch's only when larger (torch counted 0 for elementwise
    work). Bytes stay the problem's minimum (the floor is what any kernel must move);
    ncu's DRAM bytes are kept beside it as `dram_bytes_measured` for the evidence.
    """
    flops_ncu = sum(r.get("flops") or 0 for r in ncu_rows)
    dram = [r.get("dram_bytes_read", 0) + r.get("dram_bytes_write", 0) for r in ncu_rows
            if r.get("dram_bytes_read") is not None]
    out = dict(cost)
    if flops_ncu > cost.get("flops", 0):
        out["flops"], out["flops_source"] = int(flops_ncu), "ncu"
    if dram:
        out["dram_bytes_measured"] = int(sum(dram))
    return out


def roofline(cost: dict, time_ms: float | None, profile: GpuProfile, dtype: Any = None) -> dict:
    """Which ceiling limits this problem on `profile`, and how near `time_ms` comes.

    min_time = max(flops / peak, bytes / DRAM bandwidth); the larger term names the
    limit. achieved_fraction = min_time / time_ms (1.0 = at the roofline; None when no
    time). floor_ms is min_time at the fastest precision a correct kernel may use (tf32
    for fp32), for the evaluator's "faster than physics" check.
    """
    dt = compute_dtype(dtype if dtype is not None else cost.get("dtype", "fp32"))
    flops, nbytes = max(0, int(cost["flops"])), max(0, int(cost["bytes"]))
    peak = profile.peak_tflops(dt)
    mem_ms = nbytes / (profile.dram_gbps * 1e9) * 1e3
    comp_ms = flops / (peak * 1e12) * 1e3
    fast_ms = flops / (profile.peak_tflops(_FASTEST_CORRECT.get(dt, dt)) * 1e12) * 1e3
    min_ms = max(mem_ms, comp_ms)
    timed = time_ms is not None and time_ms > 0
    return {
        "limit": "compute" if comp_ms > mem_ms else "memory",
        "dtype": dt,
        "min_time_ms": min_ms,
        "floor_ms": max(mem_ms, fast_ms),
        "memory_time_ms": mem_ms,
        "compute_time_ms": comp_ms,
        "achieved_fraction": (min_ms / time_ms) if timed and min_ms > 0 else None,
        "dram_gbps_achieved": nbytes / (time_ms * 1e-3) / 1e9 if timed else None,
        "tflops_achieved": flops / (time_ms * 1e-3) / 1e12 if timed else None,
        "arith_intensity": flops / nbytes if nbytes else None,
        "ridge_intensity": peak * 1e12 / (profile.dram_gbps * 1e9),
        "peak_tflops": peak,
        "dram_gbps": profile.dram_gbps,
        "flops": flops,
        "bytes": nbytes,
        "flops_source": cost.get("flops_source", "flop_counter"),
        "dram_bytes_measured": cost.get("dram_bytes_measured"),
    }
