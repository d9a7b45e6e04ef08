"""Runs Inductor's libdevice calls and triton_helpers in Triton's interpreter after the
worker's dialect support is installed, against torch, and prints one JSON object:
{check name: error in fp32 ulps (0 = exact), or "error: ..."}.

Run by tests/test_dialect.py in a fresh process with TRITON_INTERPRET=1 (the interpreter
patches triton.language process-wide, and install() changes torch.cuda there).
"""
from __future__ import annotations

import json
import math
import sys
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from tools.dialect import runtime  # noqa: E402

runtime.install("cpu")
warnings.simplefilter("ignore")   # NumPy's notes on NaN/inf inputs, which are checked on purpose

import triton  # noqa: E402
import triton.language as tl  # noqa: E402
from torch._inductor.runtime import triton_helpers  # noqa: E402
from torch._inductor.runtime.triton_helpers import libdevice  # noqa: E402

N = 64
FN = None   # the function a kernel below applies, set before each launch


@triton.jit
def unary(x_ptr, o_ptr, N: tl.constexpr):
    i = tl.arange(0, N)
    tl.store(o_ptr + i, FN(tl.load(x_ptr + i)).to(tl.float32))


@triton.jit
def binary(x_ptr, y_ptr, o_ptr, N: tl.constexpr):
    i = tl.arange(0, N)
    tl.store(o_ptr + i, FN(tl.load(x_ptr + i), tl.load(y_ptr + i)).to(tl.float32))


@triton.jit
def pow_int(x_ptr, o_ptr, N: tl.constexpr):
    i = tl.arange(0, N)
    tl.store(o_ptr + i, libdevice.pow(tl.load(x_ptr + i), 3))


@triton.jit
def rows(x_ptr, o_ptr, R: tl.constexpr, C: tl.constexpr):
    """Row-wise triton_helpers reductions of an (R, C) block; o holds R per statistic."""
    r = tl.arange(0, R)[:, None]
    c = tl.arange(0, C)[None, :]
    v = tl.load(x_ptr + r * C + c)
    tl.store(o_ptr + 0 * R + r, triton_helpers.max2(v, 1)[:, None])
    tl.store(o_ptr + 1 * R + r, triton_helpers.min2(v, 1)[:, None])
    tl.store(o_ptr + 2 * R + r, triton_helpers.promote_to_tensor(tl.sum(v, 1))[:, None])
    mean, m2, weight = triton_helpers.welford_reduce(v, tl.zeros([R, C], tl.float32), tl.zeros([R, C], tl.float32),
                                                     tl.zeros([R, C], tl.float32), True)
    mean, m2, weight = triton_helpers.welford(mean, m2, weight, 1)
    tl.store(o_ptr + 3 * R + r, mean[:, None])
    tl.store(o_ptr + 4 * R + r, (m2 / weight)[:, None])
    tl.store(o_ptr + 5 * R + r, triton_helpers.any(v > 2.0, 1)[:, None].to(tl.float32))
    tl.store(o_ptr + 6 * R + r, triton_helpers.prod(v, 1)[:, None])


@triton.jit
def elementwise_helpers(x_ptr, y_ptr, o_ptr, N: tl.constexpr):
    i = tl.arange(0, N)
    x = tl.load(x_ptr + i)
    y = tl.load(y_ptr + i)
    tl.store(o_ptr + 0 * N + i, triton_helpers.maximum(x, y))
    tl.store(o_ptr + 1 * N + i, triton_helpers.minimum(x, y))
    tl.store(o_ptr + 2 * N + i, triton_helpers.exp(x, False))
    mantissa, exponent = triton_helpers.frexp(x)
    tl.store(o_ptr + 3 * N + i, mantissa)
    tl.store(o_ptr + 4 * N + i, exponent.to(tl.float32))
    a = (x * 10).to(tl.int32)
    tl.store(o_ptr + 5 * N + i, triton_helpers.div_floor_integer(a, 3).to(tl.float32))
    tl.store(o_ptr + 6 * N + i, triton_helpers.remainder_integer(a, 3).to(tl.float32))


