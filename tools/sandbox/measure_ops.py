"""The worker's measuring requests: time, estimate, host_run, profile, ncu_forward.

A mixin of tools/sandbox/worker.py's Worker, which answers a request `op` with its
method `op_<op>`: each of these runs the candidate's forward as the judge asked and
sends back figures (samples, call estimates, a kernel breakdown), never a verdict.
They use the Worker's model, `_inputs`, `_forward`, `_pack` and launch counts. How to
time is tools/perf/timer.py's, how to profile tools/perf/profiler.py's.

What was timed is what the judge checks: every timed call (and every call captured into
a timing graph) is a "timed" call of the worker's launch log (`launch_log`,
tools/sandbox/signatures.py), whose signatures go back with each time reply; and the
outputs a timing request returns come from the timed mechanism itself on inputs the
candidate has not seen: the judge's `check_seed` written into the timed inputs before
the last sample, or into the graph's input tensors before one more replay. Every other
sample (each replay) runs on a fresh set of inputs where the judge asks (`rotate`: one set
per sample, tools/perf/rotation.py), as the judge's own baselines do.
"""
from __future__ import annotations

import functools

from tools.perf.ncu import NVTX_RANGE   # the range ncu's filter selects, around every timed forward
from tools.perf.rotation import fits, rotation
from tools.sandbox.activity import record_timed
from tools.sandbox.faults import short
from tools.sandbox.outputs import all_tensors, flatten_output
from tools.sandbox.signatures import LaunchLog


