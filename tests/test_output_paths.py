"""Output paths krefine cannot write are bad input (one line, exit 2) before the work:
tools/errors.py check_writable, and the run, bench, export and report commands using it."""
from __future__ import annotations

import pytest

from agent.cli import main
from fixtures.runs.builder import build_run, story
from tools.errors import BadInput, check_writable


@pytest.fixture
def a_file(tmp_path):
    path = tmp_path / "afile"
    path.write_text("x")
    return path


def test_a_directory_path_that_is_a_file_is_bad_input(a_file):
    with pytest.raises(BadInput, match="exists and is not a directory"):
        check_writable(a_file, "--out", directory=True)


def test_a_directory_path_under_a_file_is_bad_input(a_file):
    with pytest.raises(BadInput, match=f"{a_file} is not a directory"):
        check_writable(a_file / "sub" / "run", "--out", directory=True)


def test_a_new_directory_under_existing_ones_is_writable(tmp_path):
    check_writable(tmp_path / "a" / "b", "--out", directory=True)


def test_a_file_path_that_is_a_directory_is_bad_input(tmp_path):
    with pytest.raises(BadInput, match="is a directory; name a file"):
        check_writable(tmp_path, "-o", directory=False)


def test_a_file_path_in_a_missing_directory_is_bad_input(tmp_path):
    with pytest.raises(BadInput, match="no such directory"):
        check_writable(tmp_path / "gone" / "k.py", "-o", directory=False)


def _one_line_exit_2(argv, capsys, fault: str) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and fault in err and "internal error" not in err


def test_run_out_that_is_a_file_is_one_line_before_the_problem_loads(a_file, capsys):
    _one_line_exit_2(["run", "examples/relu.py", "--model", "none", "--device", "cpu", "--out", str(a_file)],
                     capsys, "run directory: exists and is not a directory")


def test_export_to_a_directory_is_one_line(tmp_path, capsys):
    build_run(tmp_path / "run", story())
    _one_line_exit_2(["export", str(tmp_path / "run"), "--chrome-trace", "-o", str(tmp_path)], capsys,
                     "is a directory; name a file")


def test_report_over_a_directory_named_report_html_is_one_line(tmp_path, capsys):
    build_run(tmp_path / "run", story())
    (tmp_path / "run" / "report.html").mkdir()
    _one_line_exit_2(["report", str(tmp_path / "run")], capsys, "the report: is a directory")


def test_bench_out_that_is_a_file_is_one_line(a_file, tmp_path, capsys):
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "relu.py").write_text(open("examples/relu.py").read())
    _one_line_exit_2(["bench", str(suite), "--model", "none", "--device", "cpu", "--out", str(a_file)], capsys,
                     "bench results directory: exists and is not a directory")
