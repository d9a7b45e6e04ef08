"""Judge one candidate: guard -> compile -> test -> time -> profile, into one Verdict.

This process (the judge) computes the reference with the problem's own Model and the
same seeds and init order as KernelBench, and compares what the candidate's worker
hands back; candidate code never runs here (tools/sandbox/). Inputs come from a secret
seed per judge session, so a candidate cannot precompute answers. `judge_in` runs the
numbered steps, each in a module of its own: 1) guard (static.py), 2) reference
(reference.py, once per session; a reference that does not give its outputs again, a
random one, makes every candidate `incorrect`), 3) compile (compile_phase.py), 4) test (trials.py),
5) on cpu the sm_90 compile (compile_phase.py), 6) time (time_phase.py), 7) profile
(profiling.py); what they find goes into an Evaluation (record.py). `profile_in` is step 7
alone. What a session shares between candidates (reference, baselines, fork servers,
the GPU lock) is tools/judge/session.py's.

Not covered here: what the guards look for (tools/guards/), how numbers are compared
(tools/judge/numerics.py), bottleneck analysis (tools/perf/).
"""
from __future__ import annotations

import contextlib
import dataclasses
import time

from tools.judge import memory
from tools.judge.compile_phase import compile_phase, gpu_compile
from tools.judge.profiling import profile_candidate
from tools.judge.record import Evaluation, to_verdict
from tools.judge.static import static_checks
from tools.judge.time_phase import time_candidate
from tools.judge.trials import run_trials
from tools.problem import precision_flags
from tools.sandbox import isolation
from tools.verdict import Status, Verdict


# a candidate's steps, as the loop's graph runs them (agent/loop/judging.py): each ends
# with the candidate's worker alive for the next, unless it ended the judgement
STEPS = ("compile", "test", "profile")


class Judgement:
    """One candidate judged step by step in `judge`'s session: `advance()` runs the next of
    STEPS and returns the Verdict once the judgement has ended (a failed step, or the
    last one), else None. Between steps the candidate's worker and whatever holds the
    judgement took (the GPU, in a serial session) stay taken, so the steps of one
    candidate run one after the other, never interleaved with a wait on another's.
    Where the judge runs short of GPU memory (its own fault, tools/judge/memory.py), idle
    sessions are evicted and the judgement starts again, up to the step it was at."""

    def __init__(self, judge, candidate_src: str, *, candidate_name: str = "candidate.py",
                 profile: bool = True, progress=None, on_end=None):
        self.judge, self.src, self.name, self.profile, self.progress = judge, candidate_src, candidate_name, profile, progress
        self._on_end = on_end              # called once, when the judgement ends or is closed
        self.t0 = time.monotonic()
        self.done: list[str] = []          # the steps run so far
        self.verdict: Verdict | None = None
        self._short: str | None = None
        self._steps = None
        self.evaluation: Evaluation | None = None

    @property
    def phase_s(self) -> dict:
        """Seconds per phase so far (the verdict's checks["phase_s"] once it has one)."""
        return dict(self.evaluation.phase_s) if self.evaluation is not None else {}

    def advance(self) -> Verdict | None:
        if self.verdict is not None:
            raise RuntimeError("this judgement has ended")
        step = STEPS[len(self.done)]
        for attempt in (1, 2):
            try:
                if self._steps is None:   # a fresh start, or again after a shortage: up to this step
                    self.evaluation = Evaluation(self.judge.problem, self.src, self.judge.device, self.judge.gpu_index,
                                          self.judge.settings, self.judge, progress=self.progress)
                    self._steps = _judge(self.evaluation, self.name, self.profile)
                    for _ in self.done:
                        next(self._steps)
                next(self._steps)
                self.done.append(step)
                return None
            except StopIteration as stop:
                self.done.append(step)
                return self._end(stop.value or Status.CORRECT)
            except memory.JudgeOutOfMemory as e:
                self._steps = None
                if attempt == 2:
                    raise
                self._short = str(e)
                self.evaluation.say("the judge ran short of GPU memory: idle sessions evicted, judging again")
                self.judge.relieve_memory()
            except BaseException:
                self.close()
                raise
        raise AssertionError("unreachable")

    def _end(self, status: Status) -> Verdict:
        self.close()
        evaluation, judge = self.evaluation, self.judge
        if self._short is not None:
            evaluation.checks["judged_again_after"] = self._short
        if judge.footprint is not None:
            evaluation.checks["memory"] = {**judge.footprint.to_json(), "lean": judge.lean}
            if evaluation.memory_peaks:
                evaluation.checks["memory"]["peaks"] = evaluation.memory_peaks
        self.verdict = to_verdict(evaluation, status, self.t0)
        return self.verdict

    def close(self) -> None:
        """Ends the candidate's worker and gives back what the judgement holds (idempotent)."""
        steps, self._steps = self._steps, None
        try:
            if steps is not None:
                steps.close()
        finally:
            on_end, self._on_end = self._on_end, None
            if on_end is not None:
                on_end()


