"""krefine's convolution family (tools/kernels/conv.py) against torch.nn.functional.

On cpu the kernels run in Triton's interpreter, in one child process for all cases (the
interpreter needs triton.language imported with TRITON_INTERPRET=1, which would break
compiling in this process); each case is still its own test. Shapes are tiny; every member and every kind of
convolution (strided, padded, dilated, grouped, depthwise, 1-D/2-D/3-D, transposed with
output padding) and each epilogue step has a case. Tests marked `gpu` run the same
launchers on cuda against cuDNN at equal precision; the sm_90 compile tests catch what
only the GPU compiler refuses, without a GPU.
"""
from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

CONV_FILE = Path(__file__).resolve().parents[1] / "tools" / "kernels" / "conv.py"


ATOL = 1e-4


# (name, input shape, weight shape, stride, padding, dilation, groups, member or None)
FORWARD = [
    ("1d_direct", (2, 3, 13), (5, 3, 3), 1, 0, 1, 1, None),
    ("1d_igemm_strided_dilated", (2, 16, 17), (8, 16, 3), 2, 2, 2, 1, None),
    ("2d_direct_strided_padded", (2, 4, 9, 10), (6, 4, 3, 3), 2, 1, 1, 1, None),
    ("2d_igemm_dilated_asym", (1, 20, 8, 9), (12, 20, 3, 2), (1, 2), (2, 0), (2, 1), 1, None),
    ("2d_igemm_grouped", (2, 32, 6, 7), (20, 16, 3, 3), 1, 1, 1, 2, None),
    ("2d_direct_grouped", (2, 6, 6, 7), (9, 2, 3, 3), (2, 1), 1, 1, 3, None),
    ("2d_1x1_gemm", (2, 24, 5, 6), (10, 24, 1, 1), 1, 0, 1, 1, None),
    ("2d_depthwise", (2, 8, 9, 9), (8, 1, 3, 3), 1, 1, 1, 8, None),
    ("2d_depthwise_mult_strided_dilated", (1, 4, 10, 11), (12, 1, 3, 3), 2, 2, 2, 4, None),
    ("1d_depthwise", (2, 6, 11), (12, 1, 3), 2, 1, 2, 6, None),
    ("3d_direct", (1, 3, 5, 6, 7), (4, 3, 2, 3, 3), (1, 2, 1), 1, 1, 1, None),
    ("3d_igemm_strided", (1, 16, 5, 5, 6), (8, 16, 3, 3, 3), 2, 1, 1, 1, None),
    ("3d_depthwise", (1, 4, 4, 5, 6), (4, 1, 3, 3, 3), 1, 1, 1, 4, None),
    ("2d_forced_direct_wide", (1, 16, 5, 5), (8, 16, 3, 3), 1, 1, 1, 1, "direct"),
    ("2d_forced_igemm_narrow", (1, 3, 5, 5), (8, 3, 3, 3), 1, 1, 1, 1, "igemm"),
]

# (name, input shape, weight shape, stride, padding, output_padding, groups, dilation)
TRANSPOSED = [
    ("1d_strided_outpad_dilated", (2, 4, 9), (4, 3, 4), 3, 2, 1, 1, 2),
    ("2d_stride2_outpad", (2, 4, 5, 6), (4, 3, 3, 3), 2, 1, 1, 1, 1),
    ("2d_stride1", (1, 3, 5, 5), (3, 2, 3, 3), 1, 1, 0, 1, 1),
    ("2d_igemm_grouped_dilated", (2, 32, 5, 6), (32, 5, 3, 2), (2, 3), (1, 0), (1, 2), 2, (2, 1)),
    ("2d_grouped_direct", (1, 6, 4, 5), (6, 2, 4, 4), 2, 1, 0, 3, 1),
    ("2d_kernel_equals_stride", (1, 16, 4, 4), (16, 8, 2, 2), 2, 0, 0, 1, 1),
    ("3d_stride2_outpad", (1, 3, 3, 4, 5), (3, 2, 3, 3, 3), 2, 1, 1, 1, 1),
    ("3d_igemm_asym", (1, 16, 3, 3, 4), (16, 4, 2, 3, 3), (1, 2, 2), (0, 1, 1), (0, 1, 0), 1, 1),
]

TORCH_CONV = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}
TORCH_CONV_T = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}


def _inputs(x_shape, w_shape, bias_len, device="cpu", dtype=torch.float32):
    g = torch.Generator().manual_seed(0)
    x, w, b = (torch.randn(s, generator=g) for s in (x_shape, w_shape, (bias_len,)))
    return (t.to(device=device, dtype=dtype) for t in (x, w, b))


def _forward(K, case):
    _, xs, ws, stride, padding, dilation, groups, member = case
    x, w, b = _inputs(xs, ws, ws[0])
    got = K.conv_nd(x, w, b, stride, padding, dilation, groups, member=member)
    return got, TORCH_CONV[len(xs) - 2](x, w, b, stride, padding, dilation, groups)


