"""agent/runstats.py: reading run dirs, lineage, rounds table, fast_p, pass@k, budget curve."""
from __future__ import annotations

import pytest

from agent import runstats as rs
from fixtures.runs.builder import Cand, build_run, recorded, story
from tools.errors import BadInput
from tools.verdict import Status


@pytest.fixture
def run(tmp_path):
    build_run(tmp_path / "run", story())
    return rs.load_run(tmp_path / "run")


def result(correct=True, eager=None, compile=None, solved_at=None, candidates=4, n=(0, 0), c=(0, 0)):
    return rs.ProblemResult(problem="p", run_dir="d", finished=True, solved=solved_at is not None,
                            stop_reason="x", best="r01-c00" if correct else None, correct=correct,
                            speedup_eager=eager, speedup_compile=compile, candidates=candidates, rounds=1,
                            solved_at=solved_at, n_round1=n[0], c_round1=c[0], n_all=n[1], c_all=c[1],
                            tokens=0, wall_s=None)


def test_load_run_reads_parent_and_verdict_of_every_candidate(run):
    got = {c.id: (c.parent, c.status) for c in run.candidates.values()}
    assert got == {"r01-c00": (None, "compile_error"), "r01-c01": (None, "incorrect"),
                   "r02-c00": ("r01-c01", "correct"), "r02-c01": ("r01-c00", "runtime_error"),
                   "r03-c00": ("r02-c00", "correct"), "r03-c01": ("r02-c00", "rejected")}


def test_missing_run_dir_is_bad_input_naming_it(tmp_path):
    with pytest.raises(BadInput, match="nope: no such run directory"):
        rs.load_run(tmp_path / "nope")


def test_directory_without_run_files_is_bad_input(tmp_path):
    with pytest.raises(BadInput, match="not a run directory"):
        rs.load_run(tmp_path)


def test_unknown_candidate_is_bad_input_listing_known_ids(run):
    with pytest.raises(BadInput, match="no candidate 'r09-c00'.*r01-c00"):
        run.candidate("r09-c00")


def test_reason_names_first_diagnostic_and_line(run):
    assert run.candidates["r01-c00"].reason == "triton_compile: incompatible types fp32 and int (line 12)"


def test_interrupted_run_keeps_unjudged_candidate_as_pending(tmp_path):
    rd = build_run(tmp_path / "run", story()[:2], write_summary=False)
    rd.append_event(iteration=2, candidate="r02-c00", node="generate", status="ok",
                    metrics={"parent": "r01-c01", "prompt_tokens": 1, "completion_tokens": 2})
    run = rs.load_run(rd.root)
    assert (run.summary, run.candidates["r02-c00"].status, run.candidates["r02-c00"].parent) == \
        (None, "pending", "r01-c01")


def test_lineage_maps_parents_to_children(run):
    assert rs.children(run) == {None: ["r01-c00", "r01-c01"], "r01-c01": ["r02-c00"],
                                "r01-c00": ["r02-c01"], "r02-c00": ["r03-c00", "r03-c01"]}


def test_rounds_table_counts_verdicts_per_round(run):
    assert [row.verdicts for row in rs.rounds_table(run)] == [
        {"compile_error": 1, "incorrect": 1}, {"correct": 1, "runtime_error": 1},
        {"correct": 1, "rejected": 1}]


def test_rounds_table_best_so_far_is_running_max(tmp_path):
    cands = [Cand("r01-c00", None, Status.CORRECT, eager=1.3, compile=0.9),
             Cand("r02-c00", "r01-c00", Status.CORRECT, eager=1.1, compile=1.2)]
    build_run(tmp_path / "run", cands, solved=False)
    rows = rs.rounds_table(rs.load_run(tmp_path / "run"))
    assert [(r.best["eager"], r.best_so_far["eager"], r.best_so_far["compile"]) for r in rows] == \
        [(1.3, 1.3, 0.9), (1.1, 1.3, 1.2)]


def test_rounds_table_wall_time_spans_first_start_to_last_end(tmp_path):
    # one correct candidate: generate 2 s + compile, test, profile 1 s each + decide 0.01 s
    build_run(tmp_path / "run", [Cand("r01-c00", None, Status.CORRECT, eager=1.0, compile=1.0)])
    assert rs.rounds_table(rs.load_run(tmp_path / "run"))[0].wall_s == pytest.approx(5.01, abs=1e-3)


def test_diff_to_parent_shows_the_changed_launch(run):
    diff = rs.diff_to_parent(run, "r03-c00").splitlines()
    assert diff[:2] == ["--- r02-c00.py", "+++ r03-c00.py"]
    assert "-        relu_kernel[(triton.cdiv(n, 256),)](x, y, n, BLOCK=256)" in diff
    assert "+        relu_kernel[(triton.cdiv(n, 4096),)](x, y, n, BLOCK=4096)" in diff


