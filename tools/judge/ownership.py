"""Who wrote the outputs, and whose memory they are in: the judge's rules.

Covers two rules every otherwise correct candidate must meet, on cpu and on cuda (and
`shared_outputs`: two outputs sharing memory where Model's do not are `incorrect`):

1) Every output value is computed by the candidate's own Triton kernels. Before one
   trial's calls (which trial is derived from the session's secret seeds), the worker
   runs the forward once more with every Triton launch skipped and allocations NaN-filled
   (tools/sandbox/ownership.py `op_triton_off`). An output element that is then still
   equal to the reference (within the trial's tolerance; elements the reference has at
   0, non-finite or an integer type's max are not counted: a buffer zero-filled, or left
   as the allocator's poison fills it, is not an answer; a bool output counts as right
   only as far as it is right on both values, which no fill is) was made without them:
   PyTorch copy, index or fill kernels moving the input into place, a view of the
   input, a constant. Such a candidate is
   `rejected` (guard:output_writer, flag library_ops; no_triton_kernel too when no
   counted element needed a kernel at all). PyTorch may still prepare buffers and
   inputs, and copy what a kernel computed (the copy is wrong while the kernel is off).
2) Outputs own their memory: no output shares storage with an input, a parameter or
   buffer, or an earlier call's output still alive (guard:output_alias; flag
   no_triton_kernel, or caching for an earlier output), unless the reference's own
   output shares memory with its input or a parameter: then the problem has no kernel
   work to do, which `checks.output_ownership` says, and aliasing is not held against
   the candidate.
Both are decided after the trials passed, so a wrong answer stays `incorrect`.

Not covered: an output that PyTorch filled with the answer and a Triton kernel rewrote
in place with the same values counts as PyTorch's (write outputs into a fresh
torch.empty); a candidate that detects the skipped launches (README "Trust").
"""
from __future__ import annotations

import hashlib

from tools.sandbox import channel
from tools.verdict import Status

MIN_SHARE = 1e-3   # counted elements right without the kernels, above this share: not the kernels' work


def off_trial(seeds: list[int]) -> int:
    """Which trial's inputs the kernel-less forward runs on: a function of the secret seeds."""
    return int.from_bytes(hashlib.sha256(repr(list(seeds)).encode()).digest()[:4], "little") % len(seeds)


def run_without_triton(evaluation, worker, seed: int, poison: list, dev, ref: list | None, timeout_s: float) -> None:
    """The forward on the inputs of `seed` with no Triton launch; records what it finds in
    `evaluation.checks["output_writers"]` (the decision is `decide`'s)."""
    from tools.judge.numerics import tolerances
    facts: dict = {}
    evaluation.checks["output_writers"] = facts
    # a forward that hangs here hangs in the trial too: WorkerTimeout and WorkerDied are the caller's
    reply, payload = worker.request({"op": "triton_off", "seed": seed, "poison": poison,
                                     "staged": evaluation.staged is not None}, timeout_s)
    if not reply.get("ok") or reply.get("inconclusive"):
        facts["inconclusive"] = reply.get("inconclusive") or reply.get("message", "the worker failed")[:200]
        return
    try:
        outs = channel.unpack_tensors(reply.get("outputs", []), payload, dev, evaluation.staged)
    except channel.ProtocolError as e:
        facts["inconclusive"] = f"malformed outputs: {e}"
        return
    ref = ref if ref is not None else evaluation.judge.reference(seed)
    facts["skipped_launches"] = int(reply.get("skipped_launches") or 0)
    per_output = []
    for o, r in zip(outs, ref):
        if o.shape != r.shape or o.dtype != r.dtype:
            per_output.append(None)   # the trial says what is wrong with it
            continue
        atol, rtol, _ = tolerances(r.dtype, evaluation.settings.test)
        per_output.append(right_without_kernels(o, r, atol, rtol))
    facts["outputs"] = per_output
    del outs


