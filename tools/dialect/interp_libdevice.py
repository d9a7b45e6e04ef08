"""libdevice for Triton's interpreter (`--device cpu`), so Inductor-style kernels run.

On a GPU, `libdevice.rsqrt(x)` (triton.language.extra.libdevice, the module
Inductor's triton_helpers re-exports) becomes a call into NVIDIA's libdevice. Triton's
interpreter has no libdevice: the stub returns None and the kernel fails. `install()`
points every stub, and the CUDA backend's functions of the same names, at the CUDA
backend's own definitions run with the interpreter's semantic, so argument types,
broadcasting and the result type are decided exactly as on the GPU; the one thing the
interpreter lacks, the element-wise call itself, is computed here with NumPy in float64
and rounded once to the result type (fp32 stays fp32; `_rz/_rd/_ru` variants round in
their direction).

Computes only on interpreter tensors inside a running kernel: a torch.Tensor passed from
host code is refused, so this gives a candidate no PyTorch compute. Not covered: Bessel
functions j0/j1/y0/y1/jn/yn, cyl_bessel_i1, byte_perm and rcp64h, which raise a clear
NotImplementedError. Does nothing on the GPU: the worker installs it on cpu only.
"""
from __future__ import annotations

import math
import sys

import numpy as np

_MODULES = ("triton.language.extra.libdevice", "triton.language.extra.cuda.libdevice")
_current: list[str] = []   # the libdevice function being evaluated (its name picks the NumPy code)
_installed = False


def install() -> None:
    """Make libdevice work inside interpreted kernels of this process (idempotent)."""
    global _installed
    if _installed:
        return
    import importlib
    from triton.runtime import interpreter
    cuda = importlib.import_module("triton.language.extra.cuda.libdevice")
    stub = importlib.import_module("triton.language.extra.libdevice")
    semantic = interpreter.interpreter_semantic
    for name, fn in list(vars(cuda).items()):
        if callable(fn) and getattr(fn, "__triton_builtin__", False):
            shim = _shim(name, fn, semantic)
            setattr(cuda, name, shim)
            if hasattr(stub, name):
                setattr(stub, name, shim)
    interpreter.InterpreterBuilder.create_extern_elementwise = _extern_elementwise
    _installed = True


def _shim(name: str, fn, semantic):
    def call(*args, **kwargs):
        kwargs.pop("_semantic", None)
        kwargs.pop("_builder", None)
        torch = sys.modules.get("torch")
        if torch is not None and any(isinstance(a, torch.Tensor) for a in (*args, *kwargs.values())):
            raise TypeError(f"libdevice.{name} works on values inside a @triton.jit kernel, "
                            "not on torch tensors")
        _current.append(name)
        try:
            return fn(*args, _semantic=semantic, **kwargs)
        finally:
            _current.pop()
    call.__name__ = call.__qualname__ = name
    call.__module__ = _MODULES[0]   # Triton treats this module's functions as stubs
    return call


def _extern_elementwise(self, lib_name, lib_path, symbol, args, ret_type, is_pure):
    from triton.runtime.interpreter import TensorHandle, _get_np_dtype
    name = _current[-1] if _current else symbol
    impl = _TABLE.get(name)
    if impl is None:
        raise NotImplementedError(f"libdevice.{name} ({symbol}) cannot run in Triton's interpreter "
                                  "(--device cpu); it runs on the GPU only")
    out = _get_np_dtype(ret_type)
    with np.errstate(all="ignore"):
        res = np.asarray(impl(out, symbol, *[a.data for a in args]))
    return TensorHandle(res.astype(out), ret_type.scalar)


# --- the element-wise functions: impl(out_dtype, symbol, *arrays) -----------------------

def _f64(x):
    return np.asarray(x).astype(np.float64)


def _unary(fn):
    return lambda out, sym, x: fn(_f64(x))


def _binary(fn):
    return lambda out, sym, x, y: fn(_f64(x), _f64(y))


def _each(fn, nan=math.nan):
    """A scalar math function over an array; a domain error gives `nan` (a callable of x)."""
    def run(x):
        def one(v):
            try:
                return fn(v)
            except (ValueError, OverflowError):
                return nan(v) if callable(nan) else nan
        return np.vectorize(one, otypes=[np.float64])(x)
    return run


