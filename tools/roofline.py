"""Roofline and bottleneck: the judge's reading of a profiled, correct candidate.

Covers the least work a problem needs (`problem_cost`: FLOPs counted by torch's
FlopCounterMode over the reference forward; bytes = inputs + outputs + parameters, each
moved once, the least DRAM traffic any implementation needs; `refine_cost` folds in
Nsight Compute's counters), how near a measured time comes to it (`roofline`), and the
bottleneck class with evidence and hints a small model can act on (`classify`,
`summarize`, `describe`). Runs in the judge, over the trusted reference model and the
figures tools/profiler.py collected; never runs candidate code.
"""
from __future__ import annotations

from typing import Any, Iterable

from tools.profiler import launch_counts, ncu_summary, occupancy, time_shares
from tools.profiles import DEFAULT_CACHE, GpuProfile

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


# -- 4) classification --------------------------------------------------------------------

# Thresholds, each the point past which the named cause dominates:
LAUNCH_HOST_RATIO = 2.0     # host time per forward > 2x the kernels' time: GPU idles > half
LAUNCH_BUSY_FRACTION = 0.5  # kernels fill < half of the timed forward: launch cost and gaps
SOL_PCT = 60.0              # ncu's own guidance: a unit above 60% of its peak is the limiter
MEMORY_NEAR = 0.5           # no ncu: >= half the DRAM roofline means DRAM is the limiter
# Datasheet tensor peaks assume boost clocks that power limits rarely allow (cuBLAS
# reaches ~80% of an H100's, KINDS.md), so a compute roofline is "near" sooner.
COMPUTE_NEAR = 0.4
LOW_OCCUPANCY = 0.25        # < 8 of 32 resident warps per scheduler cannot hide latency


def classify(*, profile: GpuProfile, roof: dict | None, time_ms: float | None = None,
             launches: dict | None = None, gpu_busy_us: float | None = None,
             host_us: float | None = None, hot: dict | None = None,
             ncu: dict | None = None, kernel_roof: dict | None = None) -> dict:
    """{"class", "evidence" (top 3, with figures), "hints" (<= 2), "roofline_fraction"}.

    roof is the roofline of the timed forward (time_ms); kernel_roof, when given, the
    same over the kernels' own GPU time (gpu_busy_us): it judges the kernels, free of
    the timer's per-call overhead and of launch gaps, which rule 1 judges.

    Rules, first match wins:
      1) launch-bound: the GPU idles most of the forward, so kernel speed is not what
         costs: host time per forward > 2x the kernels' GPU time, or the kernels fill
         less than half of the timed forward.
      2) ncu present: a unit above 60% of its peak is the limiter; DRAM -> memory-bound,
         SM or tensor pipe -> compute-bound (the larger wins).
      3) no ncu: kernels at >= 50% of the memory roofline (40% of the compute one):
         the roofline's limit names the class. Two more cases count as that ceiling:
         a compute-limited problem on CUDA cores (no mma in its PTX) past half the fp32
         CUDA-core peak, and a memory-limited problem split over several well-filled
         kernels (each streams through DRAM; the extra passes are the lost time).
      4) otherwise latency-bound: busy, yet no ceiling near: too few programs (idle SMs,
         waves < 1), low occupancy (registers, shared memory), spills, or too little
         work in flight per program.
    """
    launches, hot = launches or {}, hot or {}
    n_launch = sum(launches.values())
    frac = roof.get("achieved_fraction") if roof else None
    view = kernel_roof if kernel_roof and kernel_roof.get("achieved_fraction") else roof
    kfrac = view.get("achieved_fraction") if view else None
    ev: list[str] = []
    hints: list[str] = []
    # 1) launch-bound
    busy = gpu_busy_us / (time_ms * 1e3) if gpu_busy_us and time_ms else None
    host_heavy = bool(host_us and gpu_busy_us and host_us > LAUNCH_HOST_RATIO * gpu_busy_us)
    if host_heavy or (busy is not None and busy < LAUNCH_BUSY_FRACTION):
        cls = "launch-bound"
        if busy is not None:
            ev.append(f"kernels run {gpu_busy_us:.1f} us of a {time_ms * 1e3:.1f} us forward "
                      f"(GPU busy {busy:.0%})")
        if host_heavy:
            ev.append(f"host spends {host_us:.1f} us per forward on work the GPU does in "
                      f"{gpu_busy_us:.1f} us")
        if n_launch > 1:
            hints.append(f"fuse the {_fmt_n(n_launch)} launches into one @triton.jit kernel: "
                         "intermediates stay in registers, one launch per forward")
        if launches.get("library") or launches.get("memory"):
            hints.append("keep forward() to allocating the output and launching Triton: every "
                         "torch op (zeros, .contiguous(), .to(), cat, F.*) is one more launch")
        hints.append("the problem is too small to fill the GPU: do all of it in one launch and "
                     "no host-side work besides torch.empty for the output")
    # 2) and 3) a ceiling is near
    elif (cls := _ceiling_class(ncu, view, hot, launches, profile)) == "memory-bound":
        ev.extend(_memory_evidence(ncu, view, profile))
        ratio = _bytes_ratio(roof)
        near = (ncu or {}).get("dram_pct") or (kfrac or 0) * 100
        if n_launch > 1 and (not ratio or ratio >= 1.5):
            hints.append(f"fuse the {_fmt_n(n_launch)} kernels into one so each byte crosses DRAM "
                         "once: intermediates stay in registers")
        if ratio and ratio >= 1.5:
            hints.append(f"the kernels move {ratio:.1f}x the minimum bytes: read each input once "
                         "(fuse the passes, keep reused tiles in registers or shared memory)")
        if near >= 80:   # past ~85% of the datasheet DRAM peak nothing streams faster
            hints.append(f"at {near:.0f}% of DRAM peak only fewer bytes help: fuse "
                         "neighbouring work into this kernel and store each output once")
        if launches.get("library") or launches.get("memory"):
            hints.append("drop the torch ops from forward() (clone, zeros, .contiguous(), .to(), "
                         "elementwise math): each one is another full pass over memory")
        if near < 80:
            hints.append("vectorise loads: contiguous inner dimension, BLOCK_SIZE a multiple of "
                         "128 (>= 1024 elements per program), num_warps 4-8")
    elif cls == "compute-bound":
        ev.extend(_compute_evidence(ncu, view, hot))
        hints.append(_compute_hint(roof, hot))
    # 4) latency-bound
    else:
        cls = "latency-bound"
        ev, hints = _latency_findings(ncu, view, hot, profile)
    launch_ev = _launch_text(launches) if n_launch else None
    if launch_ev and n_launch > 1 or (launch_ev and cls == "launch-bound"):
        ev.append(launch_ev)
    return {"class": cls, "evidence": _dedupe(ev)[:3], "hints": _dedupe(hints)[:2],
            "roofline_fraction": frac}


