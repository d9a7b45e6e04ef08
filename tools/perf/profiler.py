"""The profile step: why a correct candidate is as fast as it is, in a few lines.

Collects, for one forward of a correct candidate:
  1) a per-kernel breakdown from torch.profiler (time and launches of each kernel, Triton
     vs library vs memory), in the worker, where the candidate runs;
  2) compiled-kernel resources (registers, spills, shared memory, warps, stages,
     occupancy) from Triton's caches, or from Triton's bundled ptxas on a CPU-only box;
  3) Nsight Compute counters when ncu is present: tools/perf/ncu.py (the sandbox wraps
     the worker with `ncu_command`; `parse_ncu_csv` reads what it wrote).
The judge reads them in tools/perf/summary.py (roofline: tools/perf/roofline.py;
bottleneck class, evidence, hints: tools/perf/bottleneck.py). Does not time candidates
(tools/perf/timer.py) or decide verdicts (tools/judge/). Numbers from the candidate's
process shape feedback; only the evaluator's guards may act on them.
"""
from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from tools.perf.profiles import GpuProfile

# -- 1) per-kernel breakdown (worker side) ----------------------------------------------

# Kernels that only move or fill memory: torch.zeros/empty_like+fill, .contiguous(),
# .to(), torch.cat, cudaMemset/cudaMemcpy. Checked after the Triton names, so a
# candidate's own `copy_kernel` still counts as Triton.
_MEMORY_KERNEL = re.compile(
    r"memset|memcpy|FillFunctor|fill_kernel|CatArrayBatchedCopy|direct_copy|copy_kernel"
    r"|copy_device_to_device|Memcpy|Memset", re.IGNORECASE)
_GPU_CATS = {"kernel": None, "gpu_memcpy": "memory", "gpu_memset": "memory"}


def kernel_kind(name: str, triton_names: set[str] | frozenset[str]) -> str:
    """"triton" | "memory" | "library" for a GPU kernel name seen by a profiler.

    Triton names its kernel after the @triton.jit function; older releases appended a
    signature suffix (`add_kernel_0d1d2d`), so a prefix followed by "_" counts too.
    """
    for t in triton_names:
        if name == t or name.startswith(t + "_"):
            return "triton"
    return "memory" if _MEMORY_KERNEL.search(name) else "library"


def breakdown_from_trace(trace: dict, triton_names: set[str], iters: int) -> list[dict]:
    """Per-kernel rows from a Kineto (torch.profiler chrome trace) of `iters` forwards.

    calls and total_us are per forward; mean_us per launch. grid / block / registers /
    shared memory are read from the first launch (CUPTI records them on each kernel).
    """
    rows: dict[str, dict] = {}
    for e in trace.get("traceEvents", []):
        cat = e.get("cat")
        if e.get("ph") != "X" or cat not in _GPU_CATS:
            continue
        name, args = e.get("name", "?"), e.get("args") or {}
        r = rows.get(name)
        if r is None:
            kind = _GPU_CATS[cat] or kernel_kind(name, triton_names)
            grid, block = args.get("grid"), args.get("block")
            r = rows[name] = {
                "name": name, "kind": kind, "launches": 0, "dur_us": 0.0,
                "grid_blocks": math.prod(grid) if grid else None,
                "block_threads": math.prod(block) if block else None,
                "n_regs": args.get("registers per thread"),
                "shared": _shared_bytes(args),
            }
        r["launches"] += 1
        r["dur_us"] += float(e.get("dur", 0.0))
    n = max(1, iters)
    out = []
    for r in rows.values():
        launches, dur = r.pop("launches"), r.pop("dur_us")
        calls = launches / n
        out.append({"name": r["name"], "calls": int(calls) if calls == int(calls) else calls,
                    "total_us": dur / n, "mean_us": dur / launches, "kind": r["kind"],
                    **{k: r[k] for k in ("grid_blocks", "block_threads", "n_regs", "shared")}})
    return sorted(out, key=lambda r: -r["total_us"])


def _shared_bytes(args: dict) -> int | None:
    # Kineto splits static and dynamic shared memory in newer releases; Triton uses dynamic.
    parts = [args.get(k) for k in ("shared memory", "static shared memory", "dynamic shared memory")]
    parts = [p for p in parts if isinstance(p, (int, float))]
    return int(max(parts[0], sum(parts[1:]))) if parts else None


