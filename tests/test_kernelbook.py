"""tools/dialect/kernelbook.py: Inductor output -> KernelBook-format candidates, and the corpus.

Converter tests run on recorded Inductor output (tests/fixtures/inductor/): cpu_*.py were
written by this torch's Inductor for cpu tensors with its Triton backend (`python -m
tools.dialect capture PROBLEM --device cpu --out FILE`), gpu_*.py and torch25_*.py are
hand-written in the shape of torch 2.11's and torch 2.5's CUDA output, except gpu_triu_matmul_* and
gpu_conv2d_template, recorded on an H100 (torch 2.11). Each starts with a
`# kernelbook-capture:` line (argument sources, recorded launch configs).

The corpus candidates (tests/dialect/candidates_gpu/, unpacked from the GPU run of
benchmarks/kernelbook_corpus.py) are judged on cpu; each docstring says the verdict it
must get ("expect: correct" or "expect: rejected extern_kernels.OP").
"""
from __future__ import annotations

import ast
import dataclasses
import re
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

import pytest

from tools.dialect import HEADER, convert, read_capture, seed_in_subprocess
from tools.problem import load_problem
from tools.verdict import Status

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures" / "inductor"
PROBLEMS = ROOT / "tests" / "dialect" / "problems"
CORPUS = ROOT / "tests" / "dialect" / "candidates_gpu"
# fixture -> the corpus problem it was compiled from
FIXTURE_PROBLEM = {"cpu_relu_odd": "relu_odd", "cpu_transpose_add": "transpose_add",
                   "cpu_long_row_sum": "long_row_sum", "cpu_row_max_odd": "row_max_odd",
                   "cpu_layernorm": "layernorm", "cpu_linear_relu": "linear_relu",
                   "cpu_buffer_scale": "buffer_scale", "cpu_leaky_relu_mul": "leaky_relu_mul",
                   "gpu_linear_relu": "linear_relu", "gpu_long_softmax": "long_softmax",
                   "torch25_row_sum": "row_sum", "gpu_triu_matmul_extern": "triu_matmul",
                   "gpu_triu_matmul_template": "triu_matmul", "gpu_conv2d_template": "conv2d_3x3",
                   "cpu_conv_transpose_relu": "conv_transpose_relu",
                   "cpu_conv1d_grouped_sigmoid": "conv1d_grouped_sigmoid"}


@lru_cache(maxsize=None)
def _problem(name: str):
    return load_problem(PROBLEMS / f"{name}.py")


def _text(fixture: str) -> str:
    return (FIXTURES / f"{fixture}.py").read_text(encoding="utf-8")


@lru_cache(maxsize=None)
def _convert(fixture: str) -> str:
    return convert(_problem(FIXTURE_PROBLEM[fixture]), read_capture(_text(fixture)))


def _launch(src: str, kernel: str) -> str:
    return next(line.strip() for line in src.splitlines() if line.strip().startswith(kernel + "[grid("))


def _fn(src: str, name: str) -> ast.FunctionDef:
    return next(n for n in ast.walk(ast.parse(src)) if isinstance(n, ast.FunctionDef) and n.name == name)


# --- the dialect's shape ----------------------------------------------------------------

def test_every_fixture_has_a_problem_and_converts():
    assert {p.stem for p in FIXTURES.glob("*.py")} == set(FIXTURE_PROBLEM)
    for fixture in FIXTURE_PROBLEM:
        assert "class ModelNew(nn.Module):" in _convert(fixture), fixture


def test_candidate_opens_with_kernelbooks_header():
    assert _convert("cpu_relu_odd").startswith(HEADER)


def test_kernel_bodies_are_inductors_own_lines_with_hard_coded_numels():
    src, text = _convert("cpu_long_row_sum"), _text("cpu_long_row_sum")
    body = text[text.index("@triton.jit\ndef triton_red_fused_sum_0"):text.index("''', device_str=")]
    assert body.rstrip() in src
    assert "    xnumel = 8\n    r0_numel = 12000\n" in src


def test_heuristics_decorators_and_the_async_wrapper_are_gone():
    src = _convert("gpu_long_softmax")
    for gone in ("triton_heuristics.reduction", "async_compile", ".run(", "stream=", "Runner", "set_driver_to"):
        assert gone not in src, gone
    assert src.count("@triton.jit\ndef ") == 1


