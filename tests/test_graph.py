"""The loop's graph: prompts, search, fan-out and the run-directory record.

Runs the real langgraph graph, Run and prompts with a scripted model and judge
(tests/run_fixtures.py), so each test takes milliseconds.
"""
from __future__ import annotations

import threading
import time

from agent.loop.rundir import TRACE_FIELDS
from run_fixtures import ScriptedEvaluator, extract, judged, loop_run
from tools.jsonio import read_json


def test_round_one_prompt_is_the_initial_template(tmp_path):
    from agent.loop.prompting import render_initial
    from run_fixtures import TINY_PROBLEM
    _, rd, backend, _ = loop_run(tmp_path, [judged("correct", 2.0)])
    assert backend.prompts[0] == render_initial(TINY_PROBLEM)
    assert rd.prompt("r01-c00").read_text() == backend.prompts[0]


def test_greedy_refines_the_best_correct_candidate(tmp_path):
    state, rd, backend, _ = loop_run(
        tmp_path, [judged("correct", 1.1), judged("correct", 1.3), judged("correct", 1.2), judged("correct", 2.0)],
        **{"budget.candidates_per_round": 3, "budget.max_rounds": 2})
    assert state["candidates"]["r02-c00"]["parent"] == "r01-c01"
    assert "# judge: correct 1.3" in backend.prompts[1] and "# judge: correct 1.1" not in backend.prompts[1]


def test_failed_candidate_is_repaired_from_its_own_feedback(tmp_path):
    state, _, backend, _ = loop_run(tmp_path, [judged("compile_error"), judged("correct", 2.0)],
                                    **{"budget.candidates_per_round": 1})
    assert state["candidates"]["r02-c00"]["parent"] == "r01-c00"
    assert "# judge: compile_error" in backend.prompts[1] and "scripted compile_error" in backend.prompts[1]


def test_repair_prefers_the_failure_closest_to_correct(tmp_path):
    state, _, _, _ = loop_run(tmp_path, [judged("compile_error"), judged("incorrect"), judged("correct", 2.0)],
                              **{"budget.candidates_per_round": 2})
    assert state["candidates"]["r02-c00"]["parent"] == "r01-c01"


def test_without_repair_the_next_round_starts_from_the_module(tmp_path):
    state, _, backend, _ = loop_run(tmp_path, [judged("incorrect"), judged("correct", 2.0)],
                                    **{"budget.candidates_per_round": 1, "search.repair_failed": False})
    from agent.loop.prompting import render_initial
    from run_fixtures import TINY_PROBLEM
    assert state["candidates"]["r02-c00"]["parent"] is None
    assert backend.prompts[1] == render_initial(TINY_PROBLEM)


def test_beam_refines_each_of_the_top_k(tmp_path):
    texts = [judged("correct", 1.1), judged("correct", 1.3), judged("correct", 1.2)] + [judged("correct", 1.0)] * 4
    state, _, backend, _ = loop_run(tmp_path, texts, **{"budget.candidates_per_round": 3, "budget.max_rounds": 2,
                                                        "search.strategy": "beam", "search.beam_width": 2})
    parents = [state["candidates"][f"r02-c0{i}"]["parent"] for i in range(3)]
    assert parents == ["r01-c01", "r01-c01", "r01-c02"]
    assert backend.calls == [3, 2, 1]


def test_completion_without_code_is_a_compile_error_judged_without_running(tmp_path):
    state, rd, backend, evaluator = loop_run(tmp_path, ["I cannot write this kernel.", judged("correct", 2.0)],
                                             **{"budget.candidates_per_round": 1})
    verdict = read_json(rd.eval("r01-c00"))
    assert (verdict["verdict"], verdict["diagnostics"][0]["kind"]) == ("compile_error", "no_code")
    assert evaluator.calls == ["r02-c00"]
    assert "no Python code" in backend.prompts[1]


def test_each_step_of_the_judgement_is_one_trace_event_timed_by_phase_s(tmp_path):
    _, rd, _, _ = loop_run(tmp_path, [judged("correct", 2.0)])
    events = [(e["node"], e["duration_s"], e["status"]) for e in rd.events() if e["candidate"] == "r01-c00"]
    assert events[:5] == [("generate", events[0][1], "ok"), ("compile", 0.01, "ok"), ("test", 0.02, "ok"),
                          ("profile", 0.07, "correct"), ("decide", events[4][1], "target_reached")]


def test_the_final_best_gets_its_bottleneck_summary_under_the_default_refined_policy(tmp_path):
    _, rd, _, evaluator = loop_run(tmp_path, [judged("correct", 2.0)])
    assert [(e["node"], e["status"]) for e in rd.events_of("r01-c00")][-1] == ("profile", "refined")
    assert rd.verdict("r01-c00").bottleneck is not None


def test_a_compile_error_ends_the_judgement_at_compile(tmp_path):
    _, rd, _, _ = loop_run(tmp_path, [judged("compile_error"), judged("correct", 2.0)],
                           **{"budget.candidates_per_round": 1})
    nodes = [(e["node"], e["status"]) for e in rd.events_of("r01-c00")]
    assert nodes == [("generate", "ok"), ("compile", "compile_error")]