def _ceiling_class(ncu, roof, hot, launches, profile) -> str | None:
    if ncu and ncu.get("dram_pct") is not None and ncu.get("sm_pct") is not None:
        mem = ncu["dram_pct"]
        comp = max(ncu["sm_pct"], ncu.get("tensor_pct") or 0.0)
        if max(mem, comp) >= SOL_PCT:
            return "memory-bound" if mem >= comp else "compute-bound"
        return None
    if not roof or roof.get("achieved_fraction") is None:
        return None
    frac, limit = roof["achieved_fraction"], roof["limit"]
    if frac >= (MEMORY_NEAR if limit == "memory" else COMPUTE_NEAR):
        return f"{limit}-bound"
    if (limit == "compute" and hot.get("tensor_cores") is False and roof.get("tflops_achieved")
            and roof["tflops_achieved"] >= 0.5 * profile.peak_fp32_tflops):
        return "compute-bound"
    well_filled = (hot.get("waves") or 0) >= 1 and (hot.get("occupancy") or 0) >= LOW_OCCUPANCY
    if limit == "memory" and sum(launches.values()) > 1 and well_filled:
        return "memory-bound"
    return None


def _latency_findings(ncu, roof, hot, profile) -> tuple[list[str], list[str]]:
    ev, hints = [], []
    grid, waves = hot.get("grid_blocks"), hot.get("waves")
    if grid and grid < profile.sm_count:
        ev.append(f"grid of {int(grid)} blocks on {profile.sm_count} SMs: "
                  f"{profile.sm_count - int(grid)} SMs idle")
    elif waves is not None and waves < 1:
        ev.append(f"grid of {int(grid)} blocks fills {waves:.2f} waves of {profile.sm_count} SMs")
    if ev:
        hints.append(f"launch more programs: a smaller BLOCK_SIZE or a split of the long axis "
                     f"(e.g. split-K with a second pass) so the grid has at least "
                     f"{profile.sm_count} programs, ideally several per SM")
    if ncu and ncu.get("dram_pct") is not None and ncu.get("sm_pct") is not None:
        ev.append(f"DRAM at {ncu['dram_pct']:.0f}% and SM at {ncu['sm_pct']:.0f}% of peak: "
                  "no ceiling is near")
    elif roof and roof.get("achieved_fraction") is not None:
        ev.append(f"{_fmt_frac(roof['achieved_fraction'])} of the {roof['limit']} roofline "
                  "while the GPU is busy")
    if hot.get("n_spills"):
        ev.append(f"{hot['name']} spills {int(hot['n_spills']) * 4} bytes per thread to local "
                  f"memory ({hot.get('n_regs')} registers)")
        hints.append("cut register pressure: smaller tiles or fewer live values per program, "
                     "or num_warps=8 to spread the tile")
    occ, why = hot.get("occupancy"), hot.get("occupancy_limit")
    if occ is not None and occ < LOW_OCCUPANCY and why in ("registers", "shared memory"):
        detail = (f"{hot.get('n_regs')} registers/thread" if why == "registers" else
                  f"{(hot.get('shared') or 0) // 1024} KiB shared memory/program")
        ev.append(f"occupancy {occ:.0%}, limited by {detail}")
        hints.append("lower num_stages or the tile size: shared memory per program caps how many "
                     "programs share an SM" if why == "shared memory" else
                     "cut register pressure (smaller tiles, fewer live values) so more programs "
                     "fit on an SM")
    limit = roof.get("limit") if roof else None
    if limit == "compute" and hot.get("tensor_cores") is False:
        hints.append(_compute_hint(roof, hot))
    elif limit == "memory":
        hints.append("put more bytes in flight: contiguous 16-byte loads, a larger BLOCK_SIZE per "
                     "program, several independent loads before the first use")
    hints.append("more independent work per program: larger tiles, num_stages >= 3")
    return ev, hints