def test_pointwise_launch_takes_the_first_config_of_inductors_heuristics():
    assert _launch(_convert("cpu_relu_odd"), "triton_poi_fused_relu_0") == \
        "triton_poi_fused_relu_0[grid(4257)](arg0_1, buf0, 4257, XBLOCK=256, num_warps=4, num_stages=1)"


def test_a_recorded_autotuner_config_wins_over_the_heuristics():
    launch = _launch(_convert("gpu_linear_relu"), "triton_poi_fused_addmm_relu_0")
    assert "XBLOCK=128, num_warps=4, num_stages=1" in launch


def test_looped_reduction_launch_sets_its_r0_block():
    assert _launch(_convert("cpu_long_row_sum"), "triton_red_fused_sum_0").endswith(
        "(arg0_1, buf0, 8, 12000, XBLOCK=1, R0_BLOCK=2048, num_warps=16, num_stages=1)")


def test_persistent_reduction_launch_leaves_r0_block_to_the_body():
    src = _convert("cpu_row_max_odd")
    assert "R0_BLOCK: tl.constexpr = 128" in src
    assert _launch(src, "triton_per_fused_amax_0").endswith("XBLOCK=1, num_warps=2, num_stages=1)")


def test_two_dimensional_grid_names_ynumel_first_like_the_kernel():
    assert _launch(_convert("cpu_transpose_add"), "triton_poi_fused_add_t_0") == \
        ("triton_poi_fused_add_t_0[grid(96, 80)](arg1_1, arg0_1, buf0, 96, 80, XBLOCK=32, YBLOCK=32, "
         "num_warps=4, num_stages=1)")


def test_a_y_grid_that_may_overflow_launches_on_the_grid_that_spills_y_into_z():
    text = _text("cpu_transpose_add").replace("'grid_type': 'Grid2D'", "'grid_type': 'Grid2DWithYZOverflow'") \
        .replace("yoffset = tl.program_id(1) * YBLOCK",
                 "yoffset = (tl.program_id(1) + tl.program_id(2) * tl.num_programs(1)) * YBLOCK")
    src = convert(_problem("transpose_add"), read_capture(text))
    assert _launch(src, "triton_poi_fused_add_t_0").startswith("triton_poi_fused_add_t_0[grid(96, 80)](")
    assert "tl.program_id(2) * tl.num_programs(1)" in src


def test_torch25_launch_keeps_its_grid_and_passes_no_constexpr_the_kernel_lacks():
    assert _launch(_convert("torch25_row_sum"), "triton_per_fused_sum_0") == \
        "triton_per_fused_sum_0[grid(64)](arg0_1, buf0, 64, 256, num_warps=2, num_stages=1)"


def test_call_runs_under_one_device_guard_with_one_raw_stream():
    call = _fn(_convert("gpu_linear_relu"), "call")
    guard = next(s for s in call.body if isinstance(s, ast.With))
    assert ast.unparse(guard.items[0].context_expr) == "torch.cuda._DeviceGuard(0)"
    assert ast.unparse(guard.body[0]) == "torch.cuda.set_device(0)"
    assert ast.unparse(call).count("get_raw_stream(0)") == 1
    assert isinstance(call.body[-1], ast.Return)


def test_cpu_allocations_become_empty_strided_cuda():
    src = _convert("cpu_relu_odd")
    assert "empty_strided_cpu" not in src and "buf0 = empty_strided_cuda((33, 129), (129, 1), torch.float32)" in src


def test_assert_size_stride_loses_the_argument_name_kernelbook_lacks():
    assert "assert_size_stride(arg0_1, (33, 129), (129, 1))\n" in _convert("cpu_relu_odd")


def test_extern_kernels_is_imported_only_when_call_uses_it():
    # a library call the converter has no family for stays, with its import
    text = _text("gpu_linear_relu").replace("extern_kernels.mm(", "extern_kernels._mm_plus_mm(")
    assert "from torch._inductor.select_algorithm import extern_kernels" in convert(_problem("linear_relu"),
                                                                                 read_capture(text))
    assert "extern_kernels" not in _convert("cpu_relu_odd")