def ended_at(verdict: Verdict) -> str:
    """The step a verdict was reached at, by the phases it went through."""
    phase_s = (verdict.checks or {}).get("phase_s") or {}
    if "time" in phase_s or "profile" in phase_s:
        return "profile"
    return "test" if "test" in phase_s else "compile"


class Decided:
    """A judgement whose verdict `make()` gives whole (a host that judges in one call,
    e.g. a Ray judge actor; a verdict recorded before), gone through step by step like
    a Judgement: `advance()` returns it at the step it was reached at."""

    def __init__(self, make):
        self._make, self.done, self.verdict, self._whole = make, [], None, None

    def advance(self) -> Verdict | None:
        if self._whole is None:
            self._whole = self._make()
        step = STEPS[len(self.done)]
        self.done.append(step)
        if step == ended_at(self._whole) or step == STEPS[-1]:
            self.verdict = self._whole
        return self.verdict

    @property
    def phase_s(self) -> dict:
        return dict((self._whole.checks or {}).get("phase_s") or {}) if self._whole is not None else {}

    def close(self) -> None:
        pass


def judge_in(judge, candidate_src: str, *, candidate_name: str = "candidate.py",
             profile: bool = True, progress=None) -> Verdict:
    """Judge one candidate in `judge`'s session, every step at once (session.Judge.judge)."""
    return finish(Judgement(judge, candidate_src, candidate_name=candidate_name, profile=profile, progress=progress))


def finish(j: Judgement) -> Verdict:
    """`j`'s remaining steps, at once; its verdict."""
    verdict = j.verdict
    while verdict is None:
        verdict = j.advance()
    return verdict


