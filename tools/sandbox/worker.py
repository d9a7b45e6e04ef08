"""The worker: the only process where candidate code runs.

Started by tools/sandbox/isolation.py as `python -m tools.sandbox.worker CMD_FIFO
RES_FIFO` in a fresh temp cwd with a scrubbed environment (or forked by
tools/sandbox/forkserver.py). Before any candidate code runs it locks itself down
(rlimits, a private network namespace where the OS allows, an audit hook refusing
sockets, subprocesses other than Triton's toolchain, and writes outside its temp dir:
tools/sandbox/lockdown.py), hooks Triton launches (tools/sandbox/launches.py), then
answers the judge's requests one at a time: load, trial, time, host, profile,
gpu_compile (the measuring ones: tools/sandbox/measure_ops.py). It sends back raw
outputs and facts; it never decides a verdict, and nothing it prints is read as one.

What this does NOT protect against: candidate code shares this process with the
worker, so a determined candidate can tamper with anything here (the launch counter,
the timer). Those tricks are the static guards' job (tools/guards/) and the judge's
cross-checks (fresh secret inputs, host clock, its own reference). See README "Sandbox".
"""
from __future__ import annotations

import importlib.util
import os
import sys
import time
import traceback

from tools.sandbox import channel, cudaipc
from tools.sandbox.activity import Recorder, probe
from tools.sandbox.faults import candidate_line, short, triton_error_line
from tools.sandbox.launches import compile_launched, hook_launches, is_jit, launch_spec, spec_json
from tools.sandbox.lockdown import lock_down
from tools.sandbox.measure_ops import MeasureOps
from tools.sandbox.ownership import OwnershipOps, note_memory
from tools.sandbox.state_ops import StateOps
from tools.sandbox.outputs import all_tensors, device_of, fingerprint, flatten_output, poisoned_allocations, same
from tools.sandbox.toolchain import preimport_toolchain
from tools.sandbox.watch import Watch

# requests that make inputs of the problem's size: a lean worker releases them afterwards
_SIZED_OPS = frozenset({"trial", "triton_off", "warm", "time", "estimate", "host_run", "host_done", "profile", "ncu_forward"})