def test_a_library_matmul_becomes_a_launch_of_the_gemm_family_into_its_buffer():
    call = ast.unparse(_fn(_convert("gpu_linear_relu"), "call"))
    assert "gemm(arg2_1, reinterpret_tensor(arg0_1, (96, 64), (1, 96), 0), out=buf0, precision='ieee')" in call
    assert "extern_kernels" not in call and "import extern_kernels" not in _convert("gpu_linear_relu")


def test_model_new_passes_buffers_parameters_and_inputs_in_calls_order():
    forward = ast.unparse(_fn(_convert("cpu_buffer_scale"), "forward"))
    assert "arg0_1 = self.w\n    arg1_1 = input_0\n    arg2_1 = self.c\n" \
           "    output = call([arg0_1, arg1_1, arg2_1])\n    return output[0]" in forward


def test_model_new_is_built_by_models_own_init():
    src = _convert("cpu_layernorm")
    model = next(n for n in ast.parse(_problem("layernorm").source).body if isinstance(n, ast.ClassDef))
    model_init = next(f for f in model.body if isinstance(f, ast.FunctionDef) and f.name == "__init__")
    assert ast.dump(_fn(src, "__init__")) == ast.dump(model_init)


def test_model_new_brings_the_definitions_its_init_needs_and_no_others(tmp_path):
    problem = tmp_path / "helpers.py"
    problem.write_text(
        "import math\nimport torch\nimport torch.nn as nn\n\nSCALE = math.sqrt(2.0)\nUNUSED = 3\n\n\n"
        "def width(n):\n    return n * 1\n\n\n"
        "class Model(nn.Module):\n    def __init__(self, n):\n        super(Model, self).__init__()\n"
        "        self.s = SCALE * width(n)\n\n    def forward(self, x):\n        return torch.relu(x)\n\n\n"
        "def get_inputs():\n    return [torch.randn(33, 129)]\n\n\ndef get_init_inputs():\n    return [4]\n")
    src = convert(load_problem(problem), read_capture(_text("cpu_relu_odd")))
    assert "import math\nSCALE = math.sqrt(2.0)\ndef width(n):" in src
    assert "UNUSED" not in src and "super(ModelNew, self).__init__()" in src


def test_conversion_is_deterministic():
    for fixture in FIXTURE_PROBLEM:
        _convert.cache_clear()
        first = _convert(fixture)
        _convert.cache_clear()
        assert _convert(fixture) == first, fixture


def test_argument_sources_are_inferred_when_shapes_tell_them_apart():
    bare = read_capture(_text("cpu_linear_relu").partition("\n")[2])
    assert bare.arg_sources is None
    assert convert(_problem("linear_relu"), bare) == _convert("cpu_linear_relu")


def test_ambiguous_argument_sources_are_an_error_not_a_guess():
    bare = read_capture(_text("cpu_leaky_relu_mul").partition("\n")[2])
    with pytest.raises(ValueError, match=r"cannot tell which tensor call\(\)'s arg0_1 is \(2 of Model's tensors"):
        convert(_problem("leaky_relu_mul"), bare)


def test_a_source_model_does_not_have_is_an_error():
    capture = dataclasses.replace(read_capture(_text("cpu_relu_odd")), arg_sources=("param:weight",))
    with pytest.raises(ValueError, match="'param:weight' is not an input, parameter or buffer"):
        convert(_problem("relu_odd"), capture)


