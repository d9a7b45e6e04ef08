"""Judges under concurrency: cold evals of distinct problems at once each get their own
verdict (no import race of torch's lazy modules, tools/judge/warm.py), and a fault that
only the judge process sees is the evaluator's (exit 3), never the problem file's
(tools/blame.py)."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from run_fixtures import REPO, cli_env, fast_config
from test_judge_service import OK, kcli, svc  # noqa: F401  (svc: a private judge service)

# the stress problems meet here: one judge service loads them all at once, so that their
# first uses of torch's lazy modules overlap; in a process of its own one waits alone
# for 10 s and goes on
_GATE = '''import sys
import threading

try:
    sys.__dict__.setdefault("_krefine_stress_gate", threading.Barrier({n}, timeout=10)).wait()
except threading.BrokenBarrierError:
    pass
'''

# enters torch._inductor from its own end a moment after the others start, as another
# session's torch.compile baseline does on cuda (`import torch._inductor.config` first)
_INDUCTOR_USER = '''import time
time.sleep(0.1)
import torch._inductor.config as inductor_config
inductor_config.fallback_random = True
'''


def _stress_problem(i: int, n: int) -> str:
    # arithmetic in get_inputs(): on the meta device (load_problem's validation) it runs
    # torch's python reference kernels, whose first call imports torch._dynamo
    inputs = "torch.randn(8, 64)" if i == 0 else f"torch.ones(8, {16 * i}) * 0.5 + torch.randn(8, {16 * i})"
    return (f'"""ReLU, problem {i} of {n} judged at once from cold."""\n'
            "import torch\nimport torch.nn as nn\n" + _GATE.format(n=n) + (_INDUCTOR_USER if i == 0 else "") +
            "\n\nclass Model(nn.Module):\n    def forward(self, x):\n        return torch.relu(x)\n\n\n"
            f"def get_inputs():\n    return [{inputs}]\n\n\ndef get_init_inputs():\n    return []\n")


def _evals_at_once(env: dict, problems: list[Path], candidate: str, *args: str) -> list[tuple[int, str]]:
    """(exit status, stderr) of one `krefine eval` per problem, all started at once."""
    procs = [subprocess.Popen([sys.executable, "-m", "agent.cli", "eval", str(p), candidate, "--json", *args],
                              cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for p in problems]
    out = []
    for p in procs:
        stdout, stderr = p.communicate(timeout=300)
        docs = [json.loads(ln) for ln in stdout.splitlines() if ln.startswith("{")]
        out.append((p.returncode, stderr + "".join(d["verdict"] for d in docs)))
    return out


@pytest.mark.slow
def test_concurrent_cold_evals_of_distinct_problems_each_get_their_verdict(svc, tmp_path):  # noqa: F811
    env, _ = svc
    n = 6
    problems = []
    for i in range(n):
        problems.append(tmp_path / f"p{i}.py")
        problems[-1].write_text(_stress_problem(i, n))
    config = fast_config(tmp_path, eval={"trials": 2, "gpu_cross_compile": False})
    got = _evals_at_once(env, problems, OK, "--device", "cpu", "--keep-judge", "60", "--config", str(config))
    assert [rc for rc, _ in got] == [0] * n, "\n".join(f"{p.name}: exit {rc}: {text}" for p, (rc, text)
                                                       in zip(problems, got))


def test_a_judge_imports_torchs_lazy_modules_before_its_threads_start():
    """krefine eval's and krefine run's in-process judges: the Judge does it itself."""
    # the problem's forward check on the meta device imports torch._dynamo itself: off here,
    # so what is tested is what the Judge imports
    code = ("import sys\nfrom tools.judge import Judge\nimport tools.problem as tp\n"
            "tp._check_forward = lambda *a, **k: None\n"
            f"p = tp.load_problem({str(Path(__file__).parent / 'problems' / 'relu.py')!r})\n"
            "assert 'torch._dynamo' not in sys.modules\n"
            "with Judge(p, device='cpu', use_forkserver=False) as j:\n"
            "    print('torch._dynamo' in sys.modules, 'torch_imports' in j.setup_s)\n")
    r = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=cli_env(), capture_output=True, text=True,
                       timeout=120)
    assert r.stdout.split() == ["True", "True"], r.stderr


def test_a_module_this_torch_lacks_is_reported_not_raised(monkeypatch):
    from tools.judge import warm
    monkeypatch.setattr(warm, "_MODULES", {"cpu": ("torch._krefine_no_such_module",), "cuda": ()})
    monkeypatch.setattr(warm, "WARMED", {})
    warm.warm_imports("cpu")
    assert warm.WARMED["torch._krefine_no_such_module"].startswith("ModuleNotFoundError")


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
    # the one error line; the notice of a service this eval started is not an error
    lines = [ln for ln in stderr.strip().splitlines() if not ln.startswith("krefine: left the judge service")]
    assert len(lines) == 1, stderr
    return lines[0]


@pytest.mark.slow
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
    from tools import blame
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
    from tools import blame
    from tools.problem import load_problem

    def no_replay(*_):
        raise AssertionError("a fresh process was started")
    monkeypatch.setattr(blame, "replay", no_replay)
    # as in the CLI's process before any thread starts; here other tests' sessions may
    # still hold threads of their own
    import tools.problem
    monkeypatch.setattr(tools.problem.threading, "active_count", lambda: 1)
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


@pytest.mark.gpu
def test_on_the_gpu_two_cold_evals_of_distinct_problems_at_once_both_get_verdicts_20_times(tmp_path):
    """The case the issue measured: a cold service, then two evals of different problems
    at once, one session's torch.compile baseline importing Inductor while the other loads
    a get_inputs() doing arithmetic on the meta device. Two tries run side by side, each
    with a service of its own, to stay within a few minutes."""
    from concurrent.futures import ThreadPoolExecutor
    relu = REPO / "examples" / "relu.py"
    shifted = tmp_path / "relu_shifted.py"
    shifted.write_text(relu.read_text().replace("return [torch.randn(batch, dim)]",
                                                "return [torch.randn(batch, dim) * 2 + 0.5]"))
    candidate = str(REPO / "benchmarks" / "throughput" / "gate_correct.py")
    config = fast_config(tmp_path, eval={"trials": 2},
                         timing={"warmup": 2, "rounds": 2, "iters_per_round": 5, "max_rounds": 2,
                                 "max_extra_s": 0.0, "host_check_iters": 5})

    def one_try(attempt: int) -> list[str]:
        d = Path(tempfile.mkdtemp(prefix="kj", dir="/tmp")) / "s"   # a cold service of its own
        env = {**cli_env(), "KREFINE_JUDGE_DIR": str(d)}
        env.pop("KREFINE_KEEP_JUDGE_S")
        try:
            got = _evals_at_once(env, [relu, shifted], candidate, "--device", "cuda", "--no-profile",
                                 "--keep-judge", "30", "--config", str(config))
        finally:
            kcli(env, "judge", "stop", timeout=60)
            shutil.rmtree(d.parent, ignore_errors=True)
        return [f"try {attempt}: exit {rc}: {text[-300:]}" for rc, text in got if rc != 0]
    t0 = time.monotonic()
    with ThreadPoolExecutor(max_workers=2) as pool:
        failures = [f for found in pool.map(one_try, range(20)) for f in found]
    assert not failures, "\n".join(failures) + f"\n({time.monotonic() - t0:.0f} s for 20 tries)"
