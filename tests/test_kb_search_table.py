"""agent/bench/kb_search_table.py: the issue-31 tables' order, unfinished problems, GPU-hours, and parts merged."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent.bench import kb_search_table as kb


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


def _with_kernels(run: Path, cid: str, median_ms: float, kernel_us: list[tuple[int, float]]) -> None:
    """Give candidate `cid`'s verdict a per-call median and a kernel record: (calls, total_us) per kernel."""
    path = run / "evals" / f"{cid}.json"
    v = json.loads(path.read_text())
    v["timing_ms"] = {"candidate": {"median": median_ms}}
    v["checks"] = {"kernel_breakdown": [{"name": f"k{i}", "calls": c, "total_us": us} for i, (c, us) in enumerate(kernel_us)]}
    path.write_text(json.dumps(v))


def test_the_fastest_entry_s_gpu_idle_share_is_its_call_less_its_kernels_time(tmp_path):
    run = _run(tmp_path, "level3__19_Net", {"r00-c00": 0.3, "r00-c01": 0.4})
    _with_kernels(run, "r00-c00", 9.0, [(10, 500.0)])
    _with_kernels(run, "r00-c01", 6.0, [(100, 1200.0), (45, 300.0)])   # the fastest: 1.5 of 6 ms in kernels
    assert "| level3__19_Net | 6.000 | 1.500 | 145 | 0% | 0% | 75% |" in kb.table([kb.row(run)])


def test_the_share_of_launches_a_batch_norm_makes_counts_kernels_named_after_it(tmp_path):
    run = _run(tmp_path, "level3__9_Net", {"r00-c00": 0.4})
    _with_kernels(run, "r00-c00", 4.0, [(20, 800.0), (60, 400.0)])
    path = run / "evals" / "r00-c00.json"
    v = json.loads(path.read_text())
    v["checks"]["kernel_breakdown"][1]["name"] = "triton_red_fused__native_batch_norm_legit_functional_2"
    path.write_text(json.dumps(v))
    assert "| level3__9_Net | 4.000 | 1.200 | 80 | 75% | 0% | 70% |" in kb.table([kb.row(run)])


def test_krefine_s_batch_statistics_count_as_a_batch_norm_s_and_an_aten_fill_as_a_library_s(tmp_path):
    run = _run(tmp_path, "level3__19_Net", {"r00-c00": 0.5})
    _with_kernels(run, "r00-c00", 5.0, [(20, 400.0), (20, 300.0), (10, 100.0), (50, 200.0)])
    path = run / "evals" / "r00-c00.json"
    v = json.loads(path.read_text())
    v["checks"]["kernel_breakdown"][0]["name"] = "batch_stats_kernel"
    v["checks"]["kernel_breakdown"][1]["name"] = "triton_poi_fused__native_batch_norm_legit_functional_relu_3"
    v["checks"]["kernel_breakdown"][2].update(name="void at::native::vectorized_elementwise_kernel<4>", kind="memory")
    path.write_text(json.dumps(v))
    assert "| level3__19_Net | 5.000 | 1.000 | 100 | 40% | 10% | 80% |" in kb.table([kb.row(run)])


def test_problems_without_a_kernel_record_get_no_idle_table(tmp_path):
    assert "GPU idle" not in kb.table([kb.row(_run(tmp_path, "level3__1_A", {"r00-c00": 2.0}))])


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


def _figure_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("- level")]


def test_a_table_read_back_as_a_part_keeps_its_figures_where_its_two_decimals_would_not(tmp_path):
    """1.004x shows as "1.00" in the table; the part read back still counts it faster than eager."""
    rows = [kb.row(_run(tmp_path, "level1__1_A", {"r00-c00": 1.004})), kb.row(_run(tmp_path, "level1__2_B", {"r00-c00": 0.5}))]
    text = kb.table(rows)
    back, tot = kb.part_from_md(text)
    assert "| 1.00 |" in text and _figure_lines(kb.table(back, tot=tot)) == _figure_lines(text)
    assert "fast_1 vs eager 0.50" in _figure_lines(text)[0]


def test_a_problem_unfinished_in_one_part_counts_once_where_it_finished_and_both_parts_costs_add(tmp_path):
    first = [kb.row(_run(tmp_path / "a", "level1__1_A", {"r00-c00": 2.0}, finished=False))]
    second = [kb.row(_run(tmp_path / "b", "level1__1_A", {"r00-c00": 3.0, "r00-c01": 4.0}))]
    rows, tot = kb.merge([("a", first, kb.totals(first, gpu_s=100)), ("b", second, kb.totals(second, gpu_s=50))])
    assert [r["best_eager"] for r in rows] == [4.0]
    assert (tot["judged"], tot["gpu_s"], tot["figures"]["level1 best"]["n"]) == (3, 150, 1)


def test_a_problem_finished_in_two_parts_is_refused_with_exit_2(tmp_path, capsys):
    a = [kb.row(_run(tmp_path / "a", "level1__1_A", {"r00-c00": 2.0}))]
    b = [kb.row(_run(tmp_path / "b", "level1__1_A", {"r00-c00": 3.0}))]
    with pytest.raises(SystemExit) as e:
        kb.merge([("a.json", a, kb.totals(a)), ("b.json", b, kb.totals(b))])
    assert e.value.code == 2 and "b.json: level1__1_A is finished in a.json too" in capsys.readouterr().err


def test_a_part_written_with_json_merges_to_the_same_table_as_its_bench_directory(tmp_path, monkeypatch, capsys):
    _run(tmp_path / "bench", "level1__1_A", {"r00-c00": 1.2})
    _run(tmp_path / "bench", "level2__3_B", {"r00-c00": 0.7})
    part = tmp_path / "part.json"
    monkeypatch.setattr("sys.argv", ["kb_search_table.py", str(tmp_path / "bench"), "--json", str(part)])
    kb.main()
    direct = capsys.readouterr().out
    monkeypatch.setattr("sys.argv", ["kb_search_table.py", "--parts", str(part)])
    kb.main()
    assert capsys.readouterr().out == direct


def test_a_file_that_is_no_part_is_refused_with_one_line_and_exit_2(tmp_path, monkeypatch, capsys):
    bad = tmp_path / "bad.md"
    bad.write_text("| level1__2_B | 0.5 | 1 | 1 | 1 | 1 | 1 | c | 3 | many |\n")
    monkeypatch.setattr("sys.argv", ["kb_search_table.py", "--parts", str(bad)])
    with pytest.raises(SystemExit) as e:
        kb.main()
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.count("\n") == 1 and f"{bad}: not a part" in err


def test_a_missing_log_is_refused_with_one_line_and_exit_2_before_any_file_is_written(tmp_path, monkeypatch, capsys):
    bench, out = tmp_path / "bench", tmp_path / "part.json"
    bench.mkdir()
    missing = tmp_path / "c7" / "log.txt"
    monkeypatch.setattr("sys.argv", ["kb_search_table.py", str(bench), "--logs", str(missing), "--json", str(out)])
    with pytest.raises(SystemExit) as e:
        kb.main()
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.count("\n") == 1 and f"{missing}: no such log" in err
    assert not out.exists()
