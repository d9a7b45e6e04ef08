"""Judge one candidate: guard -> compile -> test -> time -> profile, into one Verdict.

This process (the judge) computes the reference with the problem's own Model and the
same seeds and init order as KernelBench, and compares what the candidate's worker
hands back; candidate code never runs here (tools/sandbox/worker.py, tools/sandbox/isolation.py). Inputs
come from a secret seed per judge session, so a candidate cannot precompute answers.
The eager and torch.compile baselines are timed here, interleaved with the candidate's
rounds in the worker, with the same timer (tools/perf/timer.py). What a session shares
between candidates (reference, baselines, fork servers, the GPU lock) is
tools/judge.py's; `evaluate()` is a session of one candidate.

Not covered here: what the guards look for (tools/guards/), how numbers are compared
(tools/numerics.py), bottleneck analysis (tools/perf/).
"""
from __future__ import annotations

import contextlib
import dataclasses
import secrets
import statistics
import time
from dataclasses import dataclass, field

from tools.sandbox import channel, isolation
from tools.errors import BadInput, EvaluatorError
from tools.problem import Problem, make_inputs
from tools.settings import EvalSettings
from tools.verdict import Diagnostic, Status, Timing, Verdict


def default_device() -> str:
    import torch
    return "cuda" if torch.cuda.is_available() else "cpu"


@dataclass
class _Run:
    """What one evaluation has found so far (mutable while judging, frozen at the end)."""
    problem: Problem
    src: str
    device: str
    gpu_index: int
    settings: EvalSettings
    judge: object = None            # tools.judge.Judge: what this candidate shares with others
    diagnostics: list[Diagnostic] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)
    checks: dict = field(default_factory=dict)
    timing: dict = field(default_factory=dict)
    kernels: list = field(default_factory=list)
    phase_s: dict = field(default_factory=dict)
    device_info: dict = field(default_factory=dict)
    speedup_eager: float | None = None
    speedup_compile: float | None = None
    speedup_interval: dict = field(default_factory=dict)   # baseline -> speedup.SpeedupEstimate JSON + "faster"
    bottleneck: dict | None = None
    staging: object = None          # tools.sandbox.cudaipc.Staging while a worker may map it
    staged: object = None           # its bytes (a uint8 tensor) once the probe proved IPC works
    progress: object = None         # callable(str) told when each phase starts, or None

    def say(self, what: str) -> None:
        if self.progress is not None:
            self.progress(what)

    def diag(self, kind: str, message: str, line: int | None = None, source_line: str | None = None):
        if line and not source_line:
            lines = self.src.splitlines()
            source_line = lines[line - 1].strip() if 0 < line <= len(lines) else None
        self.diagnostics.append(Diagnostic(kind, message, line, source_line))

    def flag(self, name: str) -> None:
        if name not in self.flags:
            self.flags.append(name)


def evaluate(problem: Problem, candidate_src: str, *, device: str | None = None,
             settings: EvalSettings = EvalSettings(), candidate_name: str = "candidate.py",
             profile: bool = True, gpu_index: int = 0, progress=None) -> Verdict:
    """Judge `candidate_src` against `problem` in a session of its own (tools/judge.py).
    Only the evaluator's own faults raise. `progress(text)`, when given, hears each
    phase as it starts (for a CLI's stderr)."""
    from tools.judge import Judge
    # a static reject or a syntax error needs no session (no fork server, no CUDA)
    quick = _static_verdict(candidate_src, candidate_name, settings, device or default_device(), gpu_index)
    if quick is not None:
        return quick
    with Judge(problem, device=device, gpu_index=gpu_index, settings=settings) as judge:
        return judge.judge(candidate_src, candidate_name=candidate_name, profile=profile,
                           progress=progress)


def _static_verdict(src: str, candidate_name: str, settings: EvalSettings, device: str,
                    gpu_index: int) -> Verdict | None:
    """The verdict of a candidate the syntax check or a static guard refuses, else None."""
    t0 = time.monotonic()
    run = _Run(None, src, device, gpu_index, settings, None)
    status = _static_checks(run, candidate_name)
    return None if status is None else _verdict(run, status, t0)


def judge_in(judge, candidate_src: str, *, candidate_name: str = "candidate.py",
             profile: bool = True, progress=None) -> Verdict:
    """Judge one candidate in `judge`'s session (tools/judge.Judge.judge calls this)."""
    t0 = time.monotonic()
    run = _Run(judge.problem, candidate_src, judge.device, judge.gpu_index, judge.settings, judge,
               progress=progress)
    status = _judge(run, candidate_name, profile)
    return _verdict(run, status, t0)


def _verdict(run: "_Run", status: Status, t0: float) -> Verdict:
    run.checks["phase_s"] = {k: round(v, 4) for k, v in run.phase_s.items()}
    from tools.dialect.causes import explain   # KernelBook-dialect causes go first, for the model
    verdict = Verdict(
        status=status, diagnostics=explain(run.src, status, run.diagnostics, run.problem) + tuple(run.diagnostics),
        flags=tuple(run.flags),
        checks=run.checks, timing=run.timing, speedup_eager=run.speedup_eager,
        speedup_compile=run.speedup_compile, speedup_interval=run.speedup_interval, device=run.device_info,
        kernels=tuple(run.kernels), bottleneck=run.bottleneck,
        duration_s=round(time.monotonic() - t0, 3))
    from tools.feedback import feedback_for
    return dataclasses.replace(verdict, feedback=feedback_for(verdict))


def _static_checks(run: _Run, candidate_name: str) -> Status | None:
    """1) guard: parse and static checks, before torch, CUDA or any candidate code."""
    run.device_info = {"type": run.device}
    try:
        compile(run.src, candidate_name, "exec")
    except SyntaxError as e:
        run.diag("syntax_error", f"SyntaxError: {e.msg}", e.lineno)
        return Status.COMPILE_ERROR
    from tools.guards.suite import run_static_guards
    findings = run_static_guards(run.src, run.settings.guards)
    for f in findings:
        run.flag(f.flag)
        run.diag(f"guard:{f.guard}", f.message, f.line)
    if any(f.reject for f in findings):
        return Status.REJECTED
    return None


