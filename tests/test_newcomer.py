"""What a newcomer meets first (issue 48): `krefine` alone, a problem file that is not Python
or whose reference forward raises, a reason too long for one line, the device named first,
a verdict worded one way, progress through long silences, best.py outside krefine."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from agent.cli import main
from tests.run_fixtures import REPO

BROKEN_FORWARD = textwrap.dedent("""\
    import torch
    from torch import nn
    class Model(nn.Module):
        def forward(self, x):
            return x @ x
    def get_inputs():
        return [torch.randn(3, 4)]
    def get_init_inputs():
        return []
    """)


def test_krefine_alone_prints_its_usage_to_stderr_and_exits_2(capsys):
    assert main([]) == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: krefine") and "run" in err and "eval" in err


def test_a_problem_with_a_syntax_error_is_reported_by_run_without_importing_torch(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import torch\nclass Model(torch.nn.Module)\n    pass\n")
    code = ("import sys; from agent.cli import main; rc = main(['run', sys.argv[1], '--out', sys.argv[2]]); "
            "assert 'torch' not in sys.modules, 'torch imported'; sys.exit(rc)")
    r = subprocess.run([sys.executable, "-c", code, str(bad), str(tmp_path / "run")], cwd=REPO,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2, r.stderr
    assert "not valid Python" in r.stderr and "line 2" in r.stderr
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("model", [["--model", "none", "--seed-kernel", "inductor"], []])
def test_a_reference_forward_that_raises_is_exit_2_before_a_run_directory(tmp_path, capsys, model):
    problem = tmp_path / "matmul.py"
    problem.write_text(BROKEN_FORWARD)
    out = tmp_path / "run"
    assert main(["run", str(problem), "--device", "cpu", "--out", str(out), *model]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(problem) in err
    assert "Model.forward" in err and "shapes cannot be multiplied" in err
    assert not out.exists()


def test_a_forward_the_meta_device_cannot_follow_still_loads(tmp_path):
    from tools.problem import load_problem
    problem = tmp_path / "dd.py"
    problem.write_text(BROKEN_FORWARD.replace("return x @ x", "return x[x > 0] * x.sum().item()"))
    assert load_problem(problem).name == "dd"