class Worker(MeasureOps, OwnershipOps, StateOps):
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
        self.pending = None          # op_warm on several threads: the kernels to load (warmpool.py)
        self._graph = None           # op_time's cuda_graph: (key, CapturedGraph, last output box, inputs)
        self._host_inputs = None     # op_host_prepare's inputs, for the judge's host-clock runs
        self.lean = False            # drop inputs and the allocator's cache after each request
        self.watch = Watch()         # facts of each forward call (tools/sandbox/watch.py)
        self._held = []              # outputs of a wrong type: never touched, never freed here
        self._earlier = []           # weak references to earlier calls' outputs (ownership.py)

    # 1) lock down: op_setup calls tools/sandbox/lockdown.py, then launches.py hooks the launches
    def note_launch(self, fn, args, kwargs) -> None:
        """Called by the launch hooks for every Triton launch the forward makes."""
        name = getattr(fn, "__name__", "?")
        self.launches[name] = self.launches.get(name, 0) + 1
        self.jit_functions.setdefault(name, fn)
        if self.record_specs:
            spec = launch_spec(fn, args, kwargs)
            if spec is not None:
                self.specs.setdefault(spec[0], spec[1])
                self.failed_launch = spec

    # 2) requests -------------------------------------------------------------------
    def serve(self) -> None:
        # the handlers and the watch's report as they are now, before any candidate code:
        # rebinding Worker's methods later changes nothing here (the watch reports it)
        handlers = {n[3:]: getattr(self, n) for n in dir(type(self)) if n.startswith("op_")}
        finish, send = self.watch.finish_reply, channel.send
        while True:
            header, _ = channel.recv(self.cmd_fd, timeout_s=None)
            op = header.get("op")
            if op == "exit":
                self.reply({"ok": True})
                return
            handler = handlers.get(op) if isinstance(op, str) else None
            if handler is None:
                self.reply({"ok": False, "error_type": "ProtocolError", "message": f"unknown op {op!r}"})
                continue
            try:
                reply, payload = handler(header)
            except BaseException as e:  # candidate faults come back as facts, never raise here
                if isinstance(e, KeyboardInterrupt):
                    raise
                reply, payload = self.describe_error(e, op), b""
            finish(op, reply)
            if self.lean and op in _SIZED_OPS:
                self._release()
            if self.device == "cuda" and "torch" in sys.modules and sys.modules["torch"].cuda.is_initialized():
                import torch   # the judge's record of where memory goes (checks.memory.peaks)
                reply["gpu_peak_bytes"] = torch.cuda.max_memory_reserved()
                torch.cuda.reset_peak_memory_stats()
            send(self.res_fd, reply, payload)

    def _release(self) -> None:
        """Lean (tools/judge/memory.py): the judge computes its next reference or times a
        baseline while this worker waits, so nothing of the inputs' size stays here.
        (A cuda_graph measure keeps its graph's inputs: short forwards are small.)"""
        self._trial_bufs = None
        if self.device == "cuda":
            import torch
            torch.cuda.empty_cache()

    def reply(self, header: dict, payload: bytes = b"") -> None:
        channel.send(self.res_fd, header, payload)

    def op_setup(self, h: dict):
        enforced = lock_down(h, self.workdir)
        import torch  # noqa: F401  (after the limits: import cost counts against them too)
        self.record_specs = h["device"] == "cpu" and h.get("gpu_cross_compile", False)
        self.device = h["device"]
        self.lean = bool(h.get("lean"))
        if self.device != "compile":
            hook_launches(self)
            self.watch.install()
        # CUPTI checked before any candidate code runs (tools/sandbox/activity.py)
        seen = probe() if self.device == "cuda" and h.get("activity_probe") else None
        return {"ok": True, "enforced": enforced, "pid": os.getpid(), "activity": seen}, b""

    def op_load(self, h: dict):
        from tools.problem import exec_module
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
        self._built = (cls, int(h["init_seed"]), h.get("module_mode", "train"))
        built = self.op_reset(h)[0]
        if not built.get("ok"):
            return built, b""
        jit_names = sorted(n for n, v in vars(module).items() if is_jit(v))
        return {"ok": True, "import_s": time.perf_counter() - t0, "jit_functions": jit_names}, b""

    def _import_candidate(self, name: str):
        """The candidate as module `candidate`, or the error reply when importing fails."""
        self.cand_path = os.path.join(self.workdir, name)
        from tools.dialect.runtime import install
        install(self.device)   # libdevice for the interpreter, before any candidate code
        preimport_toolchain(self.cand_path)   # torch's / Triton's own import-time set-up is not the candidate's
        self.watch.baseline(self.cand_path)  # what must stay as it is from here on
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
            # -0x5EED fits every integer type but the bytes: theirs is a value no plausible answer starts from
            t.fill_(float("nan") if dtype.is_floating_point else {torch.uint8: 0xA5, torch.int8: -0x5B}.get(dtype, -0x5EED))
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
        self._trial_bufs = self._refilled(getattr(self, "_trial_bufs", None), seed)
        return self._trial_bufs

    def _refilled(self, prev, seed: int):
        """The inputs of `seed`, written into `prev`'s tensors when shapes match."""
        import torch
        fresh = self._inputs(seed)
        if prev is not None and len(prev) == len(fresh) and all(
                type(p) is type(f) and (not isinstance(f, torch.Tensor) or
                                        (p.shape == f.shape and p.dtype == f.dtype and p.stride() == f.stride()))
                for p, f in zip(prev, fresh)):
            with torch.no_grad():   # an input made with requires_grad=True is a leaf autograd will not write
                for p, f in zip(prev, fresh):
                    if isinstance(f, torch.Tensor):
                        p.copy_(f)
            fresh = [p if isinstance(p, torch.Tensor) else f for p, f in zip(prev, fresh)]
        return fresh

    def op_trial(self, h: dict):
        import torch
        if self.lean:
            return self._lean_trial(h)
        inputs = self._trial_inputs(int(h["seed"]))
        before = [x.clone() if isinstance(x, torch.Tensor) else None for x in inputs]
        self.launches.clear()
        outs_all, kinds, types = [], [], []
        aten_ops: dict[str, int] = {}
        gpu = Recorder(self, h.get("activity"))   # what CUPTI saw of these calls
        aliases, pairs = [], []   # output i, j sharing memory: a list of [i, j]
        for call in range(2 if h.get("repeat") else 1):
            self._poison(h.get("poison", []))
            try:
                with poisoned_allocations(), self.watch.call(aten_ops), gpu.record():
                    out = self._forward(inputs)
            except BaseException as e:
                return self.describe_error(e, "forward"), b""
            flat, kind, names = flatten_output(out)
            kinds.append(kind)
            types += names
            if not all_tensors(names):
                return self._wrong_type(out, kinds, types, aten_ops)
            note_memory(flat, inputs, self.model, self._earlier, aliases, pairs)
            outs_all.extend(flat)
        kept = self.watch.inputs_kept(inputs)
        mutated = [i for i, (a, b) in enumerate(zip(inputs, before)) if b is not None and not (kept[i] and same(a, b))]
        specs, payload = self._pack(outs_all, h)
        return {"ok": True, "structure": kinds, "outputs": specs, "output_types": types,
                "output_devices": [device_of(t) for t in outs_all],
                "inputs_mutated": mutated, "launches": dict(self.launches), "aliases": aliases,
                "output_pairs": pairs, "aten_compute": aten_ops, "activity": gpu.facts()}, payload

    def _lean_trial(self, h: dict):
        """A lean trial (tools/judge/memory.py): a call on the inputs of `seed`, then a
        second call after the inputs of `refill_seed` were made in the storage the first
        ones left (the allocator hands the same blocks back; `same_storage` says whether
        it did), so a result kept by address or shape shows. Each call's outputs go to
        the judge before the next call runs, inputs are checked by fingerprint, not by a
        copy: no more than one call's inputs and outputs live here at a time."""
        import torch
        self.launches.clear()
        kinds, types, devices, specs, views, mutated, ptrs, aliases, pairs = [], [], [], [], [], set(), [], [], []
        aten_ops: dict[str, int] = {}
        gpu = Recorder(self, h.get("activity"))   # what CUPTI saw of these calls
        at, inputs = 0, None
        for call, seed in enumerate((int(h["seed"]), int(h.get("refill_seed", h["seed"])))):
            if inputs is not None and h.get("refill") == "copy":
                inputs = self._refilled(inputs, seed)   # the judge found room for a second set
            else:
                inputs = None
                inputs = self._inputs(seed)
            ptrs.append([x.data_ptr() for x in inputs if isinstance(x, torch.Tensor)])
            before = [fingerprint(x) if isinstance(x, torch.Tensor) else None for x in inputs]
            self._poison(h.get("poison", []))
            try:
                with poisoned_allocations(), self.watch.call(aten_ops), gpu.record():
                    out = self._forward(inputs)
            except BaseException as e:
                return self.describe_error(e, "forward"), b""
            flat, kind, names = flatten_output(out)
            kinds.append(kind)
            types += names
            if not all_tensors(names):
                return self._wrong_type(out, kinds, types, aten_ops)
            devices += [device_of(t) for t in flat]
            note_memory(flat, inputs, self.model, self._earlier, aliases, pairs)
            kept = self.watch.inputs_kept(inputs)
            mutated.update(i for i, (a, b) in enumerate(zip(inputs, before))
                           if b is not None and not (kept[i] and torch.equal(fingerprint(a), b)))
            tensors = flat
            got = cudaipc.stage(tensors, self.staging.tensor, at) \
                if h.get("staged") and self.staging is not None else None
            if got is None:
                got, more = channel.pack_tensors(tensors)
                views += more
            else:
                at += cudaipc.span([g["nbytes"] for g in got])
            specs += got
            del out, flat, tensors   # "realloc": the next call's inputs take these blocks
        return {"ok": True, "structure": kinds, "outputs": specs, "output_types": types,
                "output_devices": devices, "inputs_mutated": sorted(mutated), "launches": dict(self.launches),
                "aten_compute": aten_ops, "same_storage": ptrs[0] == ptrs[1], "activity": gpu.facts(),
                "aliases": aliases, "output_pairs": pairs}, views

    def _wrong_type(self, out, kinds: list, types: list, aten_ops: dict):
        """The reply for an output that is not exactly a torch.Tensor (or an exact tuple or
        list of them): its type names only. The object is never touched, nor freed here."""
        self._held.append(out)
        return {"ok": True, "structure": kinds, "outputs": [], "output_types": types, "output_devices": [],
                "inputs_mutated": [], "launches": dict(self.launches), "aten_compute": aten_ops}, b""

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

    def op_warm(self, h: dict):
        """JIT-compile the kernels one forward launches, launching none (cuda only).
        Values do not matter here (the kernels never run); the first trial judges."""
        import torch
        from tools.sandbox import warmpool
        inputs = self._inputs(int(h["seed"]))
        t0 = time.perf_counter()
        self.compile_only, self.compiled, used = True, 0, 1
        try:
            with warmpool.parallel(self, int(h.get("threads") or 1)) as used, torch.no_grad():
                self.model(*inputs)
            torch.cuda.synchronize()
        except BaseException as e:
            if isinstance(e, KeyboardInterrupt):
                raise
            return {**self.describe_error(e, "forward"), "compiled": self.compiled, "threads": used}, b""
        finally:
            self.compile_only = False
        return {"ok": True, "compiled": self.compiled, "threads": used,
                "s": round(time.perf_counter() - t0, 3)}, b""

    def op_reset(self, h: dict):
        """ModelNew built (op_load), or built afresh as op_load built it (KernelBench's seeds
        and init order): a reference that keeps state between calls is judged from a fresh
        model, call by call in its order (tools/judge/trials.py); the calls made before
        (warm) are gone."""
        from tools.problem import build_model
        cls, seed, mode = self._built
        self.model, self._graph = None, None
        try:
            with self.watch.build():
                self.model = build_model(cls, self.problem, seed, self.device, mode)
        except BaseException as e:
            return self.describe_error(e, "construct"), b""
        self.note_built()   # tools/sandbox/state_ops.py: what the calls are measured against
        return {"ok": True}, b""

    def op_ping(self, h: dict):
        return {"ok": True}, b""

    def op_specs(self, h: dict):
        """cpu: the launched kernels' specialisations, for a clean process to compile."""
        return {"ok": True, "specs": [spec_json(v) for v in self.specs.values()]}, b""

    def op_compile(self, h: dict):
        """compile mode: import the candidate (no interpreter) and compile each spec for
        a real GPU target. Runs in its own worker: Triton's interpreter leaves
        triton.language patched in the process that ran it, which breaks compilation."""
        module = self._import_candidate(h["candidate"])
        if isinstance(module, dict):
            return module, b""
        return {"ok": True, "kernels": [compile_launched(module, js, int(h.get("arch", 90))) for js in h["specs"]]}, b""

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
        line, src_line = candidate_line(e, self.cand_path)
        info = {"ok": False, "phase": phase, "kind": kind, "error_type": type(e).__name__,
                "message": short(str(e) or type(e).__name__, 2000), "line": line,
                "source_line": src_line,
                "traceback": short("".join(traceback.format_exception(e)), 6000)}
        if kind == "triton_compile":
            info["line"], info["source_line"] = triton_error_line(e, self.cand_path) or (line, src_line)
        if self.device == "cuda" and "out of memory" in info["message"].lower():
            import torch   # what this process held when an allocation failed (the judge decides whose fault)
            info["gpu_reserved_bytes"] = torch.cuda.memory_reserved()
        if phase == "forward" and self.record_specs and self.failed_launch is not None:
            # the interpreter hides GPU compile errors: the judge compiles this launch for
            # sm_90 in a clean worker and reports its error when there is one
            info["failed_launch"] = spec_json(self.failed_launch[1])
        return info


def run_worker(cmd_path: str, res_path: str) -> None:
    """Serve the judge over the two named pipes of tools/sandbox/isolation.py (spawned or forked)."""
    # named pipes, not inherited descriptors, so the worker can run under a wrapper (ncu)
    cmd_fd = os.open(cmd_path, os.O_RDONLY | os.O_CLOEXEC)
    res_fd = os.open(res_path, os.O_WRONLY | os.O_CLOEXEC)
    Worker(cmd_fd, res_fd).serve()


def main() -> None:
    run_worker(sys.argv[1], sys.argv[2])


if __name__ == "__main__":
    main()
