"""The bottleneck class of a profiled, correct candidate, in words a small model can act on.

Covers `classify` (launch-, memory-, compute- or latency-bound, first matching rule,
with up to three pieces of evidence carrying figures and up to two hints) and
`describe` (the 2-4 lines `krefine eval` prints and the refinement prompt carries).
Reads figures others measured: the roofline (tools/perf/roofline.py), the kernels and
ncu's summary as tools/perf/summary.py merges them. Measures nothing itself.
"""
from __future__ import annotations

from tools.perf.profiles import GpuProfile

# Thresholds, each the point past which the named cause dominates:
LAUNCH_HOST_RATIO = 2.0     # host time per forward > 2x the kernels' time: GPU idles > half
LAUNCH_BUSY_FRACTION = 0.5  # kernels fill < half of the timed forward: launch cost and gaps
SOL_PCT = 60.0              # ncu's own guidance: a unit above 60% of its peak is the limiter
MEMORY_NEAR = 0.5           # no ncu: >= half the DRAM roofline means DRAM is the limiter
# Datasheet tensor peaks assume boost clocks that power limits rarely allow (cuBLAS stays
# well under them: BENCHMARKS.md, "Profiling: the profile step on kernels of known
# character"), so a compute roofline is "near" sooner.
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


def _dedupe(xs: list[str]) -> list[str]:
    return list(dict.fromkeys(xs))


def _fmt_ms(ms: float) -> str:
    return f"{ms:.3f} ms" if ms >= 0.1 else f"{ms * 1e3:.3g} us"


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
