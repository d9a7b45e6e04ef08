"""What was timed is what was checked: the judge's rules for the candidate's timed calls.

The trials check outputs; the time phase times other calls of the same forward (the
timer's, and the ones captured into a CUDA graph, which every replay repeats). A
forward that tells the two apart (it is being captured, a call counter, the timer on
its stack) could check honestly and time something else. Two rules close that:

1) `check`: every timed call launched what a checked call launched. The worker records
   each call's Triton launches as (kernel name, compiled kernel, grid as Triton
   evaluated it) (tools/sandbox/signatures.py); a call's signature is that multiset.
   A timed call whose signature no checked call had is rejected: guard:timed_path,
   flag tampering, and no_triton_kernel where it ran fewer programs of the candidate's
   kernels than every checked call.
2) `fresh_seed`: the outputs of the timed mechanism are checked on inputs the candidate
   has never seen, a new secret seed per check, written into the timed inputs before
   the last sample or into the graph's own input tensors before one more replay
   (tools/sandbox/measure_ops.py); trials.recheck_timed_outputs compares them with the
   reference of that seed (`fresh_reference`, not kept: it is used once).

Honest differences rule 1 allows: any checked call's signature will do, so a first call
that autotunes (Triton's benchmark launches of every config) or runs a one-off set-up
kernel, or compiles, differs from the later calls without harm; the autotuner's choice,
and a grid computed from it, stay fixed after its first call, and every call has inputs
of the same shapes, so an honest forward's timed calls repeat a checked call exactly.

Not covered: launches that bypass the launch hook (CUPTI's record of the timed calls,
tools/judge/ground_truth.py), what the kernels compute (rule 2), and a record the
candidate edited in its own process (README "Sandbox"). Rule 2 does not apply where the
reference keeps state between calls (tools/judge/stateful.py): a timed call's
outputs depend on every call before it; rule 1 and CUPTI's record still do.
"""
from __future__ import annotations

import math
import secrets
from dataclasses import dataclass

from tools.judge import memory
from tools.judge.reference import compute_reference
from tools.verdict import Status

_SHOWN = 3   # launches a message names on each side


@dataclass(frozen=True)
class PathDifference:
    """Timed calls whose launches no checked call made."""
    calls: int                  # timed calls with such a signature
    of_calls: int               # timed calls recorded
    message: str                # what they launched beside the nearest checked call
    fewer_programs: bool        # they ran fewer programs than every checked call


def parse(rows) -> dict[tuple, int]:
    """A reply's [[signature, calls], ...] as {signature: calls}, a signature being the
    sorted ((name, hash, grid), launches) pairs; ValueError when it is malformed."""
    out: dict[tuple, int] = {}
    try:
        for sig_rows, calls in rows:
            launches = []
            for name, binary, dims, n in sig_rows:
                grid = tuple(int(d) for d in dims) if isinstance(dims, list) else str(dims)
                launches.append(((str(name), None if binary is None else str(binary), grid), int(n)))
            sig = tuple(sorted(launches, key=lambda kv: (kv[0][0], kv[0][1] or "", repr(kv[0][2]))))
            out[sig] = out.get(sig, 0) + int(calls)
    except (TypeError, ValueError) as e:
        raise ValueError(f"malformed launch signatures: {e}") from e
    return out


def programs(sig: tuple) -> int:
    """Programs the call's launches ran (a grid that is not plain ints counts none)."""
    return sum(n * math.prod(grid) for (_, _, grid), n in sig if isinstance(grid, tuple))


def difference(checked: dict[tuple, int], timed: dict[tuple, int], unkept: int = 0) -> PathDifference | None:
    """Rule 1 on one request's record: None when every timed signature is a checked one."""
    other = {sig: n for sig, n in timed.items() if sig not in checked}
    total = sum(timed.values()) + unkept
    if not other and not unkept:
        return None
    if not other:
        return PathDifference(unkept, total, "sets of kernels beyond the distinct ones the worker's record "
                              "keeps (an honest forward has one or two)", False)
    sig = max(other, key=lambda s: other[s])
    near = min(checked, key=lambda c: (_distance(c, sig), -checked[c]))
    fewer = programs(sig) < min(programs(c) for c in checked)
    return PathDifference(sum(other.values()) + unkept, total, _describe(near, sig), fewer)


def _distance(a: tuple, b: tuple) -> int:
    da, db = dict(a), dict(b)
    return sum(abs(da.get(k, 0) - db.get(k, 0)) for k in set(da) | set(db))