# (fixture, edit of its code, what the one-line error must name)
UNSUPPORTED = {
    "template kernel on a numel grid": ("cpu_relu_odd", ("@triton_heuristics.pointwise(", "@triton_heuristics.template("),
                                       "grid type Grid1D with heuristic template"),
    "aten fallback": ("cpu_relu_odd", ("        del arg0_1\n", "        buf9 = torch.ops.aten.cumprod.default(arg0_1)\n"),
                      "call(): Inductor leaves torch.ops.aten.cumprod.default to PyTorch (a fallback kernel), and "
                      "krefine has no Triton kernel for it"),
    "a data-dependent size": ("cpu_relu_odd", ("        del arg0_1\n", "        buf9 = torch.ops.aten.nonzero.default(arg0_1)\n"),
                              "krefine has no Triton kernel for it (torch.nonzero, torch.where(cond) or a boolean mask"),
    "a masked select": ("cpu_relu_odd", ("        del arg0_1\n",
                                         "        buf9 = torch.ops.aten.masked_select.default(arg0_1, arg0_1)\n"),
                        "krefine has no Triton kernel for it (torch.masked_select: an output whose size depends on "
                        "the values"),
    "a boolean mask": ("cpu_relu_odd", ("        del arg0_1\n", "        buf9 = torch.ops.aten.index.Tensor(arg0_1, [arg0_1])\n"),
                       "krefine has no Triton kernel for it (a boolean mask, x[mask]: an output whose size"),
    "a .data assignment": ("cpu_relu_odd", ("        del arg0_1\n",
                                            "        buf9 = torch.ops.aten.set_.source_Tensor(arg0_1, arg0_1)\n"),
                           "(an assignment to a tensor's .data, `self.w.data = ...` or `self.w.data *= m`: write it "
                           "in place instead, `self.w.data.copy_(...)`, `self.w.data.mul_(m)`)"),
    # a Fourier layer's complex zeros are aten.full, named before without what makes it a fallback
    "a complex tensor": ("cpu_relu_odd", ("        del arg0_1\n", "        buf9 = torch.ops.aten.full.default([4, 5], 0, "
                                          "dtype=torch.complex64, layout=torch.strided, device=device)\n"),
                         "Inductor leaves torch.ops.aten.full.default to PyTorch (a fallback kernel), and krefine has "
                         "no Triton kernel for it (complex tensors: Triton has no complex dtype)"),
    # a complex buffer of the problem's sliced: the first fallback is aten.slice; view_as_complex after it says why
    "a complex view": ("cpu_relu_odd", ("        del arg0_1\n", "        buf9 = torch.ops.aten.slice.Tensor(arg0_1, 0, 0, 8)\n"
                                        "        buf10 = torch.ops.aten.view_as_complex.default(buf9)\n"),
                       "Inductor leaves torch.ops.aten.view_as_complex.default to PyTorch (a fallback kernel), and "
                       "krefine has no Triton kernel for it (complex tensors: Triton has no complex dtype); also left "
                       "to PyTorch: torch.ops.aten.slice.Tensor"),
    # torch.roll of a complex tensor: aten.index with integer indices, a gather, not a boolean mask; complex is why
    "a complex roll": ("cpu_relu_odd", ("        del arg0_1\n", "        buf9 = torch.ops.aten.index.Tensor(arg0_1, [arg0_1])\n"
                                        "        buf10 = torch.ops.aten.polar.default(arg0_1, arg0_1)\n"),
                       "Inductor leaves torch.ops.aten.polar.default to PyTorch (a fallback kernel), and krefine has no "
                       "Triton kernel for it (complex tensors: Triton has no complex dtype); also left to PyTorch: "
                       "torch.ops.aten.index.Tensor"),
    # a complex input read as real: abs first, view_as_real says why
    "a complex input": ("cpu_relu_odd", ("        del arg0_1\n", "        buf9 = torch.ops.aten.abs.default(arg0_1)\n"
                                         "        buf10 = torch.ops.aten.view_as_real.default(arg0_1)\n"),
                        "Inductor leaves torch.ops.aten.view_as_real.default to PyTorch (a fallback kernel), and krefine "
                        "has no Triton kernel for it (complex tensors: Triton has no complex dtype); also left to "
                        "PyTorch: torch.ops.aten.abs.default"),
    # torch.fft2(x).real: a complex buffer written by copy_, then the fft: the fft is the reason, not the copy
    "an fft after a complex copy": ("cpu_relu_odd", ("        del arg0_1\n", "        buf0.copy_(arg0_1, False)\n"
                                                     "        buf9 = torch.ops.aten._fft_c2c.default(buf0, [1], 0, True)\n"),
                                    "Inductor leaves torch.ops.aten._fft_c2c.default to PyTorch (a fallback kernel), "
                                    "and krefine has no Triton kernel for it (torch.fft)"),
    # a Fourier layer: complex zeros (aten.full) first, then the fft, which says what the user wrote
    "a Fourier layer's fft after complex zeros": (
        "cpu_relu_odd", ("        del arg0_1\n", "        buf9 = torch.ops.aten.full.default([4, 5], 0, dtype=torch.complex64, "
                         "layout=torch.strided, device=device)\n"
                         "        buf10 = torch.ops.aten._fft_r2c.default(arg0_1, [1], 0, True)\n"),
        "Inductor leaves torch.ops.aten._fft_r2c.default to PyTorch (a fallback kernel), and krefine has no Triton "
        "kernel for it (torch.fft; complex tensors: Triton has no complex dtype); also left to PyTorch: "
        "torch.ops.aten.full.default"),
    "torch.unique": ("cpu_relu_odd", ("        del arg0_1\n", "        buf9 = torch.ops.aten.unique_consecutive.default(arg0_1)\n"),
                     "no Triton kernel for it (torch.unique: a size that depends on the values)"),
    "an fft": ("cpu_relu_odd", ("        del arg0_1\n", "        buf9 = torch.ops.aten._fft_r2c.default(arg0_1, [1], 0, True)\n"),
               "no Triton kernel for it (torch.fft)"),
    "a linear solve": ("cpu_relu_odd", ("        del arg0_1\n", "        buf9 = torch.ops.aten._linalg_solve_ex.default(arg0_1, arg0_1)\n"),
                       "(torch.linalg.solve, called directly or by parametrizations.orthogonal's Cayley map)"),
    "two aten fallbacks": ("cpu_relu_odd", ("        del arg0_1\n", "        buf9 = torch.ops.aten.cumprod.default(arg0_1)\n"
                                            "        buf10 = torch.ops.aten.digamma.default(arg0_1)\n"),
                           "krefine has no Triton kernel for it; also left to PyTorch: torch.ops.aten.digamma.default"),
    "in-place aten fallback": ("cpu_relu_odd", ("        del arg0_1\n",
                               "        aten.index_reduce_.default(arg0_1, 0, arg0_1, arg0_1, 'prod')\n"),
                               "call(): Inductor leaves aten.index_reduce_.default to PyTorch (a fallback kernel), and "
                               "krefine has no Triton kernel for it"),
    "random numbers": ("cpu_relu_odd", ("        del arg0_1\n", "        aten.randint.low_out(-9223372036854775808, "
                                                           "9223372036854775807, [1], out=buf0)\n"),
                       "call(): the forward draws random numbers (aten.randint.low_out("),
    "random numbers after an unsupported statement": (
        "cpu_relu_odd", ("        del arg0_1\n", "        buf9 = extern_kernels.convolution(arg0_1, arg0_1)\n"
                         "        aten.randint.low_out(-9223372036854775808, 9223372036854775807, [1], out=buf0)\n"),
        "call(): the forward draws random numbers (aten.randint.low_out("),
    "C++ kernel": ("cpu_relu_odd", ("async_compile.wait(globals())",
                                    "cpp_fused_0 = async_compile.cpp_pybinding(['x'], '')"),
                   "async_compile.cpp_pybinding (cpp_fused_0)"),
    "graph partition": ("cpu_relu_odd", ("class Runner:", "def partition_0(args):\n    pass\n\nclass Runner:"),
                        "graph partitions are not supported (partition_0)"),
    "two outputs": ("cpu_relu_odd", ("return (buf0, )", "return (buf0, buf0, )"), "call() returns 2 values"),
    "split constexpr": ("cpu_long_row_sum",
                        ("R0_BLOCK : tl.constexpr):", "R0_BLOCK : tl.constexpr, RSPLIT : tl.constexpr):"),
                        "unsupported constexpr parameter(s) RSPLIT"),
    "unknown grid": ("cpu_relu_odd", ("'grid_type': 'Grid1D'", "'grid_type': 'Grid4D'"),
                     "unsupported grid type Grid4D"),
    "not python": ("cpu_relu_odd", ("class Runner:", "class Runner"), "Inductor output is not valid Python"),
}


