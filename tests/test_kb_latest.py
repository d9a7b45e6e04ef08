"""agent/bench/kb_latest.py: each problem's latest correct figure over runs read in order, the
scores over a level's total, bad input as one line and exit status 2, and the committed level-3
manifest giving the figures BENCHMARKS.md states."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from agent.bench import kb_latest as kl

ROOT = Path(__file__).resolve().parents[1]


def harness(path: Path, *records) -> Path:
    """A kb_harness JSONL of (problem, correct, speedup over eager) records."""
    path.write_text("".join(json.dumps({"problem": p, "kind": "seed", "krefine": {"correct": ok, "speedup_eager": s}})
                            + "\n" for p, ok, s in records))
    return path


def part(path: Path, *rows) -> Path:
    """A kb_search_table --json part of (problem, finished, best over eager, best over torch.compile) rows."""
    path.write_text(json.dumps({"schema": 1, "totals": {}, "rows": [
        {"problem": p, "finished": f, "best_eager": e, "best_compile": c} for p, f, e, c in rows]}))
    return path


def test_a_run_keeps_each_problems_fastest_correct_entry(tmp_path):
    run = kl.read_run(harness(tmp_path / "a.jsonl", ("p1", True, 0.5), ("p1", True, 1.25), ("p1", False, 9.0)))
    assert run["p1"]["eager"] == 1.25


def test_a_later_run_replaces_an_earlier_figure(tmp_path):
    old = harness(tmp_path / "old.jsonl", ("p1", True, 0.8))
    new = harness(tmp_path / "new.jsonl", ("p1", True, 0.6))
    kept = kl.latest([(f.name, kl.read_run(f)) for f in (old, new)])
    assert (kept["p1"]["eager"], kept["p1"]["run"]) == (0.6, "new.jsonl")


def test_a_later_run_without_a_correct_entry_keeps_the_figure_and_is_named(tmp_path):
    old = harness(tmp_path / "old.jsonl", ("p1", True, 0.8))
    new = part(tmp_path / "new.json", ("p1", True, None, None))
    kept = kl.latest([(f.name, kl.read_run(f)) for f in (old, new)])
    assert (kept["p1"]["eager"], kept["p1"]["later"]) == (0.8, ["new.json"])


def test_a_correct_entry_without_a_speedup_gives_no_figure(tmp_path):
    old = harness(tmp_path / "old.jsonl", ("p1", True, 0.8))
    new = harness(tmp_path / "new.jsonl", ("p1", True, None))
    kept = kl.latest([(f.name, kl.read_run(f)) for f in (old, new)])
    assert (kept["p1"]["eager"], kept["p1"]["later"]) == (0.8, ["new.jsonl"])


def test_an_unfinished_problem_of_a_part_counts_for_nothing(tmp_path):
    assert kl.read_run(part(tmp_path / "p.json", ("p1", False, 3.0, 1.0))) == {}


def test_fast_p_is_strictly_above_p_over_the_levels_total():
    kept = {p: {"eager": e, "compile": None} for p, e in (("a", 1.0), ("b", 1.01), ("c", 2.0))}
    s = kl.scores(kept, total=10)
    assert (s["fast_1_count"], s["fast_1"], s["fast_1.5_count"]) == (2, 0.2, 1)


def test_the_geomean_over_torch_compile_counts_only_figures_that_have_it():
    kept = {"a": {"eager": 2.0, "compile": 0.5}, "b": {"eager": 8.0, "compile": None}}
    s = kl.scores(kept, total=2)
    assert (s["geomean_eager"], s["geomean_compile"], s["with_compile"]) == (pytest.approx(4.0), 0.5, 1)


def test_a_manifest_is_read_in_its_order_without_comments(tmp_path):
    (tmp_path / "m.txt").write_text("# runs\nb.jsonl   # later code\n\na.jsonl\n")
    assert kl.read_manifest(tmp_path / "m.txt") == [Path("b.jsonl"), Path("a.jsonl")]


@pytest.mark.parametrize("make, fault", [
    (lambda d: d / "missing.jsonl", "no such run file"),
    (lambda d: (d / "x.txt").write_text("{}") and d / "x.txt", "not a run file"),
    (lambda d: (d / "x.jsonl").write_text("not json\n") and d / "x.jsonl", "line 1 is not a kb_harness record"),
    (lambda d: (d / "x.json").write_text('{"rows": 3}') and d / "x.json", "not a kb_search_table --json part"),
])
def test_a_bad_run_file_is_one_line_and_exit_2(tmp_path, capsys, make, fault):
    path = make(tmp_path)
    assert kl.main([str(path)]) == kl.EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert fault in err and err.count("\n") == 1


def test_a_total_below_the_problems_judged_is_refused(tmp_path, capsys):
    run = harness(tmp_path / "a.jsonl", ("p1", True, 1.2), ("p2", True, 0.9))
    assert kl.main([str(run), "--total", "1"]) == kl.EXIT_BAD_INPUT
    assert "--total 1 is below the 2 problems" in capsys.readouterr().err


def test_the_level3_manifest_gives_benchmarks_md_figures():
    out = subprocess.run([sys.executable, "-m", "agent.bench.kb_latest", "--manifest",
                          "benchmarks/results/level3_runs.txt", "--total", "50"],
                         cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert ("50 of 50 with a correct figure; fast_1 vs eager 0.62 (31 of 50), fast_1.5 0.42 (21); "
            "geomean 1.14× eager") in out
    text = (ROOT / "BENCHMARKS.md").read_text()
    assert "correct **50/50**, fast_1 vs eager **0.62** (31 of\n  50;" in text
    assert "fast_1.5 0.42, geomean **1.14× eager**" in text
