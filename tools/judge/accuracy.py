"""The precision policy's decision: is a candidate's output no less accurate than eager's?

`[eval] precision` (tools/settings.py) is one rule for both sides of the comparison:

  * "strict": the reference, eager and torch.compile run with TF32 off (tools/problem.py
    precision_flags). An output passes numerics.py's rule against that exact-fp32
    reference (with its float64 rescue of a reference that is rounding noise).
  * "as-run": they run with the flags as the user has them, so the reference is eager as
    the user runs it, cuDNN's TF32 convolutions included. An output that misses the
    reference's tolerance still passes when, against the same forward in float64 (the
    truth: tools/judge/reference.py precise_outputs), it is within the fp32 tolerance, or
    its error is no larger than eager's own on the same inputs, by relative L2 and by
    maximum, within EAGER_ERROR_MARGIN. The bound is eager's as the judge ran it, never
    the candidate's: where eager is exact (fp32 GEMMs: cuBLAS's TF32 is off by default)
    it leaves no slack, and bf16 or fp16 on an fp32 problem fails either way.

`decide` is the one call for a candidate's outputs (trials, the timed recheck, the
pre-screen; not the reproducibility check, where eager would bound itself); `measured`
adds the truth figures to an output that passed, for the verdict. `policy_rule` is the
sentence the reduced-precision flag carries. Does not: set the flags (tools/problem.py), compare elements or make the float64
forward (numerics.py, reference.py). Imports torch (through numerics.py) only when it
compares: the static step reads `policy_rule` before torch is loaded.
"""
from __future__ import annotations

import math
from dataclasses import replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tools.judge.numerics import Comparison

# How much less accurate than eager an output may be, by relative L2 and by maximum,
# against the same truth on the same inputs. A kernel that rounds its operands as eager
# does differs from it only in summation order and in where its largest error lands:
# its norm is within about 1% of eager's, its maximum within about 15% on a
# KernelBench-size output. One step less exact is well outside: bf16 keeps 3 fewer
# mantissa bits than TF32 (about 8x the error of rounded TF32, 3x that of truncated),
# and operands truncated to TF32 instead of rounded carry about 2.5x the error.
EAGER_ERROR_MARGIN = 1.5


def decide(cmp: Comparison, out, ref, truths, k: int, policy: str, settings=None) -> Comparison:
    """`cmp` (numerics.compare(out, ref)) decided by the policy: numerics.against_truth's
    rule first; then, under "as-run", an output that failed with finite values of the
    right shape is measured against the truth (`truths()[k]`, called only then: it costs
    a float64 forward) and passes within its dtype's tolerance of it, or no less accurate
    than `ref` (eager) within EAGER_ERROR_MARGIN. `truth_error` says which. A float64
    output that eager itself does not compute to float64's tolerance (fp32 work cast to
    double, `fc(x).double()`) is fp32 work: within the fp32 tolerance of the truth it
    passes (`settings`: the [eval] table with that tolerance; None: not so judged)."""
    from tools.judge.numerics import against_truth
    cmp = against_truth(cmp, out, ref, truths, k)
    if not cmp.ok and settings is not None and _finite_same_shape(cmp) and _fp32_values(ref) \
            and _within_fp32(out, ref, settings):   # eager's float64 output holds fp32 values: fp32 work, cast
        return replace(cmp, ok=True, patterns=(), permutation=None, truth_error={
            "policy": policy, "bound": "fp32_work", "why": "eager's float64 output holds float32 values (fp32 work "
            "cast to double): judged at the fp32 tolerance"})
    if cmp.ok or policy != "as-run" or not _finite_same_shape(cmp):
        return cmp
    truth = _truth(truths, k, ref)
    if truth is None:
        return replace(cmp, truth_error={"policy": policy, "why": "no float64 forward of the reference"})
    cand, eager = _errors(out, truth, cmp), _errors(ref, truth, cmp)
    within = cand.ok or (settings is not None and str(ref.dtype) == "torch.float64" and not eager.ok
                         and _within_fp32(out, truth, settings))
    as_eager = _finite(eager) and cand.rel_l2 <= EAGER_ERROR_MARGIN * eager.rel_l2 \
        and cand.max_abs_err <= EAGER_ERROR_MARGIN * eager.max_abs_err
    ok = within or as_eager
    bound = "fp32_tolerance" if within else "eager" if as_eager else None
    info = _info(policy, cand, eager, bound)
    return replace(cmp, ok=ok, truth_error=info, patterns=() if ok else cmp.patterns,
                   permutation=None if ok else cmp.permutation)


