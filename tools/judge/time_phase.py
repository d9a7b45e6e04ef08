"""Step 6) time: candidate, eager and torch.compile, interleaved, and the speedups.

Covers the per-call rounds (what one forward costs a user), for short forwards a second
measure free of launch and sync overhead (CUDA-graph replays where all three can be
captured, else batched calls: tools/perf/timer.py), the judge's own host clock around
the candidate's calls, and the speedups with their intervals and flags
(tools/perf/speedup.py). The candidate is timed in its worker, the baselines here,
with the same timer; a timed call that skipped its kernels is rejected, and so is one
whose recorded twin ran library kernels (tools/judge/ground_truth.py), or one that
launched kernels or grids no checked call launched; and the timed mechanism's own
outputs, on new secret inputs, are checked again (tools/judge/timed_path.py).
"""
from __future__ import annotations

import math
import statistics
import time

from tools.judge import ground_truth, memory, timed_path
from tools.judge.record import died, error_diag, health
from tools.judge.trials import recheck_timed_outputs
from tools.perf.rotation import plan as rotation_plan, rotation
from tools.problem import make_inputs
from tools.sandbox import isolation
from tools.verdict import Status, Timing

HOST_RUN_MS = 5.0       # one host-clock run of the candidate lasts about this long
HOST_MAX_ITERS = 1000   # ... but takes no more calls than this
HOST_RUNS = 3           # runs over the limit taken again, the fastest counting


def time_candidate(evaluation, worker, ref_model, seed, dev) -> Status | None:
    """6) time: candidate, eager and torch.compile in interleaved rounds, first per call
    (what one forward costs a user), then, for short forwards, with a measure free of
    launch and sync overhead (tools/perf/timer.py); the speedup and its interval come from
    the measure chosen (tools/perf/speedup.py)."""
    import torch
    from tools.perf import timer
    from tools.perf.gpuinfo import gpu_state
    ts = evaluation.settings.timing
    held = BaselineInputs(evaluation.judge, evaluation.problem.module, seed, dev)
    baselines = {"eager": lambda xs: ref_model(*xs)}
    if ts.compile_baseline:
        cmodel, error = evaluation.judge.compiled_baseline()   # compiled once per session
        if cmodel is not None:
            baselines["compile"] = lambda xs: cmodel(*xs)
        else:
            evaluation.checks["compile_baseline_error"] = error
    evaluation.device_info = {"type": "cuda", **gpu_state(evaluation.gpu_index), "before_timing": True}
    try:
        with torch.no_grad():
            # every per-call sample on a fresh set of inputs, on both sides alike (tools/perf/rotation.py)
            rotate = _rotation_plan(evaluation, held)
            turn = (lambda xs: rotation(held.make, xs, rotate))
            # a) per call, every time
            per_call = {k: lambda warm, fn=fn, k=k: held.call(f"timing the {k} baseline", lambda xs: timer.time_cuda(
                            lambda: fn(xs), warmup=warm, iters=ts.iters_per_round, name=f"krefine.{k}",
                            before_each=turn(xs)))
                        for k, fn in baselines.items()}
            # more per-call rounds only where per-call will be the measure (a long forward)
            long_forward = (lambda r: ts.measure == "per_call" or (ts.measure == "auto" and min(
                statistics.median(x for rr in v for x in rr) for v in r.values()) >= ts.per_call_min_ms))
            rounds, status = _timed_rounds(evaluation, worker, seed, "per_call", 1, per_call, extend=long_forward,
                                           rotate=rotate)
            if status is not None:
                return status
            per_call_ms = {k: statistics.median(x for r in v for x in r) for k, v in rounds.items()}
            evaluation.checks["timing_per_call_ms"] = per_call_ms
            measure, reps = "per_call", 1
            # b) short forwards: the in-region sync would decide the ratio; measure without it
            short = timer.choose_measure(min(per_call_ms.values()), graph_ok=True,
                                         per_call_min_ms=ts.per_call_min_ms) != "per_call"
            if ts.measure != "per_call" and (ts.measure != "auto" or short):
                graphs: list = []
                try:
                    # graphs and batches keep their inputs for the phase (short forwards are small)
                    xs = held.pin()
                    plain = {k: lambda fn=fn: fn(xs) for k, fn in baselines.items()}
                    # no fresh inputs here: a graph replay or batched sample repeats its calls on one set,
                    # and copies before a 2 us forward's replay moved Triton's time, not cuBLAS's (BENCHMARKS.md)
                    measure, reps, judged, status = _short_measure(evaluation, worker, seed, plain, graphs)
                    if status is None:
                        rounds, status = _timed_rounds(evaluation, worker, seed, measure, reps, judged)
                finally:
                    for g in graphs:
                        g.close()
                if status is not None:
                    return status
            evaluation.checks.update(timing_measure=measure, timing_reps=reps, timing_rounds=len(rounds["candidate"]))
            _host_check(evaluation, worker, seed, baselines["eager"], held)
    finally:
        held.drop()   # lean: nothing of the inputs' size stays here
    after = gpu_state(evaluation.gpu_index)
    evaluation.device_info["after_timing"] = {k: after.get(k) for k in ("sm_clock_mhz", "mem_clock_mhz",
                                                                   "temperature_c", "power_w",
                                                                   "throttle_reasons")}
    _speedups(evaluation, rounds)
    return None


