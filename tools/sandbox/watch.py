"""The worker's watch over each call of the candidate's forward: facts for the judge.

`Watch.install` (setup, after the launch hooks, before any candidate code) wraps the
ways candidate code reads tensor data on the host (Tensor.tolist, numpy, __array__,
__dlpack__, item, __float__, __int__, __index__, __bool__, __complex__, and the elements
of a storage; aten._local_scalar_dense behind the scalar ones is counted too), the
ways Python starts a thread (_thread.start_new_thread and threading's reference to it,
start_joinable_thread where Python has it) and the calls that push or pop a dispatch
mode, and adds an audit hook for profile/trace hooks, gc object walks, code and class
replacement and ctypes; the ways around these wrappers (process memory files, mmap,
serialisation, operator registrations, introspection of the judge's code) are
tools/sandbox/detours.py's, installed with them. `baseline` (just before the candidate
is imported) records the identity of everything the judge relies on
(tools/sandbox/integrity.py). `call` wraps
one forward call: it counts aten compute ops (tools/sandbox/outputs.py) and the Triton
programs the call's launches ran (`launch`, from tools/sandbox/launches.py: the grid as
Triton evaluates it), and afterwards checks hooks, identities, threads and the
dispatch-mode stack. `finish_reply` puts the facts on the reply; the judge decides
(tools/judge/runtime_facts.py).

A read counts when candidate code makes it: anything while the forward runs outside a
Triton launch, and inside one (Triton's interpreter copies and reads every tensor
argument) only a read whose caller, past torch's and our own frames, is not Triton's
or NumPy's code. Thread starts count from the baseline on (the import included):
Python-level ones only, since torch's OpenMP pool and the CUDA runtime start native
threads lazily on a first op; native threads are reported, not judged.

Not covered: the candidate shares this process and can reach all of this (the tallies,
the wrappers' closures, TensorBase's methods, which no wrapper can replace, since
TensorBase is an immutable type); what is checked here catches what the static guards
missed by spelling, not a candidate that reverse-engineers the worker (README "Sandbox").
"""
from __future__ import annotations

import contextlib
import importlib.util
import operator
import os
import sys
import types

from tools.sandbox.detours import EVENTS as DETOUR_EVENTS, Detours
from tools.sandbox.faults import audit_where
from tools.sandbox.integrity import Snapshot
from tools.sandbox.outputs import capture_types, count_aten_compute, describe_type, poisoned_allocations
from tools.sandbox.state_ops import rng_states, same_states

# Tensor methods that hand tensor data to the host (the scalar ones also dispatch
# aten._local_scalar_dense, counted by the aten mode whatever spelling reaches it), and
# the element reads of storages (a storage itself is metadata: size, address)
_READS = ("tolist", "numpy", "__array__", "__dlpack__", "item", "__float__", "__int__", "__index__", "__bool__",
          "__complex__")
_STORAGE_READS = (("torch.storage", "UntypedStorage"), ("torch.storage", "TypedStorage"))
_THREAD_STARTS = (("_thread", "start_new_thread"), ("_thread", "start_new"), ("_thread", "start_joinable_thread"),
                  ("threading", "_start_new_thread"), ("threading", "_start_joinable_thread"))
_STACK_CALLS = ("_push_on_torch_dispatch_stack", "_pop_torch_dispatch_stack", "_set_dispatch_mode",
                "_unset_dispatch_mode")
# audit events that are tampering whenever candidate code raises them
_TAMPER_EVENTS = frozenset({"sys.setprofile", "sys.settrace", "sys._setprofileallthreads", "sys._settraceallthreads",
                            "sys.monitoring.register_callback", "gc.get_objects", "gc.get_referrers",
                            "gc.get_referents", "sys._current_frames", "sys.addaudithook", "object.__setattr__"})
_MAX_TAMPER = 30


# torch.nn.utils.parametrize's functions that swap a module's class (to a subclass made for its
# parametrizations, and back)
_PARAMETRIZE_SWAPS = ("_inject_new_class", "remove_parametrizations")


def _parametrize_swap(obj, new) -> bool:
    """Is this `obj.__class__ = new` torch.nn.utils.parametrize's own swap: an nn.Module given a
    subclass of its class made for its parametrizations (or its class back), the assignment
    made in parametrize.py itself (through Module.__setattr__), not by the candidate?"""
    torch = sys.modules.get("torch")
    parametrize = sys.modules.get("torch.nn.utils.parametrize")
    if torch is None or parametrize is None or not isinstance(obj, torch.nn.Module) or not isinstance(new, type):
        return False
    old = type(obj)
    if not (issubclass(new, old) or issubclass(old, new)):
        return False
    setter = torch.nn.modules.module.__file__
    f = sys._getframe(1)
    while f is not None and f.f_code.co_filename in (__file__, setter):   # this hook, Module.__setattr__
        f = f.f_back
    return f is not None and f.f_code.co_filename == parametrize.__file__ and f.f_code.co_name in _PARAMETRIZE_SWAPS