class MeasureOps:
    """Worker's op_time, op_estimate, op_host_run, op_profile and op_ncu_forward."""

    @functools.cached_property
    def launch_log(self) -> LaunchLog:
        """Each forward call's launches: the launch hook feeds it (tools/sandbox/launches.py),
        the trials open its checked calls, the timing requests its timed ones."""
        return LaunchLog()

    def op_time(self, h: dict):
        """One round of the candidate's timing with the measure the judge asked for
        (tools/perf/timer.py): per_call, batched (`reps` calls per sample) or cuda_graph (one
        graph of `reps` calls, captured on the first request and replayed by later ones,
        so its inputs and outputs stay alive here between rounds). With `check_seed`, the
        outputs sent back are the timed mechanism's own on that seed's inputs
        (`fresh_inputs` says which mechanism, or null where they could not be written)."""
        from tools.perf import timer
        measure = h.get("measure", "per_call")
        seed, warmup, iters, reps = int(h["seed"]), int(h["warmup"]), int(h["iters"]), int(h.get("reps", 1))
        check_seed = None if h.get("check_seed") is None else int(h["check_seed"])
        rotate = int(h.get("rotate") or 0)   # fresh input sets a round, one per sample (0: none)
        self.launches.clear()
        self.launch_log.clear("timed")
        call, fresh = None, None
        if measure == "cuda_graph":
            reply = self._time_graph(seed, warmup, iters, reps, rotate)
            if not reply.get("ok") or "capture_error" in reply:
                self.launch_log.clear("timed")   # a capture that failed mid-call: not what any replay runs
                return reply, b""
            last = self._graph[2]
            if check_seed is not None and self._refill(self._graph[3], check_seed):
                self._graph[1].replay()   # the graph's output tensors now hold this replay's results
                fresh = "graph"
        else:
            call, last, inputs = self._timed_forward(seed)
            refilled = []
            before_last = None if check_seed is None else lambda: refilled.append(self._refill(inputs, check_seed))
            turn = rotation(self._inputs, inputs, rotate)
            if measure == "batched":
                samples = timer.time_cuda_batched(call, warmup=warmup, iters=iters, calls_per_sample=reps,
                                                  name=NVTX_RANGE, before_last=before_last, before_each=turn)
                calls = warmup + iters * reps
            else:
                samples = timer.time_cuda(call, warmup=warmup, iters=iters, name=NVTX_RANGE, before_last=before_last,
                                          before_each=turn)
                calls = warmup + iters
            fresh = "call" if refilled == [True] else None
            reply = {"ok": True, "samples_ms": samples, "launches": sum(self.launches.values()),
                     "calls": calls, "rotated": turn.done if turn is not None else 0}
        flat, _, names = flatten_output(last[0])   # exact tensors only are read (tools/sandbox/outputs.py)
        specs, payload = self._pack(flat, h) if h.get("return_output") and all_tensors(names) else ([], b"")
        # after the outputs went: CUPTI's record of calls like the timed ones (tools/sandbox/activity.py)
        activity = record_timed(self, h, call, reps)
        return {**reply, "outputs": specs, "output_types": names, "fresh_inputs": fresh, "activity": activity,
                "launch_signatures": self.launch_log.take()}, payload

    def _time_graph(self, seed: int, warmup: int, iters: int, reps: int, rotate: int = 0) -> dict:
        """Replays of the candidate's graph; captured (with its launches counted) on the
        first call for this seed and reps. A capture that fails is a fact for the judge
        (it times every callable another way), not the candidate's error."""
        from tools.perf import timer
        key = (seed, reps)
        calls = 0
        if self._graph is None or self._graph[0] != key:
            self._drop_graph()
            call, last, inputs = self._timed_forward(seed)
            try:
                graph = timer.capture_cuda_graph(call, warmup=warmup, reps_per_graph=reps)
            except timer.CaptureUnsupported as e:
                # no launch count: a capture that failed mid-call launched fewer kernels than
                # calls were made, which is not skipped work
                return {"ok": True, "capture_error": short(str(e), 500)}
            self._graph = (key, graph, last, inputs)
            calls = warmup + reps   # each captured call must have launched a Triton kernel
        turn = rotation(self._inputs, self._graph[3], rotate)
        samples = self._graph[1].time(iters, name=NVTX_RANGE, before_each=turn)
        return {"ok": True, "samples_ms": samples, "launches": sum(self.launches.values()), "calls": calls,
                "rotated": turn.done if turn is not None else 0}

    def _timed_forward(self, seed: int):
        """(call, box, inputs): call() runs one forward on inputs from `seed` without a
        sync, as a timed call of the launch log, and keeps its output in box[0], for the
        outputs of timed calls to be checked."""
        inputs = self._inputs(seed)
        last = [None]
        log = self.launch_log

        def call():
            log.begin("timed")
            last[0] = self._forward_nosync(inputs)
            log.end()
        return call, last, inputs

    def _refill(self, inputs: list, seed: int) -> bool:
        """Write the inputs of `seed` into `inputs`' own tensors (those the timed callable
        and the graph read), all or nothing: False, `inputs` untouched, when a tensor's
        layout or a non-tensor argument differs, since a graph holds those as captured."""
        import torch
        fresh = self._inputs(seed)

        if not fits(inputs, fresh):
            return False
        with torch.no_grad():
            for a, b in zip(inputs, fresh):
                if isinstance(a, torch.Tensor):
                    a.copy_(b)
        return True

    def _drop_graph(self) -> None:
        if self._graph is not None:
            self._graph[1].close()
            self._graph = None

    def op_estimate(self, h: dict):
        """Rough ms per call of the forward (batched, after a warm-up): sizes `reps`."""
        from tools.perf.timer import estimate_call_ms
        inputs = self._inputs(int(h["seed"]))
        ms = estimate_call_ms(lambda: self._forward_nosync(inputs), calls=int(h.get("calls", 5)))
        return {"ok": True, "call_ms": ms}, b""

    def _forward_nosync(self, inputs):
        import torch
        with torch.no_grad():
            return self.model(*inputs)

    def op_host_prepare(self, h: dict):
        """Inputs and one call for the judge's host-clock runs, before it starts its clock."""
        import torch
        self._host_inputs = self._inputs(int(h["seed"]))
        self._forward_nosync(self._host_inputs)
        torch.cuda.synchronize()
        return {"ok": True}, b""

    def op_host_run(self, h: dict):
        """Back-to-back calls ended by a device sync; the judge times this whole request.
        No GC pass inside it: one costs more than a short forward's whole run."""
        import gc
        import torch
        inputs = self._host_inputs if self._host_inputs is not None else self._inputs(int(h["seed"]))
        was = gc.isenabled()
        gc.disable()
        try:
            torch.cuda.synchronize()
            for _ in range(int(h["iters"])):
                self._forward_nosync(inputs)
            torch.cuda.synchronize()
        finally:
            if was:
                gc.enable()
        return {"ok": True}, b""

    def op_host_done(self, h: dict):
        self._host_inputs = None
        return {"ok": True}, b""

    def op_profile(self, h: dict):
        from tools.perf import profiler
        inputs = self._inputs(int(h["seed"]))
        from tools.perf.timer import nvtx_range
        with nvtx_range(NVTX_RANGE):
            # read after the forwards: a fresh worker (a later profile of a judged candidate)
            # has launched nothing before this request, and only launched kernels are Triton's
            breakdown = profiler.kernel_breakdown(lambda: self._forward_nosync(inputs), (),
                                                  triton_names=lambda: set(self.launches) | set(self.jit_functions),
                                                  iters=int(h.get("iters", 3)))
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