def _judge(run: _Run, candidate_name: str, profile: bool) -> Status:
    s = run.settings
    status = _static_checks(run, candidate_name)
    if status is not None:
        return status
    judge = run.judge
    judge.check_device()

    # 2) reference, in the judge: KernelBench's seeds and init order (once per session)
    dev = judge.dev
    ref_model = judge.reference_model()
    seeds = judge.seeds
    judge.reference(seeds[0])   # cached: sizes the staging buffer and the GPU holds
    judge.start_baseline()
    run.checks.update(trials=s.test.trials, init_seed=s.test.init_seed, trial_seeds="secret")

    # 3) compile: a fresh worker imports the candidate, builds ModelNew, JITs its kernels
    with _fresh_worker(run, candidate_name) as worker:
        return _judge_in_worker(run, worker, ref_model, seeds, dev, candidate_name, profile)


@contextlib.contextmanager
def _fresh_worker(run: _Run, candidate_name: str):
    """A new worker for this candidate (forked when the session has a fork server);
    afterwards its output is kept, it is killed, and only then is the IPC buffer freed."""
    judge = run.judge
    server = judge.forkserver(run.device)
    worker = isolation.start_worker(run.src, device=run.device, gpu_index=run.gpu_index,
                                    max_output_bytes=run.settings.test.max_output_kib << 10,
                                    candidate_name=candidate_name, forkserver=server)
    run.checks["worker_start"] = "forked" if server is not None else "spawned"
    try:
        yield worker
    finally:
        run.checks["worker_output"] = worker.output()
        worker.close()
        if run.staging is not None:   # only now: the worker that mapped it is gone
            run.staged = None
            run.staging.free()
            run.staging = None


def profile_in(judge, candidate_src: str, verdict: Verdict, *, candidate_name: str = "candidate.py") -> Verdict:
    """The profile step alone (torch.profiler breakdown, ncu pass, bottleneck summary)
    for a correct candidate `judge` timed earlier without it; the verdict otherwise
    stays as it was (status, timing, speedups). Only the evaluator's faults raise."""
    if not verdict.correct or judge.device != "cuda" or verdict.bottleneck is not None:
        return verdict
    run = _Run(judge.problem, candidate_src, judge.device, judge.gpu_index, judge.settings, judge)
    run.timing, run.device_info = dict(verdict.timing), dict(verdict.device)
    run.checks = {k: v for k, v in verdict.checks.items() if k == "host_check"}
    judge.check_device()
    ref_model = judge.reference_model()
    t = time.monotonic()
    with _fresh_worker(run, candidate_name) as worker:
        with judge.compile_slots, judge.compile_hold():
            status, _ = _compile_phase(run, worker, judge.seeds, candidate_name)
        if status is None:
            with judge.gpu.exclusive():
                _profile(run, worker, ref_model, judge.seeds[0], judge.dev, True)
    checks = dict(verdict.checks)
    checks["phase_s"] = {**checks.get("phase_s", {}), "profile_refined": round(time.monotonic() - t, 4)}
    for k in ("ncu", "ncu_error", "profile_error"):
        if k in run.checks:
            checks[k] = run.checks[k]
    if run.bottleneck is None:
        checks.setdefault("profile_error", "; ".join(d.message for d in run.diagnostics)[:300] or "no summary")
        return dataclasses.replace(verdict, checks=checks)
    kernels = verdict.kernels + tuple(k for k in run.kernels if k not in verdict.kernels)
    profiled = dataclasses.replace(verdict, bottleneck=run.bottleneck, checks=checks, kernels=kernels)
    from tools.feedback import feedback_for
    return dataclasses.replace(profiled, feedback=feedback_for(profiled))


def _judge_in_worker(run, worker, ref_model, seeds, dev, candidate_name, profile) -> Status:
    judge = run.judge
    with judge.compile_slots, judge.compile_hold():
        status, first_ref = _compile_phase(run, worker, seeds, candidate_name)
    if status is not None:
        return status
    with judge.gpu.exclusive():
        return _gpu_phases(run, worker, ref_model, seeds, dev, first_ref, profile)


def _compile_phase(run, worker, seeds, candidate_name) -> tuple[Status | None, list]:
    """Set-up, import, ModelNew, and (cuda) every kernel JIT-compiled without running."""
    s = run.settings
    run.say("compile: fresh sandboxed worker, import the candidate, build ModelNew")
    t = time.monotonic()
    try:
        try:
            hello, _ = worker.request({
                "op": "setup", "device": "cpu" if run.device == "cpu" else "cuda",
                "max_file_mib": s.test.max_file_mib,
                "address_space_gib": s.test.cpu_memory_gib if run.device == "cpu" else 0,
                "gpu_cross_compile": s.test.gpu_cross_compile}, s.test.compile_timeout_s)
        except (isolation.WorkerTimeout, isolation.WorkerDied) as e:
            # no candidate code has run yet: this is the evaluator's failure
            tail = worker.output().get("stderr", "")[-400:]
            raise EvaluatorError(f"the worker could not start ({e}): {tail}") from None
        if not hello.get("ok"):
            raise EvaluatorError(f"worker set-up failed: {hello.get('message')}")
        run.checks["sandbox"] = hello.get("enforced", {})
        run.checks["worker_pid"] = hello.get("pid")
        first_ref = run.judge.reference(seeds[0])
        _offer_staging(run, worker, first_ref)   # before any candidate code runs
        try:
            loaded, _ = worker.request({"op": "load", "problem": str(run.problem.path),
                                        "candidate": candidate_name,
                                        "init_seed": s.test.init_seed}, s.test.compile_timeout_s)
        except isolation.WorkerTimeout as e:
            run.diag("timeout", f"importing and constructing ModelNew took too long: {e}")
            return Status.TIMEOUT, first_ref
        except isolation.WorkerDied:
            return _died(run, worker, "import"), first_ref
        if not loaded.get("ok"):
            _error_diag(run, loaded)
            return (Status.COMPILE_ERROR if loaded.get("phase") in ("import", "construct") or
                    loaded.get("kind") == "triton_compile" else Status.RUNTIME_ERROR), first_ref
        if run.device == "cuda":
            status = _warm(run, worker)
            if status is not None:
                return status, first_ref
    finally:
        run.phase_s["compile"] = time.monotonic() - t
    return None, first_ref


