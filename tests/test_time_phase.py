"""The time phase's arithmetic on CPU (tools/judge/time_phase.py): speedups and their
intervals from interleaved rounds, the host-clock fallback, and the graph-escape
cross-check. The GPU side (measures actually chosen and timed) is in
tests/test_evaluate_gpu.py."""
from __future__ import annotations

from tools.judge.profiling import _graph_escape_check
from tools.judge.record import Evaluation
from tools.judge.time_phase import _speedups
from tools.settings import EvalSettings
from tools.verdict import Timing


def _run(measure: str = "cuda_graph", host_cand_ms: float = 0.01) -> Evaluation:
    run = Evaluation(None, "", "cuda", 0, EvalSettings())
    run.checks.update(timing_measure=measure, timing_per_call_ms={"candidate": 0.03, "eager": 0.06, "compile": 0.045},
                      host_check={"candidate_ms_per_call": host_cand_ms, "eager_ms_per_call": 0.02})
    return run


# candidate twice as fast as eager in every round, 1.5x as fast as compile
ROUNDS = {"eager": [[0.020, 0.0201], [0.0202, 0.0199], [0.020, 0.0201], [0.0201, 0.020], [0.020, 0.020]],
          "candidate": [[0.010, 0.01005], [0.0101, 0.00995], [0.010, 0.01], [0.01005, 0.01], [0.01, 0.01]],
          "compile": [[0.015, 0.015], [0.0151, 0.0149], [0.015, 0.015], [0.015, 0.0151], [0.015, 0.015]]}


def test_speedups_and_intervals_come_from_the_rounds():
    run = _run()
    _speedups(run, ROUNDS)
    iv = run.speedup_interval["eager"]
    assert abs(run.speedup_eager - 2.0) < 0.02 and iv["low"] < run.speedup_eager < iv["high"]
    assert iv["faster"] == "faster" and iv["rounds"] == 5
    assert abs(run.speedup_compile - 1.5) < 0.02


def test_a_host_clock_far_slower_than_the_events_drops_the_interval():
    run = _run(host_cand_ms=1.0)
    _speedups(run, ROUNDS)
    assert "timer_mismatch" in run.flags and run.speedup_interval == {}
    assert run.speedup_eager == 0.02 / 1.0 and run.speedup_compile is None


def test_a_graph_replay_shorter_than_its_profiled_kernels_falls_back_to_per_call_speedups():
    run = _run()
    _speedups(run, ROUNDS)
    _graph_escape_check(run, [{"name": "k", "total_us": 40.0}])   # 0.04 ms of kernels, 0.01 ms replay
    assert "timer_mismatch" in run.flags and run.speedup_interval == {}
    assert run.speedup_eager == 0.06 / 0.03 and run.speedup_compile == 0.045 / 0.03


def test_a_graph_replay_as_long_as_its_kernels_keeps_its_speedups():
    run = _run()
    _speedups(run, ROUNDS)
    before = run.speedup_eager
    _graph_escape_check(run, [{"name": "k", "total_us": 9.0}])
    assert "timer_mismatch" not in run.flags and run.speedup_eager == before and run.speedup_interval


def test_the_escape_check_only_applies_to_graph_replay():
    run = _run(measure="per_call")
    run.timing = {"candidate": Timing.from_samples([0.01, 0.01])}
    _graph_escape_check(run, [{"name": "k", "total_us": 40.0}])
    assert "timer_mismatch" not in run.flags and "graph_vs_kernels" not in run.checks


def test_the_speedup_interval_survives_the_verdict_json_round_trip():
    from tools.verdict import Status, Verdict
    run = _run()
    _speedups(run, ROUNDS)
    v = Verdict(status=Status.CORRECT, speedup_eager=run.speedup_eager, speedup_interval=run.speedup_interval)
    doc = v.to_json()
    assert doc["speedup_interval"]["eager"]["faster"] == "faster"
    assert Verdict.from_json(doc).speedup_interval == run.speedup_interval


class _FakeGraph:
    def __init__(self, ms: float):
        self.ms, self.closed = ms, False

    def time(self, iters: int, *, name: str = "", before_each=None) -> list[float]:
        return [self.ms] * iters

    def close(self) -> None:
        self.closed = True


