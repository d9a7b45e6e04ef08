"""tl.dot of bfloat16 blocks in Triton's CPU interpreter.

The interpreter holds a bfloat16 block as its raw bits in a NumPy uint16 array
(triton/runtime/interpreter.py: `tl.bfloat16: np.dtype(np.uint16)`), and its
`create_dot` widens only 8-bit floats before `np.matmul`: a bf16 dot multiplied the bit
patterns as integers (a bf16 nn.Linear's seed was off by 2e10 on cpu, right on a GPU).
`install` widens bf16 operands to float32 first (the bits shifted into a float32's high
half: exact), as a GPU's tensor cores multiply bf16 exactly and accumulate in float32.
"""
from __future__ import annotations


def install() -> None:
    try:
        import numpy as np
        import triton.language as tl
        from triton.runtime.interpreter import InterpreterBuilder, TensorHandle
    except ImportError:
        return
    original = InterpreterBuilder.create_dot
    if getattr(original, "_krefine_bf16", False):
        return

    def widened(h):
        if h.dtype.scalar == tl.bfloat16 if hasattr(h.dtype, "scalar") else h.dtype == tl.bfloat16:
            return TensorHandle((h.data.astype(np.uint32) << 16).view(np.float32), tl.float32)
        return h

    def create_dot(self, a, b, d, input_precision, max_num_imprecise_acc):
        return original(self, widened(a), widened(b), d, input_precision, max_num_imprecise_acc)
    create_dot._krefine_bf16 = True
    InterpreterBuilder.create_dot = create_dot