def _warm(run, worker) -> Status | None:
    """JIT-compile the forward's kernels without launching them (Triton's warmup path),
    outside the exclusive hold on the GPU. A Triton compile error is the verdict; any
    other failure here is left for the trials to find and report."""
    try:
        reply, _ = worker.request({"op": "warm", "seed": secrets.randbelow(2**31 - 1)},
                                  run.settings.test.compile_timeout_s)
    except isolation.WorkerTimeout as e:
        run.diag("timeout", f"compiling the forward's kernels took too long: {e}")
        return Status.TIMEOUT
    except isolation.WorkerDied:
        return _died(run, worker, "kernel compilation")
    run.checks["warm"] = {"compiled": reply.get("compiled", 0), "s": reply.get("s")}
    if not reply.get("ok") and reply.get("kind") == "triton_compile":
        _error_diag(run, reply)
        return Status.COMPILE_ERROR
    if not reply.get("ok"):
        run.checks["warm"]["left_to_trials"] = f"{reply.get('error_type')}: {str(reply.get('message'))[:200]}"
    return None


def _gpu_phases(run, worker, ref_model, seeds, dev, first_ref, profile) -> Status:
    """4) test, 5) sm_90 compile on cpu, 6) time, 7) profile: one candidate at a time."""
    s = run.settings
    # 4) test: fresh secret inputs per trial
    run.say(f"test: {len(seeds)} trials on fresh inputs" + ("" if run.device == "cuda" else
                                                            " in Triton's interpreter"))
    t = time.monotonic()
    try:
        status = _test(run, worker, ref_model, seeds, dev, first_ref)
    finally:
        run.phase_s["test"] = time.monotonic() - t
    if status is not None:
        return status

    # 5) on cpu: compile every launched kernel for sm_90 too (GPU-only errors, registers)
    if run.device == "cpu":
        if s.test.gpu_cross_compile:
            run.say("compile: every launched kernel for sm_90, in a clean worker")
            t = time.monotonic()
            status = _gpu_compile(run, worker)
            run.phase_s["gpu_compile"] = time.monotonic() - t
            if status is not None:
                return status
        run.checks["timing"] = "skipped: --device cpu runs Triton's interpreter"
        return Status.CORRECT

    # 6) time, interleaved with the baselines; 7) profile and runtime guards
    ts = s.timing
    run.say(f"time: {ts.rounds} rounds x {ts.iters_per_round} calls of the candidate and eager"
            + (" and torch.compile" if ts.compile_baseline else "") + ", interleaved")
    t = time.monotonic()
    try:
        status = _time(run, worker, ref_model, seeds[0], dev)
    finally:
        run.phase_s["time"] = time.monotonic() - t
    if status is not None:
        return status
    run.say("profile: kernel breakdown" + (" and bottleneck summary" if profile else ""))
    t = time.monotonic()
    try:
        status = _profile(run, worker, ref_model, seeds[0], dev, profile)
    finally:
        run.phase_s["profile"] = time.monotonic() - t
    return status or Status.CORRECT


