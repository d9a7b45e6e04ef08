"""GPU memory in the judge: what a session keeps, and whose an allocation failure is.

KernelBench-size problems (inputs of 1-17 GB) fit only if no process holds a private
copy of what it can drop. A session is *lean* when one trial's inputs and outputs
together reach `[eval] lean_memory_mib`; then (tools/judge/session.py, time_phase.py,
the worker's lean mode in tools/sandbox/worker.py):

- the judge never holds the problem's inputs while the candidate's worker runs: it
  makes them for a reference or a baseline round, and drops them, and returns its
  allocator's cache to the driver (`release`), before the worker is asked again;
- the worker likewise drops its inputs and empties its cache after every request;
- reference outputs are not cached for the session (only the one in use), and the
  torch.compile baseline is compiled under the candidate's exclusive hold of the GPU,
  not in the background beside another candidate's trials;
- one candidate holds the GPU at a time, from its fork to its worker's exit.

Smaller sessions keep their inputs and references (a few hundred MiB at most) and
overlap candidates' compile phases, as before: there the speed matters, not the bytes.

An allocation failure is the candidate's `runtime_error` only when its own process
asked for more than the reference needs (`Footprint.candidate_allowance_bytes`);
otherwise it is the judge's shortage (`JudgeOutOfMemory`): the session relieves memory
(idle sessions of the judge service evicted, caches emptied) and judges again once,
then gives up with exit 3. Never a verdict.

Does not: measure peaks for benchmarks (benchmarks/kb_memory.py samples NVML), or
limit what a candidate allocates (its process may use the whole GPU; the allowance
only decides whose fault a failure was).
"""
from __future__ import annotations

import gc
import re
from dataclasses import dataclass

from tools.errors import EvaluatorError

GIB = float(1 << 30)
ALLOWANCE_FACTOR = 1.3          # the bound on the judge's peak over a plain harness
ALLOWANCE_SLACK_BYTES = 1 << 30  # a candidate's CUDA context, Triton's launcher, rounding
COPY_REFILL_MAX_BYTES = 256 << 20   # a second set of inputs this small is always fine


class JudgeOutOfMemory(EvaluatorError):
    """The judge's side (or another session, or another process) left too little GPU
    memory for a step that should have fitted: not the candidate's fault."""


@dataclass(frozen=True)
class Footprint:
    """What one trial of the problem needs, measured on the first reference."""
    input_bytes: int            # the inputs of one trial
    output_bytes: int           # the reference's outputs of one trial
    reference_peak_bytes: int   # allocator peak of one reference forward, inputs included (0 on cpu)
    outputs: tuple = ()         # ({"dtype", "shape"}, ...) of the reference's outputs

    @property
    def trial_bytes(self) -> int:
        return self.input_bytes + self.output_bytes

    def candidate_allowance_bytes(self) -> int:
        """What the floor (inputs, a forward, a second output) allows the candidate's
        process before an allocation failure counts as its own fault."""
        floor = max(self.reference_peak_bytes, self.trial_bytes) + self.output_bytes
        return int(ALLOWANCE_FACTOR * floor) + ALLOWANCE_SLACK_BYTES

    def refill(self, dev: str) -> str:
        """How a lean trial's second call gets new values in the first call's storage:
        "copy" (made apart, then copied in: a second set of inputs for a moment) where
        that set is small beside the outputs the trial holds anyway, or on cpu; else
        "realloc" (freed and made again: the allocator hands the same blocks back,
        which the worker checks and reports as `same_storage`)."""
        small = self.input_bytes <= max(self.output_bytes, COPY_REFILL_MAX_BYTES)
        return "copy" if not dev.startswith("cuda") or small else "realloc"

    def to_json(self) -> dict:
        return {"input_gib": round(self.input_bytes / GIB, 3), "output_gib": round(self.output_bytes / GIB, 3),
                "reference_peak_gib": round(self.reference_peak_bytes / GIB, 3),
                "candidate_allowance_gib": round(self.candidate_allowance_bytes() / GIB, 3)}


def measure(sizes: dict, out: list) -> Footprint:
    """The footprint of a trial from compute_reference's `sizes` and its outputs."""
    specs = tuple({"dtype": str(o.dtype).removeprefix("torch."), "shape": list(o.shape)} for o in out)
    return Footprint(sizes["input_bytes"], tensor_bytes(out), sizes["peak_bytes"], specs)


def tensor_bytes(values) -> int:
    import torch
    return sum(v.numel() * v.element_size() for v in values if isinstance(v, torch.Tensor))


def release(dev: str, collect: bool = False) -> None:
    """Give the allocator's unused cache back to the driver, so another process (the
    worker, the next session) can have it. Costs a device sync; no-op on cpu.
    `collect`: a GC pass first (tens of ms with torch loaded), for when tensors may
    hide in reference cycles (a failed step's traceback frames, a closed session).
    Both wait for a CUDA-graph capture in flight: each would break it (a freed Triton
    module, the cache's frees; tools/perf/capture_guard.py)."""
    if not dev.startswith("cuda"):
        return
    import torch
    from tools.perf.capture_guard import gpu_work
    with gpu_work():
        if collect:
            gc.collect()
        torch.cuda.empty_cache()


def is_oom(e: BaseException) -> bool:
    import torch
    oom = getattr(torch, "OutOfMemoryError", torch.cuda.OutOfMemoryError)
    return isinstance(e, oom) or (isinstance(e, RuntimeError) and "out of memory" in str(e).lower())


def reply_is_oom(reply: dict) -> bool:
    """A worker's error reply that reports a GPU allocation failure (not Triton's
    shared-memory OutOfResources, which is a compile limit of the kernel)."""
    if reply.get("ok", True) or reply.get("kind") == "triton_compile":
        return False
    return reply.get("error_type") == "OutOfMemoryError" or "out of memory" in str(reply.get("message", "")).lower()