class Watch:
    """Per-call facts of one worker (created with it; inactive until `install`)."""

    def __init__(self):
        self.installed = self.watching = self.armed = False
        self.building = False          # ModelNew's construction (`build`): its own modules' set-up
        self.depth = 0                 # inside a Triton launch or autotuner: Triton reads for itself there
        self._bounds, self.candidate_file = [], None   # the frames depth was entered at; the candidate's file
        self.gaps: list[str] = []      # hook points this Triton / Python lacks
        self.tamper: list[str] = []    # since the baseline, each once
        self.threads = 0               # Python thread starts since the baseline
        self.own_starts = 0            # thread starts the worker makes for itself (`own_threads`)
        self.calls: list[dict] = []    # this request: per call {"launches", "programs", "unseen"}
        self.reads: dict[str, int] = {}
        self.native = 0                # native threads added during this request's calls
        self.rng_changed = 0           # calls of this request after which a global RNG state differed
        self.snapshot = None
        self._call = None
        self._mode = None
        self._count = count_aten_compute
        self._own = self._lib = ()
        self.detours = Detours(self)   # host reads, registrations, introspection around the wrappers

    # 1) set-up --------------------------------------------------------------------------
    def install(self) -> None:
        import torch
        capture_types()
        self._own = tuple(_package_dir(n) for n in ("torch", "tools") if _package_dir(n))
        self._lib = tuple(_package_dir(n) for n in ("triton", "numpy") if _package_dir(n))
        targets = [(torch.Tensor, name, name) for name in _READS]
        targets += [(getattr(sys.modules.get(m), c, None), "__getitem__", f"{c}[]") for m, c in _STORAGE_READS]
        for cls, name, label in targets:
            orig = vars(cls).get(name, getattr(cls, name, None)) if cls is not None else None
            if orig is None:
                self.gaps.append(f"host read {label}")
                continue
            setattr(cls, name, self._reader(label, orig))
        import _thread
        import threading
        modules = {"_thread": _thread, "threading": threading}
        starts = [(modules[m], n) for m, n in _THREAD_STARTS if n in vars(modules[m])]
        for module, name in starts:
            setattr(module, name, self._starter(vars(module)[name]))
        if not starts:
            self.gaps.append("thread starts")
        self._wrap_stack_calls(torch)
        c = torch._C
        self._stack_len, self._stack_at = c._len_torch_dispatch_stack, c._get_dispatch_stack_at
        self._excluded, self._python_key = c._dispatch_tls_is_dispatch_key_excluded, c.DispatchKey.Python
        self._count = count_aten_compute   # its own reference: rebinding the module's name changes nothing
        with poisoned_allocations(), count_aten_compute({}, None):
            torch.ones(1).add_(1)   # the worker's own lazy imports (torch._inductor, dynamo) happen now
        self.detours.install((_package_dir("triton"), _package_dir("tools")))
        sys.addaudithook(self._audit)
        self.installed = True

    def baseline(self, candidate_file: str | None = None) -> None:
        """Just before the candidate (`candidate_file`) is imported: what everything should stay."""
        self.candidate_file = candidate_file
        if not self.installed:
            return
        self.snapshot = Snapshot()
        self.gaps += [f"identity check: {m} not loaded" for m in self.snapshot.missing]
        self._hooks = self._hook_state()
        self.watching = True

    @contextlib.contextmanager
    def build(self):
        """Around ModelNew's construction: torch.nn.utils.parametrize may swap the class of a
        module it builds (weight_norm, spectral_norm); at any other time that is tampering."""
        self.building = True
        try:
            yield
        finally:
            self.building = False

    # 2) one forward call -----------------------------------------------------------------
    @contextlib.contextmanager
    def call(self, aten: dict):
        """Around one forward call: aten compute ops into `aten`, the rest into this request's facts."""
        if not self.watching:
            with self._count(aten, None):
                yield
            return
        import threading
        alive, threads, native = threading.active_count(), self.threads, _native_threads()
        rng = rng_states()
        self._call = {"launches": 0, "programs": 0, "unseen": 0}
        self.calls.append(self._call)
        with self._count(aten, self.scalar_read) as mode:
            self._mode, self.armed = mode, True
            try:
                yield
            finally:
                self.armed = False
                if self._stack_len() == 0 or self._stack_at(self._stack_len() - 1) is not mode:
                    self.note("the aten counter's dispatch mode was no longer on top after the call")
        grown = threading.active_count() - alive - (self.threads - threads)
        self.threads += max(0, grown)   # a thread started by a path the wrappers missed
        self.native += max(0, _native_threads() - native)
        self.rng_changed += not same_states(rng, rng_states())
        self.check()

    def launch(self, run, fn, args, grid, kwargs):
        """One Triton launch (tools/sandbox/launches.py): run it, counting the programs its grid
        holds as Triton evaluates it (a callable of the launch's arguments, or a tuple)."""
        if not self.armed or grid is None:   # timed calls pay nothing more; no grid: Triton's own error
            return run(fn, *args, grid=grid, warmup=False, **kwargs)
        seen = []

        def evaluated(meta):
            with self.as_candidate():   # the grid is the candidate's: a C-level chain of NumPy calls too
                dims = self._dims(grid(meta) if callable(grid) else grid)
            seen.append(dims)
            return dims
        call = self._call
        if self._stack_len() == 0 or self._excluded(self._python_key):
            self.note("the aten counter was switched off at a Triton launch")
        self.depth += 1
        self._bounds.append(sys._getframe())
        try:
            return run(fn, *args, grid=evaluated, warmup=False, **kwargs)
        finally:
            self.depth -= 1
            self._bounds.pop()
            call["launches"] += 1
            if seen:
                n = 1
                for d in seen[-1]:
                    n *= max(0, d) if type(d) is int else 1
                call["programs"] += n
            else:
                call["unseen"] += 1

    @contextlib.contextmanager
    def not_candidate(self):
        """Code that is not the candidate's runs inside a call (Triton's autotuner benchmarking, a
        profiler the worker starts): reads and audit events there count as inside a launch."""
        self.depth += 1
        self._bounds.append(sys._getframe(2))   # 1: contextlib's __enter__, 2: the `with`
        try:
            yield
        finally:
            self.depth -= 1
            self._bounds.pop()

    @contextlib.contextmanager
    def as_candidate(self):
        """Candidate code called from Triton's (a grid, an autotune hook): its reads count."""
        saved, self.depth = self.depth, 0
        try:
            yield
        finally:
            self.depth = saved

    def _dims(self, dims):
        """The grid as plain ints, handed to Triton so that it runs what was counted."""
        try:
            out = []
            for d in tuple(dims):
                if type(d) is not int:
                    if self.armed and "torch.Tensor" in describe_type(d):
                        self.reads["grid value"] = self.reads.get("grid value", 0) + 1
                    d = operator.index(d)
                out.append(d)
            return tuple(out)
        except Exception:   # not a grid Triton accepts either: let Triton say so
            return dims

    # 3) what the wrappers and hooks record -------------------------------------------------
    def _by_candidate(self, frame) -> bool:
        """Does this read come from the candidate? Inside a launch or the autotuner: where a frame of
        its file lies between it and where that began, or its caller past ours is not Triton's or NumPy's."""
        if self.depth == 0:
            return True
        f, bound = frame if self.candidate_file else None, self._bounds[-1] if self._bounds else None
        while f is not None and f is not bound:
            if f.f_code.co_filename == self.candidate_file:
                return True
            f = f.f_back
        while frame is not None and frame.f_code.co_filename.startswith(self._own):
            frame = frame.f_back
        return frame is not None and not frame.f_code.co_filename.startswith(self._lib)

    def _reader(self, name: str, orig):
        watch, getframe = self, sys._getframe

        def read(*args, **kwargs):
            if watch.armed and watch._by_candidate(getframe(1)):
                watch.reads[name] = watch.reads.get(name, 0) + 1
            return orig(*args, **kwargs)
        read.__name__, read.__qualname__, read.__doc__ = name, name, getattr(orig, "__doc__", None)
        return read

    def scalar_read(self) -> None:
        """aten._local_scalar_dense ran (item, float, int, bool, index: any spelling)."""
        if self.armed and self._by_candidate(sys._getframe(1)):
            self.reads["aten._local_scalar_dense"] = self.reads.get("aten._local_scalar_dense", 0) + 1

    @contextlib.contextmanager
    def own_threads(self, n: int):
        """Around the worker's own start of `n` executor threads (tools/sandbox/warmpool.py),
        before any candidate code runs in the request: those starts, and no others, are not
        the candidate's. The caller joins every one before the request ends."""
        self.own_starts = n
        try:
            yield
        finally:
            self.own_starts = 0

    def _starter(self, orig):
        watch = self

        def start(*args, **kwargs):
            if watch.own_starts > 0:
                watch.own_starts -= 1
            elif watch.watching:
                watch.threads += 1
            return orig(*args, **kwargs)
        start.__name__ = getattr(orig, "__name__", "start_new_thread")
        return start

    def _wrap_stack_calls(self, torch) -> None:
        """Count pushes and pops of dispatch modes while the forward runs, wherever torch's
        modules hold these functions (`from torch._C import ...`)."""
        wrapped = {}
        for name in _STACK_CALLS:
            orig = vars(torch._C).get(name)
            if orig is None:
                self.gaps.append(f"torch._C.{name}")
                continue
            wrapped[id(orig)] = (orig, self._stack_call(name, orig))
        for module_name, module in list(sys.modules.items()):
            if module is None or not (module_name == "torch" or module_name.startswith("torch.")):
                continue
            space = getattr(module, "__dict__", {})
            for key, value in list(space.items()):
                hit = wrapped.get(id(value))
                if hit is not None and hit[0] is value:
                    space[key] = hit[1]

    def _stack_call(self, name: str, orig):
        watch = self

        def changed(*args, **kwargs):
            if watch.armed:
                watch.note(f"torch._C.{name} called during the forward (the aten counter's mode)")
            return orig(*args, **kwargs)
        changed.__name__ = name
        return changed

    def _audit(self, event: str, args: tuple) -> None:
        if event in DETOUR_EVENTS:
            self.detours.audit(event, args)
        if event in _TAMPER_EVENTS:
            if not self.watching:
                return
            what = event
            if event == "object.__setattr__":
                if args[1] not in ("__code__", "__class__"):
                    return
                what = f"{type(args[0]).__name__}.{args[1]} set"
                caller = sys._getframe(1).f_code.co_filename
                if isinstance(args[0], types.ModuleType) and caller.startswith(self._own + self._lib + ("<frozen",)):
                    return   # torch's config modules swap their module's class when first imported
                if args[1] == "__class__" and self.building and _parametrize_swap(args[0], args[2]):
                    return   # weight_norm / spectral_norm / register_parametrization on a module being built
            if self.depth == 0 or self._by_candidate(sys._getframe(1)):
                self.note(what + (" during the forward" if self.armed else " outside the forward") + audit_where())
        elif event.startswith("ctypes.") and self.armed and self.depth == 0:
            self.note(f"{event} during the forward")

    def note(self, what: str) -> None:
        if what not in self.tamper and len(self.tamper) < _MAX_TAMPER:
            self.tamper.append(what)

    # 4) after each call and request -----------------------------------------------------------
    def _hook_state(self):
        import threading
        return (sys.getprofile(), sys.gettrace(), getattr(threading, "_profile_hook", None),
                getattr(threading, "_trace_hook", None))

    def check(self) -> None:
        """Identities, profile/trace hooks, the launch depth; each change once in `tamper`."""
        if not self.watching:
            return
        for change in self.snapshot.changes():
            self.note(change)
        names = ("sys.getprofile()", "sys.gettrace()", "threading._profile_hook", "threading._trace_hook")
        for name, was, now in zip(names, self._hooks, self._hook_state()):
            if now is not was:
                self.note(f"{name} changed")
        if self.depth:
            self.note(f"the Triton launch depth was left at {self.depth}")
            self.depth = 0

    def inputs_kept(self, inputs) -> list[bool]:
        """Per input: still what the worker made it (a tensor not turned into a subclass by
        reassigning its __class__); each one that changed is tampering."""
        kept = []
        for k, x in enumerate(inputs):
            name = describe_type(x)
            kept.append(not name.startswith("subclass of"))
            if not kept[-1]:
                self.note(f"input #{k} became a {name}")
        return kept

    def finish_reply(self, op: str, reply: dict) -> None:
        """Facts since the baseline (tamper, threads) and of this request's calls onto `reply`."""
        if not self.watching:
            return
        try:
            self.check()
        except Exception as e:   # our own check broken by what the candidate left behind
            self.note(f"the identity check failed: {type(e).__name__}")
        if self.calls:
            reply["programs"] = [None if c["programs"] == 0 and c["unseen"] else c["programs"]
                                 for c in self.calls]
            reply["host_reads"] = dict(self.reads)
            reply["native_threads_added"] = self.native
            if any(c["unseen"] for c in self.calls):
                reply["launch_grids_unseen"] = sum(c["unseen"] for c in self.calls)
            self.calls, self.reads, self.native = [], {}, 0
            reply["threads_started"] = self.threads
            reply["rng_changed"], self.rng_changed = self.rng_changed, 0
        if self.tamper:
            reply["tamper"] = list(self.tamper)
        self.detours.report(reply)
        if self.gaps:
            reply["watch_gaps"] = list(self.gaps)


def _package_dir(name: str) -> str:
    spec = importlib.util.find_spec(name)
    origin = spec.origin if spec is not None else None
    return os.path.dirname(origin) + os.sep if origin else ""


def _native_threads() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return 0