@pytest.mark.parametrize("case", sorted(UNSUPPORTED))
def test_unsupported_inductor_output_is_a_one_line_error_naming_it(case):
    fixture, (old, new), message = UNSUPPORTED[case]
    text = _text(fixture)
    assert old in text
    with pytest.raises(ValueError) as info:
        convert(_problem(FIXTURE_PROBLEM[fixture]), read_capture(text.replace(old, new, 1)))
    assert message in str(info.value) and "\n" not in str(info.value)


_SEED_DRAW = "        aten.randint.low_out(-9223372036854775808, 9223372036854775807, [1], out=buf0)\n"


def _drawing_capture(kernel: str, mode: str = "train"):
    """cpu_relu_odd as if its kernel were `kernel`, keyed on seeds Inductor draws first."""
    text = _text("cpu_relu_odd").replace("triton_poi_fused_relu_0", kernel)
    text = text.replace("        del arg0_1\n", _SEED_DRAW, 1)
    return dataclasses.replace(read_capture(text), module_mode=mode)   # the fixture predates the field


@pytest.mark.parametrize("kernel, named, advice", [
    ("triton_poi_fused_native_dropout_0", "(dropout)", "a dropout (an RReLU) is random in training mode (--set "),
    ("triton_poi_fused_rrelu_with_noise_0", "(aten.randint.low_out(",
     "a dropout (an RReLU) is random in training mode (--set "),
])
def test_a_dropouts_draw_is_named_by_its_kernel_and_advised_to_judge_eval_mode(kernel, named, advice):
    with pytest.raises(ValueError) as info:
        convert(_problem(FIXTURE_PROBLEM["cpu_relu_odd"]), _drawing_capture(kernel))
    assert f"the forward draws random numbers {named}" in str(info.value) and advice in str(info.value)