def _transposed(K, case):
    _, xs, ws, stride, padding, output_padding, groups, dilation = case
    x, w, b = _inputs(xs, ws, ws[1] * groups)
    got = K.conv_transpose_nd(x, w, b, stride, padding, output_padding, groups, dilation)
    return got, TORCH_CONV_T[len(xs) - 2](x, w, b, stride, padding, output_padding, groups, dilation)


def _channels_last(K):
    x, w, b = _inputs((2, 16, 6, 7), (8, 16, 3, 3), 8)
    x = x.to(memory_format=torch.channels_last)
    return K.conv_nd(x, w, b, 1, 1), F.conv2d(x, w, b, 1, 1)


def _out_stride(K):
    x, w, b = _inputs((2, 4, 5, 6), (4, 3, 3, 3), 3)
    got = K.conv_transpose_nd(x, w, b, 2, 1, 1, out_stride=(360, 1, 36, 3))   # what Inductor asserts
    want = torch.empty_strided(got.shape, (360, 1, 36, 3))
    return got, want.copy_(F.conv_transpose2d(x, w, b, 2, 1, 1))


def _strided_bias(K, transposed):
    """A bias read through a view with a step (a column of a table) adds its own values, not its
    neighbours' (the kernels read bias[channel] contiguous)."""
    x, w, _ = _inputs((2, 4, 5, 6), (6, 4, 3, 3) if not transposed else (4, 6, 3, 3), 1)
    b = torch.arange(12.0).view(6, 2)[:, 1]
    if transposed:
        return K.conv_transpose_nd(x, w, b, 2, 1, 1), F.conv_transpose2d(x, w, b, 2, 1, 1)
    return K.conv_nd(x, w, b, 1, 1), F.conv2d(x, w, b, 1, 1)


EPILOGUES = [
    ("relu", dict(activation="relu"), lambda y, r: torch.relu(y)),
    ("leaky_relu", dict(activation="leaky_relu", negative_slope=0.2), lambda y, r: F.leaky_relu(y, 0.2)),
    ("sigmoid", dict(activation="sigmoid"), lambda y, r: torch.sigmoid(y)),
    ("tanh", dict(activation="tanh"), lambda y, r: torch.tanh(y)),
    ("silu", dict(activation="silu"), lambda y, r: F.silu(y)),
    ("scale_clamp", dict(scale=0.5, clamp=(-0.3, 0.4)), lambda y, r: torch.clamp(y * 0.5, -0.3, 0.4)),
    ("residual_then_relu", dict(activation="relu", scale=2.0, residual=True), lambda y, r: torch.relu(2 * y + r)),
]


