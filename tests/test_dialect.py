"""KernelBook's dialect (tools/dialect/: portable, causes, inductor_grid, interp_libdevice):
torch-2.5-era Inductor code is judged in its portable form (its kernels unchanged), and its
usual failures get feedback naming the cause.

Candidates under tests/dialect/candidates/ are hand-written in KernelBook's format, each
with a docstring saying what it is and the verdict it must get (constants PROBLEM, a
file under tests/dialect/problems_small/, and EXPECTED). They are judged on cpu, where
Triton's interpreter runs them; the `gpu` variants judge the correct ones on a GPU.
Interpreter numerics run in a fresh process (tests/dialect/interp_check.py).
"""
from __future__ import annotations

import ast
import dataclasses
import json
import os
import re
import subprocess
import sys
import textwrap
from functools import lru_cache
from pathlib import Path

import pytest

from tools.dialect import causes, inductor_grid, runtime
from tools.dialect.portable import portable
from tools.guards import run_static_guards
from tools.settings import GuardSettings
from tools.verdict import Diagnostic, Status

HERE = Path(__file__).parent / "dialect"
CANDIDATES = HERE / "candidates"
PROBLEMS = HERE / "problems_small"
ROOT = Path(__file__).resolve().parents[1]


def _read(name: str) -> tuple[str, str, Status]:
    src = (CANDIDATES / f"{name}.py").read_text(encoding="utf-8")
    problem = ast.literal_eval(re.search(r"^PROBLEM = (.+)$", src, re.M).group(1))
    expected = Status(ast.literal_eval(re.search(r"^EXPECTED = (.+)$", src, re.M).group(1)))
    return src, problem, expected


@lru_cache(maxsize=None)
def _problem(name: str):
    from tools.problem import load_problem
    return load_problem(PROBLEMS / f"{name}.py")


@lru_cache(maxsize=None)
def _judge(name: str, device: str = "cpu"):
    from tools import settings as cfg
    from shared_judges import verdict_of
    src, problem, _ = _read(name)
    test = dataclasses.replace(cfg.TrialSettings(), trials=2)
    timing = dataclasses.replace(cfg.TimingSettings(), warmup=2, rounds=2, iters_per_round=5, compile_baseline=False)
    return verdict_of(_problem(problem), src, device=device, settings=cfg.EvalSettings(test=test, timing=timing))


def _run(code: str, interpret: bool = False) -> str:
    """Run Python code in a fresh process (install() changes torch and triton there)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TRITON_INTERPRET": "1" if interpret else "0"}
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip()


# --- recorded candidates, judged on cpu -------------------------------------------------

def test_every_recorded_candidate_states_its_problem_and_verdict():
    for path in sorted(CANDIDATES.glob("*.py")):
        src, problem, expected = _read(path.stem)
        assert src.startswith('"""') and "Verdict:" in src, path.name
        assert (PROBLEMS / f"{problem}.py").is_file(), path.name
        assert not path.stem.startswith("ok_") or expected is Status.CORRECT, path.name


@pytest.mark.parametrize("name", ["ok_gelu_grid", "ok_layernorm_persistent"])
def test_kernelbook_candidate_is_correct_on_cpu_unchanged(name):
    verdict = _judge(name)
    assert verdict.status is Status.CORRECT, verdict.feedback


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["ok_gelu_grid", "ok_layernorm_persistent"])
def test_kernelbook_candidate_is_correct_on_gpu_unchanged(name):
    verdict = _judge(name, "cuda")
    assert verdict.status is Status.CORRECT, verdict.feedback


@pytest.mark.parametrize("name", ["missing_model_new", "removed_module_import", "hardcoded_xnumel",
                                  "failing_size_assert", "view_out_of_bounds", "strided_output_view"])
def test_faulty_candidate_gets_its_stated_verdict(name):
    verdict = _judge(name)
    assert verdict.status is _read(name)[2], verdict.feedback


def test_class_named_like_kernelbook_gets_told_to_rename_it_to_model_new():
    assert "rename class ReluNew to ModelNew" in _judge("missing_model_new").feedback


def test_import_of_a_moved_module_names_it_and_where_to_import_from():
    feedback = _judge("removed_module_import").feedback
    assert "torch._inductor.triton_heuristics does not exist" in feedback
    assert "import it from torch._inductor.runtime.triton_heuristics" in feedback