def _bytes_ratio(roof) -> float | None:
    measured = roof.get("dram_bytes_measured") if roof else None
    return measured / roof["bytes"] if measured and roof.get("bytes") else None


def _memory_evidence(ncu, roof, profile) -> list[str]:
    ev = []
    if ncu and ncu.get("dram_pct") is not None:
        ev.append(f"DRAM at {ncu['dram_pct']:.0f}% of {profile.dram_gbps:.0f} GB/s peak")
    if roof and roof.get("dram_gbps_achieved") is not None:
        ev.append(f"the kernels move the minimum {roof['bytes'] / 1e6:.0f} MB at "
                  f"{roof['dram_gbps_achieved']:.0f} GB/s, {_fmt_frac(roof['achieved_fraction'])} "
                  f"of the {profile.dram_gbps:.0f} GB/s peak")
    ratio = _bytes_ratio(roof)
    if ratio and ratio >= 1.2:
        ev.append(f"moves {ratio:.1f}x the minimum bytes ({roof['dram_bytes_measured'] / 1e6:.0f} MB "
                  f"vs {roof['bytes'] / 1e6:.0f} MB)")
    return ev


def _compute_evidence(ncu, roof, hot) -> list[str]:
    ev = []
    if ncu and ncu.get("sm_pct") is not None:
        tp = ncu.get("tensor_pct")
        ev.append(f"SM at {ncu['sm_pct']:.0f}% of peak" + (f", tensor pipe {tp:.0f}%" if tp else ""))
    if roof and roof.get("tflops_achieved") is not None:
        ev.append(f"the kernels run {roof['tflops_achieved']:.0f} TFLOP/s, "
                  f"{_fmt_frac(roof['achieved_fraction'])} of the {roof['peak_tflops']:.0f} "
                  f"TFLOP/s {roof['dtype']} peak")
    if hot.get("tensor_cores") is False:
        ev.append(f"{hot.get('name', 'the hot kernel')} uses no tensor-core instructions (mma)")
    return ev


