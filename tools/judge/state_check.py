"""The module's state after its calls: a candidate leaves Model's state as Model does.

Model's named parameters and buffers are its state, and ModelNew's entries of the same
names are checked after the trials passed (a wrong answer stays `incorrect`):

- An entry Model's forward leaves as it is must still hold what ModelNew was built with,
  and so must every parameter of ModelNew's, whatever its name: a forward that rewrites
  its own weights (folds a scale into them in place on its first call) answers right
  while the module a caller saves or loads into is wrong. (A buffer of ModelNew's own,
  a cache it fills, is its business.)
- An entry Model's forward changes (BatchNorm's running statistics and batch count in
  training mode, a buffer it counts calls in) must exist in ModelNew under Model's name
  and hold Model's values after two calls, both models built afresh, on two trials'
  inputs, by the outputs' precision rule (tools/judge/accuracy.py: where eager's entry
  is itself rounded, from cuDNN's TF32 convolutions, an entry no less accurate against
  the same calls in float64 passes): a kernel that normalizes by the batch but never
  updates the running statistics gives a module whose eval mode is wrong.

Either is `incorrect` with a `module_state` diagnostic naming the entry. Which entries
Model changes is found once per session (`plan`): the session's reference model, called
for the references, against one built afresh; only where they differ are two fresh models
called, and an entry the two disagree on (a random update, an init that is not
reproducible) is left out, as `checks.module_state` says. Not covered: state outside
parameters and buffers (plain tensor attributes, Python numbers); a reference that keeps
such state is judged call by call (tools/judge/stateful.py).
"""
from __future__ import annotations

import threading
from dataclasses import replace

from tools.judge.record import died, error_diag
from tools.sandbox import channel, isolation
from tools.verdict import Status

def plan(judge) -> dict:
    """{"names": Model's entries to hold unchanged, "changed": {name: Model's values after
    the calls}, "truth": {name: the same in float64}, "seeds": the calls' input seeds (None
    when Model changes nothing), "left_out": entries not judged}; made once per session."""
    with vars(judge).setdefault("_state_lock", threading.Lock()):   # dict.setdefault: one lock
        got = getattr(judge, "_state_plan", None)
        if got is None:
            got = judge._state_plan = _make_plan(judge)
        return got


def check(evaluation, worker) -> Status | None:
    """INCORRECT when ModelNew's state differs from Model's as the module doc says; else None."""
    from tools.judge.accuracy import decide
    from tools.judge.numerics import compare, tolerances
    judge = evaluation.judge
    p = plan(judge)
    evaluation.checks["module_state"] = {"entries": len(p["names"]) + len(p["changed"]),
                                         "changed_by_model": len(p["changed"]), "examples": list(p["changed"])[:4],
                                         "left_out": p["left_out"][:8]}
    if not p["names"] and not p["changed"]:
        return None
    timeout = evaluation.settings.test.run_timeout_s + (evaluation.settings.test.compile_timeout_s if p["seeds"] else 0)
    try:
        reply, payload = worker.request({"op": "state", "names": p["names"], "changed": list(p["changed"]),
                                         "seeds": p["seeds"]}, timeout)
    except isolation.WorkerTimeout:
        evaluation.diag("timeout", f"building ModelNew afresh and calling it twice took longer than {timeout:g} s")
        return Status.TIMEOUT
    except isolation.WorkerDied:
        return died(evaluation, worker, "ModelNew built afresh, called twice for its state")
    if not reply.get("ok"):
        error_diag(evaluation, reply)
        return Status.RUNTIME_ERROR
    if reply.get("drifted"):
        name = reply["drifted"][0]
        evaluation.diag("module_state", f"ModelNew's forward changed its {name} in place (a parameter, or a "
                        "buffer named as one of Model's that Model's forward leaves as it is): a forward must not "
                        "rewrite the module's weights (fold a constant into the kernels instead)")
        return Status.INCORRECT
    if reply.get("missing"):
        name = reply["missing"][0]
        evaluation.diag("module_state", f"Model's forward updates its {name}; ModelNew has no {name}: keep Model's "
                        "parameters and buffers under Model's names and update them as Model's forward does "
                        "(BatchNorm in training mode updates running_mean, running_var and num_batches_tracked)")
        return Status.INCORRECT
    try:
        got = channel.unpack_tensors(reply.get("outputs", []), payload, "cpu")
    except channel.ProtocolError as e:
        evaluation.diag("protocol", f"the worker sent malformed module state: {e}")
        evaluation.flag("tampering")
        return Status.REJECTED
    names = list(reply.get("values") or [])
    if len(got) != len(names) or any(n not in p["changed"] for n in names):
        evaluation.diag("protocol", "the worker sent module state for other entries than asked")
        evaluation.flag("tampering")
        return Status.REJECTED
    by_truth = 0
    for name, value in zip(names, got):
        want = p["changed"][name]
        atol, rtol, rel = tolerances(want.dtype, evaluation.settings.test)
        same = value.shape == want.shape and value.dtype == want.dtype
        cmp = compare(value, want, atol=atol, rtol=rtol, rel_l2_limit=rel) if same else None
        truth = p["truth"].get(name)
        if cmp is not None and not cmp.ok and truth is None and not (cmp.n_bad or cmp.n_nan or cmp.n_inf):
            cmp = replace(cmp, ok=True)   # the norm alone, with no float64 forward to tell noise from wrong
        if cmp is not None and not cmp.ok:   # the outputs' precision rule: eager's entry is rounded too
            cmp = decide(cmp, value, want, lambda: [truth], 0, evaluation.settings.test.precision, evaluation.settings.test)
            by_truth += cmp.ok
        if cmp is None or not cmp.ok:
            what = _differ(cmp) if cmp is not None else \
                f"{value.dtype} {tuple(value.shape)} where Model's is {want.dtype} {tuple(want.shape)}"
            evaluation.diag("module_state", f"after two calls, both models built afresh, ModelNew's {name} differs "
                            f"from Model's, which its forward updates (BatchNorm's running statistics in training "
                            f"mode: momentum-weighted, the variance unbiased): {what}")
            return Status.INCORRECT
    evaluation.checks["module_state"]["passed_by_float64_truth"] = by_truth
    return None


