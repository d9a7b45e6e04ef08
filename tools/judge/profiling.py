"""Step 7) profile: the runtime guard on library time, and the bottleneck summary.

Covers the worker's torch.profiler breakdown of one forward (the share of GPU time in
Triton vs library kernels, rejected above the limit), the check that a CUDA-graph
replay did not lose work, and, when asked, an Nsight Compute pass in a second worker
and the bottleneck summary (tools/perf/summary.py). Analysis never turns a correct
kernel into a failure: its errors go to checks["profile_error"].
"""
from __future__ import annotations

from tools.judge.record import Evaluation, died, error_diag
from tools.sandbox import isolation
from tools.verdict import Status


def profile_candidate(evaluation, worker, ref_model, seed, dev, profile: bool) -> Status | None:
    """Runtime guard (GPU time share in Triton) and, when asked, the bottleneck summary."""
    from tools.perf import ncu, profiler, summary
    s = evaluation.settings
    try:
        reply, _ = worker.request({"op": "profile", "seed": seed, "iters": 3}, s.test.run_timeout_s)
    except isolation.WorkerTimeout:
        evaluation.diag("timeout", "profiling the candidate did not finish")
        return Status.TIMEOUT
    except isolation.WorkerDied:
        return died(evaluation, worker, "profiling")
    if not reply.get("ok"):
        error_diag(evaluation, reply)
        return Status.RUNTIME_ERROR
    breakdown = reply.get("breakdown", [])
    shares = profiler.time_shares(breakdown)
    evaluation.checks["time_shares"] = shares
    evaluation.checks["kernel_breakdown"] = breakdown
    evaluation.kernels.extend(reply.get("resources", []))
    _graph_escape_check(evaluation, breakdown)
    if shares.get("library", 0.0) > s.guards.max_library_time_share:
        top = [k["name"][:80] for k in breakdown if k.get("kind") == "library"][:3]
        evaluation.flag("library_ops")
        msg = (f"{shares['library']:.0%} of GPU time is in library kernels ({', '.join(top)}), "
               f"above the {s.guards.max_library_time_share:.0%} limit: do the work in Triton kernels")
        if not s.guards.allow_library_ops:
            evaluation.diag("guard:library_time_share", msg)
            return Status.REJECTED
        evaluation.diag("library_ops", msg)
    if profile:
        if ncu.find_ncu():
            evaluation.say("profile: Nsight Compute pass in a second worker")
        ncu_rows = _ncu_pass(evaluation, seed) if ncu.find_ncu() else []
        evaluation.checks["ncu"] = (f"{len(ncu_rows)} kernel launches profiled" if ncu_rows else
                             "ran, no kernel profiled" if ncu.find_ncu() else "not run (ncu absent)")
        try:
            evaluation.bottleneck = summary.summarize_verdict(
                evaluation.problem, ref_model, seed, dev, evaluation.timing, breakdown, evaluation.kernels, evaluation.device_info,
                ncu_rows=ncu_rows, host_ms=evaluation.checks.get("host_check", {}).get("candidate_ms_per_call"))
        except Exception as e:  # analysis must never turn a correct kernel into a failure
            evaluation.checks["profile_error"] = f"{type(e).__name__}: {str(e)[:300]}"
        if evaluation.judge is not None and evaluation.judge.lean:   # the cost count ran the reference on real inputs
            from tools.judge.memory import release
            release(dev)
        # the floor uses tf32 for fp32 problems: a correct tf32x3 kernel may beat fp32 cores
        floor = ((evaluation.bottleneck or {}).get("roofline") or {}).get("floor_ms")
        cand = evaluation.timing.get("candidate")
        if floor and cand and cand.median_ms < s.timing.roofline_floor_ratio * floor:
            evaluation.flag("below_roofline")
            evaluation.diag("below_roofline", f"{cand.median_ms:.4f} ms is below the roofline minimum "
                     f"{floor:.4f} ms for this problem: flagged, not trusted")
    return None


# a graph replay may drop idle gaps, never kernel time: a replay this much shorter than the
# forward's profiled kernels means work ran outside the capture (an unjoined stream)
_GRAPH_ESCAPE_RATIO = 0.5


def _graph_escape_check(evaluation: Evaluation, breakdown: list[dict]) -> None:
    """With the cuda_graph measure: does one replayed call take at least the kernel time
    the profiler sees in one plain forward? Otherwise the speedup falls back to the
    per-call figures (whose device sync counts every stream)."""
    cand = evaluation.timing.get("candidate")
    if evaluation.checks.get("timing_measure") != "cuda_graph" or cand is None:
        return
    kernel_ms = sum(r.get("total_us", 0.0) for r in breakdown) / 1e3
    evaluation.checks["graph_vs_kernels"] = {"replay_ms": cand.median_ms, "kernels_ms": kernel_ms}
    if not kernel_ms > 0 or cand.median_ms >= _GRAPH_ESCAPE_RATIO * kernel_ms:
        return
    evaluation.flag("timer_mismatch")
    evaluation.diag("timer_mismatch", f"a CUDA-graph replay of the forward takes {cand.median_ms:.4f} ms per call "
             f"but its kernels run {kernel_ms:.4f} ms in one profiled forward: work escaped the graph; "
             "speedup computed from per-call times instead")
    per_call = evaluation.checks["timing_per_call_ms"]
    evaluation.speedup_eager = per_call["eager"] / per_call["candidate"]
    evaluation.speedup_compile = per_call["compile"] / per_call["candidate"] if "compile" in per_call else None
    evaluation.speedup_interval = {}
    if evaluation.speedup_eager > evaluation.settings.timing.excessive_speedup:
        evaluation.flag("excessive_speedup")


def _ncu_pass(evaluation: Evaluation, seed: int) -> list[dict]:
    """Nsight Compute over the candidate's forwards, in a fresh worker wrapped by ncu
    (ncu and torch.profiler both use CUPTI, so never in the same process)."""
    import tempfile
    from pathlib import Path
    from tools.perf import ncu
    s = evaluation.settings.test
    log = Path(tempfile.mkdtemp(prefix="krefine-ncu-")) / "ncu.csv"
    w = isolation.start_worker(evaluation.src, device=evaluation.device, gpu_index=evaluation.gpu_index,
                               wrapper=tuple(ncu.ncu_command([], log_file=str(log))),
                               max_output_bytes=s.max_output_kib << 10)
    try:
        w.request({"op": "setup", "device": "cuda", "max_file_mib": s.max_file_mib,
                   "address_space_gib": 0, "network_isolation": False}, s.compile_timeout_s)
        w.request({"op": "load", "problem": str(evaluation.problem.path), "candidate": "candidate.py",
                   "init_seed": s.init_seed, "module_mode": s.module_mode}, s.compile_timeout_s)
        w.request({"op": "ncu_forward", "seed": seed, "iters": 1}, s.compile_timeout_s)
    except (isolation.WorkerTimeout, isolation.WorkerDied) as e:
        evaluation.checks["ncu_error"] = str(e)[:300]
        return []
    finally:
        w.close()
    try:
        return ncu.parse_ncu_csv(log.read_text(errors="replace"))
    except (OSError, ValueError) as e:
        evaluation.checks["ncu_error"] = f"{type(e).__name__}: {str(e)[:300]}"
        return []
    finally:
        import shutil
        shutil.rmtree(log.parent, ignore_errors=True)
