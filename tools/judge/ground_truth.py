"""Ground truth below Python: the judge's rules on what CUPTI saw the GPU run.

The worker's launch counter and aten counter are Python state that candidate code
shares a process with. CUPTI's records (torch.profiler's CUDA activity, recorded by
tools/sandbox/activity.py around every trial call and a sample of calls made like the
timed ones after each batch of timing rounds) come from the driver. From them this
module decides, for each recorded request:

1) gpu_kernels: every kernel is one of the candidate's own Triton kernels (Triton names
   the CUDA kernel after the @triton.jit function) or PyTorch data movement of the ops
   the aten guard allows (fills, copies, casts, cat, arange; memsets and copies are
   records of their own). Anything else (cuBLAS, cutlass, cuDNN, reductions,
   elementwise compute) is library work: guard:gpu_kernels, flag library_ops, rejected
   unless [guards] allow_library_ops.
2) no_triton_program: each recorded call ran at least one of the candidate's kernels
   (a launch with an empty grid is counted in Python but runs nothing):
   guard:no_triton_program, flag no_triton_kernel.
3) host_transfer: copies between device and host of the inputs' order of size
   (`host_limit_bytes`): guard:host_transfer, flag host_compute.
4) tampering: the worker's set-up probe saw CUPTI record a kernel before any candidate
   code ran, so a later request it cannot record is the candidate's doing:
   guard:gpu_activity, flag tampering.
What was seen goes to checks["gpu_activity"] (kernels with their launches, copies,
calls recorded). Where nothing can be recorded (cpu, the setting off, no CUPTI) that
entry says so in words and nothing is decided here.

Not covered: work queued outside a recorded call (side streams and threads: the static
guards and the host clock), and which Triton kernels the candidate may call (its own
by name; a Triton kernel of a library named like one of them is the static guards').
"""
from __future__ import annotations

import ast
import re

from tools.verdict import Status

# PyTorch kernels that only fill or move memory: torch.zeros/ones/full and NaN-filled
# empty tensors, .contiguous()/.clone()/.to(dtype), torch.cat/stack, torch.arange
DATA_KERNEL = re.compile(r"FillFunctor|direct_copy_kernel|\w*_copy_kernel_cuda|CatArrayBatchedCopy|arange_cuda")
# vendor library kernels whose names are Python identifiers: one of these counts as the
# candidate's only as often as the candidate launched a function of that name
VENDOR_KERNEL = re.compile(r"^(sm\d+_|ampere_|volta_|turing_|maxwell_|hopper_|blackwell_)|cublas|cutlass|cudnn"
                           r"|xmma|nvjet|gemv|gemmk1|splitKreduce", re.IGNORECASE)
# older Triton releases appended the signature: add_kernel_0d1d2d
_SIGNATURE_SUFFIX = re.compile(r"_[0-9][0-9a-z]*$")
HOST_FLOOR_BYTES = 16 << 10   # scalars, shapes and small tables stay well below this
HOST_FRACTION = 0.01          # ... and below 1% of the smaller of a trial's inputs and outputs
_SHOWN = 3                    # kernel names a message names


def host_limit_bytes(input_bytes: int, output_bytes: int) -> int:
    """Host-bound bytes (DtoH + HtoD) one recorded request may copy. Computing on the
    host needs the inputs there and the answer back: at least the smaller of the two
    crosses, so 1% of it is far below a host round trip, and the floor is far above what
    an honest forward moves (an .item(), a shape, a small constant table)."""
    return max(HOST_FLOOR_BYTES, int(HOST_FRACTION * min(input_bytes, output_bytes)))


def probing(evaluation) -> bool:
    """Whether the worker's set-up should probe CUPTI (cuda, and the setting on)."""
    return evaluation.device == "cuda" and evaluation.settings.guards.gpu_ground_truth


def begin(evaluation, probe: dict | None) -> None:
    """After the worker's set-up: record from now on, or say in checks why not."""
    if evaluation.device != "cuda":
        evaluation.checks["gpu_activity"] = "not available on cpu: Triton's interpreter runs no CUDA kernels"
    elif not evaluation.settings.guards.gpu_ground_truth:
        evaluation.checks["gpu_activity"] = "off: [guards] gpu_ground_truth = false"
    elif not probe or not probe.get("ok"):
        why = (probe or {}).get("error", "the worker did not probe")
        evaluation.checks["gpu_activity"] = f"not available: CUPTI recorded nothing in the worker's set-up ({why})"
    else:
        evaluation.checks["gpu_activity"] = {
            "kernels": {}, "copies": [], "calls_profiled": 0, "timed_calls_profiled": 0, "record_s": 0.0,
            "probe": {k: probe.get(k) for k in ("first_session_s", "warm_session_s")}}


def recording(evaluation) -> bool:
    """Whether requests should ask the worker to record (begin found CUPTI working)."""
    return isinstance(evaluation.checks.get("gpu_activity"), dict)