class _FakeWorker:
    """Answers the time phase's requests like a worker whose forward takes 0.01 ms."""
    def __init__(self, capture_error: str | None = None):
        self.capture_error, self.requests = capture_error, []

    def request(self, header: dict, timeout_s: float):
        self.requests.append(header)
        if header["op"] == "estimate":
            return {"ok": True, "call_ms": 0.01}, b""
        if header.get("measure") == "cuda_graph" and self.capture_error:
            return {"ok": True, "capture_error": self.capture_error}, b""
        return {"ok": True, "samples_ms": [0.01] * int(header["iters"]), "launches": 10**6, "calls": 1}, b""


def _short(monkeypatch, worker):
    from tools.judge import time_phase
    from tools.perf import timer
    monkeypatch.setattr(timer, "estimate_call_ms", lambda fn, **kw: 0.02)
    monkeypatch.setattr(timer, "capture_cuda_graph", lambda fn, **kw: _FakeGraph(0.02))
    monkeypatch.setattr(timer, "time_cuda_batched", lambda fn, *, iters, **kw: [0.03] * iters)
    monkeypatch.setattr(time_phase, "recheck_timed_outputs", lambda *a: None)
    run = _run()
    run.judge = type("J", (), {"dev": "cuda:0"})()
    graphs: list = []
    measure, reps, timers, status = time_phase._short_measure(run, worker, 1, {"eager": None, "compile": None}, graphs)
    rounds, status2 = time_phase._timed_rounds(run, worker, 1, measure, reps, timers)
    return run, measure, reps, rounds, graphs, status or status2


def test_graph_rounds_give_every_callable_the_same_samples_per_round(monkeypatch):
    run, measure, reps, rounds, graphs, status = _short(monkeypatch, _FakeWorker())
    iters = run.settings.timing.iters_per_round
    assert status is None and measure == "cuda_graph" and reps == 100   # 1 ms / 0.01 ms, the fastest
    assert {k: [len(r) for r in v] for k, v in rounds.items()} == {k: [iters] * 5 for k in rounds}


def test_a_candidate_that_cannot_be_captured_puts_every_callable_on_batched_calls(monkeypatch):
    run, measure, _, rounds, graphs, status = _short(monkeypatch, _FakeWorker(capture_error="sync in capture"))
    assert status is None and measure == "batched" and graphs == []
    assert run.checks["graph_capture_failed"] == {"candidate": "sync in capture"}
    assert rounds["eager"][0] == [0.03] * run.settings.timing.iters_per_round


# --- more rounds while the interval is wide (P2: a long forward's speedup repeats) ---------

def _fake_rounds(monkeypatch, *, noise: float, settings: EvalSettings = EvalSettings(), extend=None):
    """_timed_rounds against a fake worker and fake baseline timers: eager 2.0 ms, the
    candidate 1.0 ms, each round's candidate figure off by +-noise in turn."""
    import itertools

    from tools.judge import time_phase
    run = Evaluation(None, "", "cuda", 0, settings)
    flip = itertools.cycle([1 + noise, 1 - noise])
    asked, rechecked = [], []

    def ask(run, worker, header, what):
        asked.append(header)
        return {"samples_ms": [next(flip)] * header["iters"]}, b"", None
    monkeypatch.setattr(time_phase, "_ask", ask)
    monkeypatch.setattr(time_phase, "_skipped_work", lambda run, reply, what: False)
    monkeypatch.setattr(time_phase, "recheck_timed_outputs",
                        lambda run, reply, payload, seed: rechecked.append(len(asked)))
    timers = {"eager": lambda warm: [2.0] * run.settings.timing.iters_per_round}
    kw = {} if extend is None else {"extend": extend}
    rounds, status = time_phase._timed_rounds(run, None, 1, "per_call", 1, timers, **kw)
    assert status is None and len(rounds["candidate"]) == len(rounds["eager"]) == len(asked)
    returned = [i + 1 for i, h in enumerate(asked) if h["return_output"]]
    assert returned == rechecked   # each batch's last round comes back and is checked again
    return len(asked)


def test_tight_rounds_stop_after_the_first_batch(monkeypatch):
    n = _fake_rounds(monkeypatch, noise=0.001)
    assert n == 5


def test_wide_rounds_add_batches_up_to_max_rounds(monkeypatch):
    n = _fake_rounds(monkeypatch, noise=0.2)
    assert n == 25


def test_no_extra_time_means_no_extra_rounds(monkeypatch):
    from tools.settings import TimingSettings
    n = _fake_rounds(monkeypatch, noise=0.2, settings=EvalSettings(timing=TimingSettings(max_extra_s=0.0)))
    assert n == 5