def right_without_kernels(out, ref, atol: float, rtol: float) -> dict:
    """How many counted elements of `out` equal `ref` (see the module doc)."""
    import torch
    if ref.dtype == torch.bool:
        return _bool_right(out, ref)
    if ref.is_complex():   # each real component as a float
        out, ref = torch.view_as_real(out.resolve_conj()), torch.view_as_real(ref.resolve_conj())
    if ref.is_floating_point() and ref.element_size() == 1:   # fp8: no isfinite / isclose of its own
        out, ref = out.float(), ref.float()
    counted = ref != 0
    if ref.is_floating_point():
        counted &= torch.isfinite(ref)
        right = counted & torch.isclose(out, ref, atol=atol, rtol=rtol)
    else:   # nor its max: what an unwritten integer buffer holds (outputs.py), by chance a byte's answer
        counted &= ref != torch.iinfo(ref.dtype).max
        right = counted & (out == ref)
    return {"counted": int(counted.sum()), "right": int(right.sum())}


def shared_outputs(evaluation, pairs: list, reference_pairs: list) -> Status | None:
    """INCORRECT when two outputs share memory where Model's do not (`return out, out` for
    two results Model computes apart): a caller writing one would change the other."""
    known = {tuple(q) for q in reference_pairs}
    extra = [p for p in pairs if tuple(p) not in known]
    if not extra:
        return None
    i, j = extra[0]
    evaluation.diag("output_alias", f"outputs {i} and {j} share memory, where Model's are tensors of their "
                    "own: a caller writing one would change the other; write each output into its own buffer")
    return Status.INCORRECT


def decide(evaluation, reference_aliases: str | None) -> Status | None:
    """REJECTED when an output is not the kernels' work or not its own memory; else None."""
    aliases = evaluation.checks.get("output_aliases") or []
    if reference_aliases:
        evaluation.checks["output_ownership"] = (f"in the reference, {reference_aliases}: the problem has no kernel "
                                          "work to do, and an output sharing memory is not held against it")
    elif aliases:
        earlier = any("earlier call" in a for a in aliases)
        evaluation.diag("guard:output_alias", f"{aliases[0]}; an output must be a new tensor the forward's kernels write "
                 "(return a buffer from torch.empty, not a view of an input, a parameter or a kept result)")
        evaluation.flag("caching" if earlier else "no_triton_kernel")
        return Status.REJECTED
    writers = evaluation.checks.get("output_writers") or {}
    made = [o for o in writers.get("outputs") or [] if o and o["counted"]]
    if not made or reference_aliases:
        return None
    counted, right = sum(o["counted"] for o in made), sum(o["right"] for o in made)
    if right <= MIN_SHARE * counted:
        return None
    share = right / counted
    evaluation.diag("guard:output_writer", f"with every Triton launch of the candidate skipped, {right} of {counted} "
             f"output values ({share:.0%}) were still right: PyTorch (a copy, index or fill, or a view) made them, "
             "not the candidate's kernels. Every output value must be written by a @triton.jit kernel; PyTorch "
             "may only prepare buffers and inputs")
    evaluation.flag("library_ops")
    if right == counted:
        evaluation.flag("no_triton_kernel")
    return Status.REJECTED


def _bool_right(out, ref) -> dict:
    """A bool output: a buffer filled with one value (zeroed, or the allocator's poison,
    True) is right wherever the reference holds that value, so each value's elements are
    counted apart and the output is as right as its less right value: only a mask that
    is the answer on both values, as PyTorch's comparison or copy makes it, counts."""
    same = out == ref
    shares = []
    for where in (ref, ~ref):
        n = int(where.sum())
        if n == 0:
            return {"counted": 0, "right": 0}   # one value only: a fill of it is the answer
        shares.append(int((where & same).sum()) / n)
    return {"counted": ref.numel(), "right": round(min(shares) * ref.numel())}