def _compute_hint(roof, hot) -> str:
    roof = roof or {}
    dt = roof.get("dtype")
    if hot.get("tensor_cores") is False and dt in ("bf16", "fp16", "fp8"):
        return ("use tensor cores: compute tiles with tl.dot on bf16/fp16 operands into an fp32 "
                "accumulator (BLOCK_M, BLOCK_N >= 64, BLOCK_K >= 32)")
    if hot.get("tensor_cores") is False and dt == "fp32" and roof.get("limit") == "compute":
        return ('use tensor cores at near-fp32 accuracy: tl.dot(a, b, input_precision="tf32x3") '
                "on 64x64 or larger tiles")
    if roof.get("flops_source") == "ncu" or roof.get("limit") == "memory":
        return ("cut instructions per element: hoist index math and divisions out of loops, "
                "multiply by reciprocals, keep index math in int32")
    return ("tune the tiles: BLOCK_M=128, BLOCK_N=128 or 256, BLOCK_K=64, num_stages 3-4, "
            "num_warps 8, programs grouped along M for L2 reuse")


def _launch_text(launches: dict) -> str:
    labels = (("triton", "Triton launch", "Triton launches"),
              ("library", "library kernel", "library kernels"),
              ("memory", "memory op", "memory ops"))
    parts = [f"{_fmt_n(launches[k])} {one if launches[k] == 1 else many}"
             for k, one, many in labels if launches.get(k)]
    return " + ".join(parts) + " per forward"


def _fmt_n(x) -> str:
    return str(int(x)) if float(x) == int(x) else f"{x:.1f}"


def _fmt_frac(f: float) -> str:
    return f"{f:.0%}" if f >= 0.1 else f"{f:.1%}"


def _fmt_ms(ms: float) -> str:
    return f"{ms:.3f} ms" if ms >= 0.1 else f"{ms * 1e3:.3g} us"


def _dedupe(xs: list[str]) -> list[str]:
    return list(dict.fromkeys(xs))


# -- 5) the bottleneck summary stored in Verdict.bottleneck ---------------------------------

def merge_kernels(breakdown: list[dict], resources: list[dict], profile: GpuProfile,
                  ncu_rows: list[dict] = ()) -> list[dict]:
    """Breakdown rows joined with Triton's resources and ncu's launch figures by name,
    with occupancy and waves (grid / (SMs x resident blocks per SM))."""
    by_name: dict[str, list[dict]] = {}
    for r in resources:
        by_name.setdefault(r["name"], []).append(r)
    ncu_by_name = {r["name"]: r for r in ncu_rows}
    out = []
    for row in breakdown:
        k = dict(row)
        if row["kind"] == "triton":
            variants = by_name.get(row["name"]) or [r for n, rs in by_name.items()
                                                    if row["name"].startswith(n + "_") for r in rs]
            if variants:  # the variant whose register count CUPTI saw, else the first
                v = next((v for v in variants if v.get("n_regs") == row.get("n_regs")), variants[0])
                for key in ("n_spills", "num_warps", "num_stages", "tensor_cores"):
                    k[key] = v.get(key)
                k["n_regs"] = k.get("n_regs") or v.get("n_regs")
                k["shared"] = k.get("shared") if k.get("shared") is not None else v.get("shared")
                k["block_threads"] = k.get("block_threads") or v.get("num_warps", 0) * 32 or None
        k.update(occupancy(k.get("n_regs"), k.get("block_threads"), k.get("shared"), profile))
        if k.get("grid_blocks") and k.get("blocks_per_sm"):
            k["waves"] = k["grid_blocks"] / (profile.sm_count * k["blocks_per_sm"])
        n = ncu_by_name.get(row["name"])
        if n is not None and n.get("waves") is not None and k.get("waves") is None:
            k["waves"] = n["waves"]   # ncu rounds to 0.01: ours is finer when we have it
        out.append(k)
    return out