def _rounded(mode: str):
    """Round a float64 result to the fp32 result type in direction `mode` (rn/rz/rd/ru)."""
    def finish(out, exact):
        r = exact.astype(out)
        if out != np.float32 or mode == "rn":
            return r
        r64 = r.astype(np.float64)
        if mode == "rz":
            return np.where(np.abs(r64) > np.abs(exact), np.nextafter(r, np.float32(0)), r)
        if mode == "rd":
            return np.where(r64 > exact, np.nextafter(r, np.float32(-np.inf)), r)
        return np.where(r64 < exact, np.nextafter(r, np.float32(np.inf)), r)
    return finish


def _directed(op, mode):
    finish = _rounded(mode)
    return lambda out, sym, *xs: finish(out, op(*(_f64(x) for x in xs)))


_TO_INT = {"rn": np.rint, "rz": np.trunc, "rd": np.floor, "ru": np.ceil}


def _to_int(mode, unsigned=False):
    """float -> integer as PTX's cvt does it: rounded in `mode`, NaN to 0, saturated."""
    def conv(out, sym, x):
        bits = np.dtype(out).itemsize * 8
        kind = np.dtype(f"uint{bits}" if unsigned else f"int{bits}")
        info = np.iinfo(kind)
        r = np.nan_to_num(_TO_INT[mode](_f64(x)), nan=0.0)
        high, low = r >= float(info.max), r <= float(info.min)
        ints = np.where(high | low, 0, r).astype(kind)
        ints = np.where(high, info.max, np.where(low, info.min, ints)).astype(kind)
        return ints.view(out) if np.dtype(out).kind != kind.kind else ints
    return conv


def _from_int(mode):
    finish = _rounded(mode)
    return lambda out, sym, x: finish(out, np.asarray(x).astype(np.float64))


def _erfinv(y):
    """Inverse error function: a rational first guess, then Newton steps on math.erf."""
    if y <= -1 or y >= 1:
        return -math.inf if y == -1 else math.inf if y == 1 else math.nan
    a = 0.147
    ln = math.log(1 - y * y)
    t = 2 / (math.pi * a) + ln / 2
    x = math.copysign(math.sqrt(math.sqrt(t * t - ln / a) - t), y)
    for _ in range(3):
        x -= (math.erf(x) - y) / (2 / math.sqrt(math.pi) * math.exp(-x * x))
    return x


def _erfcx(x):
    if x < 25:
        return math.exp(x * x) * math.erfc(x)
    return 1 / (x * math.sqrt(math.pi)) * (1 - 1 / (2 * x * x))


def _tgamma_pole(v):
    return math.copysign(math.inf, v) if v == 0 else math.nan


def _ilogb(out, sym, x):
    x = _f64(x)
    _, e = np.frexp(x)
    r = (e - 1).astype(np.int64)
    r = np.where(x == 0, -2 ** 31, r)
    r = np.where(np.isnan(x), -2 ** 31, r)
    return np.where(np.isinf(x), 2 ** 31 - 1, r)


def _logb(out, sym, x):
    x = _f64(x)
    _, e = np.frexp(x)
    r = (e - 1).astype(np.float64)
    r = np.where(x == 0, -np.inf, r)
    return np.where(np.isfinite(x), r, np.abs(x))


def _round_half_away(x):
    return np.copysign(np.floor(np.abs(x) + 0.5), x)


def _bits(x):
    x = np.asarray(x)
    return x.view(np.uint64 if x.dtype.itemsize == 8 else np.uint32).astype(np.uint64), x.dtype.itemsize * 8


def _clz(out, sym, x):
    u, width = _bits(x)
    return np.array([width - int(v).bit_length() for v in u.ravel()]).reshape(u.shape)


def _popc(out, sym, x):
    u, _ = _bits(x)
    return np.array([bin(int(v)).count("1") for v in u.ravel()]).reshape(u.shape)


def _ffs(out, sym, x):
    u, _ = _bits(x)
    return np.array([(int(v) & -int(v)).bit_length() for v in u.ravel()]).reshape(u.shape)


def _brev(out, sym, x):
    u, width = _bits(x)
    rev = [int(format(int(v), f"0{width}b")[::-1], 2) for v in u.ravel()]
    return np.array(rev, dtype=np.uint64).reshape(u.shape).astype(np.asarray(x).dtype.str.replace("i", "u"))


def _mulhi(out, sym, a, b):
    width = np.asarray(a).dtype.itemsize * 8
    hi = [(int(x) * int(y)) >> width for x, y in zip(np.ravel(a), np.ravel(b))]
    mask = (1 << width) - 1
    return np.array([h & mask for h in hi], dtype=np.uint64).reshape(np.shape(a)).astype(np.asarray(a).dtype)