def test_hard_coded_xnumel_is_named_with_the_problems_element_count():
    feedback = _judge("hardcoded_xnumel").feedback
    assert "xnumel = 132 is hard-coded in triton_poi_fused_relu_0" in feedback and "640 elements" in feedback


def test_failing_assert_size_stride_names_the_argument_and_both_sizes():
    first = _judge("failing_size_assert").diagnostics[0]
    assert first.kind == "dialect:assert_size_stride"
    assert "arg0_1 (input 0) has size (16, 40), stride (40, 1)" in first.message
    assert "written for size (4, 33), stride (33, 1)" in first.message


def test_out_of_bounds_view_is_refused_on_cpu_at_its_line():
    diag = _judge("view_out_of_bounds").diagnostics[0]
    assert "out of bounds for storage of size" in diag.message and "reinterpret_tensor(buf0" in (diag.source_line or "")


def test_output_view_with_non_row_major_strides_is_named_when_values_are_wrong():
    diag = _judge("strided_output_view").diagnostics[0]
    assert diag.kind == "dialect:strided_view" and "strides (1, 16), not the row-major (40, 1)" in diag.message


def test_dialect_feedback_comes_before_the_raw_error():
    kinds = [d.kind for d in _judge("missing_model_new").diagnostics]
    assert kinds[0].startswith("dialect:") and not kinds[-1].startswith("dialect:")


def test_a_hard_coded_size_is_listed_after_the_judges_own_finding():
    kinds = [d.kind for d in _judge("hardcoded_xnumel").diagnostics]
    assert kinds[:2] == ["mismatch", "dialect:hardcoded_size"]


# --- explain(), on recorded diagnostics (no evaluation) -------------------------------

def _explain(src: str, message: str, status=Status.COMPILE_ERROR, line=None, problem=None):
    return causes.explain(src, status, (Diagnostic("import_error", message, line),), problem)


def test_explain_says_what_to_import_instead_of_a_removed_name():
    got = _explain("import torch\n", "during import: ImportError: cannot import name 'get_raw_stream' "
                   "from 'torch._inductor.utils' (/x/torch/_inductor/utils.py)", line=1)
    assert "`torch._inductor.utils.get_raw_stream` does not exist" in got[0].message
    assert "from torch._C import _cuda_getCurrentRawStream as get_raw_stream" in got[0].message


def test_explain_points_a_missing_tl_math_function_at_libdevice():
    got = _explain("import torch\n", "AttributeError: module 'triton.language.math' has no attribute 'tanh'",
                   status=Status.RUNTIME_ERROR)
    assert "use libdevice.tanh(x)" in got[0].message


def test_a_tl_name_triton_never_had_is_not_blamed_on_torch():
    got = _explain("import torch\n", 'CompilationError: at 5:27: AttributeError("module '
                   "'triton.language' has no attribute 'relu'\")")
    assert "`tl.relu` is not part of Triton" in got[0].message and "torch" not in got[0].message


def test_a_tl_name_triton_never_had_gets_a_tl_formula_for_it():
    got = _explain("import torch\n", "AttributeError: module 'triton.language' has no attribute 'relu'")
    assert "tl.maximum(x, 0.0)" in got[0].message


def test_a_misspelt_tl_name_gets_the_nearest_names_triton_has():
    got = _explain("import torch\n", "AttributeError: module 'triton.language' has no attribute 'maximun'")
    assert "not part of Triton" in got[0].message and "tl.maximum" in got[0].message


def test_a_name_an_older_triton_had_names_the_installed_triton_not_torch():
    import importlib.metadata
    got = _explain("import torch\n", "AttributeError: module 'triton.language.math' has no attribute 'tanh'",
                   status=Status.RUNTIME_ERROR)
    assert f"not in the installed triton {importlib.metadata.version('triton')}" in got[0].message
    assert "installed torch" not in got[0].message


def test_a_name_of_torch_25s_inductor_is_named_as_kernelbooks_torch():
    got = _explain("import torch\n", "ImportError: cannot import name 'instance_descriptor' from "
                   "'torch._inductor.runtime.hints' (/x/torch/_inductor/runtime/hints.py)")
    assert got[0].kind == "dialect:removed_import" and "torch 2.5's Inductor had it" in got[0].message