def _timed_rounds(evaluation, worker, seed, measure: str, reps: int, timers: dict,
                  extend=lambda rounds: True, rotate: int = 0) -> tuple[dict, Status | None]:
    """Interleaved rounds (eager, candidate, compile) of one measure: per-round ms
    samples per callable. `timers[name](warmup)` times a baseline here; the candidate is
    timed in its worker. Rounds come in batches of [timing] rounds; another batch follows
    while the speedup's interval over eager is wider than `interval_target`, up to
    `max_rounds` and `max_extra_s` (a long forward's ratio moves between runs by its
    estimation error, BENCHMARKS.md P2) and `extend(rounds)` allows. The outputs of each
    batch's last round are checked again."""
    rounds: dict[str, list[list[float]]] = {"eager": [], "candidate": []}
    rounds.update({k: [] for k in timers if k != "eager"})
    t0, first_s = time.monotonic(), None
    while True:
        t = time.monotonic()
        status = _one_batch(evaluation, worker, seed, measure, reps, timers, rounds, rotate)
        batch_s = time.monotonic() - t
        first_s = batch_s if first_s is None else first_s
        extra_after_next_s = time.monotonic() - t0 - first_s + batch_s
        if status is not None or not (extend(rounds) and _want_more(evaluation, rounds, extra_after_next_s)):
            return rounds, status


def _one_batch(evaluation, worker, seed, measure, reps, timers, rounds, rotate=0) -> Status | None:
    ts = evaluation.settings.timing
    payload, reply, fresh = b"", {}, None
    launched: list[tuple[dict, str]] = []   # each round's reply, for its launch lists
    first = not rounds["candidate"]
    for r in range(ts.rounds):
        warm = ts.warmup if first and r == 0 else 2
        n = len(rounds["candidate"]) + 1
        rounds["eager"].append(timers["eager"](warm))
        final = r == ts.rounds - 1
        recorded = final and ground_truth.recording(evaluation)   # calls like these, recorded after
        fresh = timed_path.fresh_seed(evaluation, seed) if final else None   # the checked outputs' inputs: never seen
        reply, payload, status = _ask(evaluation, worker, {
            "op": "time", "seed": seed, "warmup": warm, "iters": ts.iters_per_round, "measure": measure,
            "reps": reps, "return_output": final, "check_seed": fresh, "staged": evaluation.staged is not None,
            "activity": recorded, "rotate": rotate}, f"timing round {n}")
        if status is not None:
            return status
        seen = evaluation.checks.setdefault("timed_on_fresh_inputs",   # the candidate's samples on a set of their own
                                            {"sets_per_round": rotate, "candidate_samples": 0, "of": 0})
        seen["candidate_samples"] += int(reply.get("rotated") or 0)
        seen["of"] += len(reply.get("samples_ms") or ())
        if "capture_error" in reply:   # its graph was captured by the probe: it cannot fail now
            error_diag(evaluation, {"phase": "timing", "error_type": "CaptureFailed", "message": reply["capture_error"]})
            return Status.RUNTIME_ERROR
        rounds["candidate"].append([float(x) for x in reply["samples_ms"]])
        if _skipped_work(evaluation, reply, f"timing round {n}"):
            return Status.REJECTED
        # what the GPU ran (CUPTI's record, the batch's last round) is judged before the launch lists:
        # library kernels when timed say more than a changed launch list
        launched.append((reply, f"timing round {n}"))
        status = ground_truth.check(evaluation, reply, f"timing round {n}", timed=True) if recorded else None
        if status is not None:
            return status
        for k in timers:
            if k != "eager":
                rounds[k].append(timers[k](warm))
    # then the launches: the timed graph's capture, each round's calls; then the timed outputs
    probe, evaluation.graph_probe = evaluation.graph_probe, None
    for got, where in ([(probe, "the CUDA graph capture")] if probe is not None else []) + launched:
        if (status := timed_path.check(evaluation, got, where)) is not None:
            return status
    # the outputs' inputs: the new seed where the worker could write it into the timed inputs
    on_fresh = fresh is not None and reply.get("fresh_inputs") in ("graph", "call")
    return recheck_timed_outputs(evaluation, reply, payload, fresh if on_fresh else seed)


