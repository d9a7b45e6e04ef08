"""Step 4) test: the candidate's outputs on fresh secret inputs against the reference.

Covers every trial (a repeated call in the first), the runtime guards a trial shows (a
Triton kernel launched, the watch's facts in tools/judge/runtime_facts.py, no PyTorch
compute ops, inputs unmutated, and what CUPTI saw the GPU run: tools/judge/ground_truth.py),
the outputs' type, device, shape and dtype, the numeric comparison (tools/judge/numerics.py)
and its diagnosis; `recheck_timed_outputs` checks the outputs of timed calls the same way.
"""
from __future__ import annotations

from tools.judge import ground_truth, ownership, state_check
from tools.judge.compile_phase import compile_specs
from tools.judge.memory import release
from tools.judge.record import died, error_diag, health
from tools.judge.runtime_facts import check_runtime_facts
from tools.sandbox import channel, isolation
from tools.sandbox.outputs import TENSOR
from tools.verdict import Status


def run_trials(evaluation, worker, ref_model, seeds, dev, first_ref: list) -> Status | None:
    from tools.judge.accuracy import decide, measured
    from tools.judge.numerics import compare, tolerances
    s = evaluation.settings
    policy = s.test.precision
    judge = evaluation.judge
    lean = judge.lean   # tools/judge/memory.py: references made after the worker's calls, one at a time
    # a reference that keeps state between calls (tools/judge/stateful.py call_plan): a fresh
    # ModelNew, called as the reference was, each call against the reference's at its place
    stateful = getattr(judge, "sequence", None) is not None
    if stateful:
        status = _fresh_model(evaluation, worker)
        if status is not None:
            return status
    outputs = list(judge.footprint.outputs) if judge.footprint is not None else []
    comparisons = []
    for i, seed in enumerate(seeds):
        # lean: the second call sees the next trial's inputs in the first call's storage
        seed2 = seeds[(i + 1) % len(seeds)] if lean else seed
        if stateful:   # the shared reference model's state has moved on: never judge.reference here
            refs = [judge.sequence.outputs[_position(i, 0)]]
        else:
            refs = None if lean else [first_ref if i == 0 else judge.reference(seed)]
        poison = outputs if lean else [{"dtype": str(r.dtype).removeprefix("torch."), "shape": list(r.shape)}
                                       for r in refs[0]]
        n_out = len(poison)
        timeout = s.test.compile_timeout_s if i == 0 else s.test.run_timeout_s
        if i == ownership.off_trial(seeds) and not stateful:   # who writes the outputs: the forward without its kernels
            try:
                ownership.run_without_triton(evaluation, worker, seed, poison, dev, None if lean else refs[0], timeout)
            except isolation.WorkerTimeout:
                return _timed_out(evaluation, worker, i, timeout)
            except isolation.WorkerDied:
                return died(evaluation, worker, f"trial {i + 1}, the forward with its Triton launches skipped")
            if lean:
                release(dev)
        try:
            reply, payload = worker.request({"op": "trial", "seed": seed, "poison": poison, "refill_seed": seed2,
                                             "refill": judge.footprint.refill(dev) if lean else None,
                                             "repeat": lean or i == 0, "staged": evaluation.staged is not None,
                                             "activity": ground_truth.recording(evaluation)},
                                            timeout)
        except isolation.WorkerTimeout:
            return _timed_out(evaluation, worker, i, timeout)
        except isolation.WorkerDied:
            return died(evaluation, worker, f"trial {i + 1}")
        if not reply.get("ok"):
            failed = reply.get("failed_launch")
            if failed and reply.get("kind") != "triton_compile":
                # the interpreter reports GPU compile errors as runtime errors: ask a compiler
                for k in compile_specs(evaluation, [failed]):
                    if not k.get("ok"):
                        reply = {**reply, "kind": "triton_compile", "message": k.get("message", ""),
                                 "error_type": k.get("error_type", "CompilationError"),
                                 "line": k.get("line") or reply.get("line"),
                                 "source_line": k.get("source_line") or reply.get("source_line")}
            error_diag(evaluation, reply)
            return Status.COMPILE_ERROR if reply.get("kind") == "triton_compile" else Status.RUNTIME_ERROR
        launches = reply.get("launches", {})
        evaluation.checks.setdefault("triton_launches", launches)
        evaluation.checks.setdefault("output_aliases", []).extend(reply.get("aliases") or [])
        status = ownership.shared_outputs(evaluation, reply.get("output_pairs") or [],
                                          getattr(judge, "reference_facts", {}).get("output_pairs") or [])
        if status is not None:
            return status
        if s.guards.require_triton_launch and sum(launches.values()) == 0:
            evaluation.diag("guard:no_triton_launch", f"trial {i + 1}: forward launched no @triton.jit "
                     "kernel; the work must be done in Triton kernels")
            evaluation.flag("no_triton_kernel")
            return Status.REJECTED
        status = check_runtime_facts(evaluation, reply, i)   # the worker's watch: tampering, threads, host reads, programs
        if status is not None:
            return status
        compute = reply.get("aten_compute") or {}
        if compute:
            ops = ", ".join(f"{k}×{v}" for k, v in sorted(compute.items(), key=lambda kv: -kv[1])[:5])
            evaluation.checks["aten_compute"] = compute
            evaluation.flag("library_ops")
            msg = (f"the forward runs PyTorch compute ops ({ops}) besides its Triton kernels; "
                   "do that work inside the kernels")
            if not s.guards.allow_library_ops:
                evaluation.diag("guard:library_ops", msg)
                return Status.REJECTED
            evaluation.diag("library_ops", msg)
        if reply.get("inputs_mutated"):
            idx = ", ".join(f"#{k}" for k in reply["inputs_mutated"])
            evaluation.diag("input_mutated", f"forward modified input {idx} in place; inputs must be left unchanged")
            return Status.INCORRECT
        calls = 2 if lean or i == 0 else 1
        specs = reply.get("outputs", [])
        try:
            # lean: one call's outputs at a time where they all came through the staging buffer
            staged_only = lean and all(isinstance(sp, dict) and "staged" in sp for sp in specs)
            outs = None if staged_only else channel.unpack_tensors(specs, payload, dev, evaluation.staged)
        except channel.ProtocolError as e:
            evaluation.diag("protocol", f"the worker sent malformed outputs: {e}")
            evaluation.flag("tampering")
            return Status.REJECTED
        types = reply.get("output_types", [])
        structure = reply.get("structure", [])
        ok_types = [n == TENSOR for n in types]   # the worker names TENSOR on exact identity only
        if not all(ok_types) or len(types) != calls * n_out:
            got = ", ".join(sorted(set(types))) or "nothing"
            want = f"{n_out} torch.Tensor" if n_out > 1 else "exactly one torch.Tensor"
            evaluation.diag("output_type", f"forward returned {structure[0] if structure else '?'} ({got}); expected {want}")
            return Status.INCORRECT
        want_structure = getattr(judge, "reference_facts", {}).get("structure")
        other = next((st for st in structure if st != want_structure), None) if want_structure else None
        if other is not None:   # (t,) for t, a list for a tuple: a caller's out[0] or isinstance would differ
            evaluation.diag("output_type", f"forward returned {_structure_words(other)}; Model returns "
                            f"{_structure_words(want_structure)}: return the same")
            return Status.INCORRECT
        if len(specs) != calls * n_out:
            evaluation.diag("protocol", f"the worker sent {len(specs)} outputs for {calls * n_out} tensors")
            evaluation.flag("tampering")
            return Status.REJECTED
        want_dev = "cpu" if evaluation.device == "cpu" else "cuda"
        devices = reply.get("output_devices") or []
        wrong = [d for d in devices if str(d).split(":")[0] != want_dev]
        if wrong or len(devices) != len(types):
            evaluation.diag("device", f"forward returned a tensor on {wrong[0] if wrong else '?'}; outputs must be "
                     f"on {want_dev}, where the inputs are (compute on the GPU, do not copy results elsewhere)")
            return Status.INCORRECT
        status = ground_truth.check(evaluation, reply, f"trial {i + 1}", timed=False)   # CUPTI's record of the calls
        if status is not None:
            return status
        for call in range(calls):
            ref = None   # lean: the last call's reference goes before this one is made
            if stateful:
                ref = judge.sequence.outputs[_position(i, call)]
            else:
                ref = refs[0] if not lean else judge.reference(seed if call == 0 else seed2)
            part = slice(call * n_out, (call + 1) * n_out)
            try:
                got = outs[part] if outs is not None else channel.unpack_tensors(specs[part], b"", dev, evaluation.staged)
            except channel.ProtocolError as e:
                evaluation.diag("protocol", f"the worker sent malformed outputs: {e}")
                evaluation.flag("tampering")
                return Status.REJECTED
            again = "second call" if lean else "repeated call"
            for k, (o, r) in enumerate(zip(got, ref)):
                where = f"trial {i + 1}" + (f", {again}" if call else "") + (f", output {k}" if n_out > 1 else "")
                if o.shape != r.shape:
                    evaluation.diag("shape", f"{where}: output shape {tuple(o.shape)}, expected {tuple(r.shape)}")
                    return Status.INCORRECT
                if o.dtype != r.dtype:
                    evaluation.diag("dtype", f"{where}: output dtype {o.dtype}, expected {r.dtype}")
                    return Status.INCORRECT
                atol, rtol, rel = tolerances(r.dtype, s.test)
                cmp = compare(o, r, atol=atol, rtol=rtol, rel_l2_limit=rel)
                # a reference of rounding noise, or eager's own error under "as-run": decided
                # against the float64 forward (made only then: tools/judge/accuracy.py)
                truths = (lambda: judge.sequence.precise(_position(i, call))) if stateful else \
                    (lambda: judge.precise_reference(seed if call == 0 or not lean else seed2))
                cmp = decide(cmp, o, r, truths, k, policy, s.test)
                if i == 0 and call == 0 and not lean:   # the verdict's figures: a float64 forward the session keeps
                    cmp = measured(cmp, o, r, truths, k, policy)
                comparisons.append({"trial": i + 1, "call": call + 1, "output": k, **cmp.to_json()})
                if not cmp.ok:
                    evaluation.checks["comparisons"] = comparisons
                    _record_precision(evaluation, comparisons)
                    msg = cmp.describe()
                    if call == 1 and lean:
                        where_in = "the same input tensors" if reply.get("same_storage") else "new input tensors"
                        msg = (f"the first call was right but a second call, with new values in {where_in}, "
                               "was not (results kept by address or shape, or state kept between calls?): " + msg)
                    elif call == 1 and stateful:
                        msg = ("the first call was right but a repeated call with the same inputs was not what the "
                               "reference's second call returns (the state the forward keeps between calls: carry it "
                               "as the reference does): " + msg)
                    elif call == 1:
                        msg = "the first call was right but a repeated call with the same inputs was not " \
                              "(state kept between calls?): " + msg
                    elif stateful and i > 0:
                        msg = (f"call {_position(i, 0) + 1} of a fresh ModelNew (the reference keeps state between "
                               "calls: each call is compared with the reference's at the same place): " + msg)
                    evaluation.diag("mismatch", f"{where}: {msg}")
                    for p in cmp.patterns:
                        evaluation.flag(f"diff:{p.split(':')[0]}")
                    return Status.INCORRECT
            del got
        if lean:
            evaluation.checks.setdefault("same_storage_refill", []).append(bool(reply.get("same_storage")))
            release(dev)   # the copies compared and their scratch, before the worker runs again
    evaluation.checks["comparisons"] = comparisons
    _record_precision(evaluation, comparisons)
    # the module's own state (tools/judge/state_check.py); a stateful reference's kernel-less
    # call must come after its plan's calls, so a state check that builds ModelNew afresh waits
    state_later = stateful and state_check.plan(judge)["seeds"] is not None
    status = None if state_later else state_check.check(evaluation, worker)
    if status is None and stateful:
        status = _stateful_ownership(evaluation, worker, seeds, dev)
    if status is None and state_later:
        status = state_check.check(evaluation, worker)
    if status is not None:
        return status
    status = ownership.decide(evaluation, getattr(evaluation.judge, "reference_facts", {}).get("aliases"))   # right answers: but whose, in whose memory?
    if status is not None:
        return status
    evaluation.checks["inputs_unmutated"] = True
    evaluation.checks["repeat_consistent"] = True
    _native_precision(evaluation, outputs or [{"dtype": str(r.dtype).removeprefix("torch.")} for r in ref])
    atol, rtol, rel = tolerances(ref[0].dtype, s.test)
    evaluation.checks["tolerance"] = {"atol": atol, "rtol": rtol, "rel_l2": rel, "dtype": str(ref[0].dtype)}
    return None


