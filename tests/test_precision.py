"""tools/precision.py: the precision of tl.dot calls, read and rewritten (issue 31, item 1)."""
import ast

import pytest

from tools.precision import dot_precisions, with_dot_precision

KERNEL = '''
import triton
import triton.language as tl

@triton.jit
def k(a, b, c):
    ALLOW_TF32 : tl.constexpr = False
    x = tl.dot(a, b)
    y = tl.dot(a, b, allow_tf32=ALLOW_TF32, out_dtype=tl.float32)
    z = tl.dot(a,
               b, input_precision="ieee")
    w = tl.dot(a, b, input_precision="tf32")
'''


def test_a_constexpr_bound_in_the_kernel_body_is_read_as_its_literal():
    assert dot_precisions(ast.parse(KERNEL)) == {"default": 1, "ieee": 2, "tf32": 1}


def test_a_parameter_named_in_allow_tf32_is_computed_not_guessed():
    src = "import triton.language as tl\ndef k(a, b, T):\n    return tl.dot(a, b, allow_tf32=T)\n"
    assert dot_precisions(ast.parse(src)) == {"computed": 1}


def test_every_exact_dot_becomes_tf32x3_and_nothing_else_changes():
    out = with_dot_precision(KERNEL, "tf32x3")
    assert dot_precisions(ast.parse(out)) == {"default": 1, "tf32x3": 2, "tf32": 1}
    changed = [(a, b) for a, b in zip(KERNEL.splitlines(), out.splitlines()) if a != b]
    assert len(changed) == 2 and all("tf32x3" in b for _, b in changed)


def test_a_dot_with_no_precision_gets_the_keyword_appended():
    out = with_dot_precision(KERNEL, "tf32x3", only="default")
    assert "x = tl.dot(a, b, input_precision=\"tf32x3\")" in out


def test_a_source_with_no_exact_dot_has_no_variant():
    assert with_dot_precision("import triton.language as tl\nx = tl.dot(a, b)\n", "tf32x3") is None
    assert with_dot_precision("def f(:\n", "tf32x3") is None


def test_an_unknown_precision_is_refused():
    with pytest.raises(ValueError, match="unknown dot precision"):
        with_dot_precision(KERNEL, "fp8")