def _test(run, worker, ref_model, seeds, dev, first_ref: list) -> Status | None:
    from tools.numerics import compare, tolerances
    s = run.settings
    comparisons = []
    for i, seed in enumerate(seeds):
        ref = first_ref if i == 0 else run.judge.reference(seed)
        poison = [{"dtype": str(r.dtype).removeprefix("torch."), "shape": list(r.shape)} for r in ref]
        timeout = s.test.compile_timeout_s if i == 0 else s.test.run_timeout_s
        try:
            reply, payload = worker.request({"op": "trial", "seed": seed, "poison": poison,
                                             "repeat": i == 0, "staged": run.staged is not None},
                                            timeout)
        except isolation.WorkerTimeout:
            run.diag("timeout", f"trial {i + 1}: forward did not finish within {timeout:g} s "
                     "(infinite loop, deadlock or a hung kernel)")
            _health(run, worker)
            return Status.TIMEOUT
        except isolation.WorkerDied:
            return _died(run, worker, f"trial {i + 1}")
        if not reply.get("ok"):
            failed = reply.get("failed_launch")
            if failed and reply.get("kind") != "triton_compile":
                # the interpreter reports GPU compile errors as runtime errors: ask a compiler
                for k in _compile_specs(run, [failed]):
                    if not k.get("ok"):
                        reply = {**reply, "kind": "triton_compile", "message": k.get("message", ""),
                                 "error_type": k.get("error_type", "CompilationError"),
                                 "line": k.get("line") or reply.get("line"),
                                 "source_line": k.get("source_line") or reply.get("source_line")}
            _error_diag(run, reply)
            return Status.COMPILE_ERROR if reply.get("kind") == "triton_compile" else Status.RUNTIME_ERROR
        launches = reply.get("launches", {})
        run.checks.setdefault("triton_launches", launches)
        if s.guards.require_triton_launch and sum(launches.values()) == 0:
            run.diag("guard:no_triton_launch", f"trial {i + 1}: forward launched no @triton.jit "
                     "kernel; the work must be done in Triton kernels")
            run.flag("no_triton_kernel")
            return Status.REJECTED
        compute = reply.get("aten_compute") or {}
        if compute:
            ops = ", ".join(f"{k}×{v}" for k, v in sorted(compute.items(), key=lambda kv: -kv[1])[:5])
            run.checks["aten_compute"] = compute
            run.flag("library_ops")
            msg = (f"the forward runs PyTorch compute ops ({ops}) besides its Triton kernels; "
                   "do that work inside the kernels")
            if not s.guards.allow_library_ops:
                run.diag("guard:library_ops", msg)
                return Status.REJECTED
            run.diag("library_ops", msg)
        if reply.get("inputs_mutated"):
            idx = ", ".join(f"#{k}" for k in reply["inputs_mutated"])
            run.diag("input_mutated", f"forward modified input {idx} in place; inputs must be left unchanged")
            return Status.INCORRECT
        try:
            outs = channel.unpack_tensors(reply.get("outputs", []), payload, dev, run.staged)
        except channel.ProtocolError as e:
            run.diag("protocol", f"the worker sent malformed outputs: {e}")
            run.flag("tampering")
            return Status.REJECTED
        calls = 2 if i == 0 else 1
        types = reply.get("output_types", [])
        structure = reply.get("structure", [])
        ok_types = [n == "torch.Tensor" for n in types]
        if not all(ok_types) or len(types) != calls * len(ref):
            got = ", ".join(sorted(set(types))) or "nothing"
            want = f"{len(ref)} torch.Tensor" if len(ref) > 1 else "exactly one torch.Tensor"
            run.diag("output_type", f"forward returned {structure[0] if structure else '?'} ({got}); expected {want}")
            return Status.INCORRECT
        want_dev = "cpu" if run.device == "cpu" else "cuda"
        devices = reply.get("output_devices") or []
        wrong = [d for d in devices if str(d).split(":")[0] != want_dev]
        if wrong or len(devices) != len(types):
            run.diag("device", f"forward returned a tensor on {wrong[0] if wrong else '?'}; outputs must be "
                     f"on {want_dev}, where the inputs are (compute on the GPU, do not copy results elsewhere)")
            return Status.INCORRECT
        for call in range(calls):
            got = outs[call * len(ref):(call + 1) * len(ref)]
            for k, (o, r) in enumerate(zip(got, ref)):
                where = f"trial {i + 1}" + (", repeated call" if call else "") + (f", output {k}" if len(ref) > 1 else "")
                if o.shape != r.shape:
                    run.diag("shape", f"{where}: output shape {tuple(o.shape)}, expected {tuple(r.shape)}")
                    return Status.INCORRECT
                if o.dtype != r.dtype:
                    run.diag("dtype", f"{where}: output dtype {o.dtype}, expected {r.dtype}")
                    return Status.INCORRECT
                atol, rtol, rel = tolerances(r.dtype, s.test)
                cmp = compare(o, r, atol=atol, rtol=rtol, rel_l2_limit=rel)
                comparisons.append({"trial": i + 1, "call": call + 1, "output": k, **cmp.to_json()})
                if not cmp.ok:
                    run.checks["comparisons"] = comparisons
                    msg = cmp.describe()
                    if call == 1:
                        msg = "the first call was right but a repeated call with the same inputs was not " \
                              "(state kept between calls?): " + msg
                    run.diag("mismatch", f"{where}: {msg}")
                    for p in cmp.patterns:
                        run.flag(f"diff:{p.split(':')[0]}")
                    return Status.INCORRECT
    run.checks["comparisons"] = comparisons
    run.checks["inputs_unmutated"] = True
    run.checks["repeat_consistent"] = True
    atol, rtol, rel = tolerances(ref[0].dtype, s.test)
    run.checks["tolerance"] = {"atol": atol, "rtol": rtol, "rel_l2": rel, "dtype": str(ref[0].dtype)}
    return None


def _offer_staging(run: _Run, worker, ref: list) -> None:
    """On cuda, give the worker a judge-owned CUDA IPC buffer for its outputs (two
    calls' worth: a trial's repeated call) when IPC works here and memory allows;
    otherwise outputs come through the pipe. checks["output_transfer"] says which."""
    if run.device != "cuda":
        run.checks["output_transfer"] = "pipe"
        return
    if run.settings.test.output_transfer == "pipe":
        run.checks["output_transfer"] = "pipe (output_transfer = \"pipe\")"
        return
    import torch
    from tools.sandbox import cudaipc
    need = cudaipc.span([r.numel() * r.element_size() for r in ref] * 2)
    free, _ = torch.cuda.mem_get_info(run.gpu_index)
    if need == 0 or 3 * need > free:  # the buffer, the judge's copies, room for the worker
        run.checks["output_transfer"] = (f"pipe (a {need >> 20} MiB staging buffer would leave too "
                                         f"little of the {free >> 20} MiB free)" if need else "pipe")
        return
    try:
        run.staging = cudaipc.Staging(need, run.gpu_index)
        head = run.staging.tensor[:512]
        head.copy_(torch.arange(512, device=head.device).remainder(256).to(torch.uint8))
        torch.cuda.synchronize(run.gpu_index)
    except cudaipc.IpcError as e:
        run.checks["output_transfer"] = f"pipe (CUDA IPC unavailable: {str(e)[:200]})"
        return   # the buffer, if any, is freed after the worker is gone
    try:
        reply, _ = worker.request({"op": "staging", "handle": run.staging.handle.hex(), "nbytes": need},
                                  run.settings.test.run_timeout_s)
    except (isolation.WorkerTimeout, isolation.WorkerDied) as e:  # no candidate code has run yet
        raise EvaluatorError(f"the worker failed while mapping the CUDA IPC buffer ({e}); "
                             "set [eval] output_transfer = \"pipe\" to avoid IPC") from None
    back = run.staging.tensor[256:512].tolist()
    if reply.get("ok") and reply.get("probe") == list(range(256)) and back == list(range(255, -1, -1)):
        run.checks["output_transfer"] = "cuda_ipc"
        run.staged = run.staging.tensor
        return
    # not used, but freed only after the worker is gone (it may have mapped it)
    run.checks["output_transfer"] = ("pipe (CUDA IPC probe failed: "
                                     f"{reply.get('message') or 'pattern mismatch'}"[:200] + ")")


