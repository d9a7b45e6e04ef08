"""Judges under concurrency: cold evals of distinct problems at once each get their own
verdict (no import race of torch's lazy modules, tools/judge/warm.py), and a fault that
only the judge process sees is the evaluator's (exit 3), never the problem file's
(tools/judge/blame.py)."""
from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from run_fixtures import cli_env
from test_judge_service import OK, kcli, svc  # noqa: F401  (svc: a private judge service)

# --- whose fault: the file's only when a fresh process fails the same way --------------

_JUDGE_ONLY = '''"""ReLU whose get_inputs() fails only in a process that has KREFINE_TEST_JUDGE_ONLY set:
the judge, in this test (a fresh process never inherits it), on the {where} only. A fault
of the judge process, never of this file."""
import os

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    x = torch.randn(16, 64)
    if os.environ.get("KREFINE_TEST_JUDGE_ONLY") and (x.device.type == "meta") == {on_meta}:
        raise ImportError("cannot import name 'IndentedBuffer' from partially initialized module "
                          "'torch._inductor.utils' (most likely due to a circular import)")
    return [x]


def get_init_inputs():
    return []
'''


def _judge_only(tmp_path, on_meta: bool) -> str:
    p = tmp_path / "judge_only.py"
    p.write_text(_JUDGE_ONLY.format(where="meta device" if on_meta else "real device", on_meta=on_meta))
    return str(p)


def _one_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    return lines[0]


def test_a_fault_only_the_judge_sees_while_making_inputs_is_exit_3(tmp_path):
    env = {**cli_env(), "KREFINE_TEST_JUDGE_ONLY": "1"}   # cli_env: judged in this process
    r = kcli(env, "eval", _judge_only(tmp_path, on_meta=False), OK, "--device", "cpu", "--json")
    line = _one_line(r.stderr)
    assert r.returncode == 3, r.stderr
    assert line.startswith("krefine: evaluator failed:") and line.endswith("please report"), line
    assert "get_inputs() raised ImportError" in line and "in the judge but not in a fresh process" in line


def test_a_fault_only_the_service_sees_while_loading_the_problem_is_exit_3(svc, tmp_path):  # noqa: F811
    env, _ = svc
    env = {**env, "KREFINE_TEST_JUDGE_ONLY": "1"}          # the service inherits it from its client
    r = kcli(env, "eval", _judge_only(tmp_path, on_meta=True), OK, "--device", "cpu", "--json", "--keep-judge", "60")
    line = _one_line(r.stderr)
    assert r.returncode == 3 and "evaluator failed" in line and "please report" in line, r.stderr
    assert "get_inputs() raised ImportError" in line and "not in a fresh process" in line


def test_a_fault_a_fresh_process_repeats_stays_exit_2_naming_the_file(svc, tmp_path):  # noqa: F811
    env, _ = svc
    bad = tmp_path / "bad_inputs.py"
    bad.write_text((Path(__file__).parent / "problems" / "relu.py").read_text().replace(
        "    return [torch.randn(16, 1000)]",
        "    x = torch.randn(16, 1000)\n    if x.device.type != 'meta':\n        raise ValueError('no data')\n"
        "    return [x]"))
    r = kcli(env, "eval", str(bad), OK, "--device", "cpu", "--json", "--keep-judge", "60")
    line = _one_line(r.stderr)
    assert r.returncode == 2 and str(bad) in line and "get_inputs() raised ValueError: no data" in line, r.stderr


def test_a_fault_a_fresh_process_replaces_with_another_is_the_evaluators(tmp_path, monkeypatch):
    from tools.errors import EvaluatorError
    from tools.judge import evaluate
    from tools.problem import load_problem
    src = _JUDGE_ONLY.format(where="real device", on_meta=False).replace(
        "    return [x]", "    if x.device.type != 'meta':\n        raise ValueError('other')\n    return [x]")
    (tmp_path / "p.py").write_text(src)
    problem = load_problem(tmp_path / "p.py")
    monkeypatch.setenv("KREFINE_TEST_JUDGE_ONLY", "1")
    with pytest.raises(EvaluatorError, match="raised ImportError.* in the judge but get_inputs\\(\\) raised "
                                             "ValueError: other in a fresh process; please report"):
        evaluate(problem, Path(OK).read_text(), device="cpu", profile=False)


def test_a_fresh_process_that_does_not_answer_in_time_leaves_the_fault_to_the_evaluator(tmp_path, monkeypatch):
    from tools.errors import EvaluatorError
    from tools.judge import blame
    slow = tmp_path / "slow.py"
    slow.write_text((Path(__file__).parent / "problems" / "relu.py").read_text().replace(
        "    return [torch.randn(16, 1000)]", "    import time\n    time.sleep(60)"))
    monkeypatch.setattr(blame, "RECHECK_TIMEOUT_S", 3.0)
    t = time.monotonic()
    with pytest.raises(EvaluatorError, match="a fresh process could not replay it \\(it took longer than 3 s\\)"):
        blame.blame(slow, ImportError("half imported"), "get_inputs()", blame.Step("inputs"))
    assert time.monotonic() - t < 30


def test_a_problem_loaded_with_no_other_thread_is_blamed_without_a_fresh_process(tmp_path, monkeypatch):
    """The CLI loads its problem before any thread starts: a bad problem stays quick."""
    from tools.errors import BadInput
    from tools.judge import blame
    from tools.problem import load_problem

    def no_replay(*_):
        raise AssertionError("a fresh process was started")
    monkeypatch.setattr(blame, "replay", no_replay)
    bad = tmp_path / "bad.py"
    bad.write_text((Path(__file__).parent / "problems" / "relu.py").read_text().replace(
        "    return [torch.randn(16, 1000)]", "    raise ValueError('no data')"))
    with pytest.raises(BadInput, match="get_inputs\\(\\) raised ValueError: no data"):
        load_problem(bad)


# --- on the device ------------------------------------------------------------------------

@pytest.mark.gpu
def test_on_the_gpu_a_fault_only_the_judge_sees_is_exit_3_after_a_replay_on_the_device(tmp_path):
    env = {**cli_env(), "KREFINE_TEST_JUDGE_ONLY": "1"}
    r = kcli(env, "eval", _judge_only(tmp_path, on_meta=False), OK, "--device", "cuda", "--json", "--no-profile")
    line = _one_line(r.stderr)
    assert r.returncode == 3 and "not in a fresh process" in line and "please report" in line, r.stderr
