"""What `krefine resume` says it resumes: the round still judging, or the one after."""
from __future__ import annotations

from agent.loop.progress import Progress


def _state(round_: int, statuses: dict[str, str]) -> dict:
    cands = {cid: {"id": cid, "round": int(cid[1:3]), "parent": None, "status": st, "speedup": None}
             for cid, st in statuses.items()}
    return {"round": round_, "candidates": cands}


def test_a_run_killed_while_judging_resumes_that_round():
    p = Progress()
    p.resumed(_state(2, {"r01-c00": "incorrect", "r01-c01": "incorrect", "r02-c00": "pending",
                         "r02-c01": "pending"}), judged={"r02-c00"})
    assert p.status_line == "resuming round 2: 3 candidates already judged, 1 of round 2 still to judge"


def test_a_run_killed_after_its_round_was_judged_resumes_after_it():
    p = Progress()
    p.resumed(_state(2, {"r01-c00": "incorrect", "r02-c00": "pending"}), judged={"r02-c00"})
    assert p.status_line == "resuming after round 2: 2 candidates already judged"


def test_a_round_written_after_the_last_decide_is_the_round_resumed():
    # Run.state() is the state of the last decide (round 1): round 2's candidates
    # are only on disk, one of them judged
    p = Progress()
    p.resumed(_state(1, {"r01-c00": "incorrect"}), judged={"r02-c00"}, written={"r01-c00", "r02-c00", "r02-c01"})
    assert p.status_line == "resuming round 2: 2 candidates already judged, 1 of round 2 still to judge"


def _ticking(monkeypatch, progress, device: str, limit: int = 2048):
    clock = [100.0]
    monkeypatch.setattr("agent.loop.progress.time.monotonic", lambda: clock[0])
    tick = progress.token_ticker(1, 4, limit, device)
    return tick, clock


def test_a_log_gets_one_token_count_line_per_10_seconds_not_one_per_token(monkeypatch):
    import io
    from agent.loop.progress import PlainProgress
    out = io.StringIO()
    tick, clock = _ticking(monkeypatch, PlainProgress(out), "cuda")
    for step in range(1, 61):          # 60 tokens, one every half second: 30 s
        clock[0] += 0.5
        tick(step)
    lines = out.getvalue().splitlines()
    assert len(lines) == 3 and lines[0] == "round 1: writing 4 candidates, 1 of at most 2048 tokens each, 0 s"
    assert lines[1].startswith("round 1: writing 4 candidates, 21 of at most 2048 tokens each, 10 s")


def test_on_cpu_a_long_token_limit_is_named_with_the_setting_that_cuts_it(monkeypatch):
    p = Progress()
    tick, clock = _ticking(monkeypatch, p, "cpu")
    clock[0] += 30
    tick(100)
    assert "--set sampling.max_new_tokens=256" in p.status_line


def test_a_short_token_limit_or_a_gpu_gets_no_hint(monkeypatch):
    for device, limit in (("cpu", 256), ("cuda", 2048)):
        p = Progress()
        tick, clock = _ticking(monkeypatch, p, device, limit)
        clock[0] += 30
        tick(100)
        assert "max_new_tokens" not in p.status_line and "100 of at most" in p.status_line
