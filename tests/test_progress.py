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
    # agent/loop/resume.py rebuilds the state of the last decide (round 1): round 2's candidates
    # are only on disk, one of them judged
    p = Progress()
    p.resumed(_state(1, {"r01-c00": "incorrect"}), judged={"r02-c00"}, written={"r01-c00", "r02-c00", "r02-c01"})
    assert p.status_line == "resuming round 2: 2 candidates already judged, 1 of round 2 still to judge"