def test_rounds_of_a_measure_that_will_not_decide_are_not_extended(monkeypatch):
    n = _fake_rounds(monkeypatch, noise=0.2, extend=lambda rounds: False)
    assert n == 5


class _HostWorker:
    """Answers the host check's requests; host runs sleep `delays_s` in turn (a GC pass,
    a scheduling delay), then `steady_s` per call."""
    def __init__(self, delays_s: list[float], steady_ms_per_call: float = 0.0):
        self.delays_s, self.steady, self.requests = list(delays_s), steady_ms_per_call, []

    def request(self, header: dict, timeout_s: float):
        import time
        self.requests.append(header)
        if header["op"] == "host_run":
            extra = self.delays_s.pop(0) if self.delays_s else 0.0
            time.sleep(extra + self.steady * header["iters"] / 1e3)
        return {"ok": True}, b""


def _host_check(monkeypatch, worker):
    from tools.judge import time_phase
    from tools.perf import timer
    monkeypatch.setattr(timer, "time_host", lambda fn, *, iters, device=None: 0.06)
    run = _run(host_cand_ms=0.0)
    held = type("H", (), {"call": lambda self, what, fn: fn([])})()
    time_phase._host_check(run, worker, 1, lambda xs: None, held)
    _speedups(run, ROUNDS)
    return run


def test_a_host_run_slowed_once_is_taken_again_and_the_fastest_counts(monkeypatch):
    """The false timer_mismatch of issue 17: one hiccup of a request in a short
    forward's run made an honest candidate look ten times slower."""
    run = _host_check(monkeypatch, _HostWorker([0.05]))
    assert len(run.checks["host_check"]["runs_ms_per_call"]) == 2
    assert "timer_mismatch" not in run.flags and run.speedup_interval


def test_host_runs_slower_every_time_are_still_flagged(monkeypatch):
    run = _host_check(monkeypatch, _HostWorker([], steady_ms_per_call=0.5))
    assert len(run.checks["host_check"]["runs_ms_per_call"]) == 3 and "timer_mismatch" in run.flags


def test_a_short_forwards_host_run_lasts_milliseconds_and_is_prepared_untimed(monkeypatch):
    worker = _HostWorker([])
    run = _host_check(monkeypatch, worker)
    ops = [h["op"] for h in worker.requests]
    assert ops.index("host_prepare") < ops.index("host_run") < ops.index("host_done")
    assert run.checks["host_check"]["iters"] * 0.03 >= 5.0   # 0.03 ms per call, runs of >= 5 ms


# --- fresh inputs for every timed sample, both sides alike (tools/perf/rotation.py) ----------

class _Held:
    """BaselineInputs' make and call, on cpu tensors."""
    def make(self, seed: int):
        import torch
        return [torch.randn(8, generator=torch.Generator().manual_seed(seed))]

    def call(self, what, fn):
        return fn(self.make(0))


def test_the_candidate_is_asked_to_rotate_as_many_sets_as_the_baselines(monkeypatch):
    from tools.judge import time_phase
    monkeypatch.setattr(time_phase, "recheck_timed_outputs", lambda *a: None)
    import dataclasses
    run, worker = _run(), _FakeWorker()
    run.settings = dataclasses.replace(run.settings, timing=dataclasses.replace(run.settings.timing,
                                                                                fresh_inputs=True))
    n = time_phase._rotation_plan(run, _Held())
    time_phase._timed_rounds(run, worker, 1, "per_call", 1, {"eager": lambda warm: [0.02] * 20}, rotate=n)
    assert n == run.settings.timing.iters_per_round
    assert {h.get("rotate") for h in worker.requests if h["op"] == "time"} == {n}


def test_with_fresh_inputs_off_the_default_nothing_rotates_and_the_check_says_so():
    from tools.judge import time_phase
    run = _run()
    assert time_phase._rotation_plan(run, _Held()) == 0
    assert run.checks["timed_on_fresh_inputs"] == {"sets_per_round": 0, "candidate_samples": 0, "of": 0}


def test_a_speedup_past_the_plausibility_threshold_is_flagged_with_its_figure():
    run = _run()
    fast = {"eager": ROUNDS["eager"], "candidate": [[x / 20 for x in r] for r in ROUNDS["eager"]]}
    _speedups(run, fast)
    assert "excessive_speedup" in run.flags
    assert any("20.0x faster than eager" in d.message for d in run.diagnostics if d.kind == "excessive_speedup")
