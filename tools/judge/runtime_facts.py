"""What the worker's watch saw during a trial's calls, and what it means for the verdict.

Reads the facts tools/sandbox/watch.py puts on a trial reply and rejects: tampering
with what the judge relies on (`tamper`: a hook or library function replaced, a
profile or trace hook set, gc object walks, a dispatch mode popped, an input's class
reassigned, frames or the judge's code introspected), operators registered with
PyTorch's dispatcher or shared libraries loaded (`op_registrations`: their kernels run
below the aten counter), threads started by the candidate (`threads_started`), tensor
data read on the host by candidate code during the forward (`host_reads`: a Triton
forward never needs to) or around the wrappers at any time (`memory_reads`: a process
memory file opened, an mmap, a tensor or storage serialised; tools/sandbox/detours.py),
a call whose Triton launches ran no program (`programs`: an empty grid runs
nothing), and a call that changed a global random generator's state where Model's
forward does not (`rng_changed`: torch.manual_seed in forward). Hook points the worker
could not install (`watch_gaps`) and launch grids it never saw evaluated are recorded in
the verdict's checks, not judged: a gap is a visible fact, never a silent pass.

Not covered: the aten compute ops and the launch count (tools/judge/trials.py), what the
static guards see in the source (tools/guards/).
"""
from __future__ import annotations

from tools.verdict import Status


def check_runtime_facts(evaluation, reply: dict, i: int) -> Status | None:
    """REJECTED with its guard's diagnostic and flag, or None when trial `i`'s facts are clean."""
    where = f"trial {i + 1}"
    if reply.get("watch_gaps"):
        evaluation.checks.setdefault("runtime_watch_gaps", list(reply["watch_gaps"]))
    tamper = [str(t) for t in reply.get("tamper") or []]
    if tamper:
        evaluation.checks["tamper"] = tamper
        evaluation.diag("guard:tampering", f"{where}: the candidate changed what the evaluator relies on "
                 f"({'; '.join(tamper[:4])}{'; ...' if len(tamper) > 4 else ''}); leave torch, Triton, "
                 "the interpreter's hooks and the harness unchanged")
        evaluation.flag("tampering")
        evaluation.flag("monkeypatch")   # what the static guards call the same tricks when they see them
        return Status.REJECTED
    registered = [str(r) for r in reply.get("op_registrations") or []]
    if registered:
        evaluation.checks["op_registrations"] = registered
        evaluation.diag("guard:op_registration", f"{where}: the candidate registered operators with PyTorch "
                 f"({'; '.join(registered[:4])}{'; ...' if len(registered) > 4 else ''}); a kernel registered "
                 "so runs below the op counter, in any namespace. Call your Triton kernels directly and "
                 "register nothing")
        evaluation.flag("library_ops")
        return Status.REJECTED
    threads = int(reply.get("threads_started") or 0)
    if threads:
        evaluation.diag("guard:concurrency", f"{where}: the candidate started {threads} thread(s); do all work in the "
                 "forward call, in Triton kernels")
        evaluation.flag("concurrency")
        return Status.REJECTED
    around = [str(r) for r in reply.get("memory_reads") or []]
    if around:
        evaluation.checks["memory_reads"] = around
        evaluation.diag("guard:host_transfer", f"{where}: candidate code reached tensor memory on the host "
                 f"({'; '.join(around[:4])}{'; ...' if len(around) > 4 else ''}); compute in Triton kernels "
                 "on the tensors' device, and read no process memory, mapping or serialised tensor")
        evaluation.flag("host_compute")
        if any(r.startswith("open ") for r in around):
            evaluation.flag("filesystem")
        return Status.REJECTED
    reads = {str(k): int(v) for k, v in (reply.get("host_reads") or {}).items()}
    if reads:
        evaluation.checks["host_reads"] = reads
        what = ", ".join(f"{k}×{v}" for k, v in sorted(reads.items(), key=lambda kv: -kv[1])[:5])
        evaluation.diag("guard:host_transfer", f"{where}: the forward read tensor data on the host ({what}); "
                 "compute in Triton kernels on the tensors' device, never in Python or NumPy")
        evaluation.flag("host_compute")
        return Status.REJECTED
    if reply.get("rng_changed") and not getattr(evaluation.judge, "reference_facts", {}).get("rng_changed"):
        evaluation.diag("guard:global_state", f"{where}: the forward changed the global random state "
                 "(torch.manual_seed, a generator's set_state or a random draw), which Model's forward leaves as "
                 "it is: a caller's random numbers after a call would differ. Leave the global generators alone")
        evaluation.flag("tampering")
        return Status.REJECTED
    programs = reply.get("programs")
    if programs is not None:
        evaluation.checks.setdefault("triton_programs", []).append(programs)
        if reply.get("launch_grids_unseen"):
            evaluation.checks["launch_grids_unseen"] = reply["launch_grids_unseen"]
        empty = [k for k, n in enumerate(programs) if n == 0]
        if empty and evaluation.settings.guards.require_triton_launch:
            call = f"call {empty[0] + 1} of {where}" if len(programs) > 1 else where
            evaluation.diag("guard:no_triton_program", f"{call}: the forward's Triton launches ran no program (an "
                     "empty grid runs nothing); the work must be done in Triton kernels that run")
            evaluation.flag("no_triton_kernel")
            return Status.REJECTED
    return None