def _judge(evaluation: Evaluation, candidate_name: str, profile: bool):
    """The steps, as a generator: it yields after compile and after test with the
    candidate still on course, and returns the status where the judgement ends."""
    s = evaluation.settings
    status = static_checks(evaluation, candidate_name)
    if status is not None:
        return status
    judge = evaluation.judge
    t = time.monotonic()
    judge.check_device()

    # 2) reference, in the judge: KernelBench's seeds and init order (once per session).
    #    The first one, and every one of a lean session, with the GPU held alone: its
    #    inputs and temporaries must not meet another candidate's (tools/judge/memory.py)
    dev = judge.dev
    ref_model = judge.reference_model()
    seeds = judge.seeds
    with contextlib.ExitStack() as hold:
        if judge.footprint is None or judge.large_outputs():
            hold.enter_context(judge.gpu.exclusive())
        judge.reference(seeds[0])   # sizes the staging buffer and the GPU holds
        evaluation.checks.update(trials=s.test.trials, init_seed=s.test.init_seed, trial_seeds="secret",
                          module_mode=s.test.module_mode)
        # a reference that does not match itself (Dropout in training mode) no kernel can
        # match: every candidate is told so, none passes by luck or by a loose tolerance
        unreproducible = judge.unreproducible()
        if unreproducible is not None:
            evaluation.diag(*unreproducible)
            evaluation.flag(unreproducible[0])   # the loop stops on it: no candidate can be correct
            return Status.INCORRECT
        judge.start_baseline()

        # 3) compile: a fresh worker imports the candidate, builds ModelNew, JITs its kernels.
        #    Where a trial is large (service.Judge.large_outputs), one candidate at a time
        #    holds the GPU from its fork until its worker is gone and its IPC buffer freed:
        #    a worker left over from the candidate before would crowd this one's staging
        #    buffer out, and outputs of gigabytes through the pipe are far slower (BENCHMARKS.md,
        #    19_ReLU's batch anomaly)
        serial = judge.large_outputs()
        if not serial:
            hold.close()   # small: candidates share the GPU while they compile
        try:
            with _fresh_worker(evaluation, candidate_name) as worker:
                # what this candidate waited for before its own work: the session's one-time
                # costs (the first candidate pays them), the fork server, the fork
                evaluation.phase_s["setup"] = time.monotonic() - t
                evaluation.checks["session_s"] = judge.session_costs()
                return (yield from _judge_in_worker(evaluation, worker, ref_model, seeds, dev, candidate_name,
                                                    profile, serial))
        finally:
            judge.candidate_done()   # lean: before the next candidate may take the GPU


@contextlib.contextmanager
def _fresh_worker(evaluation: Evaluation, candidate_name: str):
    """A new worker for this candidate (forked when the session has a fork server);
    afterwards its output is kept, it is killed, and only then is the IPC buffer freed."""
    judge = evaluation.judge
    server = judge.forkserver(evaluation.device)
    worker = isolation.start_worker(evaluation.src, device=evaluation.device, gpu_index=evaluation.gpu_index,
                                    max_output_bytes=evaluation.settings.test.max_output_kib << 10,
                                    candidate_name=candidate_name, forkserver=server)
    evaluation.checks["worker_start"] = "forked" if server is not None else "spawned"
    try:
        yield worker
    finally:
        evaluation.checks["worker_output"] = worker.output()
        worker.close()
        if evaluation.staging is not None:   # only now: the worker that mapped it is gone
            evaluation.staged = None
            evaluation.staging.free()
            evaluation.staging = None


def profile_in(judge, candidate_src: str, verdict: Verdict, *, candidate_name: str = "candidate.py") -> Verdict:
    """The profile step alone (torch.profiler breakdown, ncu pass, bottleneck summary)
    for a correct candidate `judge` timed earlier without it; the verdict otherwise
    stays as it was (status, timing, speedups). Only the evaluator's faults raise."""
    if not verdict.correct or judge.device != "cuda" or verdict.bottleneck is not None:
        return verdict
    evaluation = Evaluation(judge.problem, candidate_src, judge.device, judge.gpu_index, judge.settings, judge)
    evaluation.timing, evaluation.device_info = dict(verdict.timing), dict(verdict.device)
    evaluation.checks = {k: v for k, v in verdict.checks.items() if k == "host_check"}
    judge.check_device()
    ref_model = judge.reference_model()
    t = time.monotonic()
    with _fresh_worker(evaluation, candidate_name) as worker:
        with judge.compile_hold():
            status, _ = compile_phase(evaluation, worker, judge.seeds, candidate_name)
        if status is None:
            with judge.gpu.exclusive():
                profile_candidate(evaluation, worker, ref_model, judge.seeds[0], judge.dev, True)
    checks = dict(verdict.checks)
    checks["phase_s"] = {**checks.get("phase_s", {}), "profile_refined": round(time.monotonic() - t, 4)}
    for k in ("ncu", "ncu_error", "profile_error"):
        if k in evaluation.checks:
            checks[k] = evaluation.checks[k]
    if evaluation.bottleneck is None:
        checks.setdefault("profile_error", "; ".join(d.message for d in evaluation.diagnostics)[:300] or "no summary")
        return dataclasses.replace(verdict, checks=checks)
    kernels = verdict.kernels + tuple(k for k in evaluation.kernels if k not in verdict.kernels)
    profiled = dataclasses.replace(verdict, bottleneck=evaluation.bottleneck, checks=checks, kernels=kernels)
    from tools.judge.feedback import feedback_for
    return dataclasses.replace(profiled, feedback=feedback_for(profiled))