def test_a_torch_name_inductor_never_wrote_is_not_called_kernelbooks():
    got = _explain("import torch\n", "ImportError: cannot import name 'fused_relu' from "
                   "'torch._inductor.runtime.triton_helpers' (/x/triton_helpers.py)")
    assert "does not exist in the installed torch" in got[0].message and "KernelBook" not in got[0].message


def test_explain_adds_nothing_to_a_correct_verdict():
    src, _, _ = _read("hardcoded_xnumel")
    assert _explain(src, "anything", status=Status.CORRECT, problem=_problem("relu")) == ()


def test_explain_finds_an_out_of_bounds_view_from_the_source_when_the_gpu_just_gave_wrong_values():
    src = _read("view_out_of_bounds")[0]
    got = causes.explain(src, Status.INCORRECT, (Diagnostic("mismatch", "trial 1: wrong values"),))
    assert got[0].kind == "dialect:view_out_of_bounds" and "holds 640 elements" in got[0].message


def test_sizes_of_the_problem_are_not_reported_as_hard_coded():
    src = _read("ok_gelu_grid")[0]
    got = causes.explain(src, Status.INCORRECT, (Diagnostic("mismatch", "wrong values"),), _problem("gelu"))
    assert not any(d.kind == "dialect:hardcoded_size" for d in got)


def test_problem_shapes_come_from_the_meta_device_without_drawing_random_numbers():
    import torch
    torch.manual_seed(0)
    expected = torch.rand(1)
    torch.manual_seed(0)
    shapes = causes.problem_shapes(_problem("layernorm_relu").module)
    assert shapes == causes.Shapes(inputs=(((8, 32), (32, 1)),), outputs=((8, 32),), params=(32,),
                                   inner=((32,), (8, 32)))
    assert torch.equal(torch.rand(1), expected)


# --- hard-coded sizes: only a constant no product of the problem's sizes makes ----------

_AVG_POOL = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, kernel_size: int):
        super().__init__()
        self.pool = nn.AvgPool2d(kernel_size)

    def forward(self, x):
        return self.pool(x)


def get_inputs():
    return [torch.randn(112, 64, 512, 512)]


def get_init_inputs():
    return [11]
"""

# conv (5, 3, 39, 39) -> (5, 7, 37, 37), then relu and a 2x2 max pool -> (5, 7, 18, 18)
_CONV_POOL = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)

    def forward(self, x):
        return F.max_pool2d(torch.relu(self.conv(x)), 2)


def get_inputs():
    return [torch.randn(5, 3, 39, 39)]


def get_init_inputs():
    return [3, 7, 3]
"""


def _problem_from(tmp_path, src: str):
    from tools.problem import load_problem
    path = tmp_path / "problem.py"
    path.write_text(src, encoding="utf-8")
    return load_problem(path)


def _kernel_with(numels: str) -> str:
    """A KernelBook-format kernel whose body starts with `numels` (its launch is elided)."""
    return textwrap.dedent("""
        import triton
        import triton.language as tl


        @triton.jit
        def triton_red_fused_0(in_ptr0, out_ptr0, xnumel, r0_numel, XBLOCK: tl.constexpr):
            {numels}
            xoffset = tl.program_id(0) * XBLOCK
        """).replace("{numels}", numels)


def _hard_coded(src: str, problem, status=Status.INCORRECT, message="trial 1: wrong values"):
    got = causes.explain(src, status, (Diagnostic("mismatch", message),), problem)
    return [d for d in got if d.kind == "dialect:hardcoded_size"]


def test_a_product_of_dims_from_different_places_in_a_shape_is_not_hard_coded(tmp_path):
    src = _kernel_with(f"xnumel = {112 * 512 * 512}")
    assert _hard_coded(src, _problem_from(tmp_path, _AVG_POOL)) == []


def test_a_pooling_window_of_an_init_input_squared_is_not_hard_coded(tmp_path):
    src = _kernel_with("r0_numel = 121")
    assert _hard_coded(src, _problem_from(tmp_path, _AVG_POOL)) == []


def test_the_element_count_of_a_submodules_output_is_not_hard_coded(tmp_path):
    src = _kernel_with(f"xnumel = {5 * 7 * 37 * 37}")
    assert _hard_coded(src, _problem_from(tmp_path, _CONV_POOL)) == []