def _forward_epilogue(K, epilogue, member):
    _, kwargs, ref = epilogue
    groups = 8 if member == "depthwise" else 1
    x, w, b = _inputs((2, 8, 5, 6), (8, 8 // groups, 3, 3), 8)
    plain = F.conv2d(x, w, b, 1, 1, 1, groups)
    r = torch.randn(plain.shape, generator=torch.Generator().manual_seed(1))
    kwargs = {**kwargs, "residual": r} if kwargs.get("residual") else kwargs
    return K.conv_nd(x, w, b, 1, 1, 1, groups, member=member, **kwargs), ref(plain, r)


def _transposed_epilogue(K, epilogue):
    _, kwargs, ref = epilogue
    x, w, b = _inputs((2, 4, 5, 6), (4, 3, 3, 3), 3)
    plain = F.conv_transpose2d(x, w, b, 2, 1, 1)
    r = torch.randn(plain.shape, generator=torch.Generator().manual_seed(1))
    kwargs = {**kwargs, "residual": r} if kwargs.get("residual") else kwargs
    return K.conv_transpose_nd(x, w, b, 2, 1, 1, **kwargs), ref(plain, r)


def _tf32_rounded(t):
    """fp32 rounded to the nearest TF32 value (10 mantissa bits, ties away from zero)."""
    return ((t.view(torch.int32) + 0x1000) & -0x2000).view(torch.float32)


def _tf32_dots_round_their_operands(K):
    """precision="tf32": the exact convolution of the operands rounded to TF32, as cuDNN's
    TF32 convolution computes (not of the operands cut to TF32)."""
    x, w, b = _inputs((2, 16, 6, 7), (8, 16, 3, 3), 8)
    got = K.conv_nd(x, w, b, 1, 1, member="igemm", precision="tf32")
    want = F.conv2d(_tf32_rounded(x).double(), _tf32_rounded(w).double(), b.double(), 1, 1).float()
    return got, want


def _rounded_operands_give_the_bits_of_rounding_in_the_loop(K):
    """config ROUNDED (conv_config's 128x256 tf32 tiles): x and w rounded to TF32 by one launch, then the
    loop's dots without rounding: the same bits as rounding in the loop, on a plan that says ROUNDED."""
    x, w, b = _inputs((2, 16, 6, 7), (8, 16, 3, 3), 8)
    x = x.to(memory_format=torch.channels_last)
    got = K.conv_nd(x, w, b, 1, 1, member="igemm", precision="tf32", config=dict(ROUNDED=True))
    assert [p[-1]["ROUNDED"] for k, p in K._PLANS.items() if k[1:3] == (x.shape, x.stride()) and "tf32" in k] == [True]
    want = K.conv_nd(x, w, b, 1, 1, member="igemm", precision="tf32", config=dict(ROUNDED=False))
    assert torch.equal(got, want) and got.stride() == want.stride()
    return got, F.conv2d(_tf32_rounded(x).double(), _tf32_rounded(w).double(), b.double(), 1, 1).float()


def _one_launch_rounds_x_and_w_each_in_its_strides(K):
    """`_tf32(x, w)`: both rounded as the loop rounds, each as strided as it was, w 256-byte aligned after
    an x whose size is no multiple of 64."""
    x = next(_inputs((2, 3, 5, 7), (4, 3, 3, 3), 4)).to(memory_format=torch.channels_last)
    w = torch.randn(4, 3, 3, 5, generator=torch.Generator().manual_seed(3)).permute(0, 3, 1, 2)
    y, v = K._tf32(x, w)
    assert (y.stride(), v.stride()) == (x.stride(), w.stride()) and (v.data_ptr() - y.data_ptr()) % 256 == 0
    assert torch.equal(y, _tf32_rounded(x)) and torch.equal(v, _tf32_rounded(w.contiguous()))
    return torch.cat([y.flatten(), v.flatten()]), torch.cat([_tf32_rounded(x).flatten(), _tf32_rounded(w).flatten()])


def _a_strided_input_is_rounded_in_the_loop(K):
    """x with gaps between its elements (a slice with a step) is not rounded by a flat launch over its memory."""
    x, w, b = _inputs((2, 16, 6, 14), (8, 16, 3, 3), 8)
    x = x[..., ::2]
    got = K.conv_nd(x, w, b, 1, 1, member="igemm", precision="tf32", config=dict(ROUNDED=True))
    assert [p[-1]["ROUNDED"] for k, p in K._PLANS.items() if k[1:3] == (x.shape, x.stride())] == [False]
    return got, F.conv2d(_tf32_rounded(x).double(), _tf32_rounded(w).double(), b.double(), 1, 1).float()


def _float64(K, member):
    """float64 tensors convolve in fp64 (a stencil of a physics model): before, in fp32, 1e-7 off."""
    groups, ws = (8, (8, 1, 3, 3)) if member == "depthwise" else (1, (8, 16 if member == "igemm" else 4, 3, 3))
    x, w, b = _inputs((2, ws[1] * groups, 6, 7), ws, 8, dtype=torch.float64)
    if member == "phases":   # weight (in, out, kh, kw): 16 channels in, the dot path
        x, w, b = _inputs((2, 16, 6, 7), (16, 8, 3, 3), 8, dtype=torch.float64)
        got, want = K.conv_transpose_nd(x, w, b, 2, 1, 1), F.conv_transpose2d(x, w, b, 2, 1, 1)
    else:
        got, want = K.conv_nd(x, w, b, 1, 1, 1, groups, member=member), F.conv2d(x, w, b, 1, 1, 1, groups)
    err = (got - want).abs().max().item()
    assert got.dtype == torch.float64 and err < 1e-12, f"{got.dtype}, largest error {err:.1e}"
    return got, want


def _a_plan_is_made_once_a_key(K):
    """A second call of the same shapes, strides and arguments reuses the first's plan (no
    new entry in K._PLANS) and convolves its own values."""
    before = len(K._PLANS)
    x0, w, b = _inputs((2, 16, 6, 7), (8, 16, 3, 3), 8)
    for x in (x0, x0.flip(0) + 1.0):
        got, want = K.conv_nd(x, w, b, 2, 1, member="igemm", activation="relu"), F.relu(F.conv2d(x, w, b, 2, 1))
        torch.testing.assert_close(got, want, atol=ATOL, rtol=ATOL)
    assert len(K._PLANS) == before + 1, len(K._PLANS) - before
    return got, want


def _another_layout_gets_its_own_plan(K):
    """The same shapes laid out otherwise (channels-last input, a residual, no bias) are other
    keys: each gets its plan, each output right and in its own layout."""
    x, w, b = _inputs((2, 8, 5, 6), (4, 8, 3, 3), 4)
    before = len(K._PLANS)
    want = F.conv2d(x, w, b, 1, 1)
    torch.testing.assert_close(K.conv_nd(x, w, b, 1, 1), want, atol=ATOL, rtol=ATOL)
    xl = x.to(memory_format=torch.channels_last)
    got = K.conv_nd(xl, w, b, 1, 1)
    assert got.stride() == want.to(memory_format=torch.channels_last).stride()
    torch.testing.assert_close(got, want, atol=ATOL, rtol=ATOL)
    torch.testing.assert_close(K.conv_nd(x, w, None, 1, 1, residual=want), 2 * want - b.view(1, -1, 1, 1),
                               atol=ATOL, rtol=ATOL)
    assert len(K._PLANS) == before + 3, len(K._PLANS) - before
    return K.conv_nd(x, w, b, 1, 1), want


# every cpu case by id: (kernel module) -> (got, want); want's strides are the layout expected
CASES = {
    **{f"forward-{c[0]}": (lambda K, c=c: _forward(K, c)) for c in FORWARD},
    **{f"transposed-{c[0]}": (lambda K, c=c: _transposed(K, c)) for c in TRANSPOSED},
    "channels_last_in_channels_last_out": _channels_last,
    "out_stride_is_the_layout_written": _out_stride,
    "tf32_dots_round_their_operands": _tf32_dots_round_their_operands,
    "one_launch_rounds_x_and_w": _one_launch_rounds_x_and_w_each_in_its_strides,
    "rounded_operands_same_bits": _rounded_operands_give_the_bits_of_rounding_in_the_loop,
    "strided_input_rounded_in_the_loop": _a_strided_input_is_rounded_in_the_loop,
    "a_plan_is_made_once_a_key": _a_plan_is_made_once_a_key,
    "another_layout_gets_its_own_plan": _another_layout_gets_its_own_plan,
    "strided_bias": lambda K: _strided_bias(K, False),
    "strided_bias_transposed": lambda K: _strided_bias(K, True),
    **{f"float64-{m}": (lambda K, m=m: _float64(K, m)) for m in ("direct", "igemm", "depthwise", "phases")},
    **{f"epilogue-{e[0]}-{m}": (lambda K, e=e, m=m: _forward_epilogue(K, e, m))
       for e in EPILOGUES for m in ("direct", "igemm", "depthwise")},
    **{f"epilogue-{e[0]}-phases": (lambda K, e=e: _transposed_epilogue(K, e))
       for e in EPILOGUES if e[0] in ("relu", "scale_clamp", "residual_then_relu")},
}


def run_cases(ids) -> dict[str, str]:
    """In the interpreter's process: each case's failure message, "" when it passed."""
    import tools.kernels.conv as K
    out = {}
    for case_id in ids:
        try:
            got, want = CASES[case_id](K)
            assert got.shape == want.shape, f"shape {tuple(got.shape)} != {tuple(want.shape)}"
            assert got.stride() == want.stride(), f"strides {got.stride()} != {want.stride()}"
            torch.testing.assert_close(got, want, atol=ATOL, rtol=ATOL)
            out[case_id] = ""
        except Exception as e:      # the message goes back to the test that owns the case
            out[case_id] = f"{type(e).__name__}: {e}"
    return out


CHILD = """
import os, sys, json
os.environ["TRITON_INTERPRET"] = "1"   # before triton is imported: the interpreter needs all of triton.language so
import importlib.util
spec = importlib.util.spec_from_file_location("conv_cases", sys.argv[1])
cases = importlib.util.module_from_spec(spec)
spec.loader.exec_module(cases)
print(json.dumps(cases.run_cases(sys.argv[2:])))
"""


@pytest.fixture(scope="module")
def interpreted():
    """Every cpu case run once, in one child process with Triton's interpreter on."""
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", CHILD, __file__, *CASES], capture_output=True, text=True,
                          env=env, cwd=root, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("case_id", list(CASES))
def test_interpreted_conv_matches_torch(case_id, interpreted):
    assert interpreted[case_id] == ""


BAD_CALLS = {   # what torch refuses; the family read past a tensor (out of bounds on a GPU) and returned garbage
    "residual_not_the_output_s_shape": lambda K: K.conv_nd(torch.randn(2, 4, 6, 6), torch.randn(6, 4, 3, 3), None, 1,
                                                           1, residual=torch.randn(1, 6, 1, 1)),
    "input_channels_not_the_weight_s": lambda K: K.conv_nd(torch.randn(2, 3, 6, 6), torch.randn(6, 4, 3, 3)),
    "groups_not_dividing_the_channels": lambda K: K.conv_nd(torch.randn(2, 4, 6, 6), torch.randn(6, 1, 3, 3), groups=2),
    "a_bias_short_of_the_channels": lambda K: K.conv_nd(torch.randn(2, 4, 6, 6), torch.randn(6, 4, 3, 3),
                                                        torch.randn(3)),
    "a_kernel_larger_than_the_unpadded_input": lambda K: K.conv_nd(torch.randn(2, 4, 2, 2), torch.randn(6, 4, 3, 3)),
    "output_padding_not_below_the_stride": lambda K: K.conv_transpose_nd(torch.randn(2, 4, 6, 6),
                                                                         torch.randn(4, 3, 3, 3), None, 2, 1, 2),
}


@pytest.mark.parametrize("case", list(BAD_CALLS))
def test_a_call_torch_refuses_is_refused_before_any_launch(case):
    import tools.kernels.conv as K
    with pytest.raises(AssertionError, match="conv"):
        BAD_CALLS[case](K)


def test_no_family_file_calls_a_builtin_a_seed_s_inductor_helpers_redefine():
    """A seed copies each family's text beside the Triton helpers it takes from Inductor's
    triton_helpers (tools/dialect/portable.py), whose `any` is a Triton function: a family's
    host code calling the builtin any() raised in every seed holding that helper."""
    import ast
    import builtins
    from torch._inductor.runtime import triton_helpers
    from tools.dialect.families import FAMILIES
    taken = {n for n in vars(triton_helpers) if hasattr(builtins, n) and hasattr(getattr(triton_helpers, n), "fn")}
    assert "any" in taken
    calls = {(f, node.func.id) for f in FAMILIES for node in ast.walk(ast.parse((CONV_FILE.parents[2] / f).read_text()))
             if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in taken}
    assert not calls


def test_family_file_imports_only_torch_and_triton():
    import ast
    tree = ast.parse(CONV_FILE.read_text())
    roots = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    roots |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert roots <= {"torch", "triton"}


# --- sm_90 compile, no GPU needed -------------------------------------------------------

def _signature(fn, constexprs, ptr="*fp32"):
    sig = {}
    for name in inspect.signature(fn.fn).parameters:
        if name in constexprs:
            sig[name] = "constexpr"
        elif name.endswith("_ptr"):
            sig[name] = ptr
        else:
            sig[name] = "fp32" if name in ("scale", "lo", "hi", "slope") else "i32"
    return sig


COMPILED = [
    ("conv_fwd_kernel", dict(USE_DOT=True, PRECISION="tf32x3", BLOCK_K=32)),
    ("conv_fwd_kernel", dict(USE_DOT=False, PRECISION="ieee", BLOCK_K=16)),
    ("conv_depthwise_kernel", {}),
    ("conv_transpose_kernel", dict(USE_DOT=True, PRECISION="tf32", BLOCK_K=32)),
    # float64 tensors: fp64 accumulators and exact fp64 dots, fp64 tiles BLOCK_K 16 (conv_config)
    ("conv_fwd_kernel", dict(USE_DOT=True, PRECISION="ieee", BLOCK_K=16, ptr="*fp64")),
    ("conv_depthwise_kernel", dict(ptr="*fp64")),
    ("conv_transpose_kernel", dict(USE_DOT=False, PRECISION="ieee", BLOCK_K=16, ptr="*fp64")),
]


def _compile_for_sm90(name, constexprs, ptr="*fp32", num_warps=4, num_stages=3):
    """tools/kernels/conv.py's kernel `name` compiled for an H100/H200 on this machine (no GPU needed)."""
    triton = pytest.importorskip("triton")
    try:
        from triton.backends.compiler import GPUTarget
        from triton.compiler import ASTSource
    except ImportError:
        pytest.skip("this Triton has no ASTSource / GPUTarget")
    import tools.kernels.conv as compiled_module
    fn = getattr(compiled_module, name)
    if not hasattr(fn, "fn"):
        pytest.skip("TRITON_INTERPRET is set in this process")
    constexprs = {**{n: p.default for n, p in inspect.signature(fn.fn).parameters.items()   # a constexpr's default
                     if p.default is not inspect.Parameter.empty}, **constexprs}
    return triton.compile(ASTSource(fn, _signature(fn, constexprs, ptr), constexprs),
                          target=GPUTarget("cuda", 90, 32), options={"num_warps": num_warps, "num_stages": num_stages})


@pytest.mark.slow
@pytest.mark.parametrize("name,extra", COMPILED, ids=[f"{n}-{e.get('PRECISION', 'fma')}-{e.get('ptr', '*fp32')[1:]}"
                                                      for n, e in COMPILED])
def test_kernel_compiles_for_sm90(name, extra):
    extra = dict(extra)
    ptr = extra.pop("ptr", "*fp32")
    constexprs = dict(KD=3, KH=3, KW=3, HAS_BIAS=True, HAS_RES=True, ACT="relu", HAS_CLAMP=True,
                      BLOCK_M=128, BLOCK_N=64, **extra)
    assert _compile_for_sm90(name, constexprs, ptr).asm["ptx"]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["conv_fwd_kernel", "conv_transpose_kernel"])
@pytest.mark.parametrize("tile", [(128, 256), (256, 128)])
def test_wide_tf32_tiles_compile_for_sm90_within_its_shared_memory(name, tile):
    """conv_config's wide tf32 tiles, compiled for an H100/H200: under the 227 KiB a block may take
    (their operands rounded in registers take shared memory of their own: 128 KiB, not 3 x 48)."""
    constexprs = dict(KD=1, KH=3, KW=3, HAS_BIAS=True, HAS_RES=False, ACT="relu", HAS_CLAMP=False, USE_DOT=True,
                      PRECISION="tf32", BLOCK_M=tile[0], BLOCK_N=tile[1], BLOCK_K=32)
    kernel = _compile_for_sm90(name, constexprs, num_warps=8)
    assert 0 < kernel.metadata.shared <= 227 << 10, kernel.metadata.shared


@pytest.mark.slow
def test_wide_tf32_tiles_of_rounded_operands_compile_for_sm90_within_its_shared_memory():
    """conv_config's 128x256 tf32 tiles take x and w rounded before (ROUNDED): no rounding in the loop."""
    constexprs = dict(KD=1, KH=3, KW=3, HAS_BIAS=True, HAS_RES=False, ACT="relu", HAS_CLAMP=False, USE_DOT=True,
                      PRECISION="tf32", BLOCK_M=128, BLOCK_N=256, BLOCK_K=32, ROUNDED=True)
    kernel = _compile_for_sm90("conv_fwd_kernel", constexprs, num_warps=8)
    rounds = [line for line in kernel.asm["ttir"].splitlines() if "dense<-8192>" in line]   # 0xFFFFE000's mask
    assert 0 < kernel.metadata.shared <= 227 << 10 and not rounds, (kernel.metadata.shared, rounds)
    constexprs["ROUNDED"] = False
    assert len([line for line in _compile_for_sm90("conv_fwd_kernel", constexprs, num_warps=8).asm["ttir"].splitlines()
                if "dense<-8192>" in line]) == 2   # one a dot operand


def test_dense_is_a_tensor_whose_elements_fill_their_memory_once():
    from tools.kernels.conv import _dense
    x = torch.randn(2, 8, 5, 6)
    assert _dense(x) and _dense(x.to(memory_format=torch.channels_last)) and _dense(x.permute(3, 1, 0, 2))
    assert _dense(torch.randn(1, 8, 1, 1)) and _dense(x[:1])
    assert not _dense(x[..., ::2]) and not _dense(x[:, :4]) and not _dense(torch.randn(8, 1).expand(8, 5))


# --- the launch rule (plain Python: no kernel runs) ------------------------------------

def test_igemm_weight_is_packed_k_major_for_tensor_cores_only():
    from tools.kernels.conv import _igemm_order
    assert _igemm_order(4, torch.float32, "tf32", 1) == [0, 2, 3, 1]      # (out, kh, kw, in): channels-last
    assert _igemm_order(4, torch.float32, "tf32x3", 1) == [0, 2, 3, 1]
    assert _igemm_order(4, torch.float16, "ieee", 1) == [0, 2, 3, 1]      # 16-bit dots: tensor cores anyway
    assert _igemm_order(4, torch.float32, "ieee", 1) == [2, 3, 1, 0]      # CUDA cores: out contiguous, 1x1 too
    assert _igemm_order(5, torch.float32, "tf32", 0) == [1, 2, 3, 4, 0]   # transposed (in, out, taps)
    assert _igemm_order(3, torch.float32, "ieee", 0) == [2, 0, 1]


def test_a_channels_last_weight_needs_no_copy_at_tensor_core_precision():
    from tools.kernels.conv import _igemm_order
    w = torch.randn(8, 4, 3, 3).contiguous(memory_format=torch.channels_last)
    assert w.permute(*_igemm_order(4, torch.float32, "tf32", 1)).is_contiguous()
    assert not w.permute(*_igemm_order(4, torch.float32, "ieee", 1)).is_contiguous()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("precision", ["ieee", "tf32", "tf32x3"])
def test_gpu_configs_fit_96_kib_of_shared_memory(dtype, precision):
    from tools.kernels.conv import conv_config
    for positions in (1, 98, 392, 1568, 6272, 31360, 501760, 4_000_000):
        for k_group in (1, 16, 64, 128, 512):
            for c_group in (16, 64, 512, 1024):
                for member in ("igemm", "direct", "depthwise"):
                    c = conv_config(member, c_group, k_group, positions, "cuda", dtype, precision)
                    smem = c["num_stages"] * (c["BLOCK_M"] + c["BLOCK_N"]) * c["BLOCK_K"] * dtype.itemsize
                    assert smem <= 96 * 1024, (positions, k_group, c_group, member, c)
                    assert c["num_warps"] == 4 and c["BLOCK_N"] <= max(16, 1 << (k_group - 1).bit_length())


def test_small_tensor_core_outputs_get_more_programs_than_a_wide_tile_gives():
    # a batch-2 ResNet's last 3x3 layer: 98 positions x 512 channels; 128x128 tiles make 4 programs
    from tools.kernels.conv import conv_config
    c = conv_config("igemm", 512, 512, 98, "cuda", torch.float32, "tf32")
    assert -(-98 // c["BLOCK_M"]) * -(-512 // c["BLOCK_N"]) >= 32
    big = conv_config("igemm", 256, 256, 31360, "cuda", torch.float32, "tf32")
    assert (big["BLOCK_M"], big["BLOCK_N"]) == (128, 128)


@pytest.mark.parametrize("smem_kib", [227, 163, 99])   # H100/H200, A100, an RTX 4090
def test_wide_tf32_tiles_go_only_where_a_block_s_shared_memory_holds_them(smem_kib):
    """8 warps on 32K-element tiles (128 KiB compiled for sm90: test_wide_tf32_tiles_compile_for_sm90),
    at "tf32" only, past 3M positions x channels, with more than one tap, >= 64 channels in and > 64
    out a group, on a GPU whose block may take 200 KiB; elsewhere the 96-KiB rule (a 1x1 or 16
    channels in: slower wide, on an H200)."""
    from tools.kernels.conv import conv_config
    for positions, k_group in ((31360, 256), (125440, 128), (501760, 64), (7840, 512), (1960, 512)):
        for c_group, taps in ((256, 9), (64, 3), (256, 1), (16, 9)):
            for precision in ("tf32", "tf32x3", "ieee"):
                c = conv_config("igemm", c_group, k_group, positions, "cuda", torch.float32, precision,
                                smem_kib << 10, taps)
                wide = smem_kib >= 200 and precision == "tf32" and positions * k_group >= 3_000_000 and \
                    k_group > 64 and c_group >= 64 and taps > 1
                rule = conv_config("igemm", c_group, k_group, positions, "cuda", torch.float32, precision)
                assert c == (dict(BLOCK_M=128, BLOCK_N=256, BLOCK_K=32, num_warps=8, num_stages=3, ROUNDED=True)
                             if wide and k_group >= 256 else dict(BLOCK_M=256, BLOCK_N=128, BLOCK_K=32, num_warps=8,
                                                                  num_stages=3, ROUNDED=False)
                             if wide else rule), (positions, k_group, c)


# --- on a GPU: against cuDNN at equal precision -----------------------------------------

@pytest.fixture
def exact_cudnn():
    before = torch.backends.cudnn.allow_tf32
    torch.backends.cudnn.allow_tf32 = False
    yield
    torch.backends.cudnn.allow_tf32 = before


@pytest.mark.gpu
@pytest.mark.parametrize("precision,atol", [("ieee", 1e-4), ("tf32x3", 1e-4)])
@pytest.mark.parametrize("case", FORWARD, ids=[c[0] for c in FORWARD])
def test_forward_conv_on_gpu_matches_exact_cudnn(case, precision, atol, exact_cudnn):
    import tools.kernels.conv as G
    _, xs, ws, stride, padding, dilation, groups, member = case
    x, w, b = _inputs(xs, ws, ws[0], "cuda")
    got = G.conv_nd(x, w, b, stride, padding, dilation, groups, precision=precision, member=member)
    want = TORCH_CONV[len(xs) - 2](x, w, b, stride, padding, dilation, groups)
    torch.testing.assert_close(got, want, atol=atol, rtol=atol)


@pytest.mark.gpu
@pytest.mark.parametrize("precision", ["ieee", "tf32x3"])
@pytest.mark.parametrize("case", TRANSPOSED, ids=[c[0] for c in TRANSPOSED])
def test_transposed_conv_on_gpu_matches_exact_cudnn(case, precision, exact_cudnn):
    import tools.kernels.conv as G
    _, xs, ws, stride, padding, output_padding, groups, dilation = case
    x, w, b = _inputs(xs, ws, ws[1] * groups, "cuda")
    got = G.conv_transpose_nd(x, w, b, stride, padding, output_padding, groups, dilation, precision=precision)
    want = TORCH_CONV_T[len(xs) - 2](x, w, b, stride, padding, output_padding, groups, dilation)
    torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)


@pytest.mark.gpu
@pytest.mark.parametrize("precision", ["tf32x3", "ieee"])
@pytest.mark.parametrize("x_shape,c_out", [((2, 256, 7, 7), 256), ((2, 64, 28, 28), 128), ((4, 64, 64, 64), 128)],
                         ids=["below_300k", "below_3m", "above_3m"])
@pytest.mark.parametrize("weight_layout", ["contiguous", "channels_last"])
def test_each_gpu_config_class_matches_exact_cudnn(x_shape, c_out, precision, weight_layout, exact_cudnn):
    import tools.kernels.conv as G
    x, w, b = _inputs(x_shape, (c_out, x_shape[1], 3, 3), c_out, "cuda")
    x = x.to(memory_format=torch.channels_last)
    if weight_layout == "channels_last":
        w = w.contiguous(memory_format=torch.channels_last)
    got = G.conv_nd(x, w, b, 1, 1, precision=precision, activation="relu")
    torch.testing.assert_close(got, torch.relu(F.conv2d(x, w, b, 1, 1)), atol=1e-4, rtol=1e-4)


@pytest.mark.gpu
@pytest.mark.parametrize("member", ["direct", "igemm", "depthwise"])
def test_a_nan_through_the_relu_epilogue_stays_nan_on_a_gpu(member):
    """torch.relu keeps a NaN; tl.maximum(acc, 0.0) compiled for a GPU gives 0 (the interpreter's numpy keeps it,
    so only a GPU tells the two apart)."""
    import tools.kernels.conv as G
    groups, ws = (8, (8, 1, 3, 3)) if member == "depthwise" else (1, (8, 16 if member == "igemm" else 4, 3, 3))
    x, w, b = _inputs((2, ws[1] * groups, 6, 6), ws, 8, "cuda")
    x[0, :, 2, 2] = float("nan")
    got = G.conv_nd(x, w, b, 1, 1, groups=groups, member=member, activation="relu")
    want = torch.relu(F.conv2d(x, w, b, 1, 1, groups=groups))
    assert torch.equal(got.isnan(), want.isnan()) and want.isnan().any()


@pytest.mark.gpu
@pytest.mark.parametrize("precision", ["ieee", "tf32x3"])
@pytest.mark.parametrize("weight_layout", ["contiguous", "channels_last", "out_channels_contiguous"])
def test_1x1_weights_of_each_layout_match_exact_cudnn(weight_layout, precision, exact_cudnn):
    """A 1x1 igemm packs its weight for the exact path, (in, out), and reads it K-major, (out, in), as it is
    at tensor-core precision (packed where output channels are the contiguous ones): each layout gives exact
    cuDNN's result."""
    import tools.kernels.conv as G
    x, w, b = _inputs((2, 256, 14, 14), (96, 256, 1, 1), 96, "cuda")
    x = x.to(memory_format=torch.channels_last)
    w = w.contiguous(memory_format=torch.channels_last) if weight_layout == "channels_last" else \
        w.transpose(0, 1).contiguous().transpose(0, 1) if weight_layout == "out_channels_contiguous" else w
    got = G.conv_nd(x, w, b, 1, 0, precision=precision, activation="relu")
    torch.testing.assert_close(got, torch.relu(F.conv2d(x, w, b, 1, 0)), atol=1e-4, rtol=1e-4)


@pytest.mark.gpu
@pytest.mark.parametrize("x_shape,c_out", [((2, 64, 160, 160), 128), ((2, 128, 80, 80), 256)],
                         ids=["k_group_128", "k_group_256"])
@pytest.mark.parametrize("transposed", [False, True])
def test_tf32_past_3m_convolves_the_operands_rounded_to_tf32(x_shape, c_out, transposed):
    """The class that gets 8 warps and wide tiles on a Hopper GPU: the exact (float64) convolution
    of the TF32-rounded operands, forward and transposed, whichever rule this GPU takes."""
    import tools.kernels.conv as G
    ws = (x_shape[1], c_out, 3, 3) if transposed else (c_out, x_shape[1], 3, 3)
    x, w, b = _inputs(x_shape, ws, c_out, "cuda")
    w = w / (x_shape[1] * 9) ** 0.5   # outputs of order 1: 1e-4 is then TF32's rounding, not fp32's sums of 1152
    x, w = x.to(memory_format=torch.channels_last), w.contiguous(memory_format=torch.channels_last)
    conv, torch_conv = (G.conv_transpose_nd, F.conv_transpose2d) if transposed else (G.conv_nd, F.conv2d)
    got = conv(x, w, b, 1, 1, precision="tf32", activation="relu")
    want = torch.relu(torch_conv(_tf32_rounded(x).double(), _tf32_rounded(w).double(), b.double(), 1, 1)).float()
    torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_conv_on_gpu_is_close_to_cudnn(dtype):
    import tools.kernels.conv as G
    x, w, b = _inputs((4, 64, 16, 16), (128, 64, 3, 3), 128, "cuda", dtype)
    got = G.conv_nd(x.to(memory_format=torch.channels_last), w, b, 1, 1, activation="relu")
    want = torch.relu(F.conv2d(x, w, b, 1, 1))
    torch.testing.assert_close(got.float(), want.float(), atol=5e-2, rtol=2e-2)


@pytest.mark.gpu
@pytest.mark.parametrize("x_shape,w_shape,groups,transposed", [
    ((2, 4, 9, 12), (8, 4, 3, 3), 1, False),          # direct
    ((2, 64, 28, 28), (128, 64, 3, 3), 1, False),     # igemm: fp64 dots, fp64 tiles
    ((2, 8, 9, 9), (8, 1, 3, 3), 8, False),           # depthwise
    ((2, 32, 7, 7), (32, 16, 3, 3), 1, True),         # phases, dots
], ids=["direct", "igemm", "depthwise", "phases"])
def test_float64_conv_on_gpu_matches_cudnn_in_float64(x_shape, w_shape, groups, transposed):
    import tools.kernels.conv as G
    x, w, b = _inputs(x_shape, w_shape, w_shape[1] if transposed else w_shape[0], "cuda", torch.float64)
    if transposed:
        got, want = G.conv_transpose_nd(x, w, b, 2, 1, 1), F.conv_transpose2d(x, w, b, 2, 1, 1)
    else:
        got, want = G.conv_nd(x, w, b, 1, 1, 1, groups), F.conv2d(x, w, b, 1, 1, 1, groups)
    assert got.dtype == torch.float64 and (got - want).abs().max().item() < 1e-10
