"""The worker: the only process where candidate code runs.

Started by tools/sandbox.py as `python -m tools.worker CMD_FIFO RES_FIFO` in a fresh temp
cwd with a scrubbed environment. Before any candidate code runs it locks itself down
(rlimits, a private network namespace where the OS allows, an audit hook refusing
sockets, subprocesses other than Triton's toolchain, and writes outside its temp dir),
hooks Triton launches, then answers the judge's requests one at a time: load, trial,
time, host, profile, gpu_compile. It sends back raw outputs and facts; it never decides
a verdict, and nothing it prints is read as one.

What this does NOT protect against: candidate code shares this process with the
worker, so a determined candidate can tamper with anything here (the launch counter,
the timer). Those tricks are the static guards' job (tools/guards.py) and the judge's
cross-checks (fresh secret inputs, host clock, its own reference). See README "Sandbox".
"""
from __future__ import annotations

import contextlib
import ctypes
import importlib.util
import os
import resource
import sys
import time
import traceback

from tools import channel, cudaipc

# executables the worker may start: Triton's toolchain and its library lookup
_ALLOWED_EXES = {"ptxas", "ptxas-blackwell", "ldconfig", "gcc", "cc", "clang", "g++",
                 "cuobjdump", "nvdisasm", "nvlink", "fatbinary", "uname", "nvcc"}
_CLONE_NEWUSER, _CLONE_NEWNET = 0x10000000, 0x40000000
NVTX_RANGE = "krefine.candidate"   # tools/perf/ncu.py's ncu filter selects this name


