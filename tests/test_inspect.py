"""`krefine inspect`: rounds table, lineage tree, one round, one candidate, bad input."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from agent.cli import main
from fixtures.runs.builder import build_run, recorded, story


@pytest.fixture
def run_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")       # no wrapping, so lines can be matched whole
    build_run(tmp_path / "run", story())
    return str(tmp_path / "run")


def inspect(capsys, *argv) -> tuple[int, str, str]:
    rc = main(["inspect", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


def test_rounds_table_shows_best_and_best_so_far_per_round(run_dir, capsys):
    _, out, _ = inspect(capsys, run_dir)
    rows: dict[str, str] = {}
    for line in out.splitlines():            # a round's first line; its verdict mix continues below
        if line.strip()[:1].isdigit():
            rows.setdefault(line.split()[0], line)
    assert (rows["1"].count("— / —"), rows["3"].count("1.45× / 1.10×")) == (2, 2)


def test_lineage_tree_nests_each_child_under_its_parent(run_dir, capsys):
    _, out, _ = inspect(capsys, run_dir)
    lines = out.splitlines()
    depth = {cid: next(line.index(cid) for line in lines if f" {cid} " in line and "──" in line)
             for cid in ("r01-c01", "r02-c00", "r03-c00")}
    assert depth["r01-c01"] < depth["r02-c00"] < depth["r03-c00"]


def test_lineage_marks_the_best_and_says_why_others_failed(run_dir, capsys):
    _, out, _ = inspect(capsys, run_dir)
    assert "r03-c00 correct  1.45× eager, 1.10× torch.compile  ★ best" in out
    assert "r03-c01 rejected  guard:torch_compute: torch.relu in forward (line 21)" in out


def test_iteration_lists_only_that_rounds_candidates(run_dir, capsys):
    _, out, _ = inspect(capsys, run_dir, "--iteration", "2")
    first_column = [line.split()[0] for line in out.splitlines() if re.match(r"r\d\d-c\d\d ", line)]
    assert first_column == ["r02-c00", "r02-c01"]


def test_round_is_the_iteration_flag(run_dir, capsys):
    assert inspect(capsys, run_dir, "--round", "2") == inspect(capsys, run_dir, "--iteration", "2")


def test_candidate_shows_feedback_its_prompt_carried_from_the_parent(run_dir, capsys):
    _, out, _ = inspect(capsys, run_dir, "--candidate", "r03-c00")
    section = out.split("feedback received (from parent r02-c00")[1].split("feedback on this candidate")[0]
    assert "Correct. 0.82x eager, 0.61x torch.compile" in section


def test_candidate_shows_prompt_and_completion(run_dir, capsys):
    _, out, _ = inspect(capsys, run_dir, "--candidate", "r03-c00")
    assert "prompt for r03-c00 (parent r02-c00)" in out and "Here is the kernel." in out


def test_candidate_shows_unified_diff_against_parent(run_dir, capsys):
    _, out, _ = inspect(capsys, run_dir, "--candidate", "r03-c00")
    assert "+        relu_kernel[(triton.cdiv(n, 4096),)](x, y, n, BLOCK=4096)" in out


def test_candidate_shows_its_diagnostic_with_source_line(run_dir, capsys):
    _, out, _ = inspect(capsys, run_dir, "--candidate", "r01-c00")
    assert "triton_compile line 12: incompatible types fp32 and int" in out


def test_unknown_candidate_exits_2_with_one_line(run_dir, capsys):
    rc, out, err = inspect(capsys, run_dir, "--candidate", "r09-c00")
    assert (rc, out, len(err.splitlines()), "r09-c00" in err) == (2, "", 1, True)


def test_missing_run_dir_exits_2_naming_it(tmp_path, capsys):
    rc, _, err = inspect(capsys, str(tmp_path / "gone"))
    assert (rc, err) == (2, f"krefine: error: {tmp_path / 'gone'}: no such run directory\n")


def test_unknown_round_exits_2(run_dir, capsys):
    rc, _, err = inspect(capsys, run_dir, "--iteration", "9")
    assert (rc, "no round 9" in err) == (2, True)


def test_interrupted_run_says_how_to_resume(tmp_path, capsys):
    build_run(tmp_path / "run", story()[:2], write_summary=False)
    _, out, _ = inspect(capsys, str(tmp_path / "run"))
    assert "krefine resume" in out


def test_recorded_run_candidate_shows_the_feedback_its_prompt_carried(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "400")
    run_dir = recorded(tmp_path)
    parent_feedback = json.loads((run_dir / "evals" / "r01-c00.json").read_text())["feedback"]
    _, out, _ = inspect(capsys, str(run_dir), "--candidate", "r02-c00")
    section = out.split("feedback received (from parent r01-c00")[1].split("feedback on this candidate")[0]
    assert parent_feedback.splitlines()[0].strip() in section


def test_candidate_without_extracted_code_says_so_instead_of_a_diff(run_dir, capsys):
    (Path(run_dir) / "candidates" / "r02-c00.py").unlink()     # as the loop leaves a no-code completion
    _, out, _ = inspect(capsys, run_dir, "--candidate", "r02-c00")
    assert "no code was extracted from the completion" in out


def test_a_run_whose_only_correct_kernel_is_the_seed_names_the_seed(tmp_path, capsys, monkeypatch):
    from fixtures.runs.builder import Cand
    from tools.verdict import Status
    monkeypatch.setenv("COLUMNS", "200")
    build_run(tmp_path / "run", [Cand("r00-c00", None, Status.CORRECT, eager=1.2, compile=1.0, origin="inductor_seed"),
                                 Cand("r01-c00", "r00-c00", Status.INCORRECT)], solved=False)
    _, out, _ = inspect(capsys, str(tmp_path / "run"))
    assert "no correct candidate beyond the Inductor seed; the seed r00-c00 is correct: 1.20× vs eager" in out


def test_one_candidate_shows_its_path_through_the_graphs_nodes(tmp_path, capsys, monkeypatch):
    from run_fixtures import judged, loop_run
    monkeypatch.setenv("COLUMNS", "200")
    _, rd, _, _ = loop_run(tmp_path, [judged("compile_error"), judged("incorrect"), judged("correct", 2.0)],
                           **{"budget.candidates_per_round": 1})
    paths = {}
    for cid in ("r01-c00", "r02-c00", "r03-c00"):
        _, out, _ = inspect(capsys, str(rd.root), "--candidate", cid)
        paths[cid] = re.sub(r" [\d.]+s", "", next(line for line in out.splitlines() if " path " in line)).strip("│ ")
    assert paths == {"r01-c00": "path     generate → compile compile_error",
                     "r02-c00": "path     generate → compile ok → test incorrect",
                     "r03-c00": "path     generate → compile ok → test ok → profile correct → profile refined"}