def kernel_breakdown(fn, args, *, triton_names, iters: int = 3) -> list[dict]:
    """Run fn(*args) `iters` times under torch.profiler (CUDA activity) after one warm-up
    call; one row per kernel name: {name, calls, total_us, mean_us, kind, grid_blocks,
    block_threads, n_regs, shared}, calls and total_us per forward, hottest first.

    triton_names: the Triton kernels' names, or a callable returning them that is read
    after the forwards ran (the worker's launch record, which a worker that has run no
    forward before this one only fills during it)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    fn(*args)                       # JIT and autotuning stay out of the profile
    torch.cuda.synchronize()
    rows: list[dict] = []
    # CUDA activity alone is enough and cheapest; CPU is added only if a Kineto build
    # records no GPU events without it.
    for activities in ([ProfilerActivity.CUDA], [ProfilerActivity.CPU, ProfilerActivity.CUDA]):
        with profile(activities=activities) as prof:
            for _ in range(iters):
                fn(*args)
            torch.cuda.synchronize()
        with tempfile.TemporaryDirectory(prefix="krefine-prof-") as d:
            path = os.path.join(d, "trace.json")
            prof.export_chrome_trace(path)
            with open(path, encoding="utf-8") as f:
                trace = json.load(f)
        rows = breakdown_from_trace(trace, set(triton_names() if callable(triton_names) else triton_names), iters)
        if rows:
            break
    return rows


def time_shares(breakdown: list[dict]) -> dict[str, float]:
    """Share of the forward's GPU time in Triton, library and memory kernels (sum 1)."""
    total = sum(r["total_us"] for r in breakdown)
    shares = {"triton": 0.0, "library": 0.0, "memory": 0.0}
    for r in breakdown:
        shares[r["kind"]] += r["total_us"] / total if total > 0 else 0.0
    return shares


def launch_counts(breakdown: list[dict]) -> dict[str, float]:
    counts = {"triton": 0, "library": 0, "memory": 0}
    for r in breakdown:
        counts[r["kind"]] += r["calls"]
    return counts


# -- 2) compiled-kernel resources ---------------------------------------------------------