_TRIED = re.compile(r"[Tt]ried to allocate ([\d.]+) (B|KiB|MiB|GiB|TiB)")
_UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}


def tried_bytes(message: str) -> int:
    """The size of the allocation torch's out-of-memory message says failed (0 if none)."""
    m = _TRIED.search(message or "")
    return int(float(m.group(1)) * _UNITS[m.group(2)]) if m else 0


def process_gpu_bytes(gpu_index: int, pid: int) -> int | None:
    """GPU memory the driver says process `pid` holds (NVML), or None where NVML cannot
    tell (no pynvml, a container's other pid namespace). Read by the judge, not
    reported by the candidate."""
    try:
        import pynvml as nv
        nv.nvmlInit()
        try:
            h = nv.nvmlDeviceGetHandleByIndex(gpu_index)
            for p in nv.nvmlDeviceGetComputeRunningProcesses(h):
                if p.pid == pid and p.usedGpuMemory is not None:
                    return int(p.usedGpuMemory)
        finally:
            nv.nvmlShutdown()
    except Exception:   # noqa: BLE001 - NVML is a cross-check here, never required
        return None
    return None


def free_bytes(dev: str) -> int | None:
    if not dev.startswith("cuda"):
        return None
    import torch
    return int(torch.cuda.mem_get_info(torch.device(dev))[0])


def attribute_candidate_oom(evaluation, reply: dict) -> None:
    """A worker's out-of-memory reply: the candidate's own fault (return; the caller
    records its runtime_error) when its process asked for more than its allowance,
    else raise JudgeOutOfMemory (tools/judge/pipeline.py relieves memory and judges
    the candidate again). The evidence goes into checks["oom"] either way."""
    judge = evaluation.judge
    fp: Footprint | None = getattr(judge, "footprint", None)
    held_reported = int(reply.get("gpu_reserved_bytes") or 0)
    held_driver = process_gpu_bytes(evaluation.gpu_index, int(evaluation.checks.get("worker_pid") or -1))
    held = max(held_reported, held_driver or 0)
    asked = held + tried_bytes(str(reply.get("message", "")))
    free = free_bytes(judge.dev)
    evidence = {"candidate_held_gib": round(held / GIB, 3), "candidate_asked_gib": round(asked / GIB, 3),
                "free_gib": round(free / GIB, 3) if free is not None else None,
                "nvml_saw_worker": held_driver is not None}
    if fp is not None:
        evidence["allowance_gib"] = round(fp.candidate_allowance_bytes() / GIB, 3)
    evaluation.checks["oom"] = evidence
    if fp is None or asked > fp.candidate_allowance_bytes():
        evaluation.diag("out_of_memory", f"the candidate's process asked for {asked / GIB:.2f} GiB of GPU memory"
                 + (f", more than the {fp.candidate_allowance_bytes() / GIB:.2f} GiB a forward of the "
                    f"reference needs (with a second output, x{ALLOWANCE_FACTOR:g})" if fp is not None else "")
                 + ": allocate less (reuse buffers, free temporaries)")
        return
    raise JudgeOutOfMemory(
        f"the GPU ran out of memory while the candidate held only {held / GIB:.2f} GiB (it may use up to "
        f"{fp.candidate_allowance_bytes() / GIB:.2f} GiB for this problem); "
        f"{(free or 0) / GIB:.2f} GiB free: other sessions or processes hold the rest")


def retry_oom(judge, what: str, fn):
    """fn() for the judge's own step `what`; on an allocation failure relieve memory
    (judge.relieve_memory: idle sessions evicted, caches emptied) and try once more;
    a second failure is the evaluator's (exit 3), never the candidate's verdict."""
    try:
        return fn()
    except Exception as e:   # noqa: BLE001 - only allocation failures are handled here
        if not is_oom(e):
            raise
    judge.relieve_memory()
    try:
        return fn()
    except Exception as e:   # noqa: BLE001
        if not is_oom(e):
            raise
        free = free_bytes(judge.dev)
        raise JudgeOutOfMemory(f"{what} ran out of GPU memory in the judge"
                               + (f" ({free / GIB:.2f} GiB free after evicting idle sessions)"
                                  if free is not None else "") + f": {str(e).splitlines()[0][:300]}") from None


def note_peaks(evaluation, worker, phase: str) -> None:
    """checks["memory"]["peaks"][phase]: the most GPU memory the judge's allocator and
    the worker's held during `phase` (GiB, reserved; each process's own figure), then
    both counters start again. Where a peak goes, for users and for benchmarks."""
    if evaluation.device != "cuda":
        return
    import torch
    judge_bytes = torch.cuda.max_memory_reserved(evaluation.judge.dev)
    torch.cuda.reset_peak_memory_stats(evaluation.judge.dev)
    worker_bytes = getattr(worker, "gpu_peak_bytes", 0)
    worker.gpu_peak_bytes = 0
    evaluation.memory_peaks[phase] = {"judge_gib": round(judge_bytes / GIB, 3), "worker_gib": round(worker_bytes / GIB, 3)}


def forget_compiled(model) -> None:
    """Drop Dynamo's cache entries for `model`'s forward (a closed session's torch.compile
    baseline; each problem module's Model has code of its own, so no other session's
    entry goes). Best effort: the entries only hold memory, never change a verdict."""
    import sys
    dynamo = sys.modules.get("torch._dynamo")   # never imported: nothing was compiled
    if dynamo is None:
        return
    try:
        reset = getattr(dynamo, "reset_code", None)
        if reset is not None:
            reset(type(model).forward.__code__)
    except Exception:   # noqa: BLE001 - an older torch without it keeps the entry
        pass
