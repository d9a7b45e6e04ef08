"""Why a capture with an op Inductor leaves to PyTorch (a fallback kernel) gets no seed: the
one line tools/dialect/kernelbook.py raises, naming the op, what the user wrote that made it
where the op's name does not say (`_FALLBACK_HINTS`), complex tensors anywhere in call(), and
the other fallbacks after it."""
from __future__ import annotations

import ast
import re

from tools.dialect.inductor_wrapper import call_name

# what the user wrote that becomes a fallback no kernel can stand in for, where the op's name does not say
_FALLBACK_HINTS = {
    "nonzero": " (torch.nonzero, torch.where(cond) or a boolean mask: an output whose size depends on the "
               "values, where a seed's sizes are fixed when it is made)",
    "repeat_interleave": " (repeats given as a tensor: a size that depends on its values)",
    "masked_select": " (torch.masked_select: an output whose size depends on the values, where a seed's sizes are "
                     "fixed when it is made)",
    **dict.fromkeys(("unique_consecutive", "_unique2", "unique_dim"), " (torch.unique: a size that depends on the values)"),
    "index": " (a boolean mask, x[mask]: an output whose size depends on the values, where a seed's sizes are "
             "fixed when it is made)",
    "set_": " (an assignment to a tensor's .data, `self.w.data = ...` or `self.w.data *= m`: write it in place "
            "instead, `self.w.data.copy_(...)`, `self.w.data.mul_(m)`)",
    "linalg_matrix_exp": " (torch.matrix_exp, called directly or by parametrizations.orthogonal)",
    "_linalg_solve_ex": " (torch.linalg.solve, called directly or by parametrizations.orthogonal's Cayley map)",
    **dict.fromkeys(("_fft_r2c", "_fft_c2r", "_fft_c2c"), " (torch.fft)")}
# view_as_complex, a complex buffer, aten.full of one; a complex input read as real (view_as_real), torch.polar, conj
_COMPLEX = re.compile(r"\btorch\.complex(32|64|128)\b|complex|view_as_real|\.polar\.|\._conj\.")


def is_fallback(stmt) -> bool:
    return isinstance(stmt, (ast.Assign, ast.Expr)) and call_name(stmt).startswith(("torch.ops.", "aten."))


def _hint(stmt) -> str:
    return next((why for op, why in _FALLBACK_HINTS.items() if f".{op}." in call_name(stmt) + "."), "")


def fallback_fault(stmt, rest: list, call_fn) -> ValueError:
    """Why a call() with PyTorch's fallback `stmt` (and the `rest` after it) gets no seed. The op
    named is the first whose name says what the user wrote (torch.fft over the aten.full of a
    complex buffer before it), else, with complex tensors in call(), the first complex op
    (view_as_real of a complex input, torch.polar), else `stmt`; complex tensors are said too."""
    fallbacks = [stmt, *(s for s in rest if is_fallback(s))]
    complex_ = bool(_COMPLEX.search(ast.unparse(call_fn)))
    # with complex tensors about, aten.index is a gather (torch.roll of one), not a boolean mask
    hinted = [s for s in fallbacks if _hint(s) and not (complex_ and _hint(s) == _FALLBACK_HINTS["index"])]
    named = hinted[0] if hinted else next((s for s in fallbacks if complex_ and _COMPLEX.search(call_name(s) + ".")),
                                          stmt)
    said = _hint(named) if hinted else ""
    if complex_ and "complex" not in said:
        said = f"{said[:-1]}; complex tensors: Triton has no complex dtype)" if said else \
            " (complex tensors: Triton has no complex dtype)"
    more = sorted({call_name(s) for s in fallbacks} - {call_name(named)})
    return ValueError(f"call(): Inductor leaves {call_name(named)} to PyTorch (a fallback kernel), and krefine has "
                      f"no Triton kernel for it{said}" + f"; also left to PyTorch: {', '.join(more)}" * bool(more))