def ulps(got: torch.Tensor, ref: torch.Tensor) -> float:
    """Largest difference in units of the fp32 spacing at the reference (NaN and inf must match)."""
    g, r = got.double().numpy(), ref.float().double().numpy()
    same = (np.isnan(g) & np.isnan(r)) | (g == r)
    if (np.isnan(g) != np.isnan(r)).any() or (np.isinf(g) != np.isinf(r)).any():
        return math.inf
    spacing = np.spacing(np.abs(r).astype(np.float32)).astype(np.float64)
    with np.errstate(all="ignore"):
        err = np.where(same, 0.0, np.abs(g - r) / spacing)
    return float(err.max())


def values(lo: float, hi: float, n: int = N, special: bool = False) -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    x = lo + (hi - lo) * torch.rand(n, generator=g)
    if special:
        x[:6] = torch.tensor([float("nan"), float("inf"), -float("inf"), 0.0, -0.0, 2.5])
    return x


def run_unary(fn, x):
    global FN
    FN = fn
    out = torch.empty_like(x)
    unary[(1,)](x, out, N=x.numel())
    return out


def run_binary(fn, x, y):
    global FN
    FN = fn
    out = torch.empty_like(x)
    binary[(1,)](x, y, out, N=x.numel())
    return out


def round_half_away(x):
    return torch.sign(x) * torch.floor(x.abs() + 0.5)


UNARY = {   # name: (reference on float64, low, high, include nan/inf/0)
    "rsqrt": (torch.rsqrt, 0.01, 10, False), "sqrt": (torch.sqrt, 0, 10, False),
    "tanh": (torch.tanh, -6, 6, True), "erf": (torch.erf, -3, 3, True), "erfc": (torch.erfc, -3, 3, False),
    "exp": (torch.exp, -10, 10, True), "exp2": (torch.exp2, -10, 10, False), "expm1": (torch.expm1, -3, 3, False),
    "log": (torch.log, 0.01, 100, False), "log2": (torch.log2, 0.01, 100, False),
    "log10": (torch.log10, 0.01, 100, False), "log1p": (torch.log1p, -0.9, 10, False),
    "sin": (torch.sin, -6, 6, False), "cos": (torch.cos, -6, 6, False), "tan": (torch.tan, -1.5, 1.5, False),
    "asin": (torch.asin, -0.99, 0.99, False), "acos": (torch.acos, -0.99, 0.99, False),
    "atan": (torch.atan, -10, 10, False), "sinh": (torch.sinh, -5, 5, False), "cosh": (torch.cosh, -5, 5, False),
    "asinh": (torch.asinh, -10, 10, False), "acosh": (torch.acosh, 1, 10, False),
    "atanh": (torch.atanh, -0.99, 0.99, False), "erfinv": (torch.erfinv, -0.99, 0.99, False),
    "lgamma": (torch.lgamma, 0.1, 10, False), "floor": (torch.floor, -5, 5, True),
    "ceil": (torch.ceil, -5, 5, True), "trunc": (torch.trunc, -5, 5, True),
    "nearbyint": (torch.round, -5, 5, True), "rint": (torch.round, -5, 5, False),
    "round": (round_half_away, -5, 5, False), "abs": (torch.abs, -5, 5, True),
    "isnan": (lambda x: torch.isnan(x).double(), -5, 5, True),
    "isinf": (lambda x: torch.isinf(x).double(), -5, 5, True),
    "signbit": (lambda x: torch.signbit(x).double(), -5, 5, True),
}
BINARY = {
    "pow": (torch.pow, (0.1, 5), (-3, 3)), "fmod": (torch.fmod, (-10, 10), (0.5, 3)),
    "atan2": (torch.atan2, (-5, 5), (-5, 5)), "hypot": (torch.hypot, (-5, 5), (-5, 5)),
    "copysign": (torch.copysign, (-5, 5), (-5, 5)), "fast_dividef": (torch.div, (-5, 5), (0.5, 5)),
    "div_rn": (torch.div, (-5, 5), (0.5, 5)), "nextafter": (torch.nextafter, (-5, 5), (-5, 5)),
}