def compute_reference(ref_model, mod, seed: int, dev: str) -> list:
    """The problem's own Model on the trial inputs of `seed`; its faults are BadInput."""
    import torch
    path = getattr(mod, "__file__", None) or "problem"
    try:
        with torch.no_grad():
            out = ref_model(*make_inputs(mod, seed, dev))
        if dev.startswith("cuda"):
            torch.cuda.synchronize()
    except Exception as e:
        problem_fault(path, e, "the reference Model.forward(*get_inputs())")
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    if not outs or not all(isinstance(o, torch.Tensor) for o in outs):
        got = type(out).__name__ if not isinstance(out, (tuple, list)) else \
            f"{type(out).__name__} of {', '.join(sorted({type(o).__name__ for o in outs})) or 'nothing'}"
        raise BadInput(path, f"Model.forward returned {got}; expected a tensor or a tuple of tensors")
    return outs


def problem_fault(path, e: Exception, what: str):
    """The problem's own code failed in the judge: bad input (exit 2), except running out
    of memory, which is this machine's limit (exit 3)."""
    import torch
    from tools.problem import describe_fault
    if isinstance(e, getattr(torch, "OutOfMemoryError", torch.cuda.OutOfMemoryError)):
        raise EvaluatorError(f"{path}: {what} ran out of memory: {describe_fault(e)}") from None
    raise BadInput(path, f"{what} raised {describe_fault(e)}") from None


def _gpu_compile(run, worker) -> Status | None:
    """Compile every kernel the interpreter ran for sm_90, in a second, clean worker."""
    try:
        reply, _ = worker.request({"op": "specs"}, run.settings.test.run_timeout_s)
    except (isolation.WorkerTimeout, isolation.WorkerDied) as e:
        run.diag("gpu_compile", f"could not collect the launched kernels: {e}")
        return None
    kernels = _compile_specs(run, reply.get("specs", []))
    for k in kernels:
        run.kernels.append(k)
        if not k.get("ok"):
            run.diag("triton_compile", f"kernel {k.get('name')} runs in the interpreter but does not "
                     f"compile for sm_90: {k.get('message', '')[:600]}", k.get("line"), k.get("source_line"))
            return Status.COMPILE_ERROR
        if k.get("spills"):
            run.flag("register_spills")
    return None


def _compile_specs(run, specs: list[dict]) -> list[dict]:
    """sm_90 compile results for `specs`, from a fresh worker that never ran the
    interpreter (it leaves triton.language patched). [] when it could not run."""
    if not specs:
        return []
    s = run.settings.test
    w = isolation.start_worker(run.src, device="compile", max_output_bytes=s.max_output_kib << 10,
                               forkserver=run.judge.forkserver("compile"))
    try:
        w.request({"op": "setup", "device": "compile", "max_file_mib": s.max_file_mib,
                   "address_space_gib": s.cpu_memory_gib}, s.compile_timeout_s)
        reply, _ = w.request({"op": "compile", "candidate": "candidate.py", "specs": specs,
                              "arch": 90}, s.compile_timeout_s)
    except (isolation.WorkerTimeout, isolation.WorkerDied) as e:
        run.checks["gpu_compile_error"] = str(e)
        return []
    finally:
        w.close()
    if not reply.get("ok"):
        run.checks["gpu_compile_error"] = reply.get("message", "")[:500]
        return []
    return reply.get("kernels", [])


def _time(run, worker, ref_model, seed, dev) -> Status | None:
    """6) time: candidate, eager and torch.compile in interleaved rounds, first per call
    (what one forward costs a user), then, for short forwards, with a measure free of
    launch and sync overhead (tools/perf/timer.py); the speedup and its interval come from
    the measure chosen (tools/perf/speedup.py)."""
    import torch
    from tools.perf import timer
    from tools.perf.gpuinfo import gpu_state
    s, ts = run.settings, run.settings.timing
    inputs = make_inputs(run.problem.module, seed, dev)
    baselines = {"eager": lambda: ref_model(*inputs)}
    if ts.compile_baseline:
        cmodel, error = run.judge.compiled_baseline()   # compiled once per session
        if cmodel is not None:
            baselines["compile"] = lambda: cmodel(*inputs)
        else:
            run.checks["compile_baseline_error"] = error
    run.device_info = {"type": "cuda", **gpu_state(run.gpu_index), "before_timing": True}
    with torch.no_grad():
        # a) per call, every time
        per_call = {k: lambda warm, fn=fn: timer.time_cuda(fn, warmup=warm, iters=ts.iters_per_round,
                                                         name=f"krefine.{k}")
                    for k, fn in baselines.items()}
        rounds, status = _timed_rounds(run, worker, seed, "per_call", 1, per_call)
        if status is not None:
            return status
        per_call_ms = {k: statistics.median(x for r in v for x in r) for k, v in rounds.items()}
        run.checks["timing_per_call_ms"] = per_call_ms
        measure, reps = "per_call", 1
        # b) short forwards: the in-region sync would decide the ratio; measure without it
        if ts.measure != "per_call" and (ts.measure != "auto" or min(per_call_ms.values()) < ts.per_call_min_ms):
            graphs: list = []
            try:
                measure, reps, judged, status = _short_measure(run, worker, seed, baselines, graphs)
                if status is None:
                    rounds, status = _timed_rounds(run, worker, seed, measure, reps, judged)
            finally:
                for g in graphs:
                    g.close()
            if status is not None:
                return status
        run.checks.update(timing_measure=measure, timing_reps=reps)
        status = _host_check(run, worker, seed, baselines["eager"], per_call_ms["candidate"])
        if status is not None:
            return status
    after = gpu_state(run.gpu_index)
    run.device_info["after_timing"] = {k: after.get(k) for k in ("sm_clock_mhz", "mem_clock_mhz",
                                                                   "temperature_c", "power_w",
                                                                   "throttle_reasons")}
    _speedups(run, rounds)
    return None