def _judge_in_worker(evaluation, worker, ref_model, seeds, dev, candidate_name, profile, serial):
    """Compile under a shared hold, then the GPU phases under an exclusive one; `serial`:
    the caller holds the GPU exclusively for the whole candidate already."""
    judge = evaluation.judge
    with judge.compile_hold() if not serial else contextlib.nullcontext():
        status, first_ref = compile_phase(evaluation, worker, seeds, candidate_name)
    if serial:   # alone on the GPU: the peaks are this candidate's (with the reference before it)
        memory.note_peaks(evaluation, worker, "compile")
    if status is not None:
        return status
    yield "compile"
    if judge.lean:
        first_ref = None   # made again when compared: the judge holds no reference while the worker runs
    with judge.gpu.exclusive() if not serial else contextlib.nullcontext():
        # held from the trials to the last timed call: the yield after test keeps it
        return (yield from _gpu_phases(evaluation, worker, ref_model, seeds, dev, first_ref, profile))


def _gpu_phases(evaluation, worker, ref_model, seeds, dev, first_ref, profile):
    """4) test, 5) sm_90 compile on cpu, then (a yield: the test step's end) 6) time,
    7) profile: one candidate at a time on the GPU."""
    s = evaluation.settings
    # 4) test: fresh secret inputs per trial
    evaluation.say(f"test: {len(seeds)} trials on fresh inputs" + ("" if evaluation.device == "cuda" else
                                                            " in Triton's interpreter"))
    t = time.monotonic()
    try:
        status = run_trials(evaluation, worker, ref_model, seeds, dev, first_ref)
    finally:
        evaluation.phase_s["test"] = time.monotonic() - t
        memory.note_peaks(evaluation, worker, "test")
    if status is not None:
        return status

    # 5) on cpu: compile every launched kernel for sm_90 too (GPU-only errors, registers)
    if evaluation.device == "cpu":
        if s.test.gpu_cross_compile:
            evaluation.say("compile: every launched kernel for sm_90, in a clean worker")
            t = time.monotonic()
            status = gpu_compile(evaluation, worker)
            evaluation.phase_s["gpu_compile"] = time.monotonic() - t
            if status is not None:
                return status
        evaluation.checks["timing"] = "skipped: --device cpu runs Triton's interpreter"
        return Status.CORRECT
    yield "test"

    # 6) time, interleaved with the baselines; 7) profile and runtime guards
    ts = s.timing
    evaluation.say(f"time: {ts.rounds} rounds x {ts.iters_per_round} calls of the candidate and eager"
            + (" and torch.compile" if ts.compile_baseline else "") + ", interleaved")
    t = time.monotonic()
    try:
        with precision_flags(s.test.precision):   # eager and torch.compile with the reference's flags
            status = time_candidate(evaluation, worker, ref_model, seeds[0], dev)
    finally:
        evaluation.phase_s["time"] = time.monotonic() - t
        memory.note_peaks(evaluation, worker, "time")
    if status is not None:
        return status
    evaluation.say("profile: kernel breakdown" + (" and bottleneck summary" if profile else ""))
    t = time.monotonic()
    try:
        status = profile_candidate(evaluation, worker, ref_model, seeds[0], dev, profile)
    finally:
        evaluation.phase_s["profile"] = time.monotonic() - t
        memory.note_peaks(evaluation, worker, "profile")
    return status or Status.CORRECT