def test_diff_of_first_round_candidate_is_empty(run):
    assert rs.diff_to_parent(run, "r01-c00") == ""


def test_problem_result_solved_at_counts_the_whole_solving_round(tmp_path):
    build_run(tmp_path / "run", story()[:4], best="r02-c00")    # solved in round 2 of 2 x 2
    r = rs.problem_result(rs.load_run(tmp_path / "run"))
    assert (r.solved, r.solved_at, r.n_round1, r.c_round1, r.n_all, r.c_all) == (True, 4, 2, 0, 4, 1)


def test_problem_result_unsolved_run_has_no_solved_at(tmp_path):
    build_run(tmp_path / "run", story()[:2], solved=False, stop_reason="max_rounds")
    r = rs.problem_result(rs.load_run(tmp_path / "run"))
    assert (r.solved, r.solved_at, r.correct, r.stop_reason) == (False, None, False, "max_rounds")


def test_fast_p_matches_hand_count():
    results = [result(eager=0.9), result(eager=1.2), result(eager=1.6), result(eager=2.5),
               result(correct=False)]
    assert [rs.fast_p(results, p) for p in rs.FAST_P_THRESHOLDS] == [4 / 5, 3 / 5, 2 / 5, 1 / 5]


def test_fast_p_against_compile_reads_compile_speedups():
    results = [result(eager=3.0, compile=0.8), result(eager=3.0, compile=1.7)]
    assert rs.fast_p(results, 1.0, "compile") == 0.5


def test_fast_p_is_strictly_greater_than_p():
    assert rs.fast_p([result(eager=1.0)], 1.0) == 0.0


def test_fast_0_counts_untimed_correct_kernels_but_fast_1_does_not():
    results = [result(eager=None), result(correct=False)]
    assert (rs.fast_p(results, 0.0), rs.fast_p(results, 1.0)) == (0.5, 0.0)


@pytest.mark.parametrize("n,c,k,expected", [
    (5, 2, 1, 2 / 5),                                   # pass@1 = c / n
    (5, 2, 2, 1 - 3 / 10),                              # 1 - C(3,2)/C(5,2)
    (10, 3, 5, 1 - 21 / 252),                           # 1 - C(7,5)/C(10,5)
    (4, 0, 2, 0.0),
    (4, 3, 2, 1.0),                                     # n - c < k: always a hit
])
def test_pass_at_k_is_the_unbiased_estimator(n, c, k, expected):
    assert rs.pass_at_k(n, c, k) == pytest.approx(expected)


def test_pass_at_k_is_undefined_with_fewer_samples_than_k():
    assert rs.pass_at_k(3, 3, 5) is None


def test_mean_pass_at_k_skips_problems_with_too_few_samples():
    mean, counted = rs.mean_pass_at_k([(5, 2), (1, 1), (5, 0)], 2)
    assert (mean, counted) == (pytest.approx((0.7 + 0.0) / 2), 2)


def test_budget_curve_is_share_solved_within_each_budget():
    results = [result(solved_at=2), result(solved_at=4), result(correct=False, candidates=6), result(solved_at=2)]
    assert rs.budget_curve(results) == [(1, 0.0), (2, 0.5), (3, 0.5), (4, 0.75), (5, 0.75), (6, 0.75)]


def test_node_span_starts_duration_before_its_timestamp(run):
    span = next(s for s in rs.node_spans(run) if s.node == "generate")
    assert (span.end_s - span.start_s, span.end_s) == (pytest.approx(2.0), span.event["ts"])


def test_run_name_is_the_problem_file_stem(run):
    assert run.name == "relu"


def test_recorded_run_lineage_is_the_repair_chain(tmp_path):
    run = rs.load_run(recorded(tmp_path))
    assert rs.children(run) == {None: ["r01-c00"], "r01-c00": ["r02-c00"], "r02-c00": ["r03-c00"]}


def test_recorded_run_tokens_per_round_add_up_to_the_summarys(tmp_path):
    run = rs.load_run(recorded(tmp_path))
    assert sum(r.tokens for r in rs.rounds_table(run)) == run.summary["budget_spent"]["tokens"]


def test_a_file_that_is_not_json_is_bad_input_naming_it(tmp_path):
    rd = build_run(tmp_path / "run", story()[:1])
    rd.eval("r01-c00").write_text("{not json")
    with pytest.raises(BadInput, match=r"evals/r01-c00.json: not valid JSON"):
        rs.load_run(rd.root)


def test_a_file_given_as_run_dir_is_not_a_run_directory(tmp_path):
    (tmp_path / "f").write_text("x")
    with pytest.raises(BadInput, match="not a run directory"):
        rs.load_run(tmp_path / "f")