_CHUNKED = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, block_len: int):
        super().__init__()
        self.block_len = block_len

    def forward(self, x):
        b, t, d = x.shape
        return x.view(b, t // self.block_len, self.block_len, d).cumsum(2).view(b, t, d)


def get_inputs():
    return [torch.randn(16, 128, 8)]


def get_init_inputs():
    return [64]
"""


def test_a_count_of_chunks_a_size_divided_by_a_parameter_is_not_hard_coded(tmp_path):
    # Mamba2's seed: `xnumel = 2` chunks of a 128-step sequence in blocks of 64
    src = _kernel_with("xnumel = 2")
    assert _hard_coded(src, _problem_from(tmp_path, _CHUNKED)) == []


def test_a_size_no_quotient_of_the_chunked_problems_sizes_makes_is_hard_coded(tmp_path):
    (diag,) = _hard_coded(_kernel_with("xnumel = 3"), _problem_from(tmp_path, _CHUNKED))
    assert "xnumel = 3 is hard-coded" in diag.message


_BATCH_NORM = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.bn = nn.BatchNorm2d(120)

    def forward(self, x):
        return self.bn(x)


def get_inputs():
    return [torch.randn(10, 120, 224, 224)]


def get_init_inputs():
    return []
"""


def test_a_second_split_of_a_batch_norms_reduction_is_not_hard_coded(tmp_path):
    # ShuffleNetUnit's seed on an H200: N*H*W = 501760 in 448 shares of 1120, then 9 of 125
    src = _kernel_with("xnumel = 1080\n    r0_numel = 125\n    tmp1 = 1120")
    assert _hard_coded(src, _problem_from(tmp_path, _BATCH_NORM)) == []


def test_a_share_of_a_split_whose_xnumel_is_no_multiple_of_the_split_is_hard_coded(tmp_path):
    (diag,) = _hard_coded(_kernel_with("xnumel = 256\n    r0_numel = 125"), _problem_from(tmp_path, _BATCH_NORM))
    assert "is hard-coded" in diag.message


def test_a_size_no_product_of_the_problems_sizes_makes_is_still_hard_coded(tmp_path):
    src = _kernel_with("xnumel = 256")
    (diag,) = _hard_coded(src, _problem_from(tmp_path, _AVG_POOL))
    assert "xnumel = 256 is hard-coded" in diag.message


def test_kernelbooks_usual_256_on_the_shipped_relu_example_is_still_hard_coded():
    from tools.problem import load_problem
    first = json.loads((ROOT / "examples/relu.kernelbook.replay.jsonl").read_text().splitlines()[0])
    src = first["completion"].split("```python\n")[1].split("```")[0]
    (diag,) = _hard_coded(src, load_problem(ROOT / "examples/relu.py"))
    assert "xnumel = 256 is hard-coded" in diag.message and "4194303 elements" in diag.message


def test_a_hard_coded_size_goes_after_an_out_of_memory_error(tmp_path):
    src = _kernel_with("xnumel = 256")
    oom = Diagnostic("runtime_error", "during trial: OutOfMemoryError: CUDA out of memory")
    got = causes.with_causes(src, Status.RUNTIME_ERROR, (oom,), _problem_from(tmp_path, _AVG_POOL))
    assert [d.kind for d in got] == ["runtime_error", "dialect:hardcoded_size"]


# --- the launch-grid helpers of torch <= 2.6 ------------------------------------------

def test_grid_of_one_numel_divides_it_by_xblock():
    assert inductor_grid.grid(4257)({"XBLOCK": 256}) == (17, 1, 1)


def test_grid_without_xblock_launches_one_program_per_element():
    assert inductor_grid.grid(10)({}) == (10, 1, 1)


def test_grid_of_two_numels_takes_y_first():
    assert inductor_grid.grid(12, 300)({"XBLOCK": 64, "YBLOCK": 4}) == (5, 3, 1)


def test_grid_spills_a_y_above_65535_into_z():
    assert inductor_grid.grid(70000, 8)({"XBLOCK": 8, "YBLOCK": 1}) == (1, 35000, 2)


def test_grid_of_three_numels_divides_each_by_its_block():
    assert inductor_grid.grid(6, 12, 300)({"XBLOCK": 64, "YBLOCK": 4, "ZBLOCK": 2}) == (5, 3, 3)


def test_split_scan_grid_splits_the_scanned_dimension_over_x():
    assert inductor_grid.split_scan_grid(7, 1000)({"XBLOCK": 1, "RBLOCK": 256}) == (4, 7, 1)


def test_cooperative_reduction_grid_puts_rsplit_on_x():
    assert inductor_grid.cooperative_reduction_grid(100)({"RSPLIT": 8, "XBLOCK": 32}) == (8, 4, 1)


def test_round_robin_combo_grid_interleaves_kernels_with_a_floor():
    fn = inductor_grid.grid_combo_kernels(1000, num_kernels=3, min_blocks=40, is_sequential=False)
    assert fn({"XBLOCK": 64}) == (48, 1, 1) and fn({"XBLOCK": 1024}) == (40, 1, 1)


def test_sequential_combo_grid_lays_kernels_end_to_end():
    fn = inductor_grid.grid_combo_kernels([100, 300], num_kernels=2, min_blocks=None, is_sequential=True)
    assert fn({"XBLOCK": 64}) == (2 + 5, 1, 1)


# --- install(), in a fresh process ------------------------------------------------------

def test_install_gives_torch_no_grid_back_so_a_file_that_needs_it_fails_as_for_a_user():
    out = _run("""
        from tools.dialect import runtime
        runtime.install("cuda")
        try:
            from torch._inductor.runtime.triton_heuristics import grid
            print("grid is there")
        except ImportError:
            print("ImportError")
    """)
    assert out == "ImportError"


def test_install_on_cpu_leaves_torch_cuda_helpers_alone():
    out = _run("""
        import torch
        from tools.dialect import runtime
        before = torch.cuda.set_device, torch._C._dynamo.guards._empty_strided_cuda
        runtime.install("cpu")
        print(before == (torch.cuda.set_device, torch._C._dynamo.guards._empty_strided_cuda))
    """)
    assert out == "True"


# --- the interpreter: libdevice and triton_helpers compute what they do on a GPU --------

@pytest.fixture(scope="module")
def interp() -> dict:
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    done = subprocess.run([sys.executable, str(HERE / "interp_check.py")], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


_ELEMENTWISE = ["rsqrt", "sqrt", "tanh", "erf", "erfc", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p",
                "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "erfinv",
                "lgamma", "floor", "ceil", "trunc", "nearbyint", "rint", "round", "abs", "isnan", "isinf",
                "signbit", "pow", "fmod", "atan2", "hypot", "copysign", "fast_dividef", "div_rn", "nextafter",
                "pow(x, 3)"]


@pytest.mark.parametrize("name", _ELEMENTWISE)
def test_libdevice_function_matches_torch_within_one_fp32_ulp_in_the_interpreter(interp, name):
    assert interp[f"libdevice.{name}"] <= 1.0


def test_libdevice_directed_rounding_brackets_the_exact_quotient(interp):
    assert interp["libdevice.div_rz < div_ru"] == 0.0


@pytest.mark.parametrize("name", ["maximum", "minimum", "max2", "min2", "any", "exp", "frexp mantissa",
                                  "frexp exponent", "div_floor_integer", "remainder_integer"])
def test_triton_helper_matches_torch_exactly_in_the_interpreter(interp, name):
    assert interp[f"triton_helpers.{name}"] == 0.0


# prod reduces pairwise in the interpreter (tools/dialect/interp_reduce.py), as a GPU does in a
# tree: the rounding of a product depends on its order, as a sum's does
@pytest.mark.parametrize("name", ["promote_to_tensor(sum)", "welford mean", "welford var", "prod"])
def test_triton_helper_reduction_matches_torch_up_to_summation_order(interp, name):
    assert interp[f"triton_helpers.{name}"] <= 8.0


def test_libdevice_refuses_torch_tensors_outside_a_kernel(interp):
    assert interp["libdevice refuses torch tensors"] == 0.0


# --- guards: the dialect's helpers compute nothing, extern_kernels stay library ops -----

def test_kernelbook_header_and_call_body_draw_no_guard_finding_in_their_portable_form():
    for name in ("ok_gelu_grid", "ok_layernorm_persistent"):
        assert run_static_guards(portable(_read(name)[0]), GuardSettings()) == [], name


def test_every_grid_helper_and_cuda_helper_of_the_dialect_passes_the_guards():
    src = _read("ok_gelu_grid")[0] + textwrap.dedent("""
        from torch._inductor.runtime.triton_heuristics import split_scan_grid, grid_combo_kernels
        from torch._inductor.runtime.triton_heuristics import cooperative_reduction_grid
        from torch._inductor.select_algorithm import extern_kernels
        empty_strided_cpu = torch._C._dynamo.guards._empty_strided_cpu


        def call2(args):
            arg0_1, = args
            with torch.cuda._DeviceGuard(0):
                stream0 = torch._C._cuda_getCurrentRawStream(0)
                buf0 = empty_strided_cpu((8, 50), (50, 1), torch.float32)
                triton_poi_fused_gelu_0[split_scan_grid(8, 50)](arg0_1, buf0, 400, XBLOCK=1)
                triton_poi_fused_gelu_0[cooperative_reduction_grid(8)](arg0_1, buf0, 400, XBLOCK=1)
                triton_poi_fused_gelu_0[grid_combo_kernels(400, num_kernels=1, min_blocks=1, is_sequential=False)](
                    arg0_1, buf0, 400, XBLOCK=128)
                triton_poi_fused_gelu_0[grid(8, 50)](arg0_1, buf0, 400, XBLOCK=128)
                buf1 = buf0; del buf0  # reuse
            return reinterpret_tensor(buf1, (400,), (1,), 0),


        class Other(nn.Module):
            def forward(self, x):
                return call2([x])[0]
        """)
    assert run_static_guards(portable(src), GuardSettings()) == []


def test_a_private_runtime_name_the_portable_form_cannot_define_is_rejected_by_name():
    src = _read("ok_gelu_grid")[0].replace(
        "import torch.nn as nn\n", "import torch.nn as nn\nfrom torch._inductor.runtime.triton_heuristics import start_graph\n")
    (finding,) = run_static_guards(portable(src), GuardSettings())
    assert finding.reject and finding.guard == "private_runtime" and "start_graph" in finding.message


def test_old_inductor_runtime_module_paths_are_not_library_ops():
    src = portable(_read("removed_module_import")[0])
    assert run_static_guards(src, GuardSettings()) == []


@pytest.mark.parametrize("op, advice", [
    ("mm(arg0_1, arg1_1, out=buf0)", "tl.dot(a, b)"),
    ("addmm(arg2_1, arg0_1, arg1_1, alpha=1, beta=1, out=buf0)", "adding the bias"),
    ("bmm(arg0_1, arg1_1, out=buf0)", "one batch per program"),
    ("convolution(arg0_1, arg1_1, stride=(1, 1), padding=(0, 0), dilation=(1, 1), transposed=False, "
     "output_padding=(0, 0), groups=1, bias=None)", "implicit GEMM"),
])
def test_extern_kernels_op_is_rejected_naming_the_op_and_the_tl_dot_rewrite(op, advice):
    src = _read("ok_gelu_grid")[0].replace(
        "        del arg0_1\n", f"        buf0 = extern_kernels.{op}\n        del arg0_1\n").replace(
        "import torch.nn as nn\n", "import torch.nn as nn\nfrom torch._inductor.select_algorithm import extern_kernels\n")
    (finding,) = run_static_guards(portable(src), GuardSettings())
    name = op.split("(")[0]
    assert finding.reject and f"extern_kernels.{name}" in finding.message and advice in finding.message


STRIDED_RETURN = """
def call(args):
    buf0 = empty_strided_cuda((5, 9), (9, 1), torch.float32)
    buf1 = empty_strided_cuda((5,), (1,), torch.int64)
    return (reinterpret_tensor(buf0, (5,), (9,), 2), buf1)
"""


@pytest.mark.parametrize("wrong, named", [(1, False), (0, True)])
def test_a_strided_view_is_named_only_where_its_own_output_is_wrong(wrong, named):
    from tools.dialect.causes import _found
    from tools.verdict import Diagnostic, Status
    mismatch = Diagnostic("mismatch", f"trial 1, output {wrong}: errors are scattered (got 0 expected 4)")
    kinds = [d.kind for _, d in _found(STRIDED_RETURN, Status.INCORRECT, (mismatch,), None)]
    assert ("dialect:strided_view" in kinds) is named
