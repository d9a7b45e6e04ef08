"""`krefine resume` after kill -9 or Ctrl-C: no finished candidate is lost or judged twice.

Runs the real CLI in a subprocess on a tiny problem with the real evaluator on CPU,
interrupts it once some verdicts are on disk, resumes, and compares the run directory
with what an uninterrupted run would hold.
"""
from __future__ import annotations

import collections
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from agent.loop.rundir import RunDir
from run_fixtures import HALVING as WRONG, REPO, TINY_PROBLEM, cli, cli_env, fast_config, write_replay

pytestmark = pytest.mark.slow  # real evaluations on CPU, tens of seconds in all

ROUNDS, PER_ROUND = 3, 2
ALL_IDS = [f"r0{r}-c0{c}" for r in range(1, ROUNDS + 1) for c in range(PER_ROUND)]


def _start(tmp_path):
    problem = tmp_path / "tiny.py"
    problem.write_text(TINY_PROBLEM)
    replay = write_replay(tmp_path / "r.jsonl", [WRONG.format(i=i) for i in range(ROUNDS * PER_ROUND)])
    args = ["run", str(problem), "--model", f"replay:{replay}", "--device", "cpu", "--config",
            str(fast_config(tmp_path)), "--candidates", str(PER_ROUND), "--max-iterations", str(ROUNDS),
            "--out", str(tmp_path / "run")]
    # own session, so kill -9 of the group also takes the evaluator's worker with it
    proc = subprocess.Popen([sys.executable, "-m", "agent.cli", *args], cwd=REPO, env=cli_env(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)
    return proc, RunDir(tmp_path / "run")


def _wait_for_evals(proc, rd: RunDir, n: int, timeout_s: float = 240) -> None:
    deadline = time.monotonic() + timeout_s
    while len(list((rd.root / "evals").glob("*.json"))) < n:
        if proc.poll() is not None:
            pytest.fail(f"run ended before {n} verdicts: {proc.stderr.read()}")
        if time.monotonic() > deadline:
            os.killpg(proc.pid, signal.SIGKILL)
            pytest.fail("no verdicts in time")
        time.sleep(0.05)


def _interrupted_then_resumed(tmp_path, sig: int, after: int):
    proc, rd = _start(tmp_path)
    _wait_for_evals(proc, rd, after)
    if sig == signal.SIGKILL:
        os.killpg(proc.pid, signal.SIGKILL)
    else:
        proc.send_signal(sig)
    code = proc.wait(timeout=60)
    interrupted_stderr = proc.stderr.read()
    before = {p.name: p.stat().st_mtime_ns for p in (rd.root / "evals").glob("*.json")}
    resumed = cli("resume", str(rd.root))
    return (code, interrupted_stderr), before, resumed, rd


@pytest.fixture(scope="module")
def killed(tmp_path_factory):
    return _interrupted_then_resumed(tmp_path_factory.mktemp("kill"), signal.SIGKILL, after=3)


def test_kill_minus_9_then_resume_finishes_the_run(killed):
    (code, _), _, resumed, rd = killed
    assert code == -signal.SIGKILL
    assert resumed.returncode == 1, resumed.stderr  # budget spent, nothing correct
    s = rd.read_summary()
    assert (s["stop_reason"], s["candidates_evaluated"], s["rounds"]) == ("max_rounds", ROUNDS * PER_ROUND, ROUNDS)


def test_resume_loses_no_candidate(killed):
    _, _, _, rd = killed
    assert sorted(p.stem for p in (rd.root / "evals").glob("*.json")) == ALL_IDS
    assert sorted(p.stem for p in (rd.root / "candidates").glob("*.py")) == ALL_IDS


def test_resume_judges_no_finished_candidate_twice(killed):
    _, before, _, rd = killed
    after = {p.name: p.stat().st_mtime_ns for p in (rd.root / "evals").glob("*.json")}
    assert len(before) >= 3 and all(after[name] == mtime for name, mtime in before.items())
    compiles = collections.Counter(e["candidate"] for e in rd.events() if e["node"] == "compile")
    assert sorted(compiles) == ALL_IDS and set(compiles.values()) == {1}


def test_resume_continues_the_replay_where_the_run_left_it(killed):
    _, _, _, rd = killed
    recorded = rd.completions()
    assert [r["candidate"] for r in recorded] == ALL_IDS
    assert [f"# attempt {i}" in r["completion"] for i, r in enumerate(recorded)] == [True] * len(ALL_IDS)


def test_resume_names_the_round_it_takes_up(killed):
    _, before, resumed, _ = killed
    line = next(x for x in resumed.stdout.splitlines() if x.startswith("resuming"))
    after, n = re.match(r"resuming (after )?round (\d+)", line).groups()
    round_judged = {f"r{int(n):02d}-c{c:02d}.json" for c in range(PER_ROUND)} <= set(before)
    assert round_judged == bool(after), line
    assert int(n) == max(int(name[1:3]) for name in before), line   # the last round anything was judged in


def test_ctrl_c_then_resume_finishes_the_run(tmp_path):
    (code, stderr), _, resumed, rd = _interrupted_then_resumed(tmp_path, signal.SIGINT, after=1)
    assert code == 130 and f"krefine resume {rd.root}" in stderr
    assert resumed.returncode == 1, resumed.stderr
    assert sorted(p.stem for p in (rd.root / "evals").glob("*.json")) == ALL_IDS


def test_sigterm_unwinds_as_ctrl_c_says_so_and_the_run_resumes(tmp_path):
    (code, stderr), _, resumed, rd = _interrupted_then_resumed(tmp_path, signal.SIGTERM, after=1)
    assert code == 130, stderr
    assert f"krefine resume {rd.root}" in stderr and stderr.rstrip().endswith("krefine: interrupted (SIGTERM)")
    assert resumed.returncode == 1, resumed.stderr
    assert sorted(p.stem for p in (rd.root / "evals").glob("*.json")) == ALL_IDS


def test_resuming_a_finished_run_changes_nothing(killed):
    _, _, _, rd = killed
    trace = rd.trace.read_text()
    again = cli("resume", str(rd.root))
    assert again.returncode == 1 and rd.trace.read_text() == trace


def test_kill_minus_9_then_resume_finishes_the_run_judging_nothing_twice(killed):
    """The run directory alone resumes the run: no candidate judged or traced twice."""
    (code, _), before, resumed, rd = killed
    assert code == -signal.SIGKILL and resumed.returncode == 1, resumed.stderr
    s = rd.read_summary()
    assert (s["stop_reason"], s["candidates_evaluated"], s["rounds"]) == ("max_rounds", ROUNDS * PER_ROUND, ROUNDS)
    after = {p.name: p.stat().st_mtime_ns for p in (rd.root / "evals").glob("*.json")}
    assert sorted(p.removesuffix(".json") for p in after) == ALL_IDS
    assert all(after[name] == mtime for name, mtime in before.items())
    compiles = collections.Counter(e["candidate"] for e in rd.events() if e["node"] == "compile")
    assert sorted(compiles) == ALL_IDS and set(compiles.values()) == {1}