def _timed_rounds(run, worker, seed, measure: str, reps: int, timers: dict) -> tuple[dict, Status | None]:
    """Interleaved rounds (eager, candidate, compile) of one measure: per-round ms
    samples per callable. `timers[name](warmup)` times a baseline here; the candidate is
    timed in its worker. The outputs of the last round's calls are checked again."""
    s, ts = run.settings, run.settings.timing
    rounds: dict[str, list[list[float]]] = {"eager": [], "candidate": []}
    rounds.update({k: [] for k in timers if k != "eager"})
    payload, reply = b"", {}
    for r in range(ts.rounds):
        warm = ts.warmup if r == 0 else 2
        rounds["eager"].append(timers["eager"](warm))
        try:
            reply, payload = worker.request({"op": "time", "seed": seed, "warmup": warm,
                                             "iters": ts.iters_per_round, "measure": measure, "reps": reps,
                                             "return_output": r == ts.rounds - 1,
                                             "staged": run.staged is not None}, s.test.run_timeout_s)
        except isolation.WorkerTimeout:
            run.diag("timeout", f"timing round {r + 1} did not finish within {s.test.run_timeout_s:g} s")
            _health(run, worker)
            return rounds, Status.TIMEOUT
        except isolation.WorkerDied:
            return rounds, _died(run, worker, f"timing round {r + 1}")
        if not reply.get("ok") or "capture_error" in reply:
            _error_diag(run, reply if not reply.get("ok") else
                        {"phase": "timing", "error_type": "CaptureFailed", "message": reply["capture_error"]})
            return rounds, Status.RUNTIME_ERROR
        rounds["candidate"].append([float(x) for x in reply["samples_ms"]])
        if _skipped_work(run, reply, f"timing round {r + 1}"):
            return rounds, Status.REJECTED
        for k in timers:
            if k != "eager":
                rounds[k].append(timers[k](warm))
    return rounds, _recheck_timed_outputs(run, reply, payload, seed)


def _recheck_timed_outputs(run, reply: dict, payload: bytes, seed: int) -> Status | None:
    """The outputs of timed calls are checked too (deferred or skipped work shows here)."""
    from tools.numerics import compare, tolerances
    ref = run.judge.reference(seed)
    try:
        outs = channel.unpack_tensors(reply.get("outputs", []), payload, run.judge.dev, run.staged)
    except channel.ProtocolError as e:
        run.diag("protocol", f"the worker sent malformed outputs of a timed call: {e}")
        run.flag("tampering")
        return Status.REJECTED
    for o, r in zip(outs, ref):
        atol, rtol, rel = tolerances(r.dtype, run.settings.test)
        cmp = compare(o, r, atol=atol, rtol=rtol, rel_l2_limit=rel) if o.shape == r.shape else None
        if cmp is None or not cmp.ok:
            run.diag("mismatch", "the output of a timed call is wrong although the test calls were right "
                     "(work skipped or deferred under timing?): " + (cmp.describe() if cmp else "shape differs"))
            return Status.INCORRECT
    run.checks["timed_outputs_rechecked"] = True
    return None


def _short_measure(run, worker, seed, baselines: dict, graphs: list):
    """(measure, reps, timers, status) for a forward too short to time per call: graph
    replay when every callable can be captured, else batched calls; reps so that one
    sample lasts [timing] replay_target_ms for the fastest callable. The judge's graphs
    go into `graphs` for the caller to close."""
    from tools.perf import timer
    ts, s = run.settings.timing, run.settings
    try:
        reply, _ = worker.request({"op": "estimate", "seed": seed}, s.test.run_timeout_s)
    except isolation.WorkerTimeout:
        run.diag("timeout", "estimating the candidate's time per call did not finish")
        _health(run, worker)
        return "per_call", 1, {}, Status.TIMEOUT
    except isolation.WorkerDied:
        return "per_call", 1, {}, _died(run, worker, "timing")
    if not reply.get("ok"):
        _error_diag(run, reply)
        return "per_call", 1, {}, Status.RUNTIME_ERROR
    estimates = [float(reply["call_ms"])] + [timer.estimate_call_ms(fn) for fn in baselines.values()]
    reps = timer.reps_for(min(estimates), target_ms=ts.replay_target_ms)
    batched = {k: lambda warm, fn=fn: timer.time_cuda_batched(fn, warmup=warm, iters=ts.iters_per_round,
                                                              calls_per_sample=reps, name=f"krefine.{k}")
               for k, fn in baselines.items()}
    if ts.measure == "batched":
        return "batched", reps, batched, None
    failures = {}
    # the candidate's graph is captured by its first round; probe it now, before ours
    try:
        probe, _ = worker.request({"op": "time", "seed": seed, "warmup": ts.warmup, "iters": 1,
                                   "measure": "cuda_graph", "reps": reps}, s.test.run_timeout_s)
    except isolation.WorkerTimeout:
        run.diag("timeout", "capturing the candidate's forward in a CUDA graph did not finish")
        _health(run, worker)
        return "per_call", 1, {}, Status.TIMEOUT
    except isolation.WorkerDied:
        return "per_call", 1, {}, _died(run, worker, "CUDA graph capture")
    if not probe.get("ok"):
        _error_diag(run, probe)
        return "per_call", 1, {}, Status.RUNTIME_ERROR
    if _skipped_work(run, probe, "the CUDA graph capture"):
        return "per_call", 1, {}, Status.REJECTED
    if "capture_error" in probe:
        failures["candidate"] = probe["capture_error"]
    timers = {}
    for k, fn in baselines.items():
        if failures:
            break
        try:
            graphs.append(timer.capture_cuda_graph(fn, warmup=2, reps_per_graph=reps, device=run.judge.dev))
        except timer.CaptureUnsupported as e:
            failures[k] = str(e)[:300]
            break
        timers[k] = graphs[-1].time
    if failures:
        run.checks["graph_capture_failed"] = failures
        return "batched", reps, batched, None
    return "cuda_graph", reps, timers, None


