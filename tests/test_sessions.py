"""The session cache (tools/judge/pool.py) every judge host shares: which requests
share a Judge, when one is built and when it is closed. Judges are stand-ins that
count their builds and closes, except where a real one on cpu is the point."""
from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from tools.judge.pool import JudgePool, SessionCache, SessionKey

EXPLOITS = Path(__file__).parent / "exploits"


class FakeJudge:
    built: list["FakeJudge"] = []
    build_s = 0.0

    def __init__(self, problem, *, device, gpu_index, settings, forkservers=None):
        time.sleep(FakeJudge.build_s)
        self.problem, self.device, self.gpu_index, self.settings = problem, device, gpu_index, settings
        self.forkservers = forkservers
        self.closed = False
        self.in_flight = 0
        FakeJudge.built.append(self)

    def close(self):
        self.closed = True


@pytest.fixture(autouse=True)
def fake_judges(monkeypatch):
    FakeJudge.built, FakeJudge.build_s = [], 0.0
    monkeypatch.setattr("tools.judge.pool.Judge", FakeJudge)


def key(problem="p", settings="s", gpu=0) -> SessionKey:
    return SessionKey(problem, settings, "cpu", gpu)


def judge_of(cache: SessionCache, k: SessionKey):
    session, _ = cache.acquire(k, lambda: k.problem)
    return session


def test_two_requests_for_the_same_problem_share_one_judge():
    cache = SessionCache()
    first, second = judge_of(cache, key()), judge_of(cache, key())
    assert first.judge is second.judge and len(FakeJudge.built) == 1


def test_the_second_request_is_told_the_session_existed():
    cache = SessionCache()
    assert [cache.acquire(key(), lambda: "p")[1] for _ in range(2)] == [False, True]


def test_different_settings_get_different_judges():
    cache = SessionCache()
    assert judge_of(cache, key(settings="a")).judge is not judge_of(cache, key(settings="b")).judge


def test_different_gpus_get_different_judges_on_their_own_gpu():
    cache = SessionCache()
    judges = [judge_of(cache, key(gpu=i)).judge for i in (0, 1)]
    assert [j.gpu_index for j in judges] == [0, 1]


def test_concurrent_acquires_from_threads_build_one_judge():
    FakeJudge.build_s = 0.2
    cache, got = SessionCache(), []
    threads = [threading.Thread(target=lambda: got.append(judge_of(cache, key()).judge)) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert len(got) == 6 and len(FakeJudge.built) == 1 and {id(j) for j in got} == {id(FakeJudge.built[0])}


def test_keep_zero_closes_a_session_when_its_last_user_releases_it():
    cache = SessionCache(keep=0)
    a, b = judge_of(cache, key()), judge_of(cache, key())
    cache.release(a)
    assert not a.judge.closed
    cache.release(b)
    assert b.judge.closed


def test_beyond_keep_the_least_recently_used_idle_session_is_closed():
    cache = SessionCache(keep=2)
    old, recent = judge_of(cache, key("old")), judge_of(cache, key("recent"))
    cache.release(old)
    cache.release(recent)
    cache.release(judge_of(cache, key("old")))   # used again: "recent" is now the oldest
    judge_of(cache, key("new"))
    assert recent.judge.closed and not old.judge.closed
    assert [s.key.problem for s in cache.sessions()] == ["old", "new"]


def test_a_dropped_session_is_closed_only_once_its_last_user_releases_it():
    cache = SessionCache()
    failing, other = judge_of(cache, key()), judge_of(cache, key())
    cache.drop(failing)
    assert not other.judge.closed   # still judging another request's candidate
    cache.release(failing)
    cache.release(other)
    assert other.judge.closed


def test_the_request_after_a_drop_gets_a_fresh_judge():
    cache = SessionCache()
    dropped = judge_of(cache, key())
    cache.drop(dropped)
    assert judge_of(cache, key()).judge is not dropped.judge


def test_a_failed_build_is_kept_by_nobody_and_every_waiter_hears_it():
    cache, heard = SessionCache(), []

    def load():
        time.sleep(0.2)
        raise ValueError("no such model")

    def ask():
        try:
            cache.acquire(key(), load)
        except ValueError as e:
            heard.append(str(e))
    threads = [threading.Thread(target=ask) for _ in range(3)]
    for t in threads:
        t.start()
        time.sleep(0.02)
    for t in threads:
        t.join(10)
    assert heard == ["no such model"] * 3 and cache.sessions() == []


def test_an_evicted_problem_closes_only_its_idle_judges():
    cache = SessionCache()
    busy, idle = judge_of(cache, key(settings="a")), judge_of(cache, key(settings="b"))
    other = judge_of(cache, key("q"))
    cache.release(idle)
    cache.release(other)
    assert cache.evict(lambda k: k.problem == "p") == 1
    assert idle.judge.closed and not busy.judge.closed and not other.judge.closed


def test_memory_pressure_closes_idle_sessions_on_the_judges_gpu_only():
    cache = SessionCache()
    asking, here, there = judge_of(cache, key("a")), judge_of(cache, key("b")), judge_of(cache, key("c", gpu=1))
    cache.release(here)
    cache.release(there)
    assert cache.evict_idle(keep=asking.judge) == 1
    assert here.judge.closed and not there.judge.closed and not asking.judge.closed


class FakeServer:
    def __init__(self, alive=True):
        self.is_alive, self.closed = alive, False

    def alive(self):
        return self.is_alive

    def close(self):
        self.closed = True


def test_shared_fork_servers_are_one_set_for_every_session_and_closed_with_the_cache():
    server = FakeServer()
    cache = SessionCache(forkservers={"cpu": server})
    judges = [judge_of(cache, key(p)).judge for p in "ab"]
    assert judges[0].forkservers is judges[1].forkservers is cache.forkservers
    cache.close()
    assert server.closed and all(j.closed for j in judges)


def test_a_dead_shared_fork_server_is_forgotten_at_the_next_request():
    dead = FakeServer(alive=False)
    cache = SessionCache(forkservers={"cpu": dead})
    judge_of(cache, key())
    assert dead.closed and "cpu" not in cache.forkservers


# --- the in-process host, with real Judges on cpu -----------------------------------

def test_two_runs_of_one_problem_in_one_process_share_a_real_judge(monkeypatch):
    from tools.judge.session import Judge
    from tools.problem import load_problem
    monkeypatch.setattr("tools.judge.pool.Judge", Judge)
    from tools.settings import EvalSettings
    problem = load_problem(EXPLOITS / "problems" / "softmax.py")
    cache = SessionCache(keep=0)
    pools = [JudgePool(problem, device="cpu", gpu_count=1, settings=EvalSettings(), cache=cache) for _ in range(2)]
    try:
        verdicts = [pool.judge("def broken(:\n") for pool in pools]
        assert [s.users for s in cache.sessions()] == [2]
        assert {v.status.value for v in verdicts} == {"compile_error"}
    finally:
        for pool in pools:
            pool.close()
    assert cache.sessions() == []