def checks() -> dict:
    results = {}

    def record(name, compute):
        try:
            results[name] = compute()
        except Exception as e:  # one broken function must not hide the others
            results[name] = f"error: {type(e).__name__}: {e}"[:300]

    for name, (ref, lo, hi, special) in UNARY.items():
        x = values(lo, hi, special=special)
        record(f"libdevice.{name}", lambda: ulps(run_unary(getattr(libdevice, name), x), ref(x.double())))
    for name, (ref, (xlo, xhi), (ylo, yhi)) in BINARY.items():
        x, y = values(xlo, xhi), values(ylo, yhi).flip(0)
        exact = ref(x, y) if name == "nextafter" else ref(x.double(), y.double())
        record(f"libdevice.{name}", lambda: ulps(run_binary(getattr(libdevice, name), x, y), exact))
    x = values(0.1, 3)
    record("libdevice.pow(x, 3)", lambda: (lambda out: (pow_int[(1,)](x, out, N=N), ulps(out, x.double() ** 3))[1])(
        torch.empty_like(x)))
    third = torch.full((N,), 1.0) / 3

    def directed():
        lo, hi = run_binary(libdevice.div_rz, torch.ones(N), torch.full((N,), 3.0)), \
            run_binary(libdevice.div_ru, torch.ones(N), torch.full((N,), 3.0))
        return 0.0 if bool((lo < hi).all() and (torch.nextafter(lo, hi) == hi).all() and (lo <= third).all()) else 1.0
    record("libdevice.div_rz < div_ru", directed)

    v = values(-3, 3, n=4 * 8).reshape(4, 8)
    v[1, 3] = float("nan")
    out = torch.empty(7 * 4)
    rows[(1,)](v, out, R=4, C=8)
    want = [v.amax(1), v.amin(1), v.sum(1), v.mean(1), v.var(1, unbiased=False), (v > 2).any(1).float(), v.prod(1)]
    for k, name in enumerate(["max2", "min2", "promote_to_tensor(sum)", "welford mean", "welford var", "any",
                              "prod"]):
        record(f"triton_helpers.{name}", lambda: ulps(out[4 * k:4 * k + 4], want[k].double()) if k < 3 or k == 5
               else ulps(out[4 * k:4 * k + 4][[0, 2, 3]], want[k][[0, 2, 3]].double()))

    x, y = values(-3, 3, special=True), values(-3, 3)
    out = torch.empty(7 * N)
    elementwise_helpers[(1,)](x, y, out, N=N)
    mantissa, exponent = torch.frexp(x)
    a = (x * 10).to(torch.int32)
    want = [torch.maximum(x, y), torch.minimum(x, y), x.double().exp(), mantissa, exponent.float(),
            torch.div(a, 3, rounding_mode="floor").float(), torch.remainder(a, 3).float()]
    for k, name in enumerate(["maximum", "minimum", "exp", "frexp mantissa", "frexp exponent",
                              "div_floor_integer", "remainder_integer"]):
        if name.startswith(("frexp", "div_", "remainder")):
            keep = torch.isfinite(x)   # torch and Inductor differ only on non-finite inputs
            record(f"triton_helpers.{name}", lambda: ulps(out[k * N:(k + 1) * N][keep], want[k][keep].double()))
        else:
            record(f"triton_helpers.{name}", lambda: ulps(out[k * N:(k + 1) * N], want[k].double()))

    def host_tensor_refused():
        try:
            libdevice.exp(torch.ones(2))
        except TypeError:
            return 0.0
        return 1.0
    record("libdevice refuses torch tensors", host_tensor_refused)
    return results


if __name__ == "__main__":
    print(json.dumps(checks()))
