"""Where and how an output is wrong: the chunked pass over it, and the pattern tags.

Covers `Accumulator` (running figures over chunks of the flat output: mismatch counts,
norms, the worst errors, the first bad index, per-axis index sets, samples; one host
sync per chunk) and `find_patterns` (the tags tools/judge/numerics.py's Comparison
carries: nan, inf, all_zero, tail, axis, near_zero, transposed, constant_factor, offset,
reduced_precision, scattered, rel_l2). Tags are heuristics: location tags (tail, axis)
come from the exact set of mismatching indices; value tags (transposed, constant
factor, offset, reduced precision) are hypotheses that must explain every position of
a sample (mismatches spread evenly, uniform positions, the worst ones). Does not decide
pass or fail (numerics.py does). Imports only torch and the standard library.
"""
from __future__ import annotations

import itertools
import math

import torch

SAMPLE_N = 4096           # sampled positions per kind (mismatches, uniform)
MAX_AXIS_LEN = 1 << 20    # longer dims are not analysed for axis patterns
HINT_SLACK = 4.0          # a hypothesis may miss by this many tolerances
PRECISION_REL = 2e-2      # reduced precision: every error below this, relative to scale
ROUNDING_L2 = 1e-5        # near_zero: an fp32 output off by rounding alone (relative L2 below this,
ROUNDING_REL = 1e-4       # every sampled error below this share of the output's RMS)

_COUNTS = ("n_bad", "n_nan", "n_inf", "n_ref_finite", "out_nonzero", "ref_nonzero", "n_both")
_SUMS = ("sum_d2", "sum_r2", "sum_or", "sum_rb2", "sum_d")   # float64, over finite pairs


class Accumulator:
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
        # integers compare in their own type: float64 holds 53 bits, and int64 values past 2**53 that
        # differ (a 64-bit hash, t + 1 near 2**60) would read as equal
        exact = o != r if o.dtype == r.dtype and not (o.dtype.is_floating_point or o.is_complex()) else None
        diff = _integer_diff(o, r) if exact is not None else None
        o, r = o.to(self.cd), r.to(self.cd)
        r_fin, o_fin = torch.isfinite(r), torch.isfinite(o)
        both = r_fin & o_fin
        far = (o - r).abs()
        diff = far if diff is None else torch.where(far < 2.0 ** 53, diff.to(self.cd), far)   # exact where it fits
        within = diff <= self.atol + self.rtol * r.abs()        # NaN compares False
        bad = torch.where(r_fin, ~within, torch.where(torch.isnan(r), ~torch.isnan(o), o != r))
        if exact is not None:
            bad |= exact
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

def find_patterns(acc: Accumulator, o, r, shape, numel, atol, rtol, rel_l2):
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

    # 0) rounding that fails only near zero: fp32 sums or scans accumulated in another order or
    # precision (torch's CPU cumsum adds in float64); the elements off sit wherever the running
    # value crosses zero, which is no indexing pattern
    if (1e-6 <= rtol < 1e-3 and acc.n_bad and not acc.n_nan and not acc.n_inf and rel_l2 <= ROUNDING_L2
            and pos.numel() and rms_ref > 0 and bool(((o_s - r_s).abs() <= ROUNDING_REL * rms_ref).all())):
        return tuple(t for t in tags if not t.startswith(("axis:", "tail"))) + ("near_zero",), None

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
    if any(t.startswith(("constant_factor:", "offset:")) for t in tags):
        # it explains every sampled position: the errors are everywhere, and where they
        # pass the tolerance (values near 0) is no indexing pattern
        tags = [t for t in tags if not t.startswith("axis:")]

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


def _is_tail(acc: Accumulator, numel: int) -> bool:
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


def _axis_patterns(acc: Accumulator) -> list[tuple[int, str]]:
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


def _sample_positions(acc: Accumulator, numel: int, device) -> torch.Tensor:
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


def _integer_diff(o: torch.Tensor, r: torch.Tensor) -> torch.Tensor | None:
    """|o - r| in int64 (exact where it does not overflow), or None where the type has no
    such subtraction (bool, uint64): the float figures then."""
    if o.dtype in (torch.bool, torch.uint64):
        return None
    a, b = o.to(torch.int64), r.to(torch.int64)
    return torch.where(a >= b, a - b, b - a)