def _want_more(evaluation, rounds: dict, extra_after_next_s: float) -> bool:
    """Another batch of rounds: the interval over eager is still wider than the target,
    and another batch stays within max_rounds and max_extra_s (the time beyond the
    first batch, the next one included)."""
    from tools.perf.speedup import estimate_speedup
    ts = evaluation.settings.timing
    if len(rounds["candidate"]) + ts.rounds > ts.max_rounds or extra_after_next_s > ts.max_extra_s:
        return False
    try:
        est = estimate_speedup(rounds["candidate"], rounds["eager"], confidence=ts.confidence)
    except ValueError:
        return False
    return est.low > 0 and est.high / est.low - 1 > ts.interval_target


def _short_measure(evaluation, worker, seed, baselines: dict, graphs: list):
    """(measure, reps, timers, status) for a forward too short to time per call: graph
    replay when every callable can be captured, else batched calls; reps so that one
    sample lasts [timing] replay_target_ms for the fastest callable. The judge's graphs
    go into `graphs` for the caller to close."""
    from tools.perf import timer
    ts = evaluation.settings.timing
    reply, _, status = _ask(evaluation, worker, {"op": "estimate", "seed": seed},
                            "estimating the candidate's time per call")
    if status is not None:
        return "per_call", 1, {}, status
    estimates = [float(reply["call_ms"])] + [timer.estimate_call_ms(fn) for fn in baselines.values()]
    reps = timer.reps_for(min(estimates), target_ms=ts.replay_target_ms)
    batched = {k: lambda warm, fn=fn: timer.time_cuda_batched(fn, warmup=warm, iters=ts.iters_per_round,
                                                              calls_per_sample=reps, name=f"krefine.{k}")
               for k, fn in baselines.items()}
    if ts.measure == "batched":
        return "batched", reps, batched, None
    failures = {}
    # the candidate's graph is captured by its first round; probe it now, before ours
    probe, _, status = _ask(evaluation, worker, {"op": "time", "seed": seed, "warmup": ts.warmup, "iters": 1,
                                          "measure": "cuda_graph", "reps": reps},
                            "capturing the candidate's forward in a CUDA graph")
    if status is not None:
        return "per_call", 1, {}, status
    if "capture_error" in probe:
        failures["candidate"] = probe["capture_error"]
    elif _skipped_work(evaluation, probe, "the CUDA graph capture"):
        return "per_call", 1, {}, Status.REJECTED
    else:   # judged after the first timing batch, whose record of the GPU (library work) comes first
        evaluation.graph_probe = probe
    timers = {}
    for k, fn in baselines.items():
        if failures:
            break
        try:
            graphs.append(timer.capture_cuda_graph(fn, warmup=2, reps_per_graph=reps, device=evaluation.judge.dev))
        except timer.CaptureUnsupported as e:
            failures[k] = str(e)[:300]
            break
        timers[k] = lambda warm, g=graphs[-1], k=k: g.time(ts.iters_per_round, name=f"krefine.{k}")
    if failures:
        evaluation.checks["graph_capture_failed"] = failures
        return "batched", reps, batched, None
    return "cuda_graph", reps, timers, None


