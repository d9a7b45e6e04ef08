"""agent/loop/runstats.py and agent/bench/stats.py: reading run dirs, lineage, rounds table, fast_p, pass@k,
budget curve."""
from __future__ import annotations

import pytest

from agent.bench import stats as bs
from agent.loop import runstats as rs
from fixtures.runs.builder import append_event, Cand, build_run, recorded, story
from tools.errors import BadInput
from tools.verdict import Diagnostic, Status


@pytest.fixture
def run(tmp_path):
    build_run(tmp_path / "run", story())
    return rs.load_run(tmp_path / "run")


def result(correct=True, eager=None, compile=None, solved_at=None, candidates=4, n=(0, 0), c=(0, 0)):
    return bs.ProblemResult(problem="p", run_dir="d", finished=True, solved=solved_at is not None,
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
    append_event(rd, iteration=2, candidate="r02-c00", node="generate", status="ok",
                    metrics={"origin": "model", "parent": "r01-c01", "prompt_tokens": 1, "completion_tokens": 2})
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
    r = bs.problem_result(rs.load_run(tmp_path / "run"))
    assert (r.solved, r.solved_at, r.n_round1, r.c_round1, r.n_all, r.c_all) == (True, 4, 2, 0, 4, 1)


def test_problem_result_unsolved_run_has_no_solved_at(tmp_path):
    build_run(tmp_path / "run", story()[:2], solved=False, stop_reason="max_rounds")
    r = bs.problem_result(rs.load_run(tmp_path / "run"))
    assert (r.solved, r.solved_at, r.correct, r.stop_reason) == (False, None, False, "max_rounds")


def test_fast_p_matches_hand_count():
    results = [result(eager=0.9), result(eager=1.2), result(eager=1.6), result(eager=2.5),
               result(correct=False)]
    assert [bs.fast_p(results, p) for p in bs.FAST_P_THRESHOLDS] == [4 / 5, 3 / 5, 2 / 5, 1 / 5]


def test_fast_p_against_compile_reads_compile_speedups():
    results = [result(eager=3.0, compile=0.8), result(eager=3.0, compile=1.7)]
    assert bs.fast_p(results, 1.0, "compile") == 0.5


def test_fast_p_is_strictly_greater_than_p():
    assert bs.fast_p([result(eager=1.0)], 1.0) == 0.0


def test_fast_0_counts_untimed_correct_kernels_but_fast_1_does_not():
    results = [result(eager=None), result(correct=True, eager=0.8), result(correct=False)]
    assert (bs.fast_p(results, 0.0), bs.fast_p(results, 1.0)) == (2 / 3, 0.0)


def test_fast_1_of_a_suite_where_nothing_was_timed_is_unknown_not_zero():
    results = [result(eager=None), result(correct=False)]
    assert (bs.fast_p(results, 0.0), bs.fast_p(results, 1.0)) == (0.5, None)


def test_judged_counts_every_origin_and_leaves_out_what_was_never_judged():
    pairs = [("inductor_seed", "correct"), ("sweep", "correct"), ("sweep", "incorrect"), ("model", "compile_error"),
             ("model", "pending")]
    counts = rs.judged_counts(pairs)
    assert counts == {"seed": 1, "sweep": 2, "model": 1}
    assert rs.judged_text(counts) == "4 judged: 1 seed, 2 sweep variants, 1 from the model"


def test_a_run_that_judged_nothing_says_so():
    assert rs.judged_text(rs.judged_counts([("model", "pending")])) == "0 judged"


@pytest.mark.parametrize("n,c,k,expected", [
    (5, 2, 1, 2 / 5),                                   # pass@1 = c / n
    (5, 2, 2, 1 - 3 / 10),                              # 1 - C(3,2)/C(5,2)
    (10, 3, 5, 1 - 21 / 252),                           # 1 - C(7,5)/C(10,5)
    (4, 0, 2, 0.0),
    (4, 3, 2, 1.0),                                     # n - c < k: always a hit
])
def test_pass_at_k_is_the_unbiased_estimator(n, c, k, expected):
    assert bs.pass_at_k(n, c, k) == pytest.approx(expected)


def test_pass_at_k_is_undefined_with_fewer_samples_than_k():
    assert bs.pass_at_k(3, 3, 5) is None


def test_mean_pass_at_k_skips_problems_with_too_few_samples():
    mean, counted = bs.mean_pass_at_k([(5, 2), (1, 1), (5, 0)], 2)
    assert (mean, counted) == (pytest.approx((0.7 + 0.0) / 2), 2)


def test_budget_curve_is_share_solved_within_each_budget():
    results = [result(solved_at=2), result(solved_at=4), result(correct=False, candidates=6), result(solved_at=2)]
    assert bs.budget_curve(results) == [(1, 0.0), (2, 0.5), (3, 0.5), (4, 0.75), (5, 0.75), (6, 0.75)]


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


@pytest.mark.parametrize("name, text, fault", [
    ("run.json", "[1, 2]", r"run.json: not a JSON object$"),
    ("summary.json", "[]", r"summary.json: not a JSON object$"),
    ("evals/r01-c00.json", "[1]", r"evals/r01-c00.json: not a JSON object$"),
])
def test_valid_json_of_the_wrong_shape_is_bad_input_naming_the_file(tmp_path, name, text, fault):
    rd = build_run(tmp_path / "run", story())
    (rd.root / name).write_text(text)
    with pytest.raises(BadInput, match=fault):
        rs.load_run(rd.root)


def test_a_trace_line_mid_file_that_is_not_an_object_is_named_by_its_line(tmp_path):
    rd = build_run(tmp_path / "run", story())
    lines = rd.trace.read_text().splitlines(keepends=True)
    rd.trace.write_text("".join([lines[0], "[1, 2]\n", *lines[1:]]))
    with pytest.raises(BadInput, match=r"trace.jsonl: line 2: a JSON list, not an object$"):
        rs.load_run(rd.root)


def test_a_trace_that_is_not_text_is_bad_input(tmp_path):
    rd = build_run(tmp_path / "run", story())
    rd.trace.write_bytes(b"\xff\xfe\x00binary")
    with pytest.raises(BadInput, match=r"trace.jsonl: not UTF-8 text$"):
        rs.load_run(rd.root)


def test_an_event_of_the_wrong_types_is_bad_input_naming_the_run_directory(tmp_path):
    import json
    rd = build_run(tmp_path / "run", story())
    lines = rd.trace.read_text().splitlines(keepends=True)
    event = json.dumps({"schema": 1, "node": "generate", "candidate": 5, "iteration": "x"}) + "\n"
    rd.trace.write_text("".join([event, *lines[1:]]))
    with pytest.raises(BadInput, match="a file of the run directory is damaged"):
        rs.load_run(rd.root)


def test_a_best_py_that_is_a_directory_is_bad_input(tmp_path):
    rd = build_run(tmp_path / "run", story())
    rd.best.unlink(missing_ok=True)
    rd.best.mkdir()
    with pytest.raises(BadInput, match=r"best.py: not a file$"):
        rs.load_run(rd.root)


@pytest.mark.parametrize("name", ["trace.jsonl", "evals/r01-c00.json", "candidates/r03-c00.py"])
def test_a_fifo_in_the_run_directory_is_bad_input_naming_it_not_a_hang(tmp_path, name):
    import os
    build_run(tmp_path / "run", story())
    target = tmp_path / "run" / name
    target.unlink()
    os.mkfifo(target)
    with pytest.raises(BadInput, match=f"{name}: not a regular file"):
        rs.load_run(tmp_path / "run")


def test_a_file_given_as_run_dir_is_not_a_run_directory(tmp_path):
    (tmp_path / "f").write_text("x")
    with pytest.raises(BadInput, match="not a run directory"):
        rs.load_run(tmp_path / "f")


# --- the seed beside the best, why a problem is not correct and faster, suite figures
# (issue 19): run dirs built by hand, one seed outcome each

def seed(status=Status.CORRECT, eager=1.2, compile=1.0, **kw):
    return Cand("r00-c00", None, status, eager=eager if status is Status.CORRECT else None,
                compile=compile if status is Status.CORRECT else None, origin="inductor_seed", **kw)


def sweep(cid="r01-c00", eager=1.5, compile=1.25, status=Status.CORRECT, origin="sweep", **kw):
    return Cand(cid, "r00-c00", status, eager=eager if status is Status.CORRECT else None,
                compile=compile if status is Status.CORRECT else None, origin=origin, **kw)


def built(tmp_path, cands, name="p", **kw):
    build_run(tmp_path / name, cands, **kw)
    return rs.load_run(tmp_path / name)


def test_a_sweep_variant_is_the_runs_best_and_the_seed_sits_beside_it(tmp_path):
    r = bs.problem_result(built(tmp_path, [seed(), sweep(interval=0.1, measure="cuda_graph")]))
    assert (r.seed, r.seed_speedup_eager, r.seed_speedup_compile, r.best, r.best_verdict, r.speedup_eager) == \
        ("correct", 1.2, 1.0, "r01-c00", "correct", 1.5)


def test_the_bests_interval_and_measure_come_from_its_verdict(tmp_path):
    r = bs.problem_result(built(tmp_path, [seed(), sweep(interval=0.1, measure="cuda_graph")]))
    assert ((r.eager_low, r.eager_high, r.compile_low, r.compile_high), r.measure) == \
        (pytest.approx((1.35, 1.65, 1.125, 1.375)), "cuda_graph")


def test_a_seed_named_best_by_the_summary_is_not_counted_as_best(tmp_path):
    r = bs.problem_result(built(tmp_path, [seed()], best="r00-c00"))
    assert (r.best, r.correct, r.seed) == (None, False, "correct")


def test_an_unknown_origin_counts_as_the_loops_work(tmp_path):
    r = bs.problem_result(built(tmp_path, [seed(), sweep(origin="beam")]))
    assert (r.best, r.correct) == ("r01-c00", True)


def test_sweep_variants_are_not_model_samples_for_pass_at_k(tmp_path):
    r = bs.problem_result(built(tmp_path, [seed(), sweep(), Cand("r01-c01", "r00-c00", Status.INCORRECT)]))
    assert (r.n_all, r.c_all, r.n_round1) == (1, 0, 1)


def test_the_table_counts_sweep_variants_beside_the_models_candidates(tmp_path):
    from agent.bench.results import TABLE_COLUMNS, table_row
    r = bs.problem_result(built(tmp_path, [seed(), sweep(), sweep("r01-c01", eager=1.4),
                                           Cand("r01-c02", "r00-c00", Status.INCORRECT)]))
    assert table_row(r)[TABLE_COLUMNS.index("cands")] == "1+2"


def test_judge_wall_per_candidate_is_the_verdicts_duration(tmp_path):
    run = built(tmp_path, [seed(eval_s=2.0), sweep(eval_s=0.5)])
    assert bs.judge_walls(run) == {"r00-c00": 6.0, "r01-c00": 1.5}   # duration_s = 3 phases


def test_a_judge_died_event_is_not_the_candidates_judge_wall(tmp_path):
    rd = build_run(tmp_path / "p", [seed(eval_s=2.0), sweep(eval_s=0.5)])
    append_event(rd, iteration=1, candidate="r01-c00", node="evaluate", status="judge_died", duration_s=4.25)
    assert bs.judge_walls(rs.load_run(rd.root))["r01-c00"] == 1.5


@pytest.mark.parametrize("node", ["sweep"])
def test_a_prescreen_event_is_not_its_parents_judge_wall(tmp_path, node):
    """The pre-screen of r00-c00's variants is traced under r00-c00: its seconds are the
    sweep's, not r00-c00's judgement, nor a record of r00-c00's origin."""
    rd = build_run(tmp_path / "p", [seed(eval_s=2.0), sweep(eval_s=0.5)])
    append_event(rd, iteration=1, candidate="r00-c00", node=node, status="prescreen", duration_s=40.0,
                 metrics={"variants": 48})
    run = rs.load_run(rd.root)
    assert bs.judge_walls(run)["r00-c00"] == 6.0
    assert run.candidates["r00-c00"].origin == rs.load_run(build_run(tmp_path / "q", [seed()]).root).candidates["r00-c00"].origin


@pytest.mark.parametrize("cands, kw, why", [
    ([seed(), sweep()], {}, ""),
    ([seed(), sweep(eager=0.8)], {}, "slower: 0.80x eager"),
    ([sweep(eager=1.5)], {"device": "cpu"}, "not timed (cpu)"),
    ([], {"seed_error": "the Inductor output has no Triton kernel", "solved": False, "stop_reason": "max_rounds"},
     "no seed: the Inductor output has no Triton kernel"),
    ([seed(Status.REJECTED, diagnostics=(Diagnostic("guard:library_call", "extern_kernels.mm in forward", 31),))],
     {"solved": False}, "guard rejected the seed: guard:library_call: extern_kernels.mm in forward (line 31)"),
    ([seed(Status.INCORRECT, diagnostics=(Diagnostic("mismatch", "max abs error 1.73 at index 7"),)),
      sweep(status=Status.INCORRECT), sweep("r01-c01", status=Status.INCORRECT)],
     {"solved": False}, "numerics: mismatch: max abs error 1.73 at index 7; 2 other candidates, none correct "
                        "(commonest: incorrect)"),
    ([seed(Status.RUNTIME_ERROR, diagnostics=(Diagnostic("runtime_error", "illegal memory access"),))],
     {"solved": False}, "runtime_error: runtime_error: illegal memory access"),
    ([seed(eager=0.05), sweep(status=Status.INCORRECT)], {"solved": False},
     "nothing correct beyond the seed; 1 other candidate, none correct (commonest: incorrect); "
     "the seed: slower: 0.05x eager"),
    ([seed(), sweep()], {"write_summary": False}, "interrupted"),
    ([seed(eager=0.38), sweep("r00-c01", eager=0.46, origin="inductor_seed"),
      sweep("r00-c02", eager=0.9, status=Status.INCORRECT, origin="inductor_seed")], {"solved": False},
     "nothing correct beyond the seed; the seed: slower: 0.38x eager; its fastest portfolio entry r00-c01: 0.46x eager"),
    ([seed(eager=0.5), sweep("r00-c01", eager=0.4, origin="inductor_seed")], {"solved": False},
     "nothing correct beyond the seed; the seed: slower: 0.50x eager"),
])
def test_why_not_names_the_cause_from_the_run_dir(tmp_path, cands, kw, why):
    assert bs.why_not(built(tmp_path, cands, **kw)) == why


def test_why_not_against_compile_reads_the_compile_speedup(tmp_path):
    assert bs.why_not(built(tmp_path, [seed(), sweep(eager=1.5, compile=0.9)]), "compile") == \
        "slower: 0.90x compile"


def test_no_seed_reason_is_in_the_problem_result(tmp_path):
    r = bs.problem_result(built(tmp_path, [], seed_error="unsupported statement: extern_kernels.convolution",
                                solved=False))
    assert (r.seed, r.best_verdict, r.why) == ("no seed", "—", "no seed: unsupported statement: extern_kernels.convolution")


def figures_of(tmp_path, runs):
    return bs.suite_figures([bs.problem_result(built(tmp_path, cands, name=f"p{i}", **kw))
                             for i, (cands, kw) in enumerate(runs)])


SUITE = [
    ([seed(eager=1.2, compile=1.0), sweep(eager=1.8, compile=1.5)], {}),      # both fast; sweep gains 1.5x
    ([seed(eager=2.0, compile=0.5), sweep(eager=2.0, compile=0.5)], {}),      # no gain
    ([seed(Status.INCORRECT)], {"solved": False}),                            # nothing correct
    ([], {"seed_error": "no Triton kernel", "solved": False}),                # no seed
]


def test_suite_correct_counts_seed_and_best_separately(tmp_path):
    f = figures_of(tmp_path, SUITE + [([seed(eager=1.1)], {"solved": False})])  # a correct seed, no best
    assert ((f["seed"]["correct"], f["best"]["correct"], f["problems"]), f["seed_coverage"]) == \
        ((3, 2, 5), {"correct": 3, "problems": 5})


def test_suite_fast_p_of_seed_and_best_against_each_baseline(tmp_path):
    f = figures_of(tmp_path, SUITE)
    assert (f["seed"]["fast"], f["best"]["fast"]) == (
        {"eager": {"1": 0.5, "1.5": 0.25}, "compile": {"1": 0.0, "1.5": 0.0}},
        {"eager": {"1": 0.5, "1.5": 0.5}, "compile": {"1": 0.25, "1.5": 0.0}})


def test_suite_geomean_is_over_the_correct_timed_problems(tmp_path):
    f = figures_of(tmp_path, SUITE)
    assert (f["best"]["geomean"]["eager"]["value"], f["best"]["geomean"]["eager"]["over"]) == \
        (pytest.approx((1.8 * 2.0) ** 0.5), 2)


def test_suite_gain_over_seed_is_the_geomean_of_best_over_seed(tmp_path):
    f = figures_of(tmp_path, SUITE)
    assert f["gain_over_seed"]["compile"] == {"value": pytest.approx(1.5 ** 0.5), "over": 2}


def test_suite_gpu_time_sums_judge_walls_of_cuda_runs_only(tmp_path):
    f = figures_of(tmp_path, [([seed(eval_s=1.0), sweep(eval_s=1.0)], {}),
                              ([seed(eval_s=5.0), sweep(eval_s=5.0)], {"device": "cpu"})])
    assert (f["gpu_s"], f["judge_s"]["candidates"], f["judge_s"]["median"]) == (6.0, 4, 9.0)


def test_a_faster_kernel_short_of_the_target_says_so_in_the_bench_line(tmp_path):
    """Correct and 1.15x eager, but the target (1.2x here) is not met: the line names the target, not nothing."""
    from agent.bench.job import outcome
    build_run(tmp_path / "p", [seed(), sweep(eager=1.15, interval=0.05)], solved=False, stop_reason="no_model")
    assert outcome(tmp_path / "p") == ("not solved (no_model, 0 candidates): 1.15x eager, short of the 1.2x target "
                                       "(the low end of its interval, 1.09x, must clear it)")


def test_what_the_seed_cost_is_in_the_problem_result(tmp_path):
    assert bs.problem_result(built(tmp_path, [seed(), sweep()])).seed_s == 2.0


def test_the_suite_figures_sum_what_the_seeds_cost(tmp_path):
    assert figures_of(tmp_path, SUITE)["seed_s"] == {"problems": 4, "total": 7.0, "median": 2.0, "max": 2.0}