def occupancy(n_regs: int | None, threads: int | None, shared: int | None,
              profile: GpuProfile) -> dict:
    """Resident blocks per SM and the limit that sets them, as CUDA's calculator does it:
    registers are allocated per warp in units of 256, each block reserves 1 KiB of shared
    memory on sm_80+, and threads and blocks per SM are capped."""
    if not threads:
        return {"blocks_per_sm": None, "occupancy": None, "occupancy_limit": None}
    warps = math.ceil(threads / 32)
    limits = {"threads": profile.max_threads_per_sm // (warps * 32),
              "blocks": profile.max_blocks_per_sm}
    if n_regs:
        regs_per_warp = math.ceil(n_regs * 32 / 256) * 256
        limits["registers"] = (profile.regs_per_sm // regs_per_warp) // warps
    if shared:
        limits["shared memory"] = (profile.smem_per_sm_kib * 1024) // (shared + 1024)
    limiter = min(limits, key=lambda k: limits[k])
    blocks = max(0, limits[limiter])
    return {"blocks_per_sm": blocks, "occupancy_limit": limiter,
            "occupancy": blocks * warps * 32 / profile.max_threads_per_sm}


def _jit_function(obj):
    # @triton.autotune / @triton.heuristics wrap the JITFunction in .fn
    for _ in range(8):
        if hasattr(obj, "device_caches"):
            return obj
        obj = getattr(obj, "fn", None)
    return None


def kernel_resources(jit_functions, profile: GpuProfile | None = None) -> list[dict]:
    """Per compiled variant in the JITFunctions' device caches: name, n_regs, n_spills
    (Triton's figure: local-memory bytes / 4), shared (bytes), num_warps, num_stages,
    tensor_cores (mma/wgmma in its PTX), and occupancy when a profile is given. A
    variant compiled but never loaded (no n_regs yet) gets its figures from ptxas."""
    out = []
    for obj in jit_functions:
        jit = _jit_function(obj)
        if jit is None:
            continue
        for cache in list(jit.device_caches.values()):
            # (kernel_cache, ...) in every Triton 3.x; the first dict holds CompiledKernels
            kernels = next((c for c in cache if isinstance(c, dict)), {})
            for k in list(kernels.values()):
                md = k.metadata
                ptx = k.asm.get("ptx", "") if hasattr(k, "asm") else ""
                row = {"name": k.name, "n_regs": getattr(k, "n_regs", None),
                       "n_spills": getattr(k, "n_spills", None), "shared": md.shared,
                       "num_warps": md.num_warps, "num_stages": md.num_stages,
                       "tensor_cores": bool(re.search(r"\b(wgmma|mma)\.", ptx))}
                if row["n_regs"] is None and ptx:
                    pr = ptxas_resources(ptx)
                    row["n_regs"], row["n_spills"] = pr.get("n_regs"), pr.get("n_spills")
                if profile is not None:
                    row.update(occupancy(row["n_regs"], md.num_warps * 32, md.shared, profile))
                out.append(row)
    return out


def find_ptxas(arch: str = "sm_90a") -> str | None:
    """The ptxas Triton itself runs for `arch`, else Triton's bundled ptxas, else PATH's.

    Triton bundles two ptxas and picks one per target (get_ptxas: the newer CUDA's
    `ptxas-blackwell` serves sm_100+ in 3.6 and sm_90+ in 3.9); it writes the PTX
    `.version` that ptxas supports, so another ptxas may reject the PTX as too new.
    """
    try:
        from triton.backends.nvidia.compiler import get_ptxas
        m = re.match(r"sm_(\d+)", arch)
        return get_ptxas(int(m.group(1)) if m else 90).path
    except Exception:  # no NVIDIA backend, or a Triton without get_ptxas / that binary
        pass
    try:
        import triton
        bundled = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "ptxas"
        if bundled.is_file():
            return str(bundled)
    except ImportError:
        pass
    return shutil.which("ptxas")


_PTXAS_FUNC = re.compile(r"Compiling entry function '([^']+)'")
_PTXAS_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_PTXAS_REGS = re.compile(r"Used (\d+) registers(?:.*?(\d+) bytes smem)?")


def ptxas_resources(ptx: str, arch: str | None = None, *, timeout_s: float = 60.0) -> dict:
    """Registers and spills of a PTX (one Triton kernel) by `ptxas -v`, no GPU needed.

    arch defaults to the PTX's own `.target` (Triton writes sm_90a for GPUTarget 90).
    n_spills follows Triton's convention (stack-frame bytes / 4) so CPU and GPU figures
    compare; spill store/load bytes are given as ptxas reports them. A PTX that ptxas
    rejects returns {"error": ...}: it is the candidate's fault, not ours.
    """
    if arch is None:
        m = re.search(r"^\s*\.target\s+(sm_\w+)", ptx, re.MULTILINE)
        arch = m.group(1) if m else "sm_90a"
    ptxas = find_ptxas(arch)
    if ptxas is None:
        return {"error": "ptxas not found"}
    with tempfile.TemporaryDirectory(prefix="krefine-ptxas-") as d:
        src = Path(d, "k.ptx")
        src.write_text(ptx)
        try:
            cmd = [ptxas, "-v", f"--gpu-name={arch}", str(src), "-o", str(Path(d, "k.cubin"))]
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return {"error": f"ptxas timed out after {timeout_s:.0f} s"}
    log = p.stdout + p.stderr
    if p.returncode != 0:
        lines = [ln for ln in log.splitlines() if ln.strip()]
        return {"error": lines[-1] if lines else f"ptxas exit {p.returncode}"}
    out: dict = {"arch": arch}
    if m := _PTXAS_FUNC.search(log):
        out["name"] = m.group(1)
    if m := _PTXAS_FRAME.search(log):
        frame, st, ld = map(int, m.groups())
        out.update(stack_frame_bytes=frame, spill_store_bytes=st, spill_load_bytes=ld,
                   n_spills=frame // 4)
    if m := _PTXAS_REGS.search(log):
        out["n_regs"] = int(m.group(1))
        out["smem_bytes"] = int(m.group(2)) if m.group(2) else 0
    return out


def profile_forward(fn, args, *, triton_names: set[str], jit_functions=(), iters: int = 3) -> dict:
    """The worker's one call: {"kernels": kernel_breakdown(...), "resources": kernel_resources(...)}."""
    return {"kernels": kernel_breakdown(fn, args, triton_names=triton_names, iters=iters),
            "resources": kernel_resources(jit_functions)}
