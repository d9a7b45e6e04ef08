"""A faster `tl.reduce` with a custom combine function for Triton's CPU interpreter.

Triton's interpreter reduces with a user combine function (Inductor's `max2`, `min2`,
Welford and argmax helpers) one element at a time in Python
(triton/runtime/interpreter.py `ReduceOps.generic_reduce`): a softmax over 64 x 2048
values calls the combine function 130 thousand times, and a seed that finishes in
milliseconds on a GPU times out on cpu. `install` replaces it with a pairwise reduction
over whole blocks: neighbours along the axis combined in one call, log2(n) calls, the
left operand always the earlier element, as `tl.reduce` asks of an associative combine
function (a GPU reduces in a tree too). A combine function that cannot take blocks (it
branches on a value, or takes `not`, `and`, `or` of one: Inductor's argmax helpers'
`not b_isnan`, which a block would answer with its truth as an object, always True) falls
back to Triton's own loop.
"""
from __future__ import annotations

import functools


def install() -> None:
    try:
        from triton.runtime import interpreter
    except ImportError:
        return
    ops = getattr(interpreter, "ReduceOps", None)
    original = getattr(ops, "generic_reduce", None)
    if original is None or getattr(original, "_krefine_pairwise", False):
        return

    def generic_reduce(self, input):
        try:
            return _pairwise(self, input, interpreter)
        except Exception:   # a combine function written for scalars only: Triton's loop
            return original(self, input)
    generic_reduce._krefine_pairwise = True
    ops.generic_reduce = generic_reduce


@functools.cache
def _takes_truth(fn) -> bool:
    """Does `fn`'s source take a value's truth (`not x`, `x and y`, `x if c else y`)? Blocks
    cannot answer that per element (Triton's interpreter answers for the whole block). An
    `if` on a dtype (`if is_floating(a)`, Inductor's max and min) is not a value's."""
    import ast
    import inspect
    import textwrap
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    except (OSError, TypeError, SyntaxError):
        return True
    return any(isinstance(n, (ast.BoolOp, ast.IfExp)) or isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.Not)
               for n in ast.walk(tree))


def _pairwise(self, input, interpreter):
    import numpy as np
    tl = interpreter.tl
    if _takes_truth(self.combine_fn.fn):
        raise TypeError("the combine function takes a value's truth: Triton's loop, per element")
    original_axis = self.axis
    input, axis = self.unravel(input, self.axis)
    dtypes = [arg.dtype for arg in input]
    shape = input[0].handle.data.shape
    if shape[axis] == 0:
        raise ValueError("empty reduction")
    cur = [np.moveaxis(arg.handle.data, axis, 0) for arg in input]   # reduce along axis 0
    while cur[0].shape[0] > 1:
        m = cur[0].shape[0] // 2 * 2
        left = [self.to_tensor(np.ascontiguousarray(c[0:m:2]), dt) for c, dt in zip(cur, dtypes)]
        right = [self.to_tensor(np.ascontiguousarray(c[1:m:2]), dt) for c, dt in zip(cur, dtypes)]
        got = self.combine_fn.fn(*left, *right)
        got = got if isinstance(got, tuple) else (got,)
        if len(got) != len(cur):
            raise ValueError("combine function returned another arity")
        merged = []
        for g, c in zip(got, cur):
            data = g.handle.data if isinstance(g, tl.core.tensor) else np.asarray(g)
            data = np.broadcast_to(data, (m // 2, *c.shape[1:])).astype(c.dtype)
            merged.append(np.concatenate([data, c[m:]]) if c.shape[0] > m else data)
        cur = merged
    ret = []
    for c, dt in zip(cur, dtypes):
        data = c[0]
        if self.keep_dims:
            if original_axis is not None:
                data = np.expand_dims(data, axis)
            else:
                for _ in range(len(shape)):
                    data = np.expand_dims(data, 0)
        elif original_axis is None:
            data = data.item()   # a scalar, as Triton's loop gives
        ret.append(self.to_tensor(data, dt))
    return ret
