"""`krefine bench` cut off partway (kill -9, or SIGTERM to its process group as `timeout`
and a job scheduler's time limit send it), then the same command again: every problem ends
exactly once and no candidate is judged twice.

The real CLI in a subprocess, the real loop and evaluator on CPU, a replay model per
problem whose every candidate is judged "incorrect" (run_fixtures.HALVING), so each
problem spends its whole budget. Problem 1 finishes, problem 2 is cut off after its
first verdict, problem 3 never starts. The rerun must skip 1, resume 2 and run 3.
"""
from __future__ import annotations

import collections
import csv
import os
import signal
import subprocess
import sys
import time

import pytest

from agent.loop.rundir import RunDir
from run_fixtures import HALVING, REPO, TINY_PROBLEM, cli, cli_env, fast_config, processes_under, write_replay

pytestmark = pytest.mark.slow  # real evaluations on CPU: about a minute a scenario

PROBLEMS = ("1_a", "2_b", "3_c")
ROUNDS, PER_ROUND = 2, 2
IDS = [f"r0{r}-c0{c}" for r in range(1, ROUNDS + 1) for c in range(PER_ROUND)]


def _bench_args(tmp_path) -> list[str]:
    suite, replays = tmp_path / "suite", tmp_path / "replays"
    if not suite.exists():
        suite.mkdir()
        replays.mkdir()
        for name in PROBLEMS:
            (suite / f"{name}.py").write_text(TINY_PROBLEM)
            write_replay(replays / f"{name}.jsonl", [HALVING.format(i=i) for i in range(len(IDS))])
    return ["bench", str(suite), "--out", str(tmp_path / "out"), "--device", "cpu",
            "--model", f"replay:{replays}/{{problem}}.jsonl", "--config", str(fast_config(tmp_path)),
            "--set", f"budget.max_rounds={ROUNDS}", "--set", f"budget.candidates_per_round={PER_ROUND}"]


def _run_dir(tmp_path, name: str) -> RunDir:
    return RunDir(tmp_path / "out" / "default" / name)


def _cut_off(tmp_path, sig: int):
    """Start the bench, cut it off once problem 2 has a verdict, run it again."""
    env = {**cli_env(), "TMPDIR": str(tmp_path)}   # names the processes it starts (processes_under)
    # its own session: the signal goes to the whole group, judges included, as `timeout` sends it
    proc = subprocess.Popen([sys.executable, "-m", "agent.cli", *_bench_args(tmp_path)], cwd=REPO, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)
    evals = _run_dir(tmp_path, "2_b").root / "evals"
    deadline = time.monotonic() + 300
    while not list(evals.glob("*.json")):
        if proc.poll() is not None or time.monotonic() > deadline:
            os.killpg(proc.pid, signal.SIGKILL)
            pytest.fail(f"bench ended or stalled before problem 2's first verdict: {proc.stderr.read()}")
        time.sleep(0.05)
    os.killpg(proc.pid, sig)
    code = proc.wait(timeout=120)
    stderr = proc.stderr.read()
    time.sleep(1)   # what a dying judge leaves behind has had time to go
    orphans = processes_under(tmp_path, "tools.sandbox.forkserver") | processes_under(tmp_path, "agent.cli")
    before = {name: {p.name: p.stat().st_mtime_ns for p in (_run_dir(tmp_path, name).root / "evals").glob("*.json")}
              for name in PROBLEMS}
    trace_1 = _run_dir(tmp_path, "1_a").trace.read_text()
    rerun = cli(*_bench_args(tmp_path), timeout=600)
    return {"code": code, "stderr": stderr, "orphans": orphans, "before": before, "trace_1": trace_1,
            "rerun": rerun}


@pytest.fixture(scope="module")
def killed(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("bench_kill")
    return tmp, _cut_off(tmp, signal.SIGKILL)


@pytest.fixture(scope="module")
def terminated(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("bench_term")
    return tmp, _cut_off(tmp, signal.SIGTERM)


@pytest.fixture(params=["killed", "terminated"])
def cut(request):
    return request.getfixturevalue(request.param)


def test_the_cut_left_problem_1_finished_and_problem_2_partway(cut):
    _, got = cut
    before = got["before"]
    assert (len(before["1_a"]), 1 <= len(before["2_b"]) < len(IDS), len(before["3_c"])) == (len(IDS), True, 0)


def test_the_rerun_finishes_every_problem(cut):
    tmp, got = cut
    assert got["rerun"].returncode == 0, got["rerun"].stderr
    summaries = [_run_dir(tmp, name).read_summary() for name in PROBLEMS]
    assert [(s["stop_reason"], s["candidates_evaluated"]) for s in summaries] == [("max_rounds", len(IDS))] * 3


def test_the_rerun_skips_the_finished_problem(cut):
    tmp, got = cut
    assert "1 already done, 2 to run" in got["rerun"].stdout
    assert _run_dir(tmp, "1_a").trace.read_text() == got["trace_1"]


def test_no_candidate_is_judged_twice(cut):
    tmp, got = cut
    for name in PROBLEMS:
        rd = _run_dir(tmp, name)
        compiles = collections.Counter(e["candidate"] for e in rd.events() if e["node"] == "compile")
        assert (name, sorted(compiles), set(compiles.values())) == (name, IDS, {1})
        after = {p.name: p.stat().st_mtime_ns for p in (rd.root / "evals").glob("*.json")}
        assert all(after[f] == mtime for f, mtime in got["before"][name].items())


def test_the_rerun_reports_the_whole_suite(cut):
    tmp, _ = cut
    rows = list(csv.DictReader((tmp / "out" / "results.csv").open()))
    assert [(r["problem"], r["finished"], r["why"]) for r in rows] == [
        (name, "True", f"no seed: none was made (seeding off); {len(IDS)} other candidates, none correct "
                       "(commonest: incorrect)") for name in PROBLEMS]


def test_sigterm_unwinds_the_bench_and_its_judges(terminated):
    _, got = terminated
    assert (got["code"], got["orphans"]) == (130, set()), got["stderr"]
    assert "the same command resumes it" in got["stderr"]
