"""Pure-Triton seeds (issue 19): Inductor's Triton templates in the converter, seeds the
guards would reject refused as seeds, and the seed cache.

The gpu_*template* / gpu_triu_matmul_extern captures were recorded on an H100 (torch
2.11) by `python -m tools.dialect capture PROBLEM --device cuda [--templates]` from the
problems in tests/dialect/problems/ of the same shapes.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tools.dialect import kernelbook
from tools.dialect.inductor_capture import read_capture
from tools.dialect import seedcache
from tools.dialect.kernelbook import convert, guard_rejection
from tools.dialect.seedcache import SeedCache, seed_cache_key
from tools.problem import load_problem

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures" / "inductor"
PROBLEMS = ROOT / "tests" / "dialect" / "problems"


def _capture(name: str):
    return read_capture((FIXTURES / f"{name}.py").read_text(encoding="utf-8"))


def _library_capture():
    """The default compile of triu_matmul with its cuBLAS call made one krefine has no Triton
    kernel for (Inductor's `_mm_plus_mm`): `extern_kernels.mm` itself becomes a launch of
    krefine's GEMM family (tools/kernels/gemm.py)."""
    text = (FIXTURES / "gpu_triu_matmul_extern.py").read_text(encoding="utf-8")
    changed = text.replace("extern_kernels.mm(arg0_1, arg1_1, out=buf0)",
                           "extern_kernels._mm_plus_mm(arg0_1, arg1_1, arg0_1, arg1_1, out=buf0)")
    assert changed != text
    return read_capture(changed)


def _launches(src: str) -> list[ast.Call]:
    call = next(n for n in ast.parse(src).body if isinstance(n, ast.FunctionDef) and n.name == "call")
    return [n for n in ast.walk(call) if isinstance(n, ast.Call) and isinstance(n.func, ast.Subscript)]


def test_a_matmul_template_launches_on_its_fixed_grid_with_its_decorator_config():
    src = convert(load_problem(PROBLEMS / "triu_matmul.py"), _capture("gpu_triu_matmul_template"))
    tem = next(c for c in _launches(src) if ast.unparse(c.func.value) == "triton_tem_fused_mm_0")
    assert ast.unparse(tem.func.slice) == "(2048, 1, 1)"
    assert {k.arg: k.value.value for k in tem.keywords} == {"num_warps": 4, "num_stages": 3}
    assert [ast.unparse(a) for a in tem.args] == ["arg0_1", "arg1_1", "buf0"]


def test_a_template_seed_has_only_triton_kernels_and_passes_the_guards():
    src = convert(load_problem(PROBLEMS / "triu_matmul.py"), _capture("gpu_triu_matmul_template"))
    assert "extern_kernels" not in src
    assert guard_rejection(src) is None


def test_a_convolution_template_converts_with_its_layout_kernels():
    src = convert(load_problem(PROBLEMS / "conv2d_3x3.py"), _capture("gpu_conv2d_template"))
    names = [ast.unparse(c.func.value) for c in _launches(src)]
    assert names == ["triton_poi_fused_convolution_0", "triton_poi_fused_convolution_1",
                     "triton_tem_fused_convolution_2", "triton_poi_fused_convolution_3"]
    assert guard_rejection(src) is None


def test_a_seed_left_calling_cublas_is_one_the_guards_reject():
    src = convert(load_problem(PROBLEMS / "triu_matmul.py"), _library_capture())
    assert "extern_kernels._mm_plus_mm" in guard_rejection(src)


def test_a_library_matmul_in_the_default_compile_becomes_a_triton_gemm_the_guards_pass():
    src = convert(load_problem(PROBLEMS / "triu_matmul.py"), _capture("gpu_triu_matmul_extern"))
    call = next(n for n in ast.parse(src).body if isinstance(n, ast.FunctionDef) and n.name == "call")
    assert "extern_kernels." not in ast.unparse(call) and "gemm(" in ast.unparse(call)
    assert guard_rejection(src) is None


def test_the_seed_falls_back_to_triton_templates_when_the_default_seed_calls_a_library(monkeypatch):
    captures = {False: _library_capture(), True: _capture("gpu_triu_matmul_template")}
    asked = []
    monkeypatch.setattr(kernelbook, "capture", lambda problem, device, templates=False:
                        asked.append(templates) or captures[templates])
    src = kernelbook.seed_candidate(load_problem(PROBLEMS / "triu_matmul.py"), "cuda")
    assert asked == [False, True]
    assert "triton_tem_fused_mm_0[" in src and "extern_kernels" not in src


def test_no_seed_names_the_reason_of_every_attempt(monkeypatch):
    def failing(problem, device, templates=False):
        if templates:
            raise ValueError("torch.compile failed: NoValidChoicesError")
        return _library_capture()
    monkeypatch.setattr(kernelbook, "capture", failing)
    with pytest.raises(ValueError) as e:
        kernelbook.seed_candidate(load_problem(PROBLEMS / "triu_matmul.py"), "cuda")
    assert "default: the guards would reject it (torch_compute" in str(e.value)
    assert "with Triton templates: torch.compile failed: NoValidChoicesError" in str(e.value)


def test_on_cpu_the_seed_never_tries_templates(monkeypatch):
    asked = []
    monkeypatch.setattr(kernelbook, "capture", lambda problem, device, templates=False:
                        asked.append(templates) or _library_capture())
    with pytest.raises(ValueError):
        kernelbook.seed_candidate(load_problem(PROBLEMS / "triu_matmul.py"), "cpu")
    assert asked == [False]


def test_the_seed_cache_returns_what_was_put_for_the_same_problem_device_and_torch(tmp_path):
    problem, cache = load_problem(PROBLEMS / "triu_matmul.py"), SeedCache(tmp_path)
    cache.put(problem, "cuda", "2.11.0", "SEED")
    assert cache.get(problem, "cuda", "2.11.0") == "SEED"
    with pytest.raises(KeyError):
        cache.get(problem, "cuda", "2.12.0")
    with pytest.raises(KeyError):
        cache.get(problem, "cpu", "2.11.0")


def test_the_seed_cache_key_changes_with_the_problem_source():
    assert seed_cache_key("a", "cuda", "2.11") != seed_cache_key("b", "cuda", "2.11")


def test_the_seed_cache_keeps_a_lasting_reason_for_no_seed(tmp_path):
    problem, cache = load_problem(PROBLEMS / "triu_matmul.py"), SeedCache(tmp_path)
    cache.put(problem, "cuda", "2.11.0", None, "the Inductor output has no Triton kernel")
    with pytest.raises(ValueError, match="no Triton kernel"):
        cache.get(problem, "cuda", "2.11.0")


def test_the_seed_cache_forgets_a_failure_that_may_not_repeat(tmp_path):
    problem, cache = load_problem(PROBLEMS / "triu_matmul.py"), SeedCache(tmp_path)
    cache.put(problem, "cuda", "2.11.0", None, "torch.compile failed: CUDA out of memory")
    with pytest.raises(KeyError):
        cache.get(problem, "cuda", "2.11.0")


def test_the_seed_cache_keeps_a_timeout_for_the_same_limit(tmp_path):
    problem, cache = load_problem(PROBLEMS / "triu_matmul.py"), SeedCache(tmp_path)
    cache.put(problem, "cuda", "2.11.0", None, "seed: torch.compile took longer than 200 s")
    with pytest.raises(ValueError, match="took longer than 200 s"):
        cache.get(problem, "cuda", "2.11.0", timeout_s=200)


def test_the_seed_cache_retries_a_timeout_under_a_longer_limit(tmp_path):
    problem, cache = load_problem(PROBLEMS / "triu_matmul.py"), SeedCache(tmp_path)
    cache.put(problem, "cuda", "2.11.0", None, "seed: torch.compile took longer than 200 s")
    with pytest.raises(KeyError):
        cache.get(problem, "cuda", "2.11.0", timeout_s=600)


def test_a_cached_seed_is_read_without_starting_a_process(tmp_path, monkeypatch):
    import subprocess
    problem = load_problem(PROBLEMS / "triu_matmul.py")
    SeedCache(tmp_path).put(problem, "cpu", seedcache.torch_version(), "SEED")
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: pytest.fail("a process was started"))
    assert seedcache.seed_in_subprocess(problem.path, "cpu", 60, tmp_path) == "SEED"


def test_torch_version_read_without_importing_torch_is_torch_dunder_version():
    import subprocess
    import sys
    code = ("import sys; from tools.dialect.seedcache import torch_version; v = torch_version(); "
            "assert 'torch' not in sys.modules, 'torch imported'; print(v)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[1])
    import torch
    assert out.stdout.strip() == torch.__version__


def test_of_the_modules_max_autotune_saves_the_capture_keeps_the_graphs_own():
    from tools.dialect.inductor_capture import _graph_module
    bench_choice = "class Runner:\n    def call(self, args):\n        arg0_1, = args\n"
    graph = "class Runner:\n    def call(self, args):\n        arg0_1, arg1_1 = args\n        args.clear()\n"
    assert _graph_module([graph.replace("clear", "pop"), bench_choice, graph], 2) == [graph]


def test_the_template_compile_leaves_out_decompose_k_whose_subgraph_cannot_be_launched():
    import torch
    from tools.dialect.inductor_capture import _triton_templates
    with _triton_templates():
        assert torch._inductor.config.max_autotune
        assert torch._inductor.config.triton.num_decompose_k_splits == 0