def _position(trial: int, call: int) -> int:
    """Where trial `trial`'s call `call` is in a stateful reference's call_plan."""
    return call if trial == 0 else trial + 1


def _fresh_model(evaluation, worker) -> Status | None:
    """A stateful reference: ModelNew built afresh before the trials (the worker's compile
    calls are gone), as KernelBench builds both models once and calls them in turn."""
    timeout = evaluation.settings.test.compile_timeout_s
    try:
        reply, _ = worker.request({"op": "reset"}, timeout)
    except isolation.WorkerTimeout:
        evaluation.diag("timeout", f"building ModelNew afresh took longer than {timeout:g} s")
        return Status.TIMEOUT
    except isolation.WorkerDied:
        return died(evaluation, worker, "building ModelNew afresh")
    if not reply.get("ok"):
        error_diag(evaluation, reply)
        return Status.RUNTIME_ERROR
    return None


def _stateful_ownership(evaluation, worker, seeds, dev) -> Status | None:
    """A stateful reference: the kernel-less call (tools/judge/ownership.py) comes after the
    trials, as the last call of the plan (before, it would change the state the trials
    see); then ModelNew is built afresh for the time phase (that call left it no state of
    the candidate's own making)."""
    judge = evaluation.judge
    s = evaluation.settings
    ref = judge.sequence.outputs[-1]
    poison = [{"dtype": str(r.dtype).removeprefix("torch."), "shape": list(r.shape)} for r in ref]
    off = seeds[ownership.off_trial(seeds)]
    try:
        ownership.run_without_triton(evaluation, worker, off, poison, dev, ref, s.test.run_timeout_s)
    except isolation.WorkerTimeout:
        return _timed_out(evaluation, worker, len(seeds), s.test.run_timeout_s)
    except isolation.WorkerDied:
        return died(evaluation, worker, "the forward with its Triton launches skipped")
    evaluation.checks["stateful"] = (f"the reference keeps state between calls: ModelNew was built afresh and called "
                                     f"{len(judge.sequence.plan)} times in the reference's order, each call compared "
                                     "with the reference's call at the same place (as KernelBench calls both)")
    if evaluation.device == "cuda":
        return _fresh_model(evaluation, worker)
    return None


