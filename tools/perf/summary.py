"""The bottleneck summary stored in Verdict.bottleneck: the profile step's figures, joined.

Covers `merge_kernels` (the torch.profiler breakdown joined with Triton's resources and
ncu's launch figures, with occupancy and waves), `summarize` (cost, roofline, kernels,
class, evidence, hints and the text, in one dict) and `summarize_verdict` (the judge's
call: cost the reference on a trial's inputs, pick the GPU's profile, summarize). Runs
in the judge; the figures come from tools/perf/profiler.py and tools/perf/ncu.py, the
reading from tools/perf/roofline.py and tools/perf/bottleneck.py.
"""
from __future__ import annotations

from tools.perf.bottleneck import classify, describe
from tools.perf.ncu import ncu_summary
from tools.perf.profiler import launch_counts, occupancy, time_shares
from tools.perf.profiles import DEFAULT_CACHE, GpuProfile
from tools.perf.roofline import problem_cost, refine_cost, roofline

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

    profile: the GPU's ceilings (tools.perf.profiles.gpu_profile); cost: problem_cost of the
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


def summarize_verdict(problem, ref_model, seed: int, dev: str, timing: dict, breakdown: list[dict],
                      kernels: list[dict], device_info: dict | None = None, worker=None, *,
                      ncu_rows: list[dict] = (), host_ms: float | None = None,
                      cache_path=DEFAULT_CACHE) -> dict:
    """The judge's call (its profile step): cost the reference on the trial inputs of `seed`, pick the
    GPU's profile, and summarize. `worker` is unused (the ncu pass is the sandbox's)."""
    import torch

    from tools.problem import make_inputs
    from tools.perf.profiles import gpu_profile
    cost = problem_cost(ref_model, make_inputs(problem.module, seed, dev))
    profile = gpu_profile(torch.device(dev).index or 0, cache_path=cache_path)
    cand = (timing or {}).get("candidate")
    return summarize(profile=profile, cost=cost, time_ms=cand.median_ms if cand else None,
                     forward={"kernels": breakdown, "resources": kernels},
                     ncu_rows=ncu_rows, host_ms=host_ms)