# 35_LSTM's h0 = torch.randn(...) was refused as a draw no kernel reproduces; its output, after 512 steps,
# does not depend on it. The forward's own draws are now made by Triton and the judge says whether the
# output depends on them (stochastic_reference)
@pytest.mark.parametrize("kernel", ["triton_poi_fused_randn_0", "triton_poi_fused_bernoulli_sigmoid_0",
                                    "triton_poi_fused_exponential_log_neg_0"])
def test_the_seeds_of_a_forwards_own_draw_are_drawn_by_krefines_kernel(kernel):
    code = convert(_problem(FIXTURE_PROBLEM["cpu_relu_odd"]), _drawing_capture(kernel))
    call = code[code.index("\ndef call("):]
    assert "        draw_seeds(buf0)\n" in call and "aten.randint" not in call
    assert "# krefine's kernels (tools/kernels/draws.py), copied unchanged" in code


def test_the_seeds_of_a_randn_drawn_in_eval_mode_are_drawn_by_krefines_kernel_too():
    code = convert(_problem(FIXTURE_PROBLEM["cpu_relu_odd"]), _drawing_capture("triton_poi_fused_randn_0", "eval"))
    assert "        draw_seeds(buf0)\n" in code


def test_seeds_drawn_for_a_kernel_that_draws_nothing_are_still_named_as_a_draw():
    with pytest.raises(ValueError, match=r"the forward draws random numbers \(aten\.randint\.low_out\("):
        convert(_problem(FIXTURE_PROBLEM["cpu_relu_odd"]), _drawing_capture("triton_poi_fused_relu_0"))


def _eval_mode_draw_reason(kernel: str) -> str:
    """The reason a capture in eval mode whose kernel `kernel` draws random numbers gets."""
    with pytest.raises(ValueError) as info:
        convert(_problem(FIXTURE_PROBLEM["cpu_relu_odd"]), _drawing_capture(kernel, "eval"))
    return str(info.value)


def test_a_dropout_drawn_in_eval_mode_is_not_advised_to_judge_eval_mode():
    said = _eval_mode_draw_reason("triton_poi_fused_native_dropout_0")
    assert "in eval mode too (`training=True`)" in said and "--set eval.module_mode" not in said


def test_model_subclassing_a_layer_gets_a_seed_subclassing_a_set_up_only_copy_of_it(tmp_path):
    problem = tmp_path / "sub.py"
    problem.write_text(
        "import torch\nimport torch.nn as nn\n\n\nclass Model(nn.ReLU):\n    pass\n\n\n"
        "def get_inputs():\n    return [torch.randn(33, 129)]\n\n\ndef get_init_inputs():\n    return []\n")
    code = convert(load_problem(problem), read_capture(_text("cpu_relu_odd")))
    assert "class ModelNew(ReLUBase):" in code and "class ReLUBase(nn.ReLU):" in code