def _record_precision(evaluation, comparisons: list[dict]) -> None:
    """checks.precision: the policy, how eager computed fp32 (the judge's flags for it), the
    kernel's tl.dot precisions, and the least accurate output's and eager's errors against
    the float64 truth on the same trial (tools/judge/accuracy.py)."""
    from tools.judge.accuracy import EAGER_ERROR_MARGIN, worst
    from tools.problem import fp32_precisions, precision_flags
    policy = evaluation.settings.test.precision
    with precision_flags(policy):
        eager = fp32_precisions(evaluation.judge.dev)
    figures = worst(comparisons) or {}
    dots = evaluation.checks.get("dot_precision_on_gpu" if evaluation.device == "cuda" else "dot_precision", {})
    evaluation.checks["precision"] = {"policy": policy, "eager_fp32": eager, "candidate_dots": dots,
                               "candidate_error": figures.get("candidate"), "eager_error": figures.get("eager"),
                               "margin": EAGER_ERROR_MARGIN}


def _timed_out(evaluation, worker, i: int, timeout: float) -> Status:
    why = ("Triton's CPU interpreter runs each program in Python: a large input or many small "
           "programs can take this long, or a kernel hangs; try smaller inputs, larger blocks or "
           "--device cuda" if evaluation.device == "cpu" else "an infinite loop, a deadlock or a hung kernel")
    evaluation.diag("timeout", f"trial {i + 1}: forward did not finish within {timeout:g} s ({why})")
    health(evaluation, worker)
    return Status.TIMEOUT