def _differ(cmp) -> str:
    if cmp.first_bad_values is None:
        return f"the relative L2 error {cmp.rel_l2:.3g} exceeds {cmp.rel_l2_limit:g}"
    got, want = cmp.first_bad_values
    return (f"{cmp.n_bad} of {cmp.numel} values outside atol={cmp.atol:g}/rtol={cmp.rtol:g} (max abs err "
            f"{cmp.max_abs_err:.3g}); the first is {got:.6g} where Model's is {want:.6g}")


# -- Model's side ----------------------------------------------------------------------

def _make_plan(judge) -> dict:
    from tools.judge import memory
    from tools.sandbox.state_ops import fingerprints, named_tensors, same_print
    session = named_tensors(judge.reference_model())
    if not session:
        return {"names": [], "changed": {}, "truth": {}, "seeds": None, "left_out": []}
    fresh = judge.fresh_reference_model()
    first = fingerprints(named_tensors(fresh))
    now = fingerprints(session)
    if all(same_print(first[n], now.get(n)) for n in first):   # called for the references, unchanged
        return {"names": list(first), "changed": {}, "truth": {}, "seeds": None, "left_out": []}
    other = judge.fresh_reference_model()
    second = fingerprints(named_tensors(other))
    seeds = [judge.seeds[0], judge.seeds[1 % len(judge.seeds)]]
    a, b = _called(fresh, judge, seeds), _called(other, judge, seeds)
    names, changed, left_out = [], {}, []
    for n in first:
        if not same_print(first[n], second.get(n)) or n not in a or n not in b:
            left_out.append(n)   # two builds disagree: not the forward's doing
        elif same_print(first[n], fingerprints({n: a[n]})[n]):
            names.append(n)
        elif _equal(a[n], b[n], judge.settings.test):
            changed[n] = a[n].detach().to("cpu", copy=True)
        else:
            left_out.append(n)   # two fresh models' calls disagree: a random update
    del fresh, other, a, b
    truth = _truth(judge, seeds, list(changed)) if changed else {}
    memory.release(judge.dev)
    return {"names": names, "changed": changed, "truth": truth, "seeds": seeds, "left_out": left_out}


def _truth(judge, seeds: list[int], names: list[str]) -> dict:
    """Model's changed entries after the same calls in float64 (a fresh model widened, on
    widened inputs): the truth eager's own entries are rounded from, as the outputs' is
    (tools/judge/accuracy.py); {} when the forward cannot run so."""
    import torch
    from tools.problem import make_inputs
    from tools.sandbox.state_ops import named_tensors
    try:
        twin = judge.fresh_reference_model().to(torch.float64)
        for seed in seeds:
            inputs = [x.to(torch.float64) if isinstance(x, torch.Tensor) and x.is_floating_point() else x
                      for x in make_inputs(judge.problem.module, seed, judge.dev)]
            with torch.no_grad():
                twin(*inputs)
        got = named_tensors(twin)
        return {n: got[n].detach().to("cpu", copy=True) for n in names if n in got and got[n].is_floating_point()}
    except Exception:   # noqa: BLE001 - no float64 truth: Model's own entries alone decide
        return {}


def _called(model, judge, seeds: list[int]) -> dict:
    """`model` called on the inputs of each seed as the reference is (no grad, the policy's
    precision flags); its named tensors after."""
    import torch
    from tools.problem import make_inputs, precision_flags
    from tools.sandbox.state_ops import named_tensors
    for seed in seeds:
        inputs = make_inputs(judge.problem.module, seed, judge.dev)
        with torch.no_grad(), precision_flags(judge.settings.test.precision):
            model(*inputs)
        del inputs
    return named_tensors(model)


def _equal(a, b, settings) -> bool:
    """Two fresh models' values of one entry agree: exactly, or within the tolerance of
    their type (a GPU library's reduction order)."""
    import torch
    from tools.judge.numerics import tolerances
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if torch.equal(a, b):
        return True
    if not (a.is_floating_point() or a.is_complex()):
        return False
    atol, rtol, _ = tolerances(a.dtype, settings)
    return bool(torch.allclose(a, b, atol=atol, rtol=rtol, equal_nan=True))
