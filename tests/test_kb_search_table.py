"""benchmarks/kb_search_table.py: the issue-31 tables' order, unfinished problems and GPU-hours."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

_spec = importlib.util.spec_from_file_location("kb_search_table", Path(__file__).resolve().parents[1] / "benchmarks" / "kb_search_table.py")
kb = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(kb)


def _run(root: Path, name: str, speedups: dict[str, float], finished: bool = True) -> Path:
    run = root / "default" / name
    (run / "evals").mkdir(parents=True)
    trace = []
    for cid, x in speedups.items():
        (run / "evals" / f"{cid}.json").write_text(json.dumps({"verdict": "correct", "speedup": {"eager": x, "compile": x}}))
        trace.append(json.dumps({"node": "generate", "candidate": cid, "metrics": {"origin": "Inductor default"}}))
    (run / "trace.jsonl").write_text("\n".join(trace) + "\n")
    if finished:
        (run / "summary.json").write_text("{}")
    return run


def test_problems_are_ordered_by_level_then_number():
    names = ["level2__1_A", "level1__10_B", "level1__2_C", "level1__1_D"]
    assert sorted(names, key=kb.order) == ["level1__1_D", "level1__2_C", "level1__10_B", "level2__1_A"]


def test_an_unfinished_problem_is_listed_but_left_out_of_the_figures(tmp_path):
    rows = [kb.row(_run(tmp_path, "level1__1_A", {"r00-c00": 2.0})),
            kb.row(_run(tmp_path, "level1__2_B", {"r00-c00": 0.5}, finished=False))]
    text = kb.table(rows)
    assert "| level1__2_B | (unfinished" in text
    assert "partial: 1 of 2 problems finished" in text
    assert "level1 (1 problems), seed: correct 1/1; fast_1 vs eager 1.00" in text


def test_gpu_hours_are_each_calls_wall_times_its_gpus(tmp_path):
    (tmp_path / "a.txt").write_text("== 06:53:53 4 GPU(s); NVIDIA H200, 580\nseeds: ...\n== end 07:03:03 (900 s)\n")
    (tmp_path / "b.txt").write_text("== 07:03:11 2 GPU(s); NVIDIA H200, 580\n== end 07:12:20 (1800 s)\n")
    assert kb.gpu_seconds([tmp_path / "a.txt", tmp_path / "b.txt"]) == (4 * 900 + 2 * 1800, 2, 0)


def test_a_call_cut_off_before_its_end_line_is_counted_as_cut_not_as_time(tmp_path):
    (tmp_path / "a.txt").write_text("== 06:53:53 4 GPU(s); NVIDIA H200, 580\nseeds: 3/200 ...\n"
                                    "== 07:03:11 4 GPU(s); NVIDIA H200, 580\n== end 07:12:20 (550 s)\n")
    assert kb.gpu_seconds([tmp_path / "a.txt"]) == (4 * 550, 1, 1)
    assert "1 calls cut off before their end line are not counted" in kb.table([], *kb.gpu_seconds([tmp_path / "a.txt"]))
