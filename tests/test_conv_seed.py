"""A convolution's seed: Inductor's library convolution (`extern_kernels.convolution`)
becomes a launch of krefine's convolution family (tools/kernels/conv.py), whose text the
seed carries, so a problem with a convolution gets a pure-Triton seed on cpu too.

Converter tests run on captures recorded on cpu by this torch's Inductor
(tests/fixtures/inductor/cpu_conv*.py, `python -m tools.dialect capture`); the seeds run
in Triton's interpreter in a child process. The `krefine run --model none` test is slow.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

import pytest

from tools.dialect import convert, read_capture
from tools.dialect.kernelbook import accepted_seed
from tools.dialect.portfolio import seed_portfolio
from tools.problem import load_problem

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures" / "inductor"
PROBLEMS = ROOT / "tests" / "dialect" / "problems"
# fixture -> (problem, the family launch its seed must make)
CONV_FIXTURES = {
    "cpu_conv_transpose_relu": ("conv_transpose_relu", "conv_transpose_nd(", "phases"),
    "cpu_conv1d_grouped_sigmoid": ("conv1d_grouped_sigmoid", "conv_nd(", "igemm"),
}


@lru_cache(maxsize=None)
def _seed(fixture: str) -> str:
    problem = load_problem(PROBLEMS / f"{CONV_FIXTURES[fixture][0]}.py")
    return accepted_seed(problem, read_capture((FIXTURES / f"{fixture}.py").read_text(encoding="utf-8")))


def _call_source(seed: str) -> str:
    return seed[seed.index("\ndef call(args):"):seed.index("\nclass ModelNew")]


@pytest.mark.parametrize("fixture", sorted(CONV_FIXTURES))
def test_a_library_convolution_becomes_a_launch_of_the_family_naming_its_member(fixture):
    _, launcher, member = CONV_FIXTURES[fixture]
    call = _call_source(_seed(fixture))
    assert "extern_kernels" not in _seed(fixture)
    assert f"= {launcher}" in call and f"member='{member}'" in call and "precision='ieee'" in call


def test_the_layout_inductor_asserts_after_the_convolution_is_the_launch_s_out_stride():
    call = _call_source(_seed("cpu_conv_transpose_relu"))
    launch = next(line for line in call.splitlines() if "conv_transpose_nd(" in line)
    assert "out_stride=(360, 1, 36, 3)" in launch
    assert "assert_size_stride(buf2" not in call      # consumed: the launch writes that layout


def test_the_seed_carries_the_family_text_unchanged():
    family = (ROOT / "tools" / "kernels" / "conv.py").read_text(encoding="utf-8")
    assert family in _seed("cpu_conv_transpose_relu")


def test_a_convert_without_the_guards_has_no_library_import():
    problem = load_problem(PROBLEMS / "conv_transpose_relu.py")
    code = convert(problem, read_capture((FIXTURES / "cpu_conv_transpose_relu.py").read_text(encoding="utf-8")))
    assert "select_algorithm import extern_kernels" not in code


CHILD = """
import os, sys, json, importlib.util
os.environ["TRITON_INTERPRET"] = "1"
import torch
def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
seed, problem = load("seed", sys.argv[1]), load("problem", sys.argv[2])
torch.manual_seed(0); model = problem.Model(*problem.get_init_inputs())
torch.manual_seed(0); new = seed.ModelNew(*problem.get_init_inputs())
torch.manual_seed(1); inputs = problem.get_inputs()
want, got = model(*inputs), new(*inputs)
print(json.dumps([list(got.shape) == list(want.shape), (got - want).abs().max().item()]))
"""


def _run_standalone(code: str, problem: Path, tmp_path: Path) -> tuple[bool, float]:
    """The seed in a child with Triton's interpreter and nothing of krefine importable."""
    path = tmp_path / "seed.py"
    path.write_text(code, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([sys.executable, "-c", CHILD, str(path), str(problem)], capture_output=True, text=True,
                          env=env, cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return tuple(json.loads(done.stdout.strip().splitlines()[-1]))


@pytest.mark.parametrize("fixture", sorted(CONV_FIXTURES))
def test_the_seed_runs_standalone_and_matches_the_model(fixture, tmp_path):
    same_shape, err = _run_standalone(_seed(fixture), PROBLEMS / f"{CONV_FIXTURES[fixture][0]}.py", tmp_path)
    assert same_shape and err < 1e-4


def test_the_portfolio_labels_the_family_and_its_tf32x3_variant(monkeypatch):
    problem = load_problem(PROBLEMS / "conv_transpose_relu.py")
    cap = read_capture((FIXTURES / "cpu_conv_transpose_relu.py").read_text(encoding="utf-8"))
    entries = seed_portfolio(problem, "cpu", capture_fn=lambda p, d, templates: cap)
    assert [e.label for e in entries] == ["default+conv(phases)", "default+conv(phases)+tf32x3"]
    assert "precision='tf32x3'" in _call_source(entries[1].code)
    assert entries[1].code.replace("precision='tf32x3'", "precision='ieee'") == entries[0].code


def test_on_cuda_the_portfolio_adds_a_variant_with_its_convolutions_in_tf32():
    problem = load_problem(PROBLEMS / "conv_transpose_relu.py")
    cap = read_capture((FIXTURES / "cpu_conv_transpose_relu.py").read_text(encoding="utf-8"))
    entries = seed_portfolio(problem, "cuda", capture_fn=lambda p, d, templates: cap)
    assert [e.label for e in entries] == ["default+conv(phases)", "default+conv(phases)+tf32x3",
                                          "default+conv(phases)+tf32conv"]
    call = _call_source(entries[2].code)
    assert "precision='tf32', member='phases'" in call and "precision='ieee'" not in call
    assert entries[2].code.replace("precision='tf32',", "precision='tf32x3',") == entries[1].code


def test_the_tf32_convolution_variant_keeps_every_other_dot_at_tf32x3():
    from tools.dialect.portfolio import PortfolioEntry, _conv_tf32_variant
    code = _seed("cpu_conv1d_grouped_sigmoid") + "\n    gemm(a, b, out=buf9, precision='ieee')\n"
    variant = _conv_tf32_variant(PortfolioEntry("default+conv(igemm)+gemm", code))
    assert "gemm(a, b, out=buf9, precision='tf32x3')" in variant.code
    assert "member='igemm'" in variant.code and variant.code.count("precision='tf32', member=") == \
        code.count("precision='ieee', member=")


@pytest.mark.slow
def test_krefine_run_without_a_model_gives_a_standalone_transposed_conv_seed_on_cpu(tmp_path):
    problem = PROBLEMS / "conv_transpose_relu.py"
    out = tmp_path / "run"
    cli = "import sys; from agent.cli import main; sys.exit(main(sys.argv[1:]))"
    done = subprocess.run([sys.executable, "-c", cli, "run", str(problem), "--model", "none",
                           "--seed-kernel", "inductor", "--device", "cpu", "--out", str(out)],
                          capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    same_shape, err = _run_standalone((out / "best.py").read_text(encoding="utf-8"), problem, tmp_path)
    assert same_shape and err < 1e-4