def measured(cmp: Comparison, out, ref, truths, k: int, policy: str) -> Comparison:
    """`cmp` (a decision that passed) with the candidate's and eager's errors against the
    truth in `truth_error`, for the verdict; as it was where they are known already or
    no truth can be made."""
    if cmp.truth_error is not None or not cmp.ok:
        return cmp
    truth = _truth(truths, k, ref)
    if truth is None:
        return replace(cmp, truth_error={"policy": policy, "why": "no float64 forward of the reference"})
    return replace(cmp, truth_error=_info(policy, _errors(out, truth, cmp), _errors(ref, truth, cmp), "reference"))


def policy_rule(policy: str) -> str:
    """What a reduced-precision kernel must meet under `policy`, in one sentence."""
    if policy == "strict":
        return ('Under [eval] precision "strict" eager runs without TF32: it must be within the fp32 '
                "tolerance of exact fp32.")
    return ('Under [eval] precision "as-run" it passes when its error against the float64 forward is within '
            "the fp32 tolerance or no larger than eager's own (TF32 where cuDNN convolves in TF32, which "
            "fp32 GEMMs and bf16/fp16 math never meet).")


def worst(comparisons: list[dict]) -> dict | None:
    """The truth figures of the comparison whose output is least accurate against the
    truth (largest candidate relative L2), eager's on the same trial beside them."""
    known = [c["truth_error"] for c in comparisons if (c.get("truth_error") or {}).get("candidate")]
    return max(known, key=lambda e: e["candidate"]["rel_l2"] if e["candidate"]["rel_l2"] is not None
               else math.inf, default=None)


# -- helpers --------------------------------------------------------------------------

def _finite_same_shape(cmp: Comparison) -> bool:
    """Failed on values alone: the right shape, no NaN or Inf where the reference is finite."""
    return not cmp.n_nan and not cmp.n_inf and "shape" not in cmp.patterns


def _truth(truths, k: int, ref):
    got = truths()
    truth = got[k] if got is not None and k < len(got) else None
    return truth if truth is not None and tuple(truth.shape) == tuple(ref.shape) else None


def _errors(x, truth, cmp: Comparison) -> Comparison:
    """`x` against the truth at `cmp`'s tolerances: its relative L2 and maximum error."""
    from tools.judge.numerics import compare
    return compare(x, truth, atol=cmp.atol, rtol=cmp.rtol, rel_l2_limit=cmp.rel_l2_limit)


def _fp32_values(ref) -> bool:
    """A float64 tensor every value of which is a float32 (a cast of fp32 work), not all integers."""
    import torch
    if ref.dtype != torch.float64 or ref.numel() == 0:
        return False
    same = (ref.float().double() == ref) | torch.isnan(ref)
    return bool(same.all()) and bool((ref != ref.round()).any())


def _within_fp32(out, truth, settings) -> bool:
    import torch
    from tools.judge.numerics import compare, tolerances
    atol, rtol, rel = tolerances(torch.float32, settings)
    return compare(out, truth, atol=atol, rtol=rtol, rel_l2_limit=rel).ok


def _finite(c: Comparison) -> bool:
    return math.isfinite(c.rel_l2) and math.isfinite(c.max_abs_err)


def _info(policy: str, cand: Comparison, eager: Comparison, bound: str | None) -> dict:
    def figures(c: Comparison) -> dict:
        return {"rel_l2": c.rel_l2 if math.isfinite(c.rel_l2) else None,
                "max_abs": c.max_abs_err if math.isfinite(c.max_abs_err) else None}
    return {"policy": policy, "candidate": figures(cand), "eager": figures(eager),
            "margin": EAGER_ERROR_MARGIN, "bound": bound, "ok": bound is not None}
