"""Each way the loop stops, and the stop reason it records (summary.json).

Real graph, scripted model and evaluator (tests/run_fixtures.py). The tiny config has
target_speedup 1.5 vs eager unless a test says otherwise.
"""
from __future__ import annotations

from run_fixtures import judged, loop_run


def _summary(rd) -> dict:
    return rd.read_summary()


def test_stops_when_a_correct_candidate_meets_the_target(tmp_path):
    state, rd, _, _ = loop_run(tmp_path, [judged("correct", 1.2), judged("correct", 1.6), judged("correct", 3.0)],
                               **{"budget.candidates_per_round": 1})
    s = _summary(rd)
    assert (s["stop_reason"], s["solved"], s["best"]["candidate"], s["rounds"]) == ("target_reached", True, "r02-c00", 2)


def test_a_speedup_whose_interval_reaches_below_the_target_does_not_end_the_run(tmp_path):
    # 1.6x clears 1.5 by its ratio of medians, but the rounds' interval reaches 1.45
    state, rd, _, _ = loop_run(tmp_path, [judged("correct", 1.6, low=1.45), judged("correct", 1.7, low=1.55)],
                               **{"budget.candidates_per_round": 1})
    s = _summary(rd)
    assert (s["stop_reason"], s["best"]["candidate"], s["rounds"]) == ("target_reached", "r02-c00", 2)


def test_target_can_be_measured_against_torch_compile(tmp_path):
    # the scripted evaluator reports the same figure for both baselines; only the
    # baseline named in the config may end the run
    _, rd, _, _ = loop_run(tmp_path, [judged("correct", 1.6)], **{"budget.target_baseline": "compile",
                                                                  "budget.target_speedup": 1.7})
    assert _summary(rd)["stop_reason"] == "replay_exhausted"


def test_on_cpu_the_first_correct_candidate_ends_the_run_with_null_speedups(tmp_path):
    _, rd, _, _ = loop_run(tmp_path, [judged("incorrect"), judged("correct"), judged("correct")], device="cpu",
                           **{"budget.candidates_per_round": 1})
    s = _summary(rd)
    assert (s["stop_reason"], s["solved"], s["best"]) == (
        "target_reached", True, {"candidate": "r02-c00", "speedup": {"eager": None, "compile": None}})


def test_stops_after_max_rounds(tmp_path):
    _, rd, backend, _ = loop_run(tmp_path, [judged("correct", 1.1)] * 10,
                                 **{"budget.candidates_per_round": 1, "budget.max_rounds": 3})
    s = _summary(rd)
    assert (s["stop_reason"], s["solved"], s["rounds"], len(backend.prompts)) == ("max_rounds", False, 3, 3)


def test_candidates_per_round_is_how_many_each_round_samples(tmp_path):
    state, rd, backend, _ = loop_run(tmp_path, [judged("incorrect")] * 10,
                                     **{"budget.candidates_per_round": 3, "budget.max_rounds": 2})
    assert backend.calls == [3, 3]
    assert sorted(state["candidates"]) == ["r01-c00", "r01-c01", "r01-c02", "r02-c00", "r02-c01", "r02-c02"]
    assert _summary(rd)["candidates_evaluated"] == 6


def test_stops_when_the_token_budget_is_spent(tmp_path):
    # each scripted candidate costs 100 prompt + 50 completion tokens
    _, rd, _, _ = loop_run(tmp_path, [judged("incorrect")] * 10,
                           **{"budget.candidates_per_round": 2, "budget.token_budget": 500})
    s = _summary(rd)
    assert (s["stop_reason"], s["rounds"], s["budget_spent"]["tokens"]) == ("token_budget", 2, 600)


def test_stops_when_the_time_budget_is_spent(tmp_path):
    # an earlier session of this run already used the whole budget
    _, rd, _, _ = loop_run(tmp_path, [judged("incorrect")] * 10, wall_offset_s=60.0,
                           **{"budget.candidates_per_round": 1, "budget.time_budget_s": 60.0})
    s = _summary(rd)
    assert (s["stop_reason"], s["rounds"]) == ("time_budget", 1)
    assert s["budget_spent"]["wall_s"] >= 60.0


def test_stops_when_the_replay_runs_out(tmp_path):
    _, rd, _, _ = loop_run(tmp_path, [judged("incorrect")] * 3, **{"budget.candidates_per_round": 2})
    s = _summary(rd)
    assert (s["stop_reason"], s["candidates_evaluated"], s["rounds"]) == ("replay_exhausted", 3, 2)


def test_a_replay_with_nothing_left_ends_without_an_empty_round(tmp_path):
    _, rd, _, _ = loop_run(tmp_path, [judged("incorrect")] * 2, **{"budget.candidates_per_round": 2})
    s = _summary(rd)
    assert (s["stop_reason"], s["rounds"], s["candidates_evaluated"]) == ("replay_exhausted", 1, 2)


def test_stops_when_the_best_reaches_its_roofline_fraction(tmp_path):
    _, rd, _, _ = loop_run(tmp_path, [judged("correct", 1.2, roofline=0.95), judged("correct", 1.3)],
                           **{"budget.candidates_per_round": 1, "budget.roofline_stop_fraction": 0.9})
    assert _summary(rd)["stop_reason"] == "roofline"


def test_a_target_reached_in_the_last_round_counts_as_solved(tmp_path):
    _, rd, _, _ = loop_run(tmp_path, [judged("incorrect"), judged("correct", 2.0)],
                           **{"budget.candidates_per_round": 1, "budget.max_rounds": 2})
    assert (_summary(rd)["stop_reason"], _summary(rd)["solved"]) == ("target_reached", True)