def _ask(evaluation, worker, header: dict, what: str) -> tuple[dict, bytes, Status | None]:
    """One timing request: (reply, payload, None), or the verdict's status once `what`
    timed out, killed the worker or raised in the candidate's code."""
    timeout_s = evaluation.settings.test.run_timeout_s
    try:
        reply, payload = worker.request(header, timeout_s)
    except isolation.WorkerTimeout:
        evaluation.diag("timeout", f"{what} did not finish within {timeout_s:g} s")
        health(evaluation, worker)
        return {}, b"", Status.TIMEOUT
    except isolation.WorkerDied:
        return {}, b"", died(evaluation, worker, what)
    if not reply.get("ok"):
        error_diag(evaluation, reply)
        return reply, b"", Status.RUNTIME_ERROR
    return reply, payload, None


def _median_ratio(baseline: Timing | None, candidate: Timing) -> float | None:
    if baseline is None or not candidate.median_ms > 0:
        return None
    return baseline.median_ms / candidate.median_ms


def _skipped_work(evaluation, reply: dict, what: str) -> bool:
    """Fewer Triton launches than calls in a timed request: the candidate skipped its
    kernels on inputs it had seen (the verdict is then rejected)."""
    if not evaluation.settings.guards.require_triton_launch or reply.get("launches", 0) >= reply.get("calls", 0):
        return False
    evaluation.diag("guard:skipped_work", f"{what}: {reply.get('launches', 0)} Triton launches in "
             f"{reply.get('calls')} timed calls: the forward skips its kernels when it sees the "
             "same inputs again (a result cache?)")
    evaluation.flag("caching")
    return True


def _host_check(evaluation, worker, seed, eager, held) -> None:
    """The judge's own clock around back-to-back calls of the candidate and of eager
    (checks.host_check); _speedups compares it with the per-call event median
    (side-stream or deferred work the events missed).

    The worker makes its inputs and runs one call before the timed request, and the
    calls are many enough that a run lasts ~HOST_RUN_MS: one-off costs of a request (a
    GC pass, a scheduling delay, a first allocation) can make a forward of microseconds
    look many times slower in a short run. A run over the limit is taken again, up to
    HOST_RUNS times, and the fastest counts: work that escapes the events shows in
    every run, a hiccup in one."""
    from tools.perf.timer import time_host
    s, ts = evaluation.settings, evaluation.settings.timing
    per_call_ms = evaluation.checks["timing_per_call_ms"]["candidate"]
    iters = max(ts.host_check_iters, min(HOST_MAX_ITERS, math.ceil(HOST_RUN_MS / max(per_call_ms, 1e-3))))
    rtts = []
    for _ in range(5):  # the min: a first ping can wait behind the worker freeing GBs
        t = time.perf_counter()
        worker.request({"op": "ping"}, s.test.run_timeout_s)
        rtts.append((time.perf_counter() - t) * 1e3)
    rtt_ms = min(rtts)
    worker.request({"op": "host_prepare", "seed": seed}, s.test.run_timeout_s)
    runs = []
    for _ in range(HOST_RUNS):
        t = time.perf_counter()
        worker.request({"op": "host_run", "iters": iters}, s.test.run_timeout_s)
        runs.append(max(0.0, (time.perf_counter() - t) * 1e3 - rtt_ms) / iters)
        if runs[-1] <= host_limit_ms(ts, per_call_ms):
            break
    worker.request({"op": "host_done"}, s.test.run_timeout_s)
    eager_host = held.call("timing the eager baseline by the host clock",
                           lambda xs: time_host(lambda: eager(xs), iters=iters))
    evaluation.checks["host_check"] = {"candidate_ms_per_call": min(runs), "eager_ms_per_call": eager_host,
                                "rtt_ms": rtt_ms, "iters": iters, "runs_ms_per_call": runs}


def _rotation_plan(evaluation, held) -> int:
    """Fresh input sets a per-call round, one per timed sample, for every callable alike; 0
    (all timed on their inputs as they are) where [timing] fresh_inputs is off or the sets
    would not fit or take too long to make (tools/perf/rotation.py). The short measures
    (graph replays, batched calls) take none. checks.timed_on_fresh_inputs counts the
    candidate's samples on a set of their own, of all its timed samples."""
    ts = evaluation.settings.timing
    n = held.call("making fresh timing inputs", lambda xs: rotation_plan(held.make, xs, ts.iters_per_round)) \
        if ts.fresh_inputs else 0
    evaluation.checks["timed_on_fresh_inputs"] = {"sets_per_round": n, "candidate_samples": 0, "of": 0}
    return n


