"""Spare fork servers (tools/sandbox/isolation.py spare_forkservers): a bench's worker
judges problem after problem, and each judge's server is started while the last was used."""
from __future__ import annotations

import pytest

from tools.sandbox import isolation


class FakeServer:
    def __init__(self, n: int):
        self.n, self.closed, self.dead = n, False, False

    def alive(self) -> bool:
        return not self.dead

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def started(monkeypatch):
    servers: list[FakeServer] = []
    monkeypatch.setattr(isolation, "_new_forkserver",
                        lambda device, gpu_index: servers.append(FakeServer(len(servers))) or servers[-1])
    return servers


def test_inside_the_context_a_judge_gets_the_server_started_when_the_last_was_taken(started):
    with isolation.spare_forkservers():
        first = isolation.start_forkserver("cuda", 0)
        second = isolation.start_forkserver("cuda", 0)
    assert (first.n, second.n) == (0, 1)      # 1 was started (as the spare) by the first call


def test_outside_the_context_no_spare_is_started(started):
    isolation.start_forkserver("cuda", 0)
    assert len(started) == 1


def test_the_spare_left_at_the_end_is_closed(started):
    with isolation.spare_forkservers():
        isolation.start_forkserver("cuda", 0)
    assert [s.closed for s in started] == [False, True]


def test_a_spare_that_died_is_not_handed_out(started):
    with isolation.spare_forkservers():
        isolation.start_forkserver("cuda", 0)
        started[1].dead = True
        got = isolation.start_forkserver("cuda", 0)
    assert got is not started[1] and started[1].closed


def test_a_spare_serves_only_its_own_kind_and_gpu(started):
    with isolation.spare_forkservers():
        isolation.start_forkserver("cuda", 0)
        other = isolation.start_forkserver("compile", 0)
    assert other is not started[1]


def test_a_spare_is_a_real_fork_server_that_comes_up():
    with isolation.spare_forkservers():
        first = isolation.start_forkserver("cpu", 0)
        spare = isolation.start_forkserver("cpu", 0)
        try:
            spare.wait_ready()
            assert spare.alive() and spare is not first
        finally:
            first.close()
            spare.close()


def test_prestarted_servers_are_what_the_first_judge_takes(started):
    with isolation.spare_forkservers():
        isolation.prestart_forkservers("cuda", 0)
        assert len(started) == 2                 # its workers' server and its compiles'
        workers, compiles = isolation.start_forkserver("cuda", 0), isolation.start_forkserver("compile", 0)
    assert (workers.n, compiles.n) == (0, 1)


def test_prestart_outside_the_context_starts_nothing(started):
    isolation.prestart_forkservers("cuda", 0)
    assert started == []


def test_prestart_keeps_a_spare_already_there(started):
    with isolation.spare_forkservers():
        isolation.start_forkserver("cuda", 0)    # server 0 in use, 1 its spare
        isolation.prestart_forkservers("cuda", 0)
        assert [s.n for s in started] == [0, 1, 2] and not started[1].closed   # 2: the compile kind