def _skipped_work(run, reply: dict, what: str) -> bool:
    """Fewer Triton launches than calls in a timed request: the candidate skipped its
    kernels on inputs it had seen (the verdict is then rejected)."""
    if not run.settings.guards.require_triton_launch or reply.get("launches", 0) >= reply.get("calls", 0):
        return False
    run.diag("guard:skipped_work", f"{what}: {reply.get('launches', 0)} Triton launches in "
             f"{reply.get('calls')} timed calls: the forward skips its kernels when it sees the "
             "same inputs again (a result cache?)")
    run.flag("caching")
    return True


def _host_check(run, worker, seed, eager, cand_per_call_ms: float) -> Status | None:
    """The judge's own clock around back-to-back calls of the candidate, against the
    per-call event median (side-stream or deferred work the events missed)."""
    from tools.perf.timer import time_host
    s, ts = run.settings, run.settings.timing
    rtts = []
    for _ in range(5):  # the min: a first ping can wait behind the worker freeing GBs
        t = time.perf_counter()
        worker.request({"op": "ping"}, s.test.run_timeout_s)
        rtts.append((time.perf_counter() - t) * 1e3)
    rtt_ms = min(rtts)
    t = time.perf_counter()
    worker.request({"op": "host_run", "seed": seed, "iters": ts.host_check_iters}, s.test.run_timeout_s)
    cand_host = max(0.0, (time.perf_counter() - t) * 1e3 - rtt_ms) / ts.host_check_iters
    eager_host = time_host(eager, iters=ts.host_check_iters)
    run.checks["host_check"] = {"candidate_ms_per_call": cand_host, "eager_ms_per_call": eager_host,
                                "rtt_ms": rtt_ms, "iters": ts.host_check_iters}
    return None


def _speedups(run, rounds: dict) -> None:
    """Timing figures, speedups with their intervals, and the timing flags."""
    from tools.perf.speedup import decide, estimate_speedup
    ts = run.settings.timing
    run.timing = {k: Timing.from_samples([x for r in v for x in r]) for k, v in rounds.items()}
    run.timing.setdefault("compile", None)
    intervals = {}
    for b in ("eager", "compile"):
        if rounds.get(b):
            est = estimate_speedup(rounds["candidate"], rounds[b], confidence=ts.confidence)
            intervals[b] = {**est.to_json(), "faster": decide(est, 1.0).value}
    run.speedup_interval = intervals
    run.speedup_eager = intervals["eager"]["ratio"]
    run.speedup_compile = intervals["compile"]["ratio"] if "compile" in intervals else None
    host = run.checks["host_check"]
    cand_per_call = run.checks["timing_per_call_ms"]["candidate"]
    if host["candidate_ms_per_call"] > ts.host_check_ratio * cand_per_call + ts.host_check_slack_ms:
        # events missed work (side stream, deferred launch): trust the judge's own clock
        run.flag("timer_mismatch")
        run.diag("timer_mismatch", f"CUDA events say {cand_per_call:.4f} ms per call but the judge's clock "
                 f"says {host['candidate_ms_per_call']:.4f} ms; speedup computed from host times instead")
        cand_host = host["candidate_ms_per_call"]
        run.speedup_eager = host["eager_ms_per_call"] / cand_host if cand_host > 0 else None
        run.speedup_compile = None
        run.speedup_interval = {}
    if run.speedup_eager is not None and run.speedup_eager > ts.excessive_speedup:
        run.flag("excessive_speedup")
        run.diag("excessive_speedup", f"{run.speedup_eager:.1f}x faster than eager is above the "
                 f"{ts.excessive_speedup:g}x plausibility threshold: flagged, not trusted")
    if run.timing["candidate"].spread > 0.2:
        run.flag("noisy_timing")


def _profile(run, worker, ref_model, seed, dev, profile: bool) -> Status | None:
    """Runtime guard (GPU time share in Triton) and, when asked, the bottleneck summary."""
    from tools.perf import ncu, profiler, summary
    s = run.settings
    try:
        reply, _ = worker.request({"op": "profile", "seed": seed, "iters": 3}, s.test.run_timeout_s)
    except isolation.WorkerTimeout:
        run.diag("timeout", "profiling the candidate did not finish")
        return Status.TIMEOUT
    except isolation.WorkerDied:
        return _died(run, worker, "profiling")
    if not reply.get("ok"):
        _error_diag(run, reply)
        return Status.RUNTIME_ERROR
    breakdown = reply.get("breakdown", [])
    shares = profiler.time_shares(breakdown)
    run.checks["time_shares"] = shares
    run.checks["kernel_breakdown"] = breakdown
    run.kernels.extend(reply.get("resources", []))
    _graph_escape_check(run, breakdown)
    if shares.get("library", 0.0) > s.guards.max_library_time_share:
        top = [k["name"][:80] for k in breakdown if k.get("kind") == "library"][:3]
        run.flag("library_ops")
        msg = (f"{shares['library']:.0%} of GPU time is in library kernels ({', '.join(top)}), "
               f"above the {s.guards.max_library_time_share:.0%} limit: do the work in Triton kernels")
        if not s.guards.allow_library_ops:
            run.diag("guard:library_time_share", msg)
            return Status.REJECTED
        run.diag("library_ops", msg)
    if profile:
        if ncu.find_ncu():
            run.say("profile: Nsight Compute pass in a second worker")
        ncu_rows = _ncu_pass(run, seed) if ncu.find_ncu() else []
        run.checks["ncu"] = (f"{len(ncu_rows)} kernel launches profiled" if ncu_rows else
                             "ran, no kernel profiled" if ncu.find_ncu() else "not run (ncu absent)")
        try:
            run.bottleneck = summary.summarize_verdict(
                run.problem, ref_model, seed, dev, run.timing, breakdown, run.kernels, run.device_info,
                ncu_rows=ncu_rows, host_ms=run.checks.get("host_check", {}).get("candidate_ms_per_call"))
        except Exception as e:  # analysis must never turn a correct kernel into a failure
            run.checks["profile_error"] = f"{type(e).__name__}: {str(e)[:300]}"
        # the floor uses tf32 for fp32 problems: a correct tf32x3 kernel may beat fp32 cores
        floor = ((run.bottleneck or {}).get("roofline") or {}).get("floor_ms")
        cand = run.timing.get("candidate")
        if floor and cand and cand.median_ms < s.timing.roofline_floor_ratio * floor:
            run.flag("below_roofline")
            run.diag("below_roofline", f"{cand.median_ms:.4f} ms is below the roofline minimum "
                     f"{floor:.4f} ms for this problem: flagged, not trusted")
    return None