class Worker:
    def __init__(self, cmd_fd: int, res_fd: int):
        self.cmd_fd, self.res_fd = cmd_fd, res_fd
        self.workdir = os.getcwd()
        self.launches: dict[str, int] = {}
        self.jit_functions: dict[str, object] = {}
        self.specs: dict[tuple, tuple] = {}     # cpu: kernel specialisations for sm_90 compile
        self.failed_launch: tuple | None = None
        self.record_specs = False
        self.model = None
        self.problem = None
        self.device = "cpu"
        self.cand_path = ""
        self.staging = None          # cudaipc.Mapped: the judge's buffer for outputs
        self.compile_only = False    # op_warm: Triton launches compile but do not run
        self.compiled = 0
        self._graph = None           # op_time's cuda_graph: (key, CapturedGraph, last output box, inputs)

    # 1) lock down ------------------------------------------------------------------
    def lock_down(self, setup: dict) -> dict:
        enforced = {}
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        fsize = int(setup["max_file_mib"]) << 20
        resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
        enforced["max_file_mib"] = setup["max_file_mib"]
        if setup.get("address_space_gib"):
            cap = int(setup["address_space_gib"] * (1 << 30))
            resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
            enforced["address_space_gib"] = setup["address_space_gib"]
        # the ncu pass keeps the audit hook but not the namespace: ncu's injected library
        # talks to its host process over sockets a new network namespace would cut
        enforced["network"] = _private_network() if setup.get("network_isolation", True) else \
            "audit hook only (profiling pass under ncu)"
        sys.addaudithook(_make_audit_hook(self.workdir))
        enforced["audit_hook"] = "sockets, non-toolchain subprocesses, writes outside the temp dir"
        return enforced

    def hook_launches(self) -> None:
        """Count every Triton launch (and on cpu, remember specialisations)."""
        from triton.runtime.jit import JITFunction
        worker = self

        def wrap(orig):
            def run(fn, *args, grid, warmup, **kwargs):
                if worker.compile_only:
                    worker.compiled += 1
                    kernel = orig(fn, *args, grid=grid, warmup=True, **kwargs)
                    # load it and build its launcher now (Triton 3.6 compiles a C launcher
                    # per signature with gcc at the first launch), not under the GPU hold
                    init = getattr(kernel, "_init_handles", None)
                    if callable(init):
                        init()
                    return kernel
                if not warmup:
                    worker._note_launch(fn, args, kwargs)
                return orig(fn, *args, grid=grid, warmup=warmup, **kwargs)
            return run

        JITFunction.run = wrap(JITFunction.run)
        try:
            from triton.runtime.autotuner import Autotuner

            def autotune_run(orig):
                def run(tuner, *args, **kwargs):
                    if worker.compile_only:   # compile every config; benchmark none, cache none
                        kwargs.pop("warmup", None)
                        return tuner.warmup(*args, **kwargs)
                    return orig(tuner, *args, **kwargs)
                return run
            Autotuner.run = autotune_run(Autotuner.run)
        except ImportError:
            pass
        try:
            from triton.runtime.interpreter import InterpretedFunction
            InterpretedFunction.run = wrap(InterpretedFunction.run)
        except ImportError:
            pass

    def _note_launch(self, fn, args, kwargs) -> None:
        name = getattr(fn, "__name__", "?")
        self.launches[name] = self.launches.get(name, 0) + 1
        self.jit_functions.setdefault(name, fn)
        if self.record_specs:
            spec = _launch_spec(fn, args, kwargs)
            if spec is not None:
                self.specs.setdefault(spec[0], spec[1])
                self.failed_launch = spec

    # 2) requests -------------------------------------------------------------------
    def serve(self) -> None:
        while True:
            header, _ = channel.recv(self.cmd_fd, timeout_s=None)
            op = header.get("op")
            if op == "exit":
                self.reply({"ok": True})
                return
            handler = getattr(self, f"op_{op}", None)
            if handler is None:
                self.reply({"ok": False, "error_type": "ProtocolError", "message": f"unknown op {op!r}"})
                continue
            try:
                reply, payload = handler(header)
            except BaseException as e:  # candidate faults come back as facts, never raise here
                if isinstance(e, KeyboardInterrupt):
                    raise
                reply, payload = self.describe_error(e, op), b""
            self.reply(reply, payload)

    def reply(self, header: dict, payload: bytes = b"") -> None:
        channel.send(self.res_fd, header, payload)

    def op_setup(self, h: dict):
        enforced = self.lock_down(h)
        import torch  # noqa: F401  (after the limits: import cost counts against them too)
        self.record_specs = h["device"] == "cpu" and h.get("gpu_cross_compile", False)
        self.device = h["device"]
        if self.device != "compile":
            self.hook_launches()
        return {"ok": True, "enforced": enforced, "pid": os.getpid()}, b""

    def op_load(self, h: dict):
        from tools.problem import build_model, exec_module
        import torch
        from pathlib import Path
        path = Path(h["problem"])
        self.problem = exec_module(path, path.read_text(encoding="utf-8"))
        t0 = time.perf_counter()
        module = self._import_candidate(h["candidate"])
        if isinstance(module, dict):
            return module, b""
        cls = getattr(module, "ModelNew", None)
        if not isinstance(cls, type):
            return {"ok": False, "phase": "import", "error_type": "MissingModelNew",
                    "message": "the candidate defines no ModelNew class"}, b""
        try:
            self.model = build_model(cls, self.problem, int(h["init_seed"]), self.device)
        except BaseException as e:
            return self.describe_error(e, "construct"), b""
        if isinstance(self.model, torch.nn.Module):
            self.model.eval()
        jit_names = sorted(n for n, v in vars(module).items() if _is_jit(v))
        return {"ok": True, "import_s": time.perf_counter() - t0, "jit_functions": jit_names}, b""

    def _import_candidate(self, name: str):
        """The candidate as module `candidate`, or the error reply when importing fails."""
        self.cand_path = os.path.join(self.workdir, name)
        from tools import dialect
        dialect.install(self.device)   # KernelBook's torch-2.5 names, before any candidate code
        spec = importlib.util.spec_from_file_location("candidate", self.cand_path)
        module = importlib.util.module_from_spec(spec)
        sys.modules["candidate"] = module
        try:
            spec.loader.exec_module(module)
        except BaseException as e:
            return self.describe_error(e, "import")
        return module

    def _inputs(self, seed: int):
        from tools.problem import make_inputs
        return make_inputs(self.problem, seed, self.device)

    def _poison(self, specs: list[dict]) -> None:
        """Fill freed allocator blocks of the output's size with NaN / a sentinel, so an
        output buffer the candidate never writes cannot hold a plausible answer."""
        import torch
        held = []
        for s in specs:
            dtype = getattr(torch, s["dtype"])
            t = torch.empty(s["shape"], dtype=dtype, device=self.device)
            t.fill_(float("nan") if dtype.is_floating_point else -0x5EED)
            held.append(t)
        del held

    def _forward(self, inputs):
        import torch
        with torch.no_grad():
            out = self.model(*inputs)
        if self.device != "cpu":
            torch.cuda.synchronize()
        return out

    def _trial_inputs(self, seed: int):
        """Fresh values written into the previous trial's tensors when shapes match, so a
        candidate that caches results by input address or shape serves stale answers."""
        import torch
        fresh, prev = self._inputs(seed), getattr(self, "_trial_bufs", None)
        if prev is not None and len(prev) == len(fresh) and all(
                type(p) is type(f) and (not isinstance(f, torch.Tensor) or
                                        (p.shape == f.shape and p.dtype == f.dtype and p.stride() == f.stride()))
                for p, f in zip(prev, fresh)):
            for p, f in zip(prev, fresh):
                if isinstance(f, torch.Tensor):
                    p.copy_(f)
            fresh = [p if isinstance(p, torch.Tensor) else f for p, f in zip(prev, fresh)]
        self._trial_bufs = fresh
        return fresh

    def op_trial(self, h: dict):
        import torch
        inputs = self._trial_inputs(int(h["seed"]))
        before = [x.clone() if isinstance(x, torch.Tensor) else None for x in inputs]
        self.launches.clear()
        outs_all, kinds = [], []
        aten_ops: dict[str, int] = {}
        for call in range(2 if h.get("repeat") else 1):
            self._poison(h.get("poison", []))
            try:
                with _poisoned_allocations(), _count_aten_compute(aten_ops, enabled=call == 0):
                    out = self._forward(inputs)
            except BaseException as e:
                return self.describe_error(e, "forward"), b""
            flat, kind = _flatten_output(out)
            kinds.append(kind)
            outs_all.extend(flat)
        mutated = [i for i, (a, b) in enumerate(zip(inputs, before))
                   if b is not None and not _same(a, b)]
        specs, payload = self._pack([t for t in outs_all if isinstance(t, torch.Tensor)], h)
        return {"ok": True, "structure": kinds, "outputs": specs,
                "output_types": [_type_name(t) for t in outs_all],
                "output_devices": [str(t.device) for t in outs_all if isinstance(t, torch.Tensor)],
                "inputs_mutated": mutated, "launches": dict(self.launches),
                "aten_compute": aten_ops}, payload

    def _pack(self, tensors, h: dict):
        """Outputs into the judge's staging buffer when offered and they fit, else bytes."""
        if h.get("staged") and self.staging is not None:
            specs = cudaipc.stage(tensors, self.staging.tensor)
            if specs is not None:
                return specs, b""
        return channel.pack_tensors(tensors)

    def op_staging(self, h: dict):
        """Map the judge's CUDA IPC staging buffer; prove it both ways with a pattern."""
        import torch
        self.staging = cudaipc.Mapped(bytes.fromhex(h["handle"]), int(h["nbytes"]))
        buf = self.staging.tensor
        seen = buf[:256].tolist()
        buf[256:512].copy_(torch.arange(255, -1, -1, dtype=torch.uint8, device=buf.device))
        torch.cuda.synchronize()
        return {"ok": True, "probe": seen}, b""

    def op_time(self, h: dict):
        """One round of the candidate's timing with the measure the judge asked for
        (tools/perf/timer.py): per_call, batched (`reps` calls per sample) or cuda_graph (one
        graph of `reps` calls, captured on the first request and replayed by later ones,
        so its inputs and outputs stay alive here between rounds)."""
        from tools.perf import timer
        measure = h.get("measure", "per_call")
        seed, warmup, iters, reps = int(h["seed"]), int(h["warmup"]), int(h["iters"]), int(h.get("reps", 1))
        self.launches.clear()
        if measure == "cuda_graph":
            reply = self._time_graph(seed, warmup, iters, reps)
            if not reply.get("ok") or "capture_error" in reply:
                return reply, b""
            last = self._graph[2]
        else:
            inputs = self._inputs(seed)
            last = [None]

            def call():
                last[0] = self._forward_nosync(inputs)
            if measure == "batched":
                samples = timer.time_cuda_batched(call, warmup=warmup, iters=iters, calls_per_sample=reps,
                                                  name=NVTX_RANGE)
                calls = warmup + iters * reps
            else:
                samples = timer.time_cuda(call, warmup=warmup, iters=iters, name=NVTX_RANGE)
                calls = warmup + iters
            reply = {"ok": True, "samples_ms": samples, "launches": sum(self.launches.values()),
                     "calls": calls}
        flat, _ = _flatten_output(last[0])
        specs, payload = self._pack(flat, h) if h.get("return_output") else ([], b"")
        return {**reply, "outputs": specs}, payload

    def _time_graph(self, seed: int, warmup: int, iters: int, reps: int) -> dict:
        """Replays of the candidate's graph; captured (with its launches counted) on the
        first call for this seed and reps. A capture that fails is a fact for the judge
        (it times every callable another way), not the candidate's error."""
        from tools.perf import timer
        key = (seed, reps)
        calls = 0
        if self._graph is None or self._graph[0] != key:
            self._drop_graph()
            inputs = self._inputs(seed)
            last = [None]

            def call():
                last[0] = self._forward_nosync(inputs)
            try:
                graph = timer.capture_cuda_graph(call, warmup=warmup, reps_per_graph=reps)
            except timer.CaptureUnsupported as e:
                return {"ok": True, "capture_error": _short(str(e), 500),
                        "launches": sum(self.launches.values()), "calls": warmup + reps}
            self._graph = (key, graph, last, inputs)
            calls = warmup + reps   # each captured call must have launched a Triton kernel
        samples = self._graph[1].time(iters, name=NVTX_RANGE)
        return {"ok": True, "samples_ms": samples, "launches": sum(self.launches.values()), "calls": calls}

    def _drop_graph(self) -> None:
        if self._graph is not None:
            self._graph[1].close()
            self._graph = None

    def op_estimate(self, h: dict):
        """Rough ms per call of the forward (batched, after a warm-up): sizes `reps`."""
        from tools.perf.timer import estimate_call_ms
        inputs = self._inputs(int(h["seed"]))
        self.launches.clear()
        ms = estimate_call_ms(lambda: self._forward_nosync(inputs), calls=int(h.get("calls", 5)))
        return {"ok": True, "call_ms": ms, "launches": sum(self.launches.values()),
                "calls": 1 + int(h.get("calls", 5))}, b""

    def _forward_nosync(self, inputs):
        import torch
        with torch.no_grad():
            return self.model(*inputs)

    def op_host_run(self, h: dict):
        """Back-to-back calls ended by a device sync; the judge times this whole request."""
        import torch
        inputs = self._inputs(int(h["seed"]))
        torch.cuda.synchronize()
        for _ in range(int(h["iters"])):
            self._forward_nosync(inputs)
        torch.cuda.synchronize()
        return {"ok": True}, b""

    def op_warm(self, h: dict):
        """JIT-compile the kernels one forward launches, launching none (cuda only).
        Values do not matter here (the kernels never run); the first trial judges."""
        import torch
        inputs = self._inputs(int(h["seed"]))
        t0 = time.perf_counter()
        self.compile_only, self.compiled = True, 0
        try:
            with torch.no_grad():
                self.model(*inputs)
            torch.cuda.synchronize()
        except BaseException as e:
            if isinstance(e, KeyboardInterrupt):
                raise
            return {**self.describe_error(e, "forward"), "compiled": self.compiled}, b""
        finally:
            self.compile_only = False
        return {"ok": True, "compiled": self.compiled, "s": round(time.perf_counter() - t0, 3)}, b""

    def op_ping(self, h: dict):
        return {"ok": True}, b""

    def op_profile(self, h: dict):
        from tools.perf import profiler
        inputs = self._inputs(int(h["seed"]))
        names = set(self.launches) | set(self.jit_functions)
        from tools.perf.timer import nvtx_range
        with nvtx_range(NVTX_RANGE):
            breakdown = profiler.kernel_breakdown(lambda: self._forward_nosync(inputs), (),
                                                  triton_names=names, iters=int(h.get("iters", 3)))
        resources = profiler.kernel_resources(list(self.jit_functions.values()))
        return {"ok": True, "breakdown": breakdown, "resources": resources}, b""

    def op_ncu_forward(self, h: dict):
        """Forwards inside the nvtx range that ncu --nvtx-include selects."""
        from tools.perf.timer import nvtx_range
        import torch
        inputs = self._inputs(int(h["seed"]))
        self._forward(inputs)  # outside the range: JIT and allocator warm-up
        with nvtx_range(NVTX_RANGE):
            for _ in range(int(h.get("iters", 1))):
                self._forward_nosync(inputs)
            torch.cuda.synchronize()
        return {"ok": True}, b""

    def op_specs(self, h: dict):
        """cpu: the launched kernels' specialisations, for a clean process to compile."""
        return {"ok": True, "specs": [_spec_json(v) for v in self.specs.values()]}, b""

    def op_compile(self, h: dict):
        """compile mode: import the candidate (no interpreter) and compile each spec for
        a real GPU target. Runs in its own worker: Triton's interpreter leaves
        triton.language patched in the process that ran it, which breaks compilation."""
        module = self._import_candidate(h["candidate"])
        if isinstance(module, dict):
            return module, b""
        results = []
        for js in h["specs"]:
            fn = _find_kernel(module, js["name"])
            if fn is None:
                results.append({"ok": True, "name": js["name"], "skipped": "kernel not found at module level"})
                continue
            results.append(_compile_for_gpu((fn, js["signature"], js["constexprs"], js["options"]),
                                            int(h.get("arch", 90))))
        return {"ok": True, "kernels": results}, b""

    # 3) errors ---------------------------------------------------------------------
    def describe_error(self, e: BaseException, phase: str) -> dict:
        kind = "exception"
        try:
            from triton.compiler.errors import CompilationError
            if isinstance(e, CompilationError):
                kind = "triton_compile"
        except ImportError:
            pass
        if isinstance(e, SyntaxError):
            kind = "syntax"
        line, src_line = _candidate_line(e, self.cand_path)
        info = {"ok": False, "phase": phase, "kind": kind, "error_type": type(e).__name__,
                "message": _short(str(e) or type(e).__name__, 2000), "line": line,
                "source_line": src_line,
                "traceback": _short("".join(traceback.format_exception(e)), 6000)}
        if kind == "triton_compile":
            info["line"], info["source_line"] = _triton_error_line(e, self.cand_path) or (line, src_line)
        if phase == "forward" and self.record_specs and self.failed_launch is not None:
            # the interpreter hides GPU compile errors: the judge compiles this launch for
            # sm_90 in a clean worker and reports its error when there is one
            info["failed_launch"] = _spec_json(self.failed_launch[1])
        return info


