"""The persistent judge: one problem on one device, judged for many candidates.

A `Judge` keeps for its whole session what every candidate shares, so each candidate
pays only for its own work:

- the reference model, built once with KernelBench's seeds and init order (in the mode
  `[eval] module_mode` says), the secret trial seeds, the trials' reference outputs (kept
  while they fit the memory budget, else recomputed), whether the reference is reproducible
  (`unreproducible`) or keeps state between calls, judged then as a sequence of calls
  (tools/judge/stateful.py);
- the eager and torch.compile baselines, compiled once (in the background, from the first
  candidate past the guards), timed interleaved with every candidate (tools/judge/time_phase.py);
- a fork server per worker kind (tools/sandbox/forkserver.py): torch and triton imported, no
  CUDA context. Each candidate still gets a fresh worker, never reused.

Static guards and syntax checks run first, before any of that is touched. The compile phase
(fork, import, ModelNew, Triton JIT) of several candidates proceeds in parallel (`[eval]
parallel_compile` at once, a shared hold on the GPU); trials, timing and profiling hold the
GPU exclusively, one candidate at a time. `judge()` may be called from many threads at once.

`evaluate()` is a session of one candidate. Does not decide verdicts: pipeline.py's steps do.
"""
from __future__ import annotations

import secrets
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from tools.errors import EvaluatorError
from tools.judge import memory
from tools.judge.gpulock import GpuLock, gpu_lock
from tools.judge.pipeline import Judgement, finish, profile_in
from tools.judge.reference import (build_reference, check_reproducible, compute_reference, default_device,
                                   precise_reference)
from tools.judge.static import static_verdict
from tools.judge.warm import warm_imports
from tools.perf.capture_guard import gpu_work
from tools.problem import Problem
from tools.settings import EvalSettings
from tools.verdict import Verdict

_REF_CACHE_SHARE = 0.25      # of free GPU memory (or 1 GiB on cpu) the cached references may take
_REF_CACHE_MAX_BYTES = 1 << 30   # and never more: an idle session keeps them (README "judge service")


