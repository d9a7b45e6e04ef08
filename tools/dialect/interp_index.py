"""A kernel's integer argument as a loop bound in Triton's CPU interpreter, on Triton 3.6.

Triton's interpreter holds a scalar argument as a one-element array and turns it into a
Python int, for `range(0, n, BLOCK)` or `tl.range`, with the tensor's `__index__`
(triton/runtime/interpreter.py `_patch_lang_tensor`). Triton 3.6 does that with
`int(self.handle.data)`, which NumPy 2.4 refuses for an array with a dimension ("only
0-dimensional arrays can be converted to Python scalars"; deprecated since NumPy 1.25), so
every Inductor reduction that loops over `r0_numel` fails on cpu with Triton 3.6 and a
current NumPy. Triton 3.7 and later convert `self.handle.data.squeeze()`; `install` makes
any version do the same. Nothing here computes on tensors.
"""
from __future__ import annotations


def install() -> None:
    try:
        from triton.runtime import interpreter
    except ImportError:
        return
    original = getattr(interpreter, "_patch_lang_tensor", None)
    if original is None or getattr(original, "_krefine_index", False):
        return

    def _patch_lang_tensor(tensor, scope):
        original(tensor, scope)
        scope.set_attr(tensor, "__index__", _index)   # restored with the rest after the kernel
    _patch_lang_tensor._krefine_index = True
    interpreter._patch_lang_tensor = _patch_lang_tensor


def _index(self) -> int:
    return int(self.handle.data.squeeze())   # Triton 3.7's own conversion