def host_limit_ms(ts, per_call_ms: float) -> float:
    """The most the judge's clock may say per call before the events are not trusted."""
    return ts.host_check_ratio * per_call_ms + ts.host_check_slack_ms


class BaselineInputs:
    """The judge's inputs for timing the baselines: made once and kept for the phase
    (a small problem, or a short forward's graphs), or, in a lean session, made for
    each use and dropped after it with the allocator's cache (tools/judge/memory.py),
    so the candidate's rounds never run beside them. Allocation failures are the
    judge's: relieved and retried once (memory.retry_oom)."""

    def __init__(self, judge, mod, seed: int, dev: str):
        self.judge, self.mod, self.seed, self.dev = judge, mod, seed, dev
        self._kept: list | None = None

    def make(self, seed: int) -> list:
        """A set of inputs from `seed`, made here (a fresh timing set: tools/perf/rotation.py)."""
        return make_inputs(self.mod, seed, self.dev)

    def pin(self) -> list:
        if self._kept is None:
            self._kept = memory.retry_oom(self.judge, "making the timing inputs",
                                          lambda: make_inputs(self.mod, self.seed, self.dev))
        return self._kept

    def call(self, what: str, fn):
        if self._kept is not None or not self.judge.lean:
            xs = self.pin()
            return memory.retry_oom(self.judge, what, lambda: fn(xs))
        try:
            return memory.retry_oom(self.judge, what, lambda: fn(make_inputs(self.mod, self.seed, self.dev)))
        finally:
            memory.release(self.dev)

    def drop(self) -> None:
        self._kept = None
        if self.judge.lean:
            memory.release(self.dev)


def _speedups(evaluation, rounds: dict) -> None:
    """Timing figures, speedups with their intervals, and the timing flags."""
    from tools.perf.speedup import decide, estimate_speedup
    ts = evaluation.settings.timing
    evaluation.timing = {k: Timing.from_samples([x for r in v for x in r]) for k, v in rounds.items()}
    evaluation.timing.setdefault("compile", None)
    intervals = {}
    for b in ("eager", "compile"):
        if rounds.get(b):
            try:
                est = estimate_speedup(rounds["candidate"], rounds[b], confidence=ts.confidence)
            except ValueError as e:   # a sample that is not a positive time: no interval
                evaluation.checks.setdefault("speedup_interval_error", {})[b] = str(e)
                continue
            intervals[b] = {**est.to_json(), "faster": decide(est, 1.0).value}
    evaluation.speedup_interval = intervals
    evaluation.speedup_eager, evaluation.speedup_compile = (
        intervals[b]["ratio"] if b in intervals else _median_ratio(evaluation.timing.get(b), evaluation.timing["candidate"])
        for b in ("eager", "compile"))
    host = evaluation.checks["host_check"]
    cand_per_call = evaluation.checks["timing_per_call_ms"]["candidate"]
    if host["candidate_ms_per_call"] > host_limit_ms(ts, cand_per_call):
        # events missed work (side stream, deferred launch): trust the judge's own clock
        evaluation.flag("timer_mismatch")
        evaluation.diag("timer_mismatch", f"CUDA events say {cand_per_call:.4f} ms per call but the judge's clock "
                 f"says {host['candidate_ms_per_call']:.4f} ms; speedup computed from host times instead")
        cand_host = host["candidate_ms_per_call"]
        evaluation.speedup_eager = host["eager_ms_per_call"] / cand_host if cand_host > 0 else None
        evaluation.speedup_compile = None
        evaluation.speedup_interval = {}
    if evaluation.speedup_eager is not None and evaluation.speedup_eager > ts.excessive_speedup:
        evaluation.flag("excessive_speedup")
        evaluation.diag("excessive_speedup", f"{evaluation.speedup_eager:.1f}x faster than eager is above the "
                 f"{ts.excessive_speedup:g}x plausibility threshold: flagged, not trusted")
    if evaluation.timing["candidate"].spread > 0.2:
        evaluation.flag("noisy_timing")
