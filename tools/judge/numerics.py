"""Compare a candidate's output with the reference, and say how it is wrong.

Covers the judge's numeric rule and the diff that goes back to the model:
  * pass/fail: every element within torch.isclose(out, ref, atol, rtol, equal_nan=True)
    with infinities matching exactly, AND the relative L2 error ||out-ref|| / ||ref||
    at most `rel_l2_limit`, so near-zero outputs cannot pass as zeros (KernelBench
    issue #165); non-finite output where the reference is finite always fails;
  * a reference that is rounding noise: where only the norm rule fails, `against_truth`
    measures the output and the float32 reference against the same forward in float64
    (tools/judge/reference.py precise_outputs). The output passes when its L2 error from
    that truth is at most rel_l2_limit of the truth's norm, or at most NOISE_FACTOR times
    the float32 reference's own error: a GroupNorm output's mean is 0 in exact arithmetic
    and ~1e-8 noise in float32, which no other order of summation reproduces. Zeros pass
    only where the truth is within NOISE_FACTOR times float32's own error of zero;
  * the figures: max abs/rel error, relative L2, fraction wrong, first bad index and
    values, NaN/Inf counts;
  * tags saying HOW it is wrong (see `Comparison.patterns`; found by
    tools/judge/mismatch.py), turned into 1-3 short lines by `Comparison.describe()`
    for a small model to act on.
Works on any device in float32 (float64 when an input is float64 or not floating),
in passes of CHUNK_NUMEL elements so a multi-GiB output needs ~1 GiB of scratch,
with no Python loop over elements.

Does not: decide the tolerances' policy beyond `tolerances()`, check type, dtype or
device (the judge does; a shape mismatch is reported, never raised), or prove a
diagnosis (tools/judge/mismatch.py says what its tags are). Imports only torch, the
standard library and tools/judge/mismatch.py.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import torch

from tools.judge.mismatch import Accumulator, find_patterns

if TYPE_CHECKING:  # annotation only: this module imports nothing else of krefine at run time
    from tools.settings import TrialSettings

CHUNK_NUMEL = 1 << 24     # elements per pass; each float64 temporary is then 128 MiB
NOISE_FACTOR = 10.0       # against_truth: an output may be this many times noisier than the float32 reference
DESCRIBE_MAX_CHARS = 400

# describe() mentions at most two patterns, in this order of usefulness
_PRIORITY = ("shape", "nan", "inf", "all_zero", "transposed", "constant_factor", "offset",
             "near_zero", "tail", "axis", "reduced_precision", "scattered", "rel_l2")
_CLAUSE_END = re.compile(r"(?<=[.;:])\s")


def fit_text(lines: list[str], max_chars: int) -> str:
    """`lines` joined, at most `max_chars`: whole lines while they fit, then the longest
    head of the next that ends a clause ("." ";" ":"), never a cut inside one. The first
    line is kept whole even when it alone is longer."""
    out: list[str] = []
    for line in lines:
        if len("\n".join(out + [line])) <= max_chars or not out:
            out.append(line)
            continue
        room = max_chars - len("\n".join(out)) - 1
        ends = [m.start() for m in _CLAUSE_END.finditer(line) if m.start() <= room]
        if ends:
            out.append(line[:ends[-1]].rstrip(";:").rstrip())
        break
    return "\n".join(out)


@dataclass(frozen=True)
class Comparison:
    ok: bool
    atol: float
    rtol: float
    rel_l2_limit: float
    max_abs_err: float            # over finite pairs; inf if out is non-finite where ref is not
    max_rel_err: float            # |out-ref|/|ref| where |ref| > atol; inf as above
    rel_l2: float                 # ||out-ref|| / ||ref||, float64, finite pairs
    frac_bad: float
    n_bad: int
    numel: int
    first_bad_index: tuple[int, ...] | None     # in the reference's shape (+ (2,) for complex)
    first_bad_values: tuple[float, float] | None  # (got, expected)
    n_nan: int                    # NaN in the candidate where the reference is finite
    n_inf: int                    # Inf in the candidate where the reference is finite
    patterns: tuple[str, ...]     # "nan" "inf" "all_zero" "tail" "axis:<d>:<detail>"
                                  # "transposed" "constant_factor:<c>" "offset:<c>"
                                  # "reduced_precision" "scattered" "rel_l2" "shape" "near_zero"
    permutation: tuple[int, ...] | None = None  # with "transposed": out laid out as ref.permute(p)
    shape: tuple[int, ...] = ()   # the reference's shape, for describe()
    reference_error: dict | None = None   # against_truth's figures, when it was asked
    truth_error: dict | None = None       # tools/judge/accuracy.py: out's and eager's errors against the truth

    def describe(self) -> str:
        """The most useful pattern's hint (what to fix) first, then the figures, then a
        second hint; at most DESCRIBE_MAX_CHARS, cut only between lines or clauses."""
        hints = [self._sentence(tag) for tag in sorted(self._pattern_groups(), key=_PRIORITY.index)[:2]]
        return fit_text([*hints[:1], self._headline(), *hints[1:]], DESCRIBE_MAX_CHARS)

    def to_json(self) -> dict:
        return {
            "ok": self.ok, "atol": self.atol, "rtol": self.rtol,
            "rel_l2_limit": self.rel_l2_limit,
            "max_abs_err": _json_float(self.max_abs_err),
            "max_rel_err": _json_float(self.max_rel_err),
            "rel_l2": _json_float(self.rel_l2),
            "frac_bad": self.frac_bad, "n_bad": self.n_bad, "numel": self.numel,
            "first_bad_index": (list(self.first_bad_index)
                                if self.first_bad_index is not None else None),
            "first_bad_values": ([_json_float(v) for v in self.first_bad_values]
                                 if self.first_bad_values is not None else None),
            "n_nan": self.n_nan, "n_inf": self.n_inf,
            "patterns": list(self.patterns),
            "permutation": list(self.permutation) if self.permutation is not None else None,
            **({"reference_error": self.reference_error} if self.reference_error is not None else {}),
            **({"truth_error": self.truth_error} if self.truth_error is not None else {}),
        }

    @property
    def norm_only(self) -> bool:
        """Failed on the norm rule alone: every element within tolerance, all finite, same shape."""
        return not self.ok and self.n_bad == 0 and not self.n_nan and not self.n_inf and "shape" not in self.patterns

    # -- describe() parts ------------------------------------------------------------

    def _pattern_groups(self) -> set[str]:
        groups = {t.split(":", 1)[0] for t in self.patterns} - {"shape"}  # in the headline
        if "nan" in groups and "inf" in groups:
            groups.discard("inf")          # one sentence covers both
        return groups

    def _headline(self) -> str:
        tol = f"atol={self.atol:g}/rtol={self.rtol:g}"
        if self.ok:
            return (f"correct: max abs err {self.max_abs_err:.3g}, relative L2 error "
                    f"{self.rel_l2:.3g} (limit {self.rel_l2_limit:g})")
        if "shape" in self.patterns:
            text = "wrong shape: the output's shape differs from the reference's"
            if self.first_bad_values is None:
                return text
            return text + f"; in flat order {self.n_bad} of {self.numel} elements are wrong"
        if self.n_bad:
            text = (f"wrong values: {self.n_bad} of {self.numel} elements "
                    f"({100 * self.frac_bad:.3g}%) outside {tol}; "
                    f"max abs err {self.max_abs_err:.3g}")
            if self.first_bad_index is not None and self.first_bad_values is not None:
                got, expected = self.first_bad_values
                text += (f"; first at {_fmt_index(self.first_bad_index)}: got {got:.4g} "
                         f"expected {expected:.4g}")
            return text
        text = (f"every element is within {tol}, but the relative L2 error {self.rel_l2:.3g} "
                f"exceeds {self.rel_l2_limit:g}: the reference is near zero and the output "
                f"does not follow it")
        e = self.reference_error
        if e is not None and e.get("ref_l2_err") is not None:
            text += (f"; from the float64 forward its L2 error is {e['out_l2_err']:.3g}, "
                     f"more than {e['factor']:g}x the float32 reference's own {e['ref_l2_err']:.3g}")
        return text

    def _sentence(self, group: str) -> str:
        tag = next(t for t in self.patterns if t.split(":", 1)[0] == group)
        if group in ("nan", "inf"):
            counts = " and ".join(f"{n} {what}" for n, what in ((self.n_nan, "NaN"),
                                                               (self.n_inf, "Inf")) if n)
            return (f"{counts} where the reference is finite: "
                    "look for division by zero, overflow, an unwritten torch.empty output "
                    "or masked loads without other=")
        if group == "all_zero":
            return ("the output is all zeros: the result is never stored, or the tensor "
                    "returned is not the one the kernel writes")
        if group == "transposed":
            return (f"the output is the reference laid out as ref.permute{self.permutation}: "
                    "the store (or a load) uses swapped strides or index order")
        if group == "constant_factor":
            return (f"output = {float(tag.split(':')[1]):.4g} x expected everywhere: a scale "
                    "(1/N, alpha, softmax scale) is missing, wrong or applied twice")
        if group == "offset":
            return (f"output = expected {float(tag.split(':')[1]):+.4g} everywhere: a bias or "
                    "constant is added wrongly, twice or not at all")
        if group == "tail":
            start = _ravel(self.first_bad_index or (0,), self.shape)
            wrong = self.numel - start
            if wrong > start:
                return (f"only the first {start} elements are right, all after flat index "
                        f"{start} are wrong: the grid covers too few blocks (use triton.cdiv) "
                        "or a loop stops early")
            return (f"all errors lie in the last {wrong} elements (flat index >= {start}): "
                    "the last partial block is probably masked out or not written")
        if group == "axis":
            parts = [_axis_words(t, self.shape) for t in self.patterns if t.startswith("axis:")]
            return ("errors only at " + " and ".join(parts[:2]) + ": a stride, offset or "
                    f"mask along {'those dims' if len(parts) > 1 else 'that dim'} is wrong")
        if group == "near_zero":
            return (f"the errors are of rounding size (relative L2 {self.rel_l2:.1g}) and fail only where the "
                    "reference is near zero: the sums are accumulated in another order or precision than the "
                    "reference's (a long sum or scan in float32; torch's CPU cumsum adds in float64), not a "
                    "wrong index")
        if group == "reduced_precision" and self.rtol < FP32_EPS:   # a float64 output's tolerance
            return (f"small errors everywhere (relative ~{self.rel_l2:.1g}), typical of float32 "
                    "compute on a float64 problem: load, accumulate and store in float64")
        if group == "reduced_precision":
            return (f"small errors everywhere (relative ~{self.rel_l2:.1g}), typical of tf32/"
                    "fp16 compute: accumulate in fp32 and use tl.dot(..., "
                    "input_precision=\"ieee\") on fp32 inputs")
        if group == "scattered":
            return ("errors are scattered with no simple pattern: recheck the arithmetic "
                    "(op order, eps, reduction axis, broadcasting)")
        return ("the output is not a simple transform of the expected one: check the "
                "formula against the reference on a few elements")  # rel_l2


FP32_EPS = 1.1920929e-07   # below it, a tolerance only float64 meets (TrialSettings.atol_fp64)


def tolerances(dtype: torch.dtype, settings: "TrialSettings") -> tuple[float, float, float]:
    """(atol, rtol, rel_l2_limit) for an output dtype; KernelBench uses atol = rtol."""
    if dtype.is_complex:
        bits = dtype.itemsize * 4          # per real component
    elif dtype.is_floating_point:
        bits = dtype.itemsize * 8
    else:
        return 0.0, 0.0, 0.0               # integers and bool compare exactly
    if bits >= 64:
        return settings.atol_fp64, settings.atol_fp64, settings.rel_l2_fp64
    if bits >= 32:
        return settings.atol_fp32, settings.atol_fp32, settings.rel_l2_fp32
    return settings.atol_half, settings.atol_half, settings.rel_l2_half


def compare(out: torch.Tensor, ref: torch.Tensor, *, atol: float, rtol: float,
            rel_l2_limit: float, chunk_numel: int = CHUNK_NUMEL) -> Comparison:
    """Judge `out` against `ref`; never raises on any values the candidate produced."""
    # 1) normalise: same device, real values, flat in the reference's logical order
    same_shape = tuple(out.shape) == tuple(ref.shape)
    if out.numel() != ref.numel():
        return Comparison(ok=False, atol=atol, rtol=rtol, rel_l2_limit=rel_l2_limit,
                          max_abs_err=math.inf, max_rel_err=math.inf, rel_l2=math.inf,
                          frac_bad=1.0, n_bad=ref.numel(), numel=ref.numel(),
                          first_bad_index=None, first_bad_values=None, n_nan=0, n_inf=0,
                          patterns=("shape",), shape=tuple(ref.shape))
    o, r, shape, cd = _flatten(out, ref)
    numel = r.numel()

    # 2) one chunked pass: the element rule and every figure
    acc = Accumulator(shape, cd, atol, rtol)
    step = max(1, chunk_numel)
    with torch.no_grad():
        for start in range(0, numel, step):
            acc.add(o[start:start + step], r[start:start + step], start)

    # 3) the verdict: elements, then the norm
    nonfinite = acc.n_nan + acc.n_inf
    if acc.sum_r2 > 0:
        rel_l2 = math.sqrt(acc.sum_d2) / math.sqrt(acc.sum_r2)
    else:
        rel_l2 = 0.0 if acc.sum_d2 == 0 else math.inf
    ok = same_shape and acc.n_bad == 0 and rel_l2 <= rel_l2_limit

    # 4) how it is wrong
    patterns: tuple[str, ...] = ()
    perm = None
    if not ok:
        patterns, perm = find_patterns(acc, o, r, shape, numel, atol, rtol, rel_l2)
        if not same_shape:
            patterns = ("shape",) + patterns
    first = acc.first_bad
    return Comparison(
        ok=ok, atol=atol, rtol=rtol, rel_l2_limit=rel_l2_limit,
        max_abs_err=math.inf if nonfinite else max(acc.worst_abs[0], 0.0),
        max_rel_err=math.inf if nonfinite else max(acc.worst_rel[0], 0.0),
        rel_l2=rel_l2, frac_bad=acc.n_bad / numel if numel else 0.0, n_bad=acc.n_bad,
        numel=numel,
        first_bad_index=_unravel(first, shape) if first is not None else None,
        first_bad_values=acc.first_values, n_nan=acc.n_nan, n_inf=acc.n_inf,
        patterns=patterns, permutation=perm, shape=shape)


def against_truth(cmp: Comparison, out: torch.Tensor, ref: torch.Tensor, truths, k: int = 0, *,
                  factor: float = NOISE_FACTOR, chunk_numel: int = CHUNK_NUMEL) -> Comparison:
    """`cmp` (compare(out, ref)) when it did not fail on the norm rule alone; else decided
    again on that rule with `truth`, output `k` of `truths()` (the reference's forward in
    float64, a list, or None; called only here, as it costs a forward): ok when
    ||out - truth|| <= max(rel_l2_limit * ||truth||, factor * ||ref - truth||). The
    elements were already within tolerance of `ref`. No truth (None, another shape, not
    finite): `cmp`, with reference_error saying why."""
    if not cmp.norm_only:
        return cmp
    got = truths()
    truth = got[k] if got is not None and k < len(got) else None
    if truth is None or tuple(truth.shape) != tuple(ref.shape) or out.numel() != ref.numel():
        return replace(cmp, reference_error={"precision": None, "why": "no float64 forward of the reference"})
    o, r, t = (x.detach().reshape(-1) for x in (out, ref, truth))
    sums = [0.0, 0.0, 0.0]   # ||out - truth||^2, ||ref - truth||^2, ||truth||^2
    step = max(1, chunk_numel)
    with torch.no_grad():
        for start in range(0, t.numel(), step):
            tc = t[start:start + step].to(torch.float64)
            oc = o[start:start + step].to(tc.device, torch.float64)
            rc = r[start:start + step].to(tc.device, torch.float64)
            for j, v in enumerate((oc - tc, rc - tc, tc)):
                sums[j] += float(torch.dot(v, v))
    out_err, ref_err, norm = (math.sqrt(v) for v in sums)
    if not all(math.isfinite(v) for v in (out_err, ref_err, norm)):
        return replace(cmp, reference_error={"precision": "float64", "why": "the float64 forward is not finite"})
    ok = out_err <= max(cmp.rel_l2_limit * norm, factor * ref_err)
    info = {"precision": "float64", "out_l2_err": out_err, "ref_l2_err": ref_err, "truth_l2": norm,
            "ref_rel_l2": ref_err / norm if norm else None, "factor": factor, "ok": ok}
    return replace(cmp, ok=ok, reference_error=info, patterns=() if ok else cmp.patterns,
                   permutation=None if ok else cmp.permutation)


# -- the pass -----------------------------------------------------------------------


def _flatten(out: torch.Tensor, ref: torch.Tensor):
    out, ref = out.detach(), ref.detach()
    if out.device != ref.device:
        out = out.to(ref.device)
    if out.is_complex() or ref.is_complex():
        cplx = torch.complex128 if torch.float64 in (out.dtype, ref.dtype) or \
            torch.complex128 in (out.dtype, ref.dtype) else torch.complex64
        out, ref = torch.view_as_real(out.to(cplx)), torch.view_as_real(ref.to(cplx))
    exact = torch.float64 in (out.dtype, ref.dtype) or not (
        out.dtype.is_floating_point and ref.dtype.is_floating_point)
    cd = torch.float64 if exact else torch.float32
    return out.reshape(-1), ref.reshape(-1), tuple(ref.shape), cd


# -- small helpers ----------------------------------------------------------------

def _axis_words(tag: str, shape: tuple[int, ...]) -> str:
    _, d, kind, *rest = tag.split(":")
    size = shape[int(d)] if int(d) < len(shape) else "?"
    if kind == "range" and int(rest[1]) - int(rest[0]) == 1:
        where = f"index {rest[0]}"
    elif kind == "range":
        where = f"indices {rest[0]}..{int(rest[1]) - 1}"
    elif kind == "every":
        where = f"every {_ordinal(int(rest[0]))} index from {rest[2]}"
    else:                                              # first, last, some
        where = {"first": "the first ", "last": "the last ", "some": ""}[kind] + rest[0]
    return f"{where} of {size} along dim {d}"


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _unravel(flat: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    index = []
    for size in reversed(shape):
        index.append(flat % size)
        flat //= size
    return tuple(reversed(index)) if shape else ()


def _ravel(index: tuple[int, ...], shape: tuple[int, ...]) -> int:
    flat = 0
    for i, size in zip(index, shape):
        flat = flat * size + i
    return flat


def _fmt_index(index: tuple[int, ...]) -> str:
    return "(" + ", ".join(map(str, index)) + ")"


def _json_float(x: float) -> float | None:
    return x if math.isfinite(x) else None              # strict JSON has no NaN/Infinity