def recheck_timed_outputs(evaluation, reply: dict, payload: bytes, seed: int) -> Status | None:
    """The outputs the timed mechanism itself made (deferred, skipped or cached work shows
    here) against the reference of `seed`, the seed of their inputs: a new secret one
    where the worker wrote it into the timed inputs before the last timed sample, or into
    the graph's input tensors before one more replay (reply["fresh_inputs"]: "call",
    "graph"); else the timing seed, which the candidate saw before that call."""
    from tools.judge.accuracy import decide
    from tools.judge.numerics import compare, tolerances
    from tools.judge.timed_path import fresh_reference
    if getattr(evaluation.judge, "sequence", None) is not None:
        # the timed calls' outputs depend on every call before them, which the timer makes as
        # many as it needs: rule 1 (their launches) and CUPTI's record still hold them
        evaluation.checks["timed_outputs_rechecked"] = ("not rechecked: the reference keeps state between calls, so a "
                                                        "timed call's outputs depend on how many calls came before it")
        return None
    on_new = seed not in evaluation.judge.seeds and reply.get("fresh_inputs") in ("call", "graph")
    fresh = reply["fresh_inputs"] if on_new else None
    ref = evaluation.judge.reference(seed) if fresh is None else fresh_reference(evaluation, seed)
    try:
        outs = channel.unpack_tensors(reply.get("outputs", []), payload, evaluation.judge.dev, evaluation.staged)
    except channel.ProtocolError as e:
        evaluation.diag("protocol", f"the worker sent malformed outputs of a timed call: {e}")
        evaluation.flag("tampering")
        return Status.REJECTED
    if len(outs) != len(ref):   # the worker sends only exact tensors (tools/sandbox/outputs.py)
        got = ", ".join(sorted(set(reply.get("output_types") or []))) or "nothing"
        evaluation.diag("output_type", f"a timed call returned {got}; expected {len(ref)} torch.Tensor")
        return Status.INCORRECT
    for k, (o, r) in enumerate(zip(outs, ref)):
        atol, rtol, rel = tolerances(r.dtype, evaluation.settings.test)
        cmp = compare(o, r, atol=atol, rtol=rtol, rel_l2_limit=rel) if o.shape == r.shape else None
        if cmp is not None:   # against the float64 forward where the policy says (tools/judge/accuracy.py)
            cmp = decide(cmp, o, r, lambda: evaluation.judge.precise_reference(seed), k, evaluation.settings.test.precision,
                         evaluation.settings.test)
        if cmp is None or not cmp.ok:
            what = {"graph": "the timed CUDA graph, replayed once on new inputs written into the tensors it was "
                             "captured on, returned a wrong output",
                    "call": "a timed call on new inputs (written into the timed inputs before the last timed "
                            "sample) returned a wrong output",
                    None: "the output of a timed call is wrong"}[fresh]
            evaluation.diag("mismatch", f"{what} although the test calls were right (work skipped, deferred or its "
                     "result cached under timing or capture?): " + (cmp.describe() if cmp else "shape differs"))
            return Status.INCORRECT
    evaluation.checks["timed_outputs_rechecked"] = {"graph": "the graph's replay on new inputs", None: "a timed call on the "
                                             "timing inputs", "call": "a timed call on new inputs"}[fresh]
    if evaluation.judge.lean:
        del outs
        release(evaluation.judge.dev)
    return None