# --- helpers (module level: no candidate-visible state) -------------------------------

# aten ops that allocate, move, view or describe data; anything else in the forward is
# library compute (an operator like `x * (x > 0)` that no static guard can see)
_ATEN_DATA_OPS = frozenset("""
empty empty_like empty_strided new_empty new_empty_strided zeros zeros_like new_zeros ones
ones_like new_ones full full_like new_full fill_ zero_ arange copy_ _to_copy to clone
contiguous view _unsafe_view reshape _reshape_alias as_strided permute transpose t expand
expand_as squeeze unsqueeze flatten unflatten slice select split split_with_sizes chunk
narrow detach alias lift_fresh lift_fresh_copy _local_scalar_dense item resize_ set_
view_as unbind movedim cat stack is_same_size sym_size sym_stride sym_numel
sym_storage_offset stride size numel dim is_contiguous result_type _has_compatible_shallow_copy_type
record_stream is_pinned _pin_memory pin_memory equal
""".split())


@contextlib.contextmanager
def _count_aten_compute(counts: dict, enabled: bool):
    """Count aten compute ops dispatched while the candidate's forward runs."""
    if not enabled:
        yield
        return
    from torch.utils._python_dispatch import TorchDispatchMode

    class _Count(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            name = func.overloadpacket.__name__
            if name not in _ATEN_DATA_OPS:
                counts[f"aten.{name}"] = counts.get(f"aten.{name}", 0) + 1
            return func(*args, **(kwargs or {}))

    with _Count():
        yield


@contextlib.contextmanager
def _poisoned_allocations():
    """torch.empty & co. return NaN-filled memory (integers: their max) while on, so an
    output the candidate never writes cannot read as a plausible answer."""
    import torch
    was, warn = torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled()
    torch.use_deterministic_algorithms(True, warn_only=True)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(was, warn_only=warn)


def _private_network() -> str:
    """Enter a fresh network namespace (only loopback, down) if the kernel lets us."""
    if not sys.platform.startswith("linux"):
        return "none (not Linux)"
    libc = ctypes.CDLL(None, use_errno=True)
    for flags, label in ((_CLONE_NEWNET, "netns"), (_CLONE_NEWUSER | _CLONE_NEWNET, "userns+netns")):
        if libc.unshare(flags) == 0:
            return label
    return f"audit hook only (unshare: {os.strerror(ctypes.get_errno())})"


def _make_audit_hook(workdir: str):
    real = os.path.realpath
    root = real(workdir)
    allowed_write = (root, "/dev/null", "/dev/shm", "/proc/self")
    write_flags = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC

    def hook(event: str, args: tuple) -> None:
        if event in ("socket.connect", "socket.bind", "socket.sendto", "socket.sendmsg",
                     "socket.getaddrinfo"):
            raise PermissionError(f"krefine sandbox: network is not allowed ({event})")
        if event in ("os.system", "os.fork", "os.forkpty", "pty.spawn"):
            raise PermissionError(f"krefine sandbox: {event} is not allowed")
        if event in ("subprocess.Popen", "os.posix_spawn", "os.exec", "os.spawn"):
            exe, argv = (list(args) + [None, None])[:2]
            if event == "os.spawn":
                exe, argv = (list(args) + [None, None, None])[1:3]
            first = exe if isinstance(exe, (str, bytes, os.PathLike)) else \
                (argv[0] if isinstance(argv, (list, tuple)) and argv else "")
            name = os.path.basename(os.fsdecode(first or ""))
            if name not in _ALLOWED_EXES:
                raise PermissionError(f"krefine sandbox: starting {name!r} is not allowed")
        if event == "open":
            path, mode, flags = (list(args) + [None, None, 0])[:3]
            writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or \
                      (isinstance(flags, int) and flags & write_flags)
            if writing and isinstance(path, (str, bytes, os.PathLike)):
                p = real(os.fsdecode(path))
                if not any(p == a or p.startswith(a + os.sep) for a in allowed_write):
                    raise PermissionError(f"krefine sandbox: writing {p} is not allowed")
        if event in ("os.remove", "os.rmdir", "os.rename", "shutil.rmtree", "os.truncate"):
            path = args[0]
            if isinstance(path, (str, bytes, os.PathLike)):
                p = real(os.fsdecode(path))
                if not (p == root or p.startswith(root + os.sep)):
                    raise PermissionError(f"krefine sandbox: {event} {p} is not allowed")
    return hook


def _is_jit(v) -> bool:
    try:
        from triton.runtime.jit import JITFunction
        from triton.runtime.autotuner import Autotuner, Heuristics
        kinds = (JITFunction, Autotuner, Heuristics)
        try:
            from triton.runtime.interpreter import InterpretedFunction
            kinds += (InterpretedFunction,)
        except ImportError:
            pass
        return isinstance(v, kinds)
    except ImportError:
        return False


def _flatten_output(out):
    import torch
    if isinstance(out, torch.Tensor):
        return [out], "tensor"
    if isinstance(out, (tuple, list)):
        return list(out), f"{type(out).__name__}:{len(out)}"
    return [out], type(out).__name__


def _type_name(x) -> str:
    t = type(x)
    return f"{t.__module__}.{t.__qualname__}"


def _same(a, b) -> bool:
    import torch
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    return bool(torch.equal(a, b)) or bool(torch.equal(a.isnan(), b.isnan()) and
                                           torch.equal(a.nan_to_num(), b.nan_to_num()))


def _short(s: str, n: int) -> str:
    return s if len(s) <= n else s[: n // 2] + "\n...\n" + s[-n // 2:]


def _candidate_line(e: BaseException, cand_path: str) -> tuple[int | None, str | None]:
    """Innermost traceback frame inside the candidate file, following the chain of
    causes (the interpreter wraps a kernel's error in its own InterpreterError)."""
    line, seen = None, set()
    target = os.path.realpath(cand_path or "")
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        found = None
        if isinstance(e, SyntaxError) and e.filename and os.path.realpath(e.filename) == target:
            found = e.lineno
        tb = e.__traceback__
        while tb is not None:
            if cand_path and os.path.realpath(tb.tb_frame.f_code.co_filename) == target:
                found = tb.tb_lineno
            tb = tb.tb_next
        line = found or line
        e = e.__cause__ or e.__context__
    return line, _source_line(cand_path, line)


def _source_line(path: str, line: int | None) -> str | None:
    if not line or not path:
        return None
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
        return lines[line - 1].strip() if 0 < line <= len(lines) else None
    except OSError:
        return None


def _def_line(py_fn) -> int | None:
    """Line of `def` in the file: Triton numbers a kernel's lines from its def, after
    the decorators, while inspect starts at the first decorator."""
    import inspect
    try:
        lines, start = inspect.getsourcelines(py_fn)
    except (OSError, TypeError):
        return None
    for i, text in enumerate(lines):
        if text.lstrip().startswith("def "):
            return start + i
    return None


def _triton_error_line(e, cand_path: str):
    """Map a CompilationError's function-relative line to a line of the candidate file."""
    rel = getattr(getattr(e, "node", None), "lineno", None)
    tb, fn_line = e.__traceback__, None
    while tb is not None:
        obj = tb.tb_frame.f_locals.get("fn")
        py_fn = getattr(obj, "fn", None)
        if callable(py_fn) and getattr(py_fn, "__code__", None) is not None:
            fn_line = _def_line(py_fn) or fn_line
        tb = tb.tb_next
    if rel is None or fn_line is None:
        return None
    line = fn_line + rel - 1
    return line, _source_line(cand_path, line)


_LAUNCH_OPTIONS = {"num_warps", "num_stages", "num_ctas", "maxnreg", "enable_fp_fusion",
                   "launch_cooperative_grid", "launch_pdl", "debug"}


def _launch_spec(fn, args, kwargs):
    """(key, spec) describing one launch well enough to compile it for a GPU."""
    try:
        import inspect
        from triton.runtime.jit import mangle_type
        py_fn = getattr(fn, "fn", fn)
        names = list(inspect.signature(py_fn).parameters)
        bound = dict(zip(names, args))
        bound.update({k: v for k, v in kwargs.items() if k in names})
        options = {k: v for k, v in kwargs.items() if k in _LAUNCH_OPTIONS and k != "debug"}
        sig, const = {}, {}
        annotations = getattr(py_fn, "__annotations__", {})
        for n in names:
            v = bound.get(n)
            is_const = "constexpr" in str(annotations.get(n, ""))
            if is_const or v is None or isinstance(v, (str, type)):
                sig[n], const[n] = "constexpr", v
            else:
                sig[n] = mangle_type(v)
        key = (py_fn.__name__, tuple(sorted(sig.items())), repr(sorted(const.items(), key=lambda kv: kv[0])),
               repr(sorted(options.items())))
        return key, (py_fn, sig, const, options)
    except Exception:  # an odd launch we cannot describe: skip its GPU compile, not the trial
        return None


def _spec_json(spec) -> dict:
    py_fn, sig, const, options = spec
    def plain(v):
        return v if isinstance(v, (int, float, bool, str)) or v is None else repr(v)
    return {"name": py_fn.__name__, "signature": sig,
            "constexprs": {k: plain(v) for k, v in const.items()}, "options": options}


def _find_kernel(module, name: str):
    """The plain Python function of kernel `name` (through autotune/heuristics wrappers)."""
    for v in vars(module).values():
        obj = v
        for _ in range(4):
            if getattr(obj, "__name__", None) == name and hasattr(obj, "__code__"):
                return obj
            inner = getattr(obj, "fn", None)
            if inner is None:
                break
            obj = inner
    return None


def _compile_for_gpu(spec, arch: int) -> dict:
    py_fn, sig, const, options = spec
    try:
        import triton
        from triton.backends.compiler import GPUTarget
        from triton.compiler import ASTSource
        from triton.runtime.jit import JITFunction
        jf = JITFunction(py_fn)
        k = triton.compile(ASTSource(jf, sig, const), target=GPUTarget("cuda", arch, 32),
                           options=dict(options))
        info = {"ok": True, "name": py_fn.__name__, "arch": f"sm_{arch}",
                "num_warps": getattr(k.metadata, "num_warps", None),
                "num_stages": getattr(k.metadata, "num_stages", None),
                "shared": getattr(k.metadata, "shared", None)}
        try:
            from tools.perf.profiler import ptxas_resources
            info.update(ptxas_resources(k.asm["ptx"], arch=f"sm_{arch}a"))
        except Exception as e:  # resources are a nicety; the compile itself succeeded
            info["resources_error"] = _short(str(e), 300)
        return info
    except Exception as e:
        line = None
        node = getattr(e, "node", None)
        if getattr(node, "lineno", None) is not None:
            line = _def_line(py_fn) + node.lineno - 1 if _def_line(py_fn) else None
        src_line = None
        if line:
            try:
                import inspect
                src_line = _source_line(inspect.getsourcefile(py_fn), line)
            except TypeError:
                pass
        return {"ok": False, "name": py_fn.__name__, "arch": f"sm_{arch}",
                "error_type": type(e).__name__, "message": _short(str(e), 2000),
                "line": line, "source_line": src_line}


def run_worker(cmd_path: str, res_path: str) -> None:
    """Serve the judge over the two named pipes of tools/sandbox.py (spawned or forked)."""
    # named pipes, not inherited descriptors, so the worker can run under a wrapper (ncu)
    cmd_fd = os.open(cmd_path, os.O_RDONLY | os.O_CLOEXEC)
    res_fd = os.open(res_path, os.O_WRONLY | os.O_CLOEXEC)
    Worker(cmd_fd, res_fd).serve()


def main() -> None:
    run_worker(sys.argv[1], sys.argv[2])


if __name__ == "__main__":
    main()