def _mul24(out, sym, a, b):
    def low24(v):
        v = np.asarray(v).astype(np.int64) & 0xFFFFFF
        return v if sym.startswith("__nv_u") else np.where(v >= 1 << 23, v - (1 << 24), v)
    return low24(a) * low24(b)


_TABLE = {
    # rounding, classification, sign
    "floor": _unary(np.floor), "ceil": _unary(np.ceil), "trunc": _unary(np.trunc),
    "rint": _unary(np.rint), "nearbyint": _unary(np.rint), "round": _unary(_round_half_away),
    "llrint": _unary(np.rint), "llround": _unary(_round_half_away),
    "abs": lambda out, sym, x: np.abs(x), "saturatef": _unary(lambda x: np.clip(np.nan_to_num(x, nan=0.0), 0, 1)),
    "isnan": lambda out, sym, x: np.isnan(x), "isinf": lambda out, sym, x: np.isinf(x),
    "finitef": lambda out, sym, x: np.isfinite(x), "isfinited": lambda out, sym, x: np.isfinite(x),
    "signbit": lambda out, sym, x: np.signbit(x), "copysign": _binary(np.copysign),
    "nextafter": lambda out, sym, x, y: np.nextafter(np.asarray(x).astype(out), np.asarray(y).astype(out)),
    "fdim": _binary(lambda x, y: np.where(np.isnan(x) | np.isnan(y), np.nan, np.maximum(x - y, 0))),
    "ilogb": _ilogb, "logb": _logb,
    "ldexp": lambda out, sym, x, n: np.ldexp(np.asarray(x).astype(out), np.asarray(n).astype(np.int32)),
    "scalbn": lambda out, sym, x, n: np.ldexp(np.asarray(x).astype(out), np.asarray(n).astype(np.int32)),
    # powers, roots, exponentials, logarithms
    "sqrt": _unary(np.sqrt), "rsqrt": _unary(lambda x: 1 / np.sqrt(x)), "rsqrt_rn": _unary(lambda x: 1 / np.sqrt(x)),
    "cbrt": _unary(np.cbrt), "rcbrt": _unary(lambda x: 1 / np.cbrt(x)),
    "exp": _unary(np.exp), "exp2": _unary(np.exp2), "exp10": _unary(lambda x: np.power(10.0, x)),
    "expm1": _unary(np.expm1), "log": _unary(np.log), "log2": _unary(np.log2), "log10": _unary(np.log10),
    "log1p": _unary(np.log1p), "pow": _binary(np.power), "fast_powf": _binary(np.power),
    "fast_expf": _unary(np.exp), "fast_exp10f": _unary(lambda x: np.power(10.0, x)),
    "fast_logf": _unary(np.log), "fast_log2f": _unary(np.log2), "fast_log10f": _unary(np.log10),
    "hypot": _binary(np.hypot), "rhypot": _binary(lambda x, y: 1 / np.hypot(x, y)),
    "norm3d": lambda out, sym, *v: np.sqrt(sum(_f64(a) ** 2 for a in v)),
    "norm4d": lambda out, sym, *v: np.sqrt(sum(_f64(a) ** 2 for a in v)),
    "rnorm3d": lambda out, sym, *v: 1 / np.sqrt(sum(_f64(a) ** 2 for a in v)),
    "rnorm4d": lambda out, sym, *v: 1 / np.sqrt(sum(_f64(a) ** 2 for a in v)),
    "fmod": _binary(np.fmod), "remainder": _binary(np.vectorize(
        lambda x, y: math.remainder(x, y) if math.isfinite(x) and y != 0 and not math.isnan(y) else math.nan,
        otypes=[np.float64])),
    "fma": lambda out, sym, x, y, z: _f64(x) * _f64(y) + _f64(z),
    "fast_dividef": _binary(np.divide),
    # trigonometric and hyperbolic
    "sin": _unary(np.sin), "cos": _unary(np.cos), "tan": _unary(np.tan), "fast_sinf": _unary(np.sin),
    "fast_cosf": _unary(np.cos), "fast_tanf": _unary(np.tan), "sinpi": _unary(lambda x: np.sin(np.pi * x)),
    "cospi": _unary(lambda x: np.cos(np.pi * x)), "asin": _unary(np.arcsin), "acos": _unary(np.arccos),
    "atan": _unary(np.arctan), "atan2": _binary(np.arctan2), "sinh": _unary(np.sinh), "cosh": _unary(np.cosh),
    "tanh": _unary(np.tanh), "asinh": _unary(np.arcsinh), "acosh": _unary(np.arccosh),
    "atanh": _unary(np.arctanh),
    # special functions
    "erf": _unary(_each(math.erf)), "erfc": _unary(_each(math.erfc)),
    "erfinv": _unary(_each(_erfinv)), "erfcinv": _unary(_each(lambda v: _erfinv(1 - v))),
    "erfcx": _unary(_each(_erfcx)), "normcdf": _unary(_each(lambda v: 0.5 * math.erfc(-v / math.sqrt(2)))),
    "normcdfinv": _unary(_each(lambda v: -math.sqrt(2) * _erfinv(1 - 2 * v))),
    "lgamma": _unary(_each(math.lgamma, nan=math.inf)), "tgamma": _unary(_each(math.gamma, nan=_tgamma_pole)),
    "cyl_bessel_i0": _unary(np.i0),
    # bit casts and integer helpers
    "float_as_int": lambda out, sym, x: np.asarray(x).view(np.int32),
    "float_as_uint": lambda out, sym, x: np.asarray(x).view(np.int32),
    "int_as_float": lambda out, sym, x: np.asarray(x).view(np.float32),
    "uint_as_float": lambda out, sym, x: np.asarray(x).view(np.float32),
    "double_as_longlong": lambda out, sym, x: np.asarray(x).view(np.int64),
    "longlong_as_double": lambda out, sym, x: np.asarray(x).view(np.float64),
    "double2loint": lambda out, sym, x: (np.asarray(x).view(np.uint64) & 0xFFFFFFFF).astype(np.uint32).view(np.int32),
    "double2hiint": lambda out, sym, x: (np.asarray(x).view(np.uint64) >> np.uint64(32)).astype(np.uint32).view(np.int32),
    "hiloint2double": lambda out, sym, hi, lo: ((np.asarray(hi).astype(np.uint32).astype(np.uint64) << np.uint64(32))
                                                | np.asarray(lo).astype(np.uint32).astype(np.uint64)).view(np.float64),
    "clz": _clz, "popc": _popc, "ffs": _ffs, "brev": _brev, "mulhi": _mulhi, "mul24": _mul24,
    "sad": lambda out, sym, a, b, c: np.abs(np.asarray(a).astype(np.int64) - np.asarray(b).astype(np.int64)) + c,
    "hadd": lambda out, sym, a, b: (np.asarray(a).astype(np.int64) + np.asarray(b).astype(np.int64)) >> 1,
    "rhadd": lambda out, sym, a, b: (np.asarray(a).astype(np.int64) + np.asarray(b).astype(np.int64) + 1) >> 1,
}
for _mode in ("rn", "rz", "rd", "ru"):
    _TABLE.update({
        f"add_{_mode}": _directed(np.add, _mode), f"sub_{_mode}": _directed(np.subtract, _mode),
        f"mul_{_mode}": _directed(np.multiply, _mode), f"div_{_mode}": _directed(np.divide, _mode),
        f"rcp_{_mode}": _directed(lambda x: 1 / x, _mode), f"sqrt_{_mode}": _directed(np.sqrt, _mode),
        f"fma_{_mode}": _directed(lambda x, y, z: x * y + z, _mode),
        f"double2float_{_mode}": _directed(lambda x: x, _mode),
        f"int2float_{_mode}": _from_int(_mode), f"uint2float_{_mode}": _from_int(_mode),
        f"ll2float_{_mode}": _from_int(_mode), f"ull2float_{_mode}": _from_int(_mode),
        f"ll2double_{_mode}": _from_int(_mode), f"ull2double_{_mode}": _from_int(_mode),
        f"float2int_{_mode}": _to_int(_mode), f"double2int_{_mode}": _to_int(_mode),
        f"float2ll_{_mode}": _to_int(_mode), f"double2ll_{_mode}": _to_int(_mode),
        f"float2uint_{_mode}": _to_int(_mode, unsigned=True), f"double2uint_{_mode}": _to_int(_mode, unsigned=True),
        f"float2ull_{_mode}": _to_int(_mode, unsigned=True), f"double2ull_{_mode}": _to_int(_mode, unsigned=True),
    })
_TABLE.update({"int2double_rn": _from_int("rn"), "uint2double_rn": _from_int("rn")})