def test_an_incorrect_candidate_ends_at_test_and_is_never_timed(tmp_path):
    _, rd, _, _ = loop_run(tmp_path, [judged("incorrect"), judged("correct", 2.0)],
                           **{"budget.candidates_per_round": 1})
    nodes = [(e["node"], e["status"]) for e in rd.events_of("r01-c00")]
    assert nodes == [("generate", "ok"), ("compile", "ok"), ("test", "incorrect")]


def test_the_graph_drawing_shows_compile_test_and_profile(tmp_path):
    from agent.loop.graph import build_graph
    drawing = build_graph().get_graph(xray=True).draw_mermaid()
    for edge in ("judge\\3acompile -.-> judge\\3atest", "judge\\3atest -.-> judge\\3aprofile",
                 "judge\\3a__end__ --> decide", "decide -.-> generate"):
        assert edge in drawing


def test_trace_events_carry_exactly_the_trace_fields(tmp_path):
    _, rd, _, _ = loop_run(tmp_path, [judged("incorrect"), judged("correct", 2.0)], **{"budget.candidates_per_round": 1})
    assert all(tuple(e) == TRACE_FIELDS for e in rd.events())


def test_every_candidate_has_prompt_completion_source_and_verdict_on_disk(tmp_path):
    state, rd, _, _ = loop_run(tmp_path, [judged("incorrect"), judged("correct", 2.0)], **{"budget.candidates_per_round": 1})
    for cid in state["candidates"]:
        assert all(p.exists() for p in (rd.prompt(cid), rd.completion(cid), rd.candidate_src(cid), rd.eval(cid)))
    assert rd.completion_ids() == ["r01-c00", "r02-c00"]


def test_best_py_is_the_fastest_correct_candidate(tmp_path):
    state, rd, _, _ = loop_run(tmp_path, [judged("correct", 1.2), judged("correct", 1.4), judged("incorrect")],
                               **{"budget.candidates_per_round": 3, "budget.max_rounds": 1})
    assert state["best"] == "r01-c01"
    assert rd.best.read_text() == rd.candidate_src("r01-c01").read_text()


def test_no_gpu_times_two_candidates_at_once(tmp_path):
    busy: dict[int, int] = {}
    overlaps, peak, running, lock = [], [0], [0], threading.Lock()
    inner = ScriptedEvaluator()

    def slow_evaluate(problem, src, **kw):
        with lock:
            overlaps.append(busy.get(kw["gpu_index"], 0))
            busy[kw["gpu_index"]] = busy.get(kw["gpu_index"], 0) + 1
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        time.sleep(0.05)
        with lock:
            busy[kw["gpu_index"]] -= 1
            running[0] -= 1
        return inner(problem, src, **kw)

    loop_run(tmp_path, [judged("correct", 1.0)] * 6, gpus=2, evaluator=slow_evaluate, **{"budget.candidates_per_round": 6, "budget.max_rounds": 1})
    assert overlaps == [0] * 6 and peak[0] == 2


def test_generate_reuses_completions_recorded_before_a_kill(tmp_path):
    """A kill mid-generate leaves part of the round recorded (completion file, then its
    generate event): re-running the node takes those and samples only the rest."""
    def killed_mid_round(run):
        run.generated("r01-c00", parent=None, origin="model", code=extract(judged("incorrect")),
                      prompt="INITIAL", completion=judged("incorrect"), tokens=(7, 3), model="m",
                      finish_reason="stop")

    state, rd, backend, _ = loop_run(tmp_path, [judged("incorrect")], prepare=killed_mid_round,
                                     **{"budget.candidates_per_round": 2, "budget.max_rounds": 1})
    assert backend.calls == [1]
    assert state["candidates"]["r01-c00"]["tokens"] == {"prompt": 7, "completion": 3}
    assert rd.completion_ids() == ["r01-c00", "r01-c01"]
    assert [e["candidate"] for e in rd.events() if e["node"] == "generate"] == ["r01-c00", "r01-c01"]


def test_evaluate_reuses_a_verdict_already_on_disk(tmp_path):
    from tools.jsonio import write_json
    from tools.verdict import Status, Verdict

    def judged_before_a_kill(run):
        write_json(run.rd.eval("r01-c00"), Verdict(status=Status.INCORRECT, feedback="from disk").to_json())

    state, _, _, evaluator = loop_run(tmp_path, [judged("correct", 2.0), judged("correct", 2.0)],
                                      prepare=judged_before_a_kill, **{"budget.candidates_per_round": 2})
    assert evaluator.calls == ["r01-c01"]
    assert state["candidates"]["r01-c00"]["status"] == "incorrect"


def test_a_candidate_record_carries_the_profiler_class_and_roofline_fraction(tmp_path):
    state, _, _, _ = loop_run(tmp_path, [judged("correct", 2.0, roofline=0.5)])
    record = state["candidates"]["r01-c00"]
    assert (record["bottleneck"], record["roofline_fraction"]) == ("memory-bound", 0.5)