def summarize(*, profile: GpuProfile, cost: dict, time_ms: float | None,
              forward: dict | None = None, ncu_rows: list[dict] = (),
              host_ms: float | None = None) -> dict:
    """The `bottleneck` dict of a verdict.

    profile: the GPU's ceilings (tools.profiles.gpu_profile); cost: problem_cost of the
    reference; time_ms: the candidate's median (None on cpu); forward: the worker's
    profile_forward result; ncu_rows: parse_ncu_csv of the ncu pass, if any; host_ms:
    wall-clock ms per call of back-to-back calls (the judge's host check).
    roofline_fraction is set whenever time_ms is (the loop's early stop reads it).
    """
    forward = forward or {}
    breakdown = list(forward.get("kernels") or [])
    # 1) cost and roofline, refined by ncu's counters when present
    cost = refine_cost(cost, list(ncu_rows))
    roof = roofline(cost, time_ms, profile)
    # 2) kernels: breakdown + resources + ncu, hottest first
    kernels = merge_kernels(breakdown, list(forward.get("resources") or []), profile, list(ncu_rows))
    launches = launch_counts(kernels)
    busy_us = sum(k["total_us"] for k in kernels) if kernels else None
    ncu = ncu_summary(list(ncu_rows))
    hot = kernels[0] if kernels else None
    kernel_roof = roofline(cost, busy_us / 1e3, profile) if busy_us else None
    # 3) classify (no GPU timing: only the static roofline can be said)
    if time_ms is None:
        verdict = {"class": f"{roof['limit']}-bound",
                   "evidence": [f"no GPU timing: static estimate, {_intensity_text(roof)}"],
                   "hints": [], "roofline_fraction": None}
    else:
        verdict = classify(profile=profile, roof=roof, time_ms=time_ms, launches=launches,
                           gpu_busy_us=busy_us, host_us=host_ms * 1e3 if host_ms else None,
                           hot=hot, ncu=ncu, kernel_roof=kernel_roof)
    # 4) assemble; "summary" is describe()'s text, what feedback and prompts carry
    keep = ("name", "kind", "calls", "total_us", "mean_us", "grid_blocks", "block_threads",
            "n_regs", "n_spills", "shared", "num_warps", "num_stages", "tensor_cores",
            "occupancy", "occupancy_limit", "waves")
    bottleneck = {
        **verdict,
        "limit": roof["limit"],
        "time_ms": time_ms,
        "min_time_ms": roof["min_time_ms"],
        # the same fraction over the kernels' own GPU time (no timer or launch overhead)
        "kernel_roofline_fraction": kernel_roof["achieved_fraction"] if kernel_roof else None,
        "gpu": profile.name,
        "profile_source": "measured" if profile.measured else "datasheet",
        "roofline": roof,
        "launches": launches if kernels else None,
        "time_shares": time_shares(kernels) if kernels else None,
        "gpu_busy_us": busy_us,
        "host_us": host_ms * 1e3 if host_ms else None,
        "kernels": [{k: v for k, v in row.items() if k in keep} for row in kernels[:5]],
        "ncu": ncu,
        "sources": [s for s, on in (("torch.profiler", bool(kernels)),
                                    ("triton", bool(forward.get("resources"))),
                                    ("ncu", ncu is not None)) if on],
    }
    bottleneck["summary"] = describe(bottleneck)
    return bottleneck


def _intensity_text(roof: dict) -> str:
    ai = roof.get("arith_intensity")
    return (f"{ai:.1f} FLOP/byte vs the {roof['dtype']} ridge at {roof['ridge_intensity']:.0f}"
            if ai is not None else "no bytes counted")


def describe(bottleneck: dict | None) -> str:
    """2-4 short lines for `krefine eval` and the refinement prompt."""
    b = bottleneck
    if not b:
        return ""
    frac = b.get("roofline_fraction")
    head = f"Bottleneck: {b['class']}"
    if frac is not None and b.get("time_ms"):
        head += (f", {_fmt_frac(frac)} of the {b['limit']} roofline ({_fmt_ms(b['time_ms'])} vs "
                 f"{_fmt_ms(b['min_time_ms'])} minimum on {b['gpu']})")
    lines = [head]
    if b.get("evidence"):
        lines.append("Evidence: " + "; ".join(b["evidence"]))
    for i, h in enumerate(b.get("hints") or []):
        lines.append(("Next: " if i == 0 else "Also: ") + h)
    return "\n".join(lines)


def summarize_verdict(problem, ref_model, seed: int, dev: str, timing: dict, breakdown: list[dict],
                      kernels: list[dict], device_info: dict | None = None, worker=None, *,
                      ncu_rows: list[dict] = (), host_ms: float | None = None,
                      cache_path=DEFAULT_CACHE) -> dict:
    """tools/evaluate.py's call: cost the reference on the trial inputs of `seed`, pick the
    GPU's profile, and summarize. `worker` is unused (the ncu pass is the sandbox's)."""
    import torch

    from tools.problem import make_inputs
    from tools.profiles import gpu_profile
    cost = problem_cost(ref_model, make_inputs(problem.module, seed, dev))
    profile = gpu_profile(torch.device(dev).index or 0, cache_path=cache_path)
    cand = (timing or {}).get("candidate")
    return summarize(profile=profile, cost=cost, time_ms=cand.median_ms if cand else None,
                     forward={"kernels": breakdown, "resources": kernels},
                     ncu_rows=ncu_rows, host_ms=host_ms)
