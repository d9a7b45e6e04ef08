"""The persistent judge (tools/judge/session.py) and its fork server (tools/sandbox/forkserver.py),
on CPU."""
from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from tools import sandbox
from tools.judge import GpuLock, Judge
from tools.problem import load_problem
from tools.verdict import Status

EXPLOITS = Path(__file__).parent / "exploits"


def _case(name: str) -> str:
    return (EXPLOITS / f"{name}.py").read_text()


@pytest.fixture(scope="module")
def softmax():
    return load_problem(EXPLOITS / "problems" / "softmax.py")


def test_a_forked_worker_answers_and_its_exit_status_is_reported():
    server = sandbox.start_forkserver("cpu")
    try:
        w = sandbox.start_worker("x = 1\n", device="cpu", forkserver=server)
        hello, _ = w.request({"op": "setup", "device": "cpu", "max_file_mib": 16, "address_space_gib": 0}, 60)
        w.kill()
        assert hello["ok"] and w.returncode == -9
    finally:
        server.close()


def test_exclusive_hold_waits_for_shared_holds_to_end():
    lock, seen = GpuLock(), []
    with lock.shared():
        t = threading.Thread(target=lambda: lock.exclusive().__enter__() or seen.append(time.monotonic()))
        t.start()
        time.sleep(0.2)
        released = time.monotonic()
    t.join(5)
    assert seen and seen[0] >= released


def test_a_shared_hold_beyond_its_limit_waits_for_one_to_end():
    """The compile cap ([eval] parallel_compile) is the GPU lock's, per device."""
    lock, seen = GpuLock(), []
    with lock.shared(limit=2), lock.shared(limit=2):
        t = threading.Thread(target=lambda: lock.shared(limit=2).__enter__() or seen.append(time.monotonic()))
        t.start()
        time.sleep(0.2)
        released = time.monotonic()
    t.join(5)
    assert seen and seen[0] >= released


def test_judge_many_returns_verdicts_in_input_order(softmax):
    srcs = [("a.py", _case("ok_softmax")), ("b.py", _case("syntax_error")), ("c.py", _case("no_triton_kernel"))]
    with Judge(softmax, device="cpu") as judge:
        got = [v.status for v in judge.judge_many(srcs)]
    assert got == [Status.CORRECT, Status.COMPILE_ERROR, Status.REJECTED]


def test_every_candidate_of_a_session_gets_its_own_forked_worker(softmax):
    with Judge(softmax, device="cpu") as judge:
        checks = [judge.judge(_case("ok_softmax")).checks for _ in range(2)]
    assert {c["worker_start"] for c in checks} == {"forked"}
    assert checks[0]["worker_pid"] != checks[1]["worker_pid"]


def test_a_static_reject_starts_no_session(softmax, monkeypatch):
    from tools.judge import evaluate

    def no_session(*a, **k):
        raise AssertionError("a session was started for a statically rejected candidate")
    monkeypatch.setattr("tools.judge.session.Judge.__init__", no_session)
    v = evaluate(softmax, _case("torch_matmul"), device="cpu")
    assert v.status is Status.REJECTED and v.duration_s < 0.5


def test_a_session_reuses_its_secret_seeds_for_every_candidate(softmax):
    with Judge(softmax, device="cpu") as judge:
        seeds = list(judge.seeds)
        judge.judge(_case("ok_softmax"))
        assert judge.seeds == seeds and len(set(seeds)) == len(seeds)


def test_with_outputs_too_large_to_cache_each_candidate_holds_the_gpu_from_fork_to_teardown(softmax, monkeypatch):
    """A worker left over from the candidate before would crowd the next one's IPC
    staging buffer out (19_ReLU's batch fell back to the pipe: 71 s of trials)."""
    from tools.sandbox import isolation
    events, lock = [], threading.Lock()
    real_start = isolation.start_worker

    def start_worker(src, **kw):
        w = real_start(src, **kw)
        if kw.get("device") == "compile":   # a candidate's own sm_90 compile worker, cpu only
            return w
        name = kw.get("candidate_name")
        with lock:
            events.append(("start", name))
        real_close = w.close

        def close(*a, **k):
            real_close(*a, **k)
            with lock:
                events.append(("closed", name))
        w.close = close
        return w
    monkeypatch.setattr(isolation, "start_worker", start_worker)
    monkeypatch.setattr(Judge, "_fits", lambda self, nbytes: False)
    with Judge(softmax, device="cpu") as judge:
        verdicts = judge.judge_many([(f"c{i}.py", _case("ok_softmax")) for i in range(3)])
        assert judge.large_outputs()
    assert [v.status for v in verdicts] == [Status.CORRECT] * 3
    alive: dict[str, int] = {}
    for kind, name in events:   # never workers of two candidates alive at once
        alive[name] = alive.get(name, 0) + (1 if kind == "start" else -1)
        assert len([n for n, k in alive.items() if k > 0]) <= 1, events
    assert len(alive) == 3 and not any(alive.values())


def test_the_fork_servers_cleanup_kills_a_child_that_has_not_yet_left_its_process_group():
    """A worker forked an instant before the judge died has not called setsid yet: its
    process group does not exist, so killpg alone missed it (found orphaned after CI)."""
    import os
    import signal

    from tools.sandbox.forkserver import kill_children
    pid = os.fork()
    if pid == 0:   # a child still in our process group, as before its setsid
        time.sleep(60)
        os._exit(0)
    try:
        kill_children({pid})
        _, status = os.waitpid(pid, 0)
        assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
    finally:
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except OSError:
            pass


def _killed_worker(close_server: bool):
    """(a worker killed by its fork server's close, or by a plain kill; the server)."""
    server = sandbox.start_forkserver("cpu")
    w = sandbox.start_worker("x = 1\n", device="cpu", forkserver=server)
    w.request({"op": "setup", "device": "cpu", "max_file_mib": 16, "address_space_gib": 0}, 60)
    if close_server:
        server.close()              # the judge shutting down: the server kills its children
    else:
        w.kill()
    w.wait_exit(10.0)
    return w, server


def test_a_worker_killed_by_the_judges_shutdown_gets_no_verdict(softmax):
    """A bench's time limit or Ctrl-C closes the fork server under a candidate being timed:
    its death is not the candidate's runtime error (a resumed run judges it again)."""
    from tools.errors import JudgeShutDown
    from tools.judge.record import Evaluation, died
    from tools.settings import EvalSettings
    run = Evaluation(softmax, "x = 1\n", "cpu", 0, EvalSettings(), None)
    w, _ = _killed_worker(close_server=True)
    with pytest.raises(JudgeShutDown):
        died(run, w, "timing round 1")
    assert run.diagnostics == []


def test_a_worker_that_dies_on_its_own_is_still_a_runtime_error(softmax):
    from tools.judge.record import Evaluation, died
    from tools.settings import EvalSettings
    run = Evaluation(softmax, "x = 1\n", "cpu", 0, EvalSettings(), None)
    w, server = _killed_worker(close_server=False)
    try:
        assert died(run, w, "timing round 1") is Status.RUNTIME_ERROR
    finally:
        server.close()
    assert run.diagnostics[0].kind == "worker_died"