def test_a_model_subclassing_two_classes_is_an_error(tmp_path):
    problem = tmp_path / "sub.py"
    problem.write_text(
        "import torch\nimport torch.nn as nn\n\n\nclass Model(nn.ReLU, nn.Tanh):\n    pass\n\n\n"
        "def get_inputs():\n    return [torch.randn(33, 129)]\n\n\ndef get_init_inputs():\n    return []\n")
    with pytest.raises(ValueError, match="Model subclasses nn.ReLU, nn.Tanh, not nn.Module, one torch layer"):
        convert(load_problem(problem), read_capture(_text("cpu_relu_odd")))


def test_a_tensor_constant_inductor_keeps_outside_call_and_the_capture_did_not_record_is_named():
    # `x + torch.tensor([[1., 0, 0], [0, 1., 0]])` in the forward (a capture records those it can carry)
    text = _text("cpu_relu_odd")
    assert "\nclass Runner" in text
    text = text.replace("\nclass Runner", "\n_tensor_constant0 = None  # device(type='cpu') torch.float32 (2, 3)\n"
                        "\nclass Runner", 1)
    with pytest.raises(ValueError, match=r"the forward makes a tensor from Python values .* make it in __init__ as a "
                                         r"buffer"):
        convert(_problem(FIXTURE_PROBLEM["cpu_relu_odd"]), read_capture(text))


@pytest.mark.parametrize("kernel, advice", [
    # nn.RReLU in training mode: its noise is aten.uniform, beside the kernel Inductor names after it
    ("triton_poi_fused_rrelu_with_noise_functional_0", "a dropout (an RReLU) is random in training mode"),
    # the user's own `torch.empty_like(x).uniform_()` (Gumbel noise) was advised as an RReLU
    ("triton_poi_fused_add_0", "the forward's own draw (torch.randn, rand, bernoulli, uniform_)"),
])
def test_a_random_op_left_to_pytorch_is_named_as_a_random_draw(kernel, advice):
    _random_fallback_named(kernel, "torch.ops.aten.uniform.default(buf0, 0.125, 0.3333)", "uniform", advice)


@pytest.mark.parametrize("op", ["torch.ops.aten.normal_functional.default(buf0, 0.0, 1.0)",   # Normal.rsample()
                                "torch.ops.prims.normal.default([4, 5], mean=0.0, std=1.0, dtype=torch.float32)"])
def test_a_normal_draw_left_to_pytorch_is_named_as_a_random_draw(op):
    # before: "Inductor leaves ... normal_functional to PyTorch", as if a kernel were missing
    _random_fallback_named("triton_poi_fused_add_0", op, "normal", "the forward's own draw (torch.randn, rand")


def test_a_feature_dropout_left_to_pytorch_is_named_as_a_dropout_in_training():
    # nn.Dropout3d in training: an in-place bernoulli_ Inductor leaves to PyTorch, which the draw
    # pattern missed ("krefine has no Triton kernel for it", as if a kernel were missing)
    _random_fallback_named("triton_poi_fused_div_mul_0", "torch.ops.aten.bernoulli_.float(buf0, 0.8)", "bernoulli",
                           "a feature or alpha dropout (nn.Dropout2d / Dropout3d / AlphaDropout, F.dropout2d, "
                           "F.alpha_dropout) or the forward's own bernoulli_(p) is random in training mode (--set "
                           "eval.module_mode=eval")


def _random_fallback_named(kernel, op, named, advice):
    text = _text("cpu_relu_odd").replace("triton_poi_fused_relu_0", kernel).replace(
        "        del arg0_1\n", f"        {op}\n", 1)
    import dataclasses
    capture = dataclasses.replace(read_capture(text), module_mode="train")   # the fixture predates the field
    with pytest.raises(ValueError, match=rf"the forward draws random numbers \({named}\)") as info:
        convert(_problem(FIXTURE_PROBLEM["cpu_relu_odd"]), capture)
    assert advice in str(info.value)


# --- torch.compile on cpu (Inductor's Triton backend) ------------------------------------