def _structure_words(structure: str) -> str:
    """"tuple:2" -> "a tuple of 2 tensors", "tensor" -> "a tensor", as the worker names them."""
    kind, _, n = str(structure).partition(":")
    if not n:
        return f"a {kind}"
    return f"a {kind} of {n} tensor{'s' if n != '1' else ''}"


def _native_precision(evaluation, outputs: list[dict]) -> None:
    """The reduced_precision flag (tools/guards/flags.py) taken back where every floating output
    of Model is itself 16- or 8-bit (a half-precision model, an fp8 cast): the candidate computes
    in the problem's own precision, not below it; checks["reduced_precision"] says so."""
    import torch
    dtypes = (getattr(torch, str(o.get("dtype")), None) for o in outputs)
    floats = [d for d in dtypes if isinstance(d, torch.dtype) and d.is_floating_point]
    if "reduced_precision" not in evaluation.flags or not floats or any(d.itemsize > 2 for d in floats):
        return
    evaluation.flags.remove("reduced_precision")
    evaluation.diagnostics[:] = [d for d in evaluation.diagnostics if d.kind != "guard:reduced_precision"]
    names = ", ".join(sorted({str(d).removeprefix("torch.") for d in floats}))
    evaluation.checks["reduced_precision"] = f"not flagged: Model's own outputs are {names}"
