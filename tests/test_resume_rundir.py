"""`krefine resume` folds the run directory into the loop's state (agent/loop/run.py
Run.state), on the same code path as a fresh run: a run killed in any node and resumed
ends as the uninterrupted run.

Scripted model and evaluator (tests/run_fixtures.py `loop_run`), so each run takes
well under a second; tests/test_resume.py does the same with the real CLI and kill -9.
"""
from __future__ import annotations

import pytest

from agent.loop.progress import QuietProgress
from agent.loop.run import Run
from agent.loop.rundir import RunDir
from run_fixtures import judged, loop_run

# three rounds of two: best r03-c00 (1.4x), never the 1.5x target, so max_rounds stops it
TEXTS = [judged("incorrect"), judged("correct", 1.2),
         judged("correct", 1.3), judged("compile_error"),
         judged("correct", 1.4), judged("incorrect")]
BUDGET = {"budget.candidates_per_round": 2, "budget.max_rounds": 3, "search.strategy": "beam",
          "search.beam_width": 2}


class Killed(BaseException):
    """Stands in for kill -9 part-way through a node."""


class KillAt(QuietProgress):
    """Raises Killed at the `n`th call of `hook` (generated: after a candidate's generate
    event; judging: in the judge's compile node, before the judgement starts; evaluated:
    after its verdict and step events; decided: after a decide event)."""

    def __init__(self, hook: str, n: int):
        super().__init__()
        self.hook, self.left = hook, n

    def generated(self, record: dict) -> None:
        self._count("generated")

    def judging(self, record: dict) -> None:
        self._count("judging")

    def evaluated(self, record: dict, verdict) -> None:
        self._count("evaluated")

    def decided(self, state: dict) -> None:
        self._count("decided")

    def _count(self, hook: str) -> None:
        if hook == self.hook:
            self.left -= 1
            if self.left == 0:
                raise Killed()


def _without_wall(state: dict) -> dict:
    """Less what two runs of the same script cannot share: wall time, the problem's path."""
    return {**state, "problem_path": None, "spent": {k: v for k, v in state["spent"].items() if k != "wall_s"}}


def _killed_then_resumed(tmp_path, hook: str, n: int):
    with pytest.raises(Killed):
        loop_run(tmp_path, TEXTS, progress=KillAt(hook, n), **BUDGET)
    rd = RunDir(tmp_path / "run")
    left = TEXTS[len(RunDir(rd.root).completion_ids()):]
    return loop_run(tmp_path, left, resume=True, **BUDGET)


def test_the_state_rebuilt_from_a_finished_run_directory_is_the_state_the_loop_ended_with(tmp_path):
    state, rd, _, _ = loop_run(tmp_path, TEXTS, **BUDGET)
    assert state["best"] == "r03-c00" and state["stop_reason"] == "max_rounds"
    view_only = ("candidates", "swept", "replay_exhausted")   # Run.view's, beside the graph's state
    assert Run(RunDir(rd.root)).state(state["problem_path"]) == {k: v for k, v in state.items() if k not in view_only}


@pytest.mark.parametrize("hook, n", [("generated", 3), ("judging", 1), ("judging", 4), ("evaluated", 3),
                                     ("evaluated", 4), ("decided", 1), ("decided", 2), ("generated", 6)])
def test_a_killed_run_resumed_ends_as_an_uninterrupted_one(tmp_path, hook, n):
    whole, _, _, _ = loop_run(tmp_path / "whole", TEXTS, **BUDGET)
    resumed, _, _, _ = _killed_then_resumed(tmp_path / "killed", hook, n)
    assert (resumed["round"], resumed["best"], list(resumed["candidates"])) == \
        (whole["round"], whole["best"], list(whole["candidates"]))
    assert _without_wall(resumed) == _without_wall(whole)


def test_a_resumed_run_judges_no_candidate_twice(tmp_path):
    with pytest.raises(Killed):
        loop_run(tmp_path, TEXTS, progress=KillAt("evaluated", 3), **BUDGET)
    judged_before = RunDir(tmp_path / "run").judged()
    _, rd, _, evaluator = loop_run(tmp_path, TEXTS[len(RunDir(tmp_path / "run").completion_ids()):],
                                   resume=True, **BUDGET)
    assert len(judged_before) >= 3 and not judged_before & set(evaluator.calls)   # a round's other thread may finish too
    assert sorted(judged_before | set(evaluator.calls)) == sorted(rd.judged()) and len(rd.judged()) == 6


def test_a_replay_spent_before_the_kill_is_traced_once(tmp_path):
    # round 2 got one completion of two; a session that resumed it found the replay spent,
    # traced that, and was killed before its decide; the next resume must not trace it again
    with pytest.raises(Killed):
        loop_run(tmp_path, TEXTS[:3], progress=KillAt("evaluated", 3), **BUDGET)
    Run(RunDir(tmp_path / "run")).note_replay_exhausted(2)
    _, rd, _, _ = loop_run(tmp_path, [], resume=True, **BUDGET)
    spent = [e for e in RunDir(rd.root).events() if (e["node"], e["status"]) == ("generate", "replay_exhausted")]
    assert [e["iteration"] for e in spent] == [2]


def test_raising_the_budget_of_a_run_in_a_directory_that_cannot_be_written_is_one_line(tmp_path, monkeypatch):
    import os
    from agent.loop.runner import resume_run
    from fixtures.runs.builder import build_run, story
    from tools.errors import BadInput
    rd = build_run(tmp_path / "run", story(), stop_reason="max_rounds", solved=False)
    root, real = str(rd.root), os.access
    monkeypatch.setattr(os, "access", lambda p, mode, **kw: False if str(p) == root and mode & os.W_OK
                        else real(p, mode, **kw))   # a read-only mount (root ignores mode bits)
    meta = rd.meta.read_text()
    with pytest.raises(BadInput, match="not writable"):
        resume_run(rd.root, progress=False, budget={"budget.max_rounds": 10})
    assert rd.meta.read_text() == meta
