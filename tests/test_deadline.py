"""A problem's own code that never returns (tools/deadline.py): loading it, building its
Model and its reference forward end as one line naming the file and line, exit 2; a
deadline met leaves nothing armed; the judge service stays usable after one."""
from __future__ import annotations

import threading
import time

import pytest

import tools.problem as problem_mod
from tools.deadline import Deadline
from tools.errors import BadInput

HANGS_EVERYWHERE = """import torch, torch.nn as nn
class Model(nn.Module):
    def forward(self, x):
        while True:
            x = x + 1
def get_inputs(): return [torch.randn(8, 8)]
def get_init_inputs(): return []
"""

# the meta-device check at load returns at once; on real tensors the forward never does
HANGS_ON_REAL_TENSORS = """import time, torch, torch.nn as nn
class Model(nn.Module):
    def forward(self, x):
        if x.device.type != "meta":
            while x.sum() == x.sum():
                time.sleep(0.01)
        return x * 2
def get_inputs(): return [torch.randn(8, 8)]
def get_init_inputs(): return []
"""

CANDIDATE = """import torch, torch.nn as nn, triton, triton.language as tl
@triton.jit
def double(x, y, n, B: tl.constexpr):
    o = tl.program_id(0) * B + tl.arange(0, B)
    tl.store(y + o, tl.load(x + o, mask=o < n) * 2, mask=o < n)
class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        double[(triton.cdiv(x.numel(), 64),)](x, y, x.numel(), B=64)
        return y
"""


def test_loading_a_problem_whose_forward_never_returns_names_the_file_and_line(tmp_path, monkeypatch):
    p = tmp_path / "spins.py"
    p.write_text(HANGS_EVERYWHERE)
    monkeypatch.setattr(problem_mod, "LOAD_TIMEOUT_S", 2.0)
    t = time.monotonic()
    with pytest.raises(BadInput) as e:
        problem_mod.load_problem(p)
    assert time.monotonic() - t < 30
    assert str(p) in str(e.value) and "did not return within 2 s" in str(e.value) and "line 5, in forward" in str(e.value)


def test_a_deadline_ends_a_python_loop_in_a_thread_other_than_the_main_one():
    said = []

    def body():
        try:
            with Deadline(1, "problem.py", "the forward"):
                while True:
                    pass
        except BadInput as e:
            said.append(str(e))
    t = threading.Thread(target=body, daemon=True)
    t.start()
    t.join(20)
    assert not t.is_alive() and said and "the forward did not return within 1 s" in said[0]


def test_an_inner_deadline_leaves_the_outer_one_armed():
    t = time.monotonic()
    with pytest.raises(BadInput) as e:
        with Deadline(1.5, "problem.py", "the outer call"):
            with Deadline(100, "problem.py", "an inner call"):
                pass
            time.sleep(30)
    assert "the outer call did not return within 1.5 s" in str(e.value) and time.monotonic() - t < 10


def test_an_outer_deadline_that_fires_inside_an_inner_one_names_itself():
    with pytest.raises(BadInput) as e:
        with Deadline(1, "problem.py", "the outer call"):
            with Deadline(100, "problem.py", "an inner call"):
                time.sleep(30)
    assert "the outer call did not return within 1 s" in str(e.value)


def test_a_deadline_met_leaves_no_alarm_behind():
    with Deadline(0.5, "problem.py", "a quick call"):
        pass
    time.sleep(1.0)   # an alarm left armed would raise here


def hanging_files(tmp_path):
    problem, cand, config = tmp_path / "spins_on_device.py", tmp_path / "cand.py", tmp_path / "krefine.toml"
    problem.write_text(HANGS_ON_REAL_TENSORS)
    cand.write_text(CANDIDATE)
    config.write_text("[eval]\nreference_timeout_s = 3\n")
    return str(problem), str(cand), str(config)


def test_a_reference_forward_that_never_returns_is_exit_2_in_one_line(tmp_path):
    from run_fixtures import cli
    problem, cand, config = hanging_files(tmp_path)
    r = cli("eval", problem, cand, "--device", "cpu", "--no-profile", "--keep-judge", "0", "--config", config)
    assert r.returncode == 2, r.stderr
    last = r.stderr.strip().splitlines()[-1]
    assert problem in last and "did not return within 3 s" in last and "in forward" in last


# the reference's forward spins in pure Python (no deadline within the test's time), after leaving a mark
SPINS_ON_REAL_TENSORS = """import pathlib, torch, torch.nn as nn
MARK = pathlib.Path(MARK_PATH)
class Model(nn.Module):
    def forward(self, x):
        if x.device.type != "meta":
            MARK.touch()
            while True:
                pass
        return x * 2
def get_inputs(): return [torch.randn(8, 8)]
def get_init_inputs(): return []
"""


def test_sigterm_while_the_reference_spins_ends_the_process_with_130(tmp_path):
    import signal
    import subprocess
    import sys
    from run_fixtures import REPO, cli_env
    problem, cand = tmp_path / "spins.py", tmp_path / "cand.py"
    mark = tmp_path / "spinning"
    problem.write_text(SPINS_ON_REAL_TENSORS.replace("MARK_PATH", repr(str(mark))))
    cand.write_text(CANDIDATE)
    p = subprocess.Popen([sys.executable, "-m", "agent.cli", "eval", str(problem), str(cand), "--device", "cpu",
                          "--no-profile", "--keep-judge", "0"], cwd=REPO, env=cli_env(),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        end = time.monotonic() + 120
        while not mark.exists() and time.monotonic() < end and p.poll() is None:
            time.sleep(0.2)
        assert mark.exists(), f"the reference never ran: {p.poll()} {p.stderr.read() if p.poll() is not None else ''}"
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=30)   # before: the spinning thread kept the process alive for ever
        assert p.returncode == 130 and "interrupted (SIGTERM)" in err, err
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