@pytest.mark.slow
def test_cpu_capture_records_inductors_triton_and_which_tensor_each_argument_is(tmp_path):
    out = tmp_path / "capture.py"
    done = subprocess.run([sys.executable, "-m", "tools.dialect", "capture", str(PROBLEMS / "buffer_scale.py"),
                           "--device", "cpu", "--out", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    capture = read_capture(out.read_text())
    assert capture.arg_sources == ("buffer:w", "input:0", "param:c")
    assert "= async_compile.triton('triton_poi_fused_add_mul_0'" in capture.code


@pytest.mark.slow
def test_a_seed_that_cannot_be_made_is_a_one_line_value_error(tmp_path):
    problem = tmp_path / "dict_output.py"
    problem.write_text(
        "import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n    def forward(self, x):\n"
        "        return {'a': x + 1}\n\n\ndef get_inputs():\n    return [torch.randn(8)]\n\n\n"
        "def get_init_inputs():\n    return []\n")
    # the problem itself is refused when it loads (tools/problem.py output_fault, the judge's own rule)
    with pytest.raises(ValueError, match=r"dict_output.py: Model.forward returned dict; expected a tensor or a "
                                         r"tuple of tensors$") as info:
        seed_in_subprocess(problem, "cpu", timeout_s=300)
    assert "\n" not in str(info.value)


def test_the_types_of_a_returned_tuple_are_named_in_its_order():
    import torch
    from tools.problem import output_fault
    assert output_fault((torch.zeros(1), None, 2.0)) == \
        "Model.forward returned tuple of Tensor, NoneType, float; expected a tensor or a tuple of tensors"


# --- converted candidates judged on cpu ---------------------------------------------------

def _judge(problem: str, src: str, device: str = "cpu"):
    from tools import settings as cfg
    from shared_judges import verdict_of
    # the verdict is what is tested here, not the timing: two trials, short timing, no torch.compile
    test = dataclasses.replace(cfg.TrialSettings(), trials=2)
    timing = dataclasses.replace(cfg.TimingSettings(), warmup=2, rounds=2, iters_per_round=5, compile_baseline=False)
    return verdict_of(_problem(problem), src, device=device, settings=cfg.EvalSettings(test=test, timing=timing))


@pytest.mark.slow
def test_converted_torch25_reduction_is_judged_correct_on_cpu():
    verdict = _judge("row_sum", _convert("torch25_row_sum"))
    assert verdict.status is Status.CORRECT, verdict.feedback


def test_converted_linear_with_its_matmul_in_the_gemm_family_is_judged_correct_on_cpu():
    verdict = _judge("linear_relu", _convert("gpu_linear_relu"))
    assert verdict.status is Status.CORRECT, verdict.feedback


def _corpus() -> list[Path]:
    return sorted(CORPUS.glob("*.py")) if CORPUS.is_dir() else []


def _corpus_params():
    marks = [pytest.mark.skip(reason="no corpus candidates yet: run benchmarks/kernelbook_corpus.py "
                                     "on a GPU, then --unpack")]
    for device in ("cpu", "cuda"):
        extra = [pytest.mark.gpu] if device == "cuda" else [pytest.mark.slow]
        if not _corpus():
            yield pytest.param(None, device, marks=marks + extra, id=f"none-{device}")
        for path in _corpus():
            yield pytest.param(path, device, marks=extra, id=f"{path.stem}-{device}")


@pytest.mark.parametrize("path, device", list(_corpus_params()))
def test_corpus_candidate_gets_the_verdict_its_docstring_states(path, device):
    src = path.read_text(encoding="utf-8")
    expect = re.search(r"^expect: (correct|rejected (extern_kernels\.\w+))$", src, re.M)
    assert expect, f"{path.name}: no 'expect:' line in its docstring"
    verdict = _judge(path.stem, src, device)
    if expect.group(1) == "correct":
        assert verdict.status is Status.CORRECT, verdict.feedback
    else:
        assert verdict.status is Status.REJECTED, verdict.feedback
        assert any(expect.group(2) in d.message for d in verdict.diagnostics), verdict.feedback


@pytest.mark.slow
def test_a_batchnorm_seed_computes_the_training_mode_forward_the_judge_runs_by_default():
    from tools.dialect import seed_candidate
    verdict = _judge("batchnorm_train", seed_candidate(_problem("batchnorm_train"), "cpu"))
    assert verdict.status is Status.CORRECT, verdict.feedback