def _describe(checked: tuple, timed: tuple) -> str:
    """The launches only the timed call made, and those only the checked call made."""
    dc, dt = dict(checked), dict(timed)
    extra = {k: n - dc.get(k, 0) for k, n in dt.items() if n > dc.get(k, 0)}
    missing = {k: n - dt.get(k, 0) for k, n in dc.items() if n > dt.get(k, 0)}
    plain = {(k[0], k[2]) for k in extra} == {(k[0], k[2]) for k in missing}
    if extra and plain:   # the same names and grids: other compiled kernels
        names = ", ".join(sorted({k[0] for k in extra}))
        return (f"{names} compiled differently (other constexpr arguments or launch options: kernel "
                f"{_hashes(extra)} where the checked calls ran {_hashes(missing)})")
    return f"{_launches(extra)} where a checked call launched {_launches(missing)}"


def _launches(part: dict) -> str:
    if not part:
        return "nothing more"
    rows = sorted(part.items(), key=lambda kv: -kv[1])
    text = ", ".join(f"{n} x {name} on grid {_grid(grid)}" for (name, _, grid), n in rows[:_SHOWN])
    return text + (f" and {len(rows) - _SHOWN} more" if len(rows) > _SHOWN else "")


def _grid(grid) -> str:
    return "x".join(str(d) for d in grid) if isinstance(grid, tuple) else str(grid)


def _hashes(part: dict) -> str:
    return ", ".join(sorted({str(binary) for _, binary, _ in part}))


def check(evaluation, reply: dict, where: str) -> Status | None:
    """Rule 1 on a time reply; what was compared goes to checks["timed_path"]."""
    record = reply.get("launch_signatures")
    if not isinstance(record, dict) or not record.get("attached"):
        evaluation.checks.setdefault("timed_path", "not recorded: the worker's launch hook does not feed its launch log")
        return None
    try:
        checked, timed = parse(record.get("checked") or []), parse(record.get("timed") or [])
        unkept = int((record.get("unkept") or {}).get("timed", 0))
    except (ValueError, TypeError, AttributeError) as e:
        evaluation.diag("protocol", f"{where}: the worker sent a malformed launch record: {e}")
        evaluation.flag("tampering")
        return Status.REJECTED
    if not checked:
        evaluation.checks.setdefault("timed_path", "not compared: no checked call's launches were recorded")
        return None
    seen = evaluation.checks.get("timed_path")
    seen = seen if isinstance(seen, dict) else {"checked_signatures": 0, "timed_calls_compared": 0}
    seen["checked_signatures"] = len(checked)
    seen["timed_calls_compared"] += sum(timed.values()) + unkept
    evaluation.checks["timed_path"] = seen
    found = difference(checked, timed, unkept)
    if found is None:
        return None
    evaluation.diag("guard:timed_path", f"{where}: {found.calls} of {found.of_calls} timed calls launched {found.message}: "
             "what was timed is not what was checked (a forward that changes its kernels or grids when it is "
             "captured in a CUDA graph or timed); launch the same kernels on every call")
    evaluation.flag("tampering")
    if found.fewer_programs:
        evaluation.flag("no_triton_kernel")
    return Status.REJECTED


def fresh_seed(evaluation, seed: int) -> int | None:
    """A new secret seed for the timed outputs' check (none of the trials', not the
    timing seed), or None where the worker may not hold a second set of inputs for a
    moment (a lean session whose inputs are large: tools/judge/memory.py's refill)."""
    judge = evaluation.judge
    if getattr(judge, "lean", False) and judge.footprint is not None and judge.footprint.refill(judge.dev) != "copy":
        return None
    taken = {seed, *getattr(judge, "seeds", ())}
    while True:
        fresh = secrets.randbelow(2**31 - 1)
        if fresh not in taken:
            return fresh


def fresh_reference(evaluation, seed: int) -> list:
    """The reference outputs for a check seed, computed and not kept (a session keeps
    the trial seeds' references only)."""
    judge, s = evaluation.judge, evaluation.settings.test
    try:
        return memory.retry_oom(judge, "the reference for the timed outputs' new inputs", lambda: compute_reference(
            judge.reference_model(), evaluation.problem.module, seed, judge.dev, init_seed=s.init_seed,
            precision=s.precision, module_mode=s.module_mode, timeout_s=s.reference_timeout_s))
    finally:
        if judge.lean:
            memory.release(judge.dev)