def own_kernel_names(src: str, launched) -> frozenset[str]:
    """The candidate's kernel names: every function it defines (a @triton.jit kernel is
    named after its function), and the launched ones the worker names, identifiers only:
    PyTorch's kernels have C++ names that no Python function can have."""
    names = {n for n in launched if isinstance(n, str) and n.isidentifier()}
    try:
        names |= {n.name for n in ast.walk(ast.parse(src)) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        pass
    return frozenset(names)


def classify(kernels: dict[str, int], own: frozenset[str], launched: dict[str, int]) -> dict[str, str]:
    """name -> "triton" | "data" | "library" for the kernels of one recorded request."""
    kinds = {}
    for name, n in kernels.items():
        base = name if name in own else _SIGNATURE_SUFFIX.sub("", name)
        if base in own and (not VENDOR_KERNEL.search(name) or n <= launched.get(base, 0)):
            kinds[name] = "triton"
        elif DATA_KERNEL.search(name):
            kinds[name] = "data"
        else:
            kinds[name] = "library"
    return kinds


def check(evaluation, reply: dict, where: str, *, timed: bool) -> Status | None:
    """The rules on one reply's `activity` facts; what was seen goes to checks."""
    if not recording(evaluation):
        return None
    seen = evaluation.checks["gpu_activity"]
    facts = reply.get("activity")
    if not isinstance(facts, dict) or not facts.get("ok"):
        why = facts.get("error", "no record") if isinstance(facts, dict) else "the worker sent no record"
        evaluation.diag("guard:gpu_activity", f"{where}: the GPU's activity could not be recorded although it could "
                 f"before the candidate was loaded ({why}): the profiler was tampered with")
        evaluation.flag("tampering")
        return Status.REJECTED
    kernels = {str(k): int(v) for k, v in (facts.get("kernels") or {}).items()}
    launched = {str(k): int(v) for k, v in (facts.get("launches") or {}).items()}
    copies = {str(k): v for k, v in (facts.get("copies") or {}).items() if isinstance(v, dict)}
    calls = int(facts.get("calls", 0))
    _note(seen, kernels, copies, calls, timed, float(facts.get("record_s", 0.0)))
    # 1) every kernel the candidate's or data movement
    named = list(launched) + list(reply["launches"] if isinstance(reply.get("launches"), dict) else [])
    kinds = classify(kernels, own_kernel_names(evaluation.src, named), launched)
    library = sorted((n for n, k in kinds.items() if k == "library"), key=lambda n: -kernels[n])
    if library:
        names = "; ".join(f"{_short(n)} x{kernels[n]}" for n in library[:_SHOWN])
        more = f" and {len(library) - _SHOWN} more" if len(library) > _SHOWN else ""
        msg = (f"{where}: the GPU ran kernels that are neither the candidate's Triton kernels nor PyTorch "
               f"data movement (CUPTI's records): {names}{more}; do that work inside Triton kernels")
        evaluation.flag("library_ops")
        if not evaluation.settings.guards.allow_library_ops:
            evaluation.diag("guard:gpu_kernels", msg)
            return Status.REJECTED
        evaluation.diag("library_ops", msg)
    # 2) a Triton kernel ran on every recorded call
    ran = sum(n for name, n in kernels.items() if kinds[name] == "triton")
    if evaluation.settings.guards.require_triton_launch and ran < calls:
        evaluation.diag("guard:no_triton_program", f"{where}: {ran} of the candidate's Triton kernels ran on the GPU in "
                 f"{calls} recorded calls (a launch with an empty grid runs nothing); the work must be done "
                 "in Triton kernels")
        evaluation.flag("no_triton_kernel")
        return Status.REJECTED
    # 3) no host round trip of the data
    host = {k: int(v.get("bytes", 0)) for k, v in copies.items() if _host_bound(k)}
    fp = evaluation.judge.footprint if evaluation.judge is not None else None
    limit = host_limit_bytes(fp.input_bytes, fp.output_bytes) if fp is not None else HOST_FLOOR_BYTES
    if sum(host.values()) >= limit:
        moved = ", ".join(f"{k} {b} B" for k, b in sorted(host.items()))
        evaluation.diag("guard:host_transfer", f"{where}: the forward copied {sum(host.values())} bytes between the GPU "
                 f"and the host ({moved}; the limit is {limit} B): compute on the GPU, in Triton kernels")
        evaluation.flag("host_compute")
        return Status.REJECTED
    return None


def _host_bound(kind: str) -> bool:
    """DtoH, HtoD (and arrays' AtoH, HtoA); host-to-host and device-to-device are not."""
    return "H" in kind and kind != "HtoH"


def _note(seen: dict, kernels: dict, copies: dict, calls: int, timed: bool, record_s: float) -> None:
    for name, n in kernels.items():
        key = _short(name)
        seen["kernels"][key] = seen["kernels"].get(key, 0) + n
    by_kind = {c["kind"]: c for c in seen["copies"]}
    for kind, v in copies.items():
        c = by_kind.get(kind)
        if c is None:
            c = {"kind": kind, "bytes": 0, "count": 0}
            seen["copies"].append(c)
        c["bytes"] += int(v.get("bytes", 0))
        c["count"] += int(v.get("count", 0))
    seen["timed_calls_profiled" if timed else "calls_profiled"] += calls
    seen["record_s"] = round(seen["record_s"] + record_s, 4)


def _short(name: str) -> str:
    return name if len(name) <= 160 else name[:157] + "..."