class Judge:
    """See the module docstring. Use as a context manager, or call close()."""

    def __init__(self, problem, *, device: str | None = None, gpu_index: int = 0,
                 settings: EvalSettings = EvalSettings(), use_forkserver: bool = True,
                 forkservers: dict | None = None):
        """`forkservers`: {kind: ForkServer}, the caller's (a session cache's, tools/judge/pool.py),
        shared: servers the judge starts go into it, the caller closes them. None: its own."""
        self.problem = problem
        self.device = device or default_device()
        self.gpu_index = gpu_index
        self.settings = settings
        self.dev = f"cuda:{gpu_index}" if self.device == "cuda" else "cpu"
        # nothing is timed on cpu: candidates there share nothing that needs holding
        self.gpu = gpu_lock(self.dev) if self.device == "cuda" else GpuLock()
        self.seeds = [secrets.randbelow(2**31 - 1) for _ in range(settings.test.trials)]
        self.in_flight = 0
        self.judged = 0
        self._lock = threading.Lock()
        self._use_forkserver, self._share_forkservers = use_forkserver, forkservers is not None
        self._forkservers: dict[str, object] = forkservers if forkservers is not None else {}
        # what the session paid once, in seconds (checks.session_s of every verdict)
        self.setup_s: dict[str, float] = {}
        self._ref_model = None
        self._refs: dict[int, list] = {}
        self._precise: dict[int, list | None] = {}   # precise_reference's, by seed
        self._ref_cache_ok: bool | None = None
        self._unreproducible: tuple | None = None   # (check_reproducible's answer,) once asked
        # a reference that keeps state between calls (reference.py state_carried): judged as
        # KernelBench calls it, a sequence of calls from a fresh model (tools/judge/stateful.py)
        self.sequence = None
        self._reproducible_lock = threading.Lock()
        # measured on the first reference; lean: see tools/judge/memory.py
        self.footprint: memory.Footprint | None = None
        # set with the footprint: reference.py compute_reference's `sizes` ("aliases", "structure",
        # "output_pairs", "rng_changed"), read by trials.py, ownership.py and runtime_facts.py
        self.reference_facts: dict = {}
        self.lean = False
        self._last_ref: tuple[int, list] | None = None   # lean: the one reference in use
        # set by the judge service: evicts its idle sessions when this one runs short
        self.memory_pressure = None
        self._healthy = False
        self._baseline_thread: threading.Thread | None = None
        self._compiled = None
        self._compiled_error: str | None = None
        self._compiled_failure: BaseException | None = None   # the judge's own (out of memory)
        self._closed = False
        if use_forkserver:   # start the main one now: it imports torch while we do other work
            self.forkserver(self.device)
        # torch's lazy modules, before this session's threads (the baseline's, the
        # candidates') can import them at once (a no-op where the host did it at its start)
        warm_s = warm_imports(self.device)
        if warm_s:
            self.setup_s["torch_imports"] = round(warm_s, 3)

    @property
    def closed(self) -> bool:
        """close() was called: a judgement still running has no verdict to give."""
        return self._closed

    def __enter__(self) -> "Judge":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # --- what candidates share -----------------------------------------------------
    def forkserver(self, kind: str):
        """The fork server for workers of `kind` (cuda, cpu, compile), or None (spawn)."""
        if not self._use_forkserver:
            return None
        with self._lock:
            if kind not in self._forkservers:
                from tools.sandbox.isolation import start_forkserver
                started = start_forkserver(kind, self.gpu_index)
                if self._forkservers.setdefault(kind, started) is not started and started is not None:
                    started.close()   # a judge sharing the dict started one meanwhile
            return self._forkservers[kind]

    def check_device(self) -> None:
        """Once per session (and again after a candidate crashed or hung: record.health)."""
        if self.device != "cuda" or self._healthy:
            return
        from tools.judge.device_check import check_gpu
        t = time.monotonic()
        check_gpu(self.gpu_index)
        self.setup_s.setdefault("device_check", round(time.monotonic() - t, 3))
        self._healthy = True

    def reference_model(self):
        with self._lock:
            if self._ref_model is None:
                t = time.monotonic()
                self._ref_model = self.fresh_reference_model()
                self.setup_s["reference_model"] = round(time.monotonic() - t, 3)
            return self._ref_model

    def fresh_reference_model(self):
        """The problem's Model built afresh (reference.py build_reference); the session's own is reference_model()'s."""
        return build_reference(self.problem, self.dev, self.gpu_index, self.settings.test)

    def compile_hold(self):
        """The GPU hold of a compile phase: shared with at most `parallel_compile` in all, but
        exclusive in a lean session or where parallel workers (inputs, outputs and IPC staging
        buffers each) could exhaust GPU memory."""
        if self.large_outputs():
            return self.gpu.exclusive()
        return self.gpu.shared(limit=self.settings.test.parallel_compile)

    def large_outputs(self) -> bool:
        """Whether candidates take the GPU one at a time, fork to teardown (pipeline.py): a lean
        session, or references too large to cache (known after the first reference)."""
        return self.lean or self._ref_cache_ok is False

    def reference(self, seed: int) -> list:
        """The reference outputs for `seed`: cached while they fit and the session is not lean
        (a lean one keeps only the last)."""
        got = self._refs.get(seed)
        last = self._last_ref
        if got is None and last is not None and last[0] == seed:
            got = last[1]
        if got is not None:
            return got
        if self.lean:
            self._last_ref = None   # freed before the next one is made, not beside it
        t = time.monotonic()
        sizes: dict | None = {} if self.footprint is None else None   # measured once: it resets the peak
        s = self.settings.test
        out = memory.retry_oom(self, "the reference Model.forward(*get_inputs())", lambda: compute_reference(
            self.reference_model(), self.problem.module, seed, self.dev, init_seed=s.init_seed, precision=s.precision,
            module_mode=s.module_mode, sizes=sizes, timeout_s=s.reference_timeout_s))
        with self._lock:
            self.setup_s["references"] = round(self.setup_s.get("references", 0.0) + time.monotonic() - t, 3)
            if self.footprint is None and sizes is not None:
                self.reference_facts = sizes
                self.footprint = memory.measure(sizes, out)
                self.lean = self.footprint.trial_bytes >= self.settings.test.lean_memory_mib << 20
                self._ref_cache_ok = not self.lean and self._fits(self.footprint.output_bytes)
            if self._ref_cache_ok:
                self._refs[seed] = out
            else:
                self._last_ref = (seed, out)
        if self.lean:
            memory.release(self.dev)   # the inputs and the forward's temporaries, before the worker runs
        return out

    def precise_reference(self, seed: int) -> list | None:
        """The reference's forward in float64 on the inputs of `seed`, or None where it cannot
        run so (tools/judge/numerics.py against_truth: asked only when a candidate's output
        fails on the norm rule alone); kept for the session unless it is lean."""
        with self._lock:
            if seed in self._precise:
                return self._precise[seed]
        t = time.monotonic()
        out = precise_reference(self.reference_model(), self.problem.module, seed, self.dev)
        with self._lock:
            self.setup_s["precise_references"] = round(self.setup_s.get("precise_references", 0.0)
                                                       + time.monotonic() - t, 3)
            if not self.lean:
                self._precise[seed] = out
        memory.release(self.dev)   # the float64 model copy and inputs
        return out

    def unreproducible(self) -> tuple[str, str] | None:
        """Once per session: why no candidate can match the reference (random, e.g. training
        Dropout, or other outputs when called again), as the diagnostic (kind, message) every
        candidate gets; None when reproducible. One more reference forward, on trial 1's inputs."""
        with self._reproducible_lock:
            if self._unreproducible is None:
                seed = self.seeds[0]
                t = time.monotonic()
                found = memory.retry_oom(self, "the reference's second call", lambda: check_reproducible(
                    self.reference_model(), self.problem.module, seed, self.dev, self.reference(seed),
                    self.settings.test))
                if found is not None and found[0] == "unreproducible_reference":   # state kept between calls?
                    from tools.judge.stateful import as_sequence
                    found, self.sequence = as_sequence(self, seed, found)
                self._unreproducible = (found,)
                self.setup_s["reproducible_check"] = round(time.monotonic() - t, 3)
                if self.lean:
                    memory.release(self.dev)
            return self._unreproducible[0]

    def _fits(self, nbytes_per_trial: int) -> bool:
        total = nbytes_per_trial * len(self.seeds)
        if self.device != "cuda":
            return total <= 1 << 30
        import torch
        free, _ = torch.cuda.mem_get_info(self.gpu_index)
        return total <= min(_REF_CACHE_SHARE * free, _REF_CACHE_MAX_BYTES)

    def relieve_memory(self) -> None:
        """Short of GPU memory: the service evicts its idle sessions, this one drops
        its cached references, and the allocator's cache goes back to the driver."""
        if self.memory_pressure is not None:
            self.memory_pressure(self)
        with self._lock:
            self._refs.clear()
            self._precise.clear()
            self._last_ref = None
            if self._ref_cache_ok:
                self._ref_cache_ok = False   # recomputed per trial from now on
        memory.release(self.dev, collect=True)

    def candidate_done(self) -> None:
        """After each candidate of a lean session: nothing of its size stays here."""
        if self.lean:
            self._last_ref = None
            memory.release(self.dev)

    def start_baseline(self) -> None:
        """Compile the torch.compile baseline in the background, once (cuda only). A lean
        session compiles it later, in the time phase, under the candidate's hold."""
        if self.device != "cuda" or not self.settings.timing.compile_baseline or self.lean:
            return
        with self._lock:
            if self._baseline_thread is None:
                self._baseline_thread = threading.Thread(target=self._compile_baseline,
                                                         name="krefine-compile-baseline", daemon=True)
                self._baseline_thread.start()

    def _compile_baseline(self) -> None:
        import contextlib

        import torch
        from tools.problem import importable, make_inputs, strict_fp32
        t = time.monotonic()
        # Inductor fixes a convolution template's TF32 from cuDNN's flag when it compiles:
        # "strict" compiles under the flags it is timed with. "as-run" compiles with the
        # user's flags without the lock, so the first candidate's trials overlap it (only a
        # strict session's reference, in the same process, would flip them meanwhile)
        flags = strict_fp32 if self.settings.test.precision == "strict" else contextlib.nullcontext

        def compile_once():
            # its first call autotunes (device-wide waits): a capture waits for the whole compile
            model = self.reference_model()   # built already: no hold taken under its lock
            # the guard after the flags (a capture waits for it holding them); importable: a decorated forward
            with flags(), gpu_work(), importable(self.problem.module):
                cmodel = torch.compile(model)
                with torch.no_grad():
                    cmodel(*make_inputs(self.problem.module, self.seeds[0], self.dev))
                torch.cuda.synchronize(self.gpu_index)
            return cmodel
        try:
            torch.cuda.set_device(self.gpu_index)
            import torch._inductor.config as inductor_config
            # one small graph: compiling in this process beats starting a pool of
            # compile workers, each of which imports torch again
            inductor_config.compile_threads = 1
            self._compiled = memory.retry_oom(self, "the torch.compile baseline", compile_once)
        except memory.JudgeOutOfMemory as e:   # the judge's own shortage: exit 3, not a null speedup
            self._compiled_failure = e
        except Exception as e:  # torch.compile cannot handle some models: report, don't fail
            self._compiled_error = f"{type(e).__name__}: {str(e)[:300]}"
        if self.lean:
            memory.release(self.dev)
        self.setup_s["compile_baseline"] = round(time.monotonic() - t, 3)

    def compiled_baseline(self):
        """(the compiled model or None, its error or None); waits for the compile (a
        lean session compiles here, in the caller's hold of the GPU)."""
        with self._lock:
            now = self.lean and self._baseline_thread is None and self._compiled is None \
                and self._compiled_error is None and self._compiled_failure is None
        if now:
            self._compile_baseline()
        self.start_baseline()
        if self._baseline_thread is not None:
            self._baseline_thread.join()
        if self._compiled_failure is not None:
            raise self._compiled_failure
        return self._compiled, self._compiled_error

    def session_costs(self) -> dict[str, float]:
        """What the session has paid once so far (s): device check, reference model and
        outputs, torch.compile baseline, and how long each fork server took to start."""
        costs = dict(self.setup_s)
        for kind, fs in list(self._forkservers.items()):
            if getattr(fs, "ready_after_s", None) is not None:
                costs[f"forkserver_{kind}_ready_after"] = fs.ready_after_s
        return costs

    # --- judging -------------------------------------------------------------------
    def judge(self, candidate_src: str, *, candidate_name: str = "candidate.py",
              profile: bool = True, progress=None):
        """One Verdict for one candidate (thread-safe; see pipeline.judge_in)."""
        return finish(self.begin(candidate_src, candidate_name=candidate_name, profile=profile, progress=progress))

    def begin(self, candidate_src: str, *, candidate_name: str = "candidate.py", profile: bool = True,
              progress=None, on_end=None) -> Judgement:
        """A judgement of one candidate, to be advanced step by step (pipeline.Judgement);
        it counts as in flight here until it ends or is closed."""
        if self._closed:
            raise EvaluatorError("this judge is closed")
        with self._lock:
            self.in_flight += 1

        def ended():
            with self._lock:
                self.in_flight -= 1
                self.judged += 1
            if on_end is not None:
                on_end()
        return Judgement(self, candidate_src, candidate_name=candidate_name, profile=profile, progress=progress,
                         on_end=ended)

    def add_bottleneck(self, candidate_src: str, verdict, *, candidate_name: str = "candidate.py"):
        """`verdict` (a correct one judged here without a summary) with the bottleneck
        summary added: the profile step on its own, for a candidate whose feedback will
        be used ([eval] profile = "refined")."""
        return profile_in(self, candidate_src, verdict, candidate_name=candidate_name)

    def prescreen(self, sources: list[str], *, reps: int = 30) -> list:
        """tools/judge/prescreen.py's Screens for these variants' sources: one input drawn
        from a fresh seed (none of the trials'), checked and timed in one worker process
        while this judge holds its GPU exclusively."""
        from tools.judge.prescreen import prescreen
        with self.gpu.exclusive():
            return prescreen(self.problem.path, sources, device=self.device, settings=self.settings.test,
                             seed=secrets.randbelow(2**31 - 1), reps=reps,
                             gpu_index=self.gpu_index if self.device == "cuda" else None,
                             timeout_s=self.settings.test.compile_timeout_s)

    def judge_many(self, sources: list[tuple[str, str]], *, profile: bool = True,
                   progress=None, on_verdict=None) -> list:
        """Verdicts for [(name, src), ...] in order, judged concurrently so compile phases
        overlap; `on_verdict(index, verdict)` hears each one as it is ready."""
        width = max(1, min(len(sources), self.settings.test.parallel_compile + 1))

        def one(i: int):
            name, src = sources[i]
            # several at once: each progress line names whose it is
            said = progress if progress is None or len(sources) == 1 else (lambda what: progress(f"{name}: {what}"))
            v = self.judge(src, candidate_name=name, profile=profile, progress=said)
            if on_verdict is not None and not self._closed:   # not after an interrupt
                on_verdict(i, v)
            return v
        pool = ThreadPoolExecutor(max_workers=width, thread_name_prefix="krefine-judge")
        try:
            return list(pool.map(one, range(len(sources))))
        except (KeyboardInterrupt, SystemExit):   # Ctrl-C, SIGTERM: the workers end now, not at their timeouts
            pool.shutdown(wait=False, cancel_futures=True)
            self.close(interrupted=True)
            raise
        finally:   # after an interrupt, a thread in the problem's code that never returns is not waited for
            pool.shutdown(wait=not self._closed)

    def close(self, *, interrupted: bool = False) -> None:
        """Fork servers closed (unless shared: their workers end with them) and the session's
        GPU memory given back: references, the model, the compiled baseline and Dynamo's cache
        entry for it. `interrupted` (a Ctrl-C): every fork server, at once, and nothing else."""
        self._closed = True
        with self._lock:   # interrupted: shared ones too, the process is ending
            servers = [] if self._share_forkservers and not interrupted else list(self._forkservers.values())
            self._forkservers = {}
        for fs in servers:
            if fs is not None:
                fs.close()
        if interrupted:
            return
        if self._baseline_thread is not None:
            self._baseline_thread.join()   # before the hold: the thread takes it too
        with gpu_work():   # the compiled baseline's Triton modules unload: not beside a capture
            model, self._ref_model, self._compiled = self._ref_model, None, None
            self._refs.clear()
            self._precise.clear()
            self._last_ref = None
            if model is not None and self.device == "cuda":
                memory.forget_compiled(model)
            memory.release(self.dev, collect=True)


def evaluate(problem: Problem, candidate_src: str, *, device: str | None = None,
             settings: EvalSettings = EvalSettings(), candidate_name: str = "candidate.py",
             profile: bool = True, gpu_index: int = 0, progress=None) -> Verdict:
    """Judge `candidate_src` against `problem` in a session of its own (a Judge); only the
    evaluator's own faults raise. `progress(text)` hears each phase as it starts."""
    device = device or default_device()
    # a static reject or a syntax error needs no session (no fork server, no CUDA)
    quick = static_verdict(candidate_src, candidate_name, settings, device, gpu_index)
    if quick is not None:
        return quick
    with Judge(problem, device=device, gpu_index=gpu_index, settings=settings) as judge:
        return judge.judge(candidate_src, candidate_name=candidate_name, profile=profile, progress=progress)
