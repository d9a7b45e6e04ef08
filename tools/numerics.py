"""Compare a candidate's output with the reference, and say how it is wrong.

Covers the judge's numeric rule and the diff that goes back to the model:
  * pass/fail: every element within torch.isclose(out, ref, atol, rtol, equal_nan=True)
    with infinities matching exactly, AND the relative L2 error ||out-ref|| / ||ref||
    at most `rel_l2_limit`, so near-zero outputs cannot pass as zeros (KernelBench
    issue #165); non-finite output where the reference is finite always fails;
  * the figures: max abs/rel error, relative L2, fraction wrong, first bad index and
    values, NaN/Inf counts;
  * tags saying HOW it is wrong (see `Comparison.patterns`), turned into 1-3 short
    lines by `Comparison.describe()` for a small model to act on.
Works on any device in float32 (float64 when an input is float64 or not floating),
in passes of CHUNK_NUMEL elements so a multi-GiB output needs ~1 GiB of scratch,
with no Python loop over elements.

Does not: decide the tolerances' policy beyond `tolerances()`, check type, dtype or
device (the judge does; a shape mismatch is reported, never raised), or prove a
diagnosis. Tags are heuristics: location tags (tail, axis) come from the exact set of
mismatching indices; value tags (transposed, constant factor, offset, reduced
precision) are hypotheses that must explain every position of a sample (mismatches
spread evenly, uniform positions, the worst ones). Imports only torch and the
standard library.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:  # annotation only: this module imports nothing of krefine at run time
    from tools.settings import TestSettings

CHUNK_NUMEL = 1 << 24     # elements per pass; each float64 temporary is then 128 MiB
SAMPLE_N = 4096           # sampled positions per kind (mismatches, uniform)
MAX_AXIS_LEN = 1 << 20    # longer dims are not analysed for axis patterns
HINT_SLACK = 4.0          # a hypothesis may miss by this many tolerances
PRECISION_REL = 2e-2      # reduced precision: every error below this, relative to scale
DESCRIBE_MAX_CHARS = 400

# describe() mentions at most two patterns, in this order of usefulness
_PRIORITY = ("shape", "nan", "inf", "all_zero", "transposed", "constant_factor", "offset",
             "tail", "axis", "reduced_precision", "scattered", "rel_l2")


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
                                  # "reduced_precision" "scattered" "rel_l2" "shape"
    permutation: tuple[int, ...] | None = None  # with "transposed": out laid out as ref.permute(p)
    shape: tuple[int, ...] = ()   # the reference's shape, for describe()

    def describe(self) -> str:
        lines = [self._headline()]
        for tag in sorted(self._pattern_groups(), key=_PRIORITY.index)[:2]:
            lines.append(self._sentence(tag))
        text = "\n".join(lines)
        return text if len(text) <= DESCRIBE_MAX_CHARS else text[:DESCRIBE_MAX_CHARS - 3] + "..."

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
        }

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
        return (f"every element is within {tol}, but the relative L2 error {self.rel_l2:.3g} "
                f"exceeds {self.rel_l2_limit:g}: the reference is near zero and the output "
                f"does not follow it")

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
        if group == "reduced_precision":
            return (f"small errors everywhere (relative ~{self.rel_l2:.1g}), typical of tf32/"
                    "fp16 compute: accumulate in fp32 and use tl.dot(..., "
                    "input_precision=\"ieee\") on fp32 inputs")
        if group == "scattered":
            return ("errors are scattered with no simple pattern: recheck the arithmetic "
                    "(op order, eps, reduction axis, broadcasting)")
        return ("the output is not a simple transform of the expected one: check the "
                "formula against the reference on a few elements")  # rel_l2


def tolerances(dtype: torch.dtype, settings: "TestSettings") -> tuple[float, float, float]:
    """(atol, rtol, rel_l2_limit) for an output dtype; KernelBench uses atol = rtol."""
    if dtype.is_complex:
        bits = dtype.itemsize * 4          # per real component
    elif dtype.is_floating_point:
        bits = dtype.itemsize * 8
    else:
        return 0.0, 0.0, 0.0               # integers and bool compare exactly
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
    acc = _Accumulator(shape, cd, atol, rtol)
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
        patterns, perm = _find_patterns(acc, o, r, shape, numel, atol, rtol, rel_l2)
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


_COUNTS = ("n_bad", "n_nan", "n_inf", "n_ref_finite", "out_nonzero", "ref_nonzero", "n_both")
_SUMS = ("sum_d2", "sum_r2", "sum_or", "sum_rb2", "sum_d")   # float64, over finite pairs


class _Accumulator:
    """Running figures over chunks; one host sync per chunk for the scalars."""

    def __init__(self, shape: tuple[int, ...], cd: torch.dtype, atol: float, rtol: float):
        self.shape, self.cd, self.atol, self.rtol = shape, cd, atol, rtol
        self.strides = [math.prod(shape[d + 1:]) for d in range(len(shape))]
        # dims whose mismatch index sets are tracked: only meaningful with two or more
        sized = [d for d in range(len(shape)) if 1 < shape[d] <= MAX_AXIS_LEN]
        self.axis_dims = sized if sum(n > 1 for n in shape) >= 2 else []
        self.axis_counts: dict[int, torch.Tensor] = {}
        for name in _COUNTS:
            setattr(self, name, 0)
        for name in _SUMS:
            setattr(self, name, 0.0)
        self.worst_abs = self.worst_rel = (-1.0, 0)     # (error, flat position)
        self.first_bad: int | None = None
        self.first_values: tuple[float, float] | None = None
        self.bad_samples: list[torch.Tensor] = []
        self.last_bad: int | None = None
        self.max_gap = 0                    # largest step between consecutive bad flat indices

    def add(self, o: torch.Tensor, r: torch.Tensor, start: int) -> None:
        o, r = o.to(self.cd), r.to(self.cd)
        r_fin, o_fin = torch.isfinite(r), torch.isfinite(o)
        both = r_fin & o_fin
        diff = (o - r).abs()
        within = diff <= self.atol + self.rtol * r.abs()        # NaN compares False
        bad = torch.where(r_fin, ~within, torch.where(torch.isnan(r), ~torch.isnan(o), o != r))
        d = torch.where(both, diff, 0)
        rel = torch.where(both & (r.abs() > self.atol), diff / r.abs(), 0)
        i_abs, i_rel = torch.argmax(d), torch.argmax(rel)
        rb, ob = torch.where(both, r, 0).double(), torch.where(both, o, 0).double()
        rf = torch.where(r_fin, r, 0).double()
        values = torch.stack([
            bad.sum(), (torch.isnan(o) & r_fin).sum(), (torch.isinf(o) & r_fin).sum(),
            r_fin.sum(), (o != 0).sum(), (r != 0).sum(), both.sum(),        # _COUNTS
            (ob - rb).square().sum(), rf.square().sum(), (ob * rb).sum(),
            rb.square().sum(), (ob - rb).sum(),                             # _SUMS
            d[i_abs].double(), i_abs.double(), rel[i_rel].double(), i_rel.double(),
        ]).double().tolist()
        for name, v in zip(_COUNTS, values):
            setattr(self, name, getattr(self, name) + int(v))
        for name, v in zip(_SUMS, values[len(_COUNTS):]):
            setattr(self, name, getattr(self, name) + v)
        err_abs, at_abs, err_rel, at_rel = values[-4:]
        self.worst_abs = max(self.worst_abs, (err_abs, start + int(at_abs)))
        self.worst_rel = max(self.worst_rel, (err_rel, start + int(at_rel)))
        if values[0]:
            self._add_bad(bad, o, r, start)

    def _add_bad(self, bad: torch.Tensor, o: torch.Tensor, r: torch.Tensor, start: int) -> None:
        idx = bad.nonzero().squeeze(1)                  # ascending
        if self.first_bad is None:
            self.first_bad = start + int(idx[0])
            self.first_values = (float(o[idx[0]]), float(r[idx[0]]))
        flat = idx + start
        steps = flat[1:] - flat[:-1]
        if self.last_bad is not None:
            self.max_gap = max(self.max_gap, int(flat[0]) - self.last_bad)
        if steps.numel():
            self.max_gap = max(self.max_gap, int(steps.max()))
        self.last_bad = int(flat[-1])
        for d in self.axis_dims:
            counts = torch.bincount((flat // self.strides[d]) % self.shape[d],
                                    minlength=self.shape[d])
            self.axis_counts[d] = self.axis_counts.get(d, 0) + counts
        self.bad_samples.append(_evenly(flat, SAMPLE_N))


def _evenly(x: torch.Tensor, k: int) -> torch.Tensor:
    if x.numel() <= k:
        return x
    return x[torch.linspace(0, x.numel() - 1, k, device=x.device).long()]


# -- patterns -------------------------------------------------------------------------


def _find_patterns(acc: _Accumulator, o, r, shape, numel, atol, rtol, rel_l2):
    tags: list[str] = []
    if acc.n_nan:
        tags.append("nan")
    if acc.n_inf:
        tags.append("inf")
    if acc.out_nonzero == 0 and acc.ref_nonzero > 0:
        return tuple(tags + ["all_zero"]), None        # nothing else worth saying

    # 1) where: from the exact set of mismatching indices
    if _is_tail(acc, numel):
        tags.append("tail")                            # implies its own axis ranges
    else:
        tags.extend(f"axis:{d}:{detail}" for d, detail in _axis_patterns(acc))

    # 2) what: hypotheses that must explain every sampled position
    pos = _sample_positions(acc, numel, r.device)
    o_s, r_s = o[pos].to(acc.cd), r[pos].to(acc.cd)
    keep = torch.isfinite(r_s)
    pos, o_s, r_s = pos[keep], o_s[keep], r_s[keep]
    rms_ref = math.sqrt(acc.sum_r2 / acc.n_ref_finite) if acc.n_ref_finite else 0.0

    def explains(h: torch.Tensor) -> bool:
        scale = float(h.double().square().mean().sqrt()) if h.numel() else 0.0
        tol = HINT_SLACK * (rtol * h.abs() + min(atol, rtol * scale))
        return bool(((o_s - h).abs() <= tol).all())

    perm = None
    if pos.numel() and not explains(r_s):
        perm = next((p for p in _permutations(shape)
                     if explains(r[_permuted_positions(pos, shape, p)].to(acc.cd))), None)
        if perm is not None:
            tags.append("transposed")
        else:
            factor = acc.sum_or / acc.sum_rb2 if acc.sum_rb2 > 0 else 1.0  # least squares
            offset = acc.sum_d / acc.n_both if acc.n_both else 0.0         # mean of out - ref
            if abs(factor - 1) > HINT_SLACK * rtol and factor != 0 and explains(factor * r_s):
                tags.append(f"constant_factor:{factor:.4g}")
            elif abs(offset) > HINT_SLACK * min(atol, rtol * rms_ref) and explains(r_s + offset):
                tags.append(f"offset:{offset:.4g}")

    # 3) small everywhere: tf32/fp16 compute of an fp32 problem
    structural = any(t.split(":")[0] in ("tail", "axis", "transposed", "constant_factor",
                                         "offset") for t in tags)
    if (not structural and rtol < 1e-3 and not acc.n_nan and not acc.n_inf
            and rel_l2 <= PRECISION_REL and acc.n_bad >= 0.01 * numel and pos.numel()
            and bool(((o_s - r_s).abs() <= PRECISION_REL * (r_s.abs() + rms_ref)).all())):
        tags.append("reduced_precision")
    elif not structural and acc.n_bad > acc.n_nan + acc.n_inf:   # "nan"/"inf" say enough
        tags.append("scattered")
    elif not structural and not acc.n_bad:
        tags.append("rel_l2")
    return tuple(tags), perm


def _is_tail(acc: _Accumulator, numel: int) -> bool:
    """All mismatches at flat index >= f, densely: a partial block or a short grid."""
    f = acc.first_bad
    if f is None or f == 0:
        return False
    density = acc.n_bad / (numel - f)
    # f * density: expected mismatches before f if they were scattered at that density
    if density < 0.25 or f * density < 16:
        return False
    # no long run of right values inside the tail (every other row wrong is no tail)
    if acc.max_gap > max(32, 0.05 * (numel - f)):
        return False
    # per dim, outer to inner, a flat tail hits only the last index, then the last k,
    # then everything; a column bug (all rows, last k columns) does not
    whole = False
    for d in acc.axis_dims:
        hit = (acc.axis_counts[d] > 0).nonzero().squeeze(1)
        size, k = acc.shape[d], hit.numel()
        if whole and k < size:
            return False
        if int(hit[0]) != size - k:                    # not the last k indices
            return False
        whole = whole or k > 1
    return True


def _axis_patterns(acc: _Accumulator) -> list[tuple[int, str]]:
    """Dims along which mismatches sit in a few index ranges: a row/column/tile bug.

    Needs a dim the mismatches span fully, or at least 16 of them (one wrong element is
    not an indexing pattern), and the box they span must be dense.
    """
    if not acc.axis_counts:
        return []
    sets = {d: (c > 0).nonzero().squeeze(1).tolist() for d, c in acc.axis_counts.items()}
    confined = [d for d, s in sets.items() if len(s) < acc.shape[d]]
    full = [d for d, s in sets.items() if len(s) == acc.shape[d]]
    if not confined or not (full or acc.n_bad >= 16):
        return []
    box = math.prod(len(sets[d]) if d in sets else acc.shape[d] for d in range(len(acc.shape)))
    if acc.n_bad / box < 0.25:                         # sparse inside the box: scattered
        return []
    return [(d, _index_set_detail(sets[d], acc.shape[d])) for d in confined]


def _index_set_detail(idx: list[int], size: int) -> str:
    a, b, k = idx[0], idx[-1], len(idx)
    if b - a + 1 == k:
        if a == 0:
            return f"first:{k}"
        if b == size - 1:
            return f"last:{k}"
        return f"range:{a}:{b + 1}"
    steps = {y - x for x, y in zip(idx, idx[1:])}
    if len(steps) == 1:
        return f"every:{steps.pop()}:from:{a}"
    return f"some:{k}"


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


def _sample_positions(acc: _Accumulator, numel: int, device) -> torch.Tensor:
    parts = []
    if acc.bad_samples:
        parts.append(_evenly(torch.cat(acc.bad_samples), SAMPLE_N))
    if numel:
        gen = torch.Generator().manual_seed(0)          # deterministic feedback
        parts.append(torch.randint(numel, (min(numel, SAMPLE_N),), generator=gen).to(device))
        parts.append(torch.tensor([acc.worst_abs[1], acc.worst_rel[1]], device=device))
    return torch.cat(parts) if parts else torch.zeros(0, dtype=torch.long, device=device)


def _permutations(shape: tuple[int, ...]):
    """Non-trivial dim orders (size-1 dims stay put); all for <= 4 sized dims, else a swap."""
    sized = [d for d in range(len(shape)) if shape[d] > 1]
    orders = (itertools.permutations(sized) if len(sized) <= 4
              else [sized[:-2] + [sized[-1], sized[-2]]])
    for order in orders:
        if list(order) == sized:
            continue
        p = list(range(len(shape)))
        for slot, d in zip(sized, order):
            p[slot] = d
        yield tuple(p)


def _permuted_positions(pos: torch.Tensor, shape: tuple[int, ...], p: tuple[int, ...]):
    """Flat positions in ref of ref.permute(p).contiguous().reshape(-1)[pos]."""
    strides = [math.prod(shape[d + 1:]) for d in range(len(shape))]
    rem, flat = pos, torch.zeros_like(pos)
    for axis in reversed(p):
        flat = flat + (rem % shape[axis]) * strides[axis]
        rem = rem // shape[axis]
    return flat


# -- small helpers ----------------------------------------------------------------


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