# a graph replay may drop idle gaps, never kernel time: a replay this much shorter than the
# forward's profiled kernels means work ran outside the capture (an unjoined stream)
_GRAPH_ESCAPE_RATIO = 0.5


def _graph_escape_check(run: _Run, breakdown: list[dict]) -> None:
    """With the cuda_graph measure: does one replayed call take at least the kernel time
    the profiler sees in one plain forward? Otherwise the speedup falls back to the
    per-call figures (whose device sync counts every stream)."""
    cand = run.timing.get("candidate")
    if run.checks.get("timing_measure") != "cuda_graph" or cand is None:
        return
    kernel_ms = sum(r.get("total_us", 0.0) for r in breakdown) / 1e3
    run.checks["graph_vs_kernels"] = {"replay_ms": cand.median_ms, "kernels_ms": kernel_ms}
    if not kernel_ms > 0 or cand.median_ms >= _GRAPH_ESCAPE_RATIO * kernel_ms:
        return
    run.flag("timer_mismatch")
    run.diag("timer_mismatch", f"a CUDA-graph replay of the forward takes {cand.median_ms:.4f} ms per call "
             f"but its kernels run {kernel_ms:.4f} ms in one profiled forward: work escaped the graph; "
             "speedup computed from per-call times instead")
    per_call = run.checks["timing_per_call_ms"]
    run.speedup_eager = per_call["eager"] / per_call["candidate"]
    run.speedup_compile = per_call["compile"] / per_call["candidate"] if "compile" in per_call else None
    run.speedup_interval = {}
    if run.speedup_eager > run.settings.timing.excessive_speedup:
        run.flag("excessive_speedup")


def _ncu_pass(run: _Run, seed: int) -> list[dict]:
    """Nsight Compute over the candidate's forwards, in a fresh worker wrapped by ncu
    (ncu and torch.profiler both use CUPTI, so never in the same process)."""
    import tempfile
    from pathlib import Path
    from tools.perf import ncu
    s = run.settings.test
    log = Path(tempfile.mkdtemp(prefix="krefine-ncu-")) / "ncu.csv"
    w = isolation.start_worker(run.src, device=run.device, gpu_index=run.gpu_index,
                               wrapper=tuple(ncu.ncu_command([], log_file=str(log))),
                               max_output_bytes=s.max_output_kib << 10)
    try:
        w.request({"op": "setup", "device": "cuda", "max_file_mib": s.max_file_mib,
                   "address_space_gib": 0, "network_isolation": False}, s.compile_timeout_s)
        w.request({"op": "load", "problem": str(run.problem.path), "candidate": "candidate.py",
                   "init_seed": s.init_seed}, s.compile_timeout_s)
        w.request({"op": "ncu_forward", "seed": seed, "iters": 1}, s.compile_timeout_s)
    except (isolation.WorkerTimeout, isolation.WorkerDied) as e:
        run.checks["ncu_error"] = str(e)[:300]
        return []
    finally:
        w.close()
    try:
        return ncu.parse_ncu_csv(log.read_text(errors="replace"))
    except (OSError, ValueError) as e:
        run.checks["ncu_error"] = f"{type(e).__name__}: {str(e)[:300]}"
        return []
    finally:
        import shutil
        shutil.rmtree(log.parent, ignore_errors=True)


def _error_diag(run: _Run, reply: dict) -> None:
    kind = {"triton_compile": "triton_compile", "syntax": "syntax_error"}.get(reply.get("kind"), None)
    phase = reply.get("phase", "?")
    if kind is None:
        kind = {"import": "import_error", "construct": "construct_error"}.get(phase, "runtime_error")
    msg = f"{reply.get('error_type', 'Error')}: {reply.get('message', '')}".strip()
    run.diag(kind, f"during {phase}: {msg[:1500]}", reply.get("line"), reply.get("source_line"))
    if reply.get("traceback"):
        run.checks["traceback"] = reply["traceback"]


def _died(run: _Run, worker, during: str) -> Status:
    code = worker.returncode
    how = f"signal {-code}" if code is not None and code < 0 else f"status {code}"
    tail = worker.output().get("stderr", "").strip().splitlines()[-3:]
    run.diag("worker_died", f"the candidate's process exited ({how}) during {during} without "
             f"reporting results" + (f"; stderr: {' | '.join(tail)[:500]}" if tail else ""))
    _health(run, worker)
    return Status.RUNTIME_ERROR


def _health(run: _Run, worker) -> None:
    """After a crash or hang: is the GPU still usable for the next candidate?"""
    if run.device != "cuda":
        return
    from tools.perf.gpuinfo import cuda_healthy
    ok, why = cuda_healthy(run.gpu_index)
    run.checks["gpu_healthy_after_failure"] = ok
    if not ok:
        raise EvaluatorError(f"GPU {run.gpu_index} unusable after the candidate failed: {why}")
