"""`krefine eval` as a user runs it: exit statuses, the one JSON object, progress on stderr."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from run_fixtures import cli

HERE = Path(__file__).parent
PROBLEM = str(HERE / "problems" / "relu.py")
OK = str(HERE / "problems" / "relu_ok.py")


@pytest.fixture(scope="module")
def wrong(tmp_path_factory):
    src = Path(OK).read_text().replace("tl.maximum(x, 0.0)", "tl.maximum(x, 0.0) * 2.0")
    assert src != Path(OK).read_text()
    path = tmp_path_factory.mktemp("cand") / "double.py"
    path.write_text(src)
    return str(path)


@pytest.fixture(scope="module")
def json_correct():
    return cli("eval", PROBLEM, OK, "--device", "cpu", "--json")


def test_correct_candidate_exits_0_and_says_so(tmp_path):
    r = cli("eval", PROBLEM, OK, "--device", "cpu")
    assert r.returncode == 0 and r.stdout.startswith("verdict: correct")


def test_progress_names_each_phase_on_stderr(tmp_path):
    r = cli("eval", PROBLEM, OK, "--device", "cpu")
    phases = [ln.split(":")[1].strip() for ln in r.stderr.splitlines() if ln.startswith("krefine: ")]
    assert ["compile", "test", "compile"] == [p for p in phases if p in ("compile", "test")]


def test_json_is_one_schema_1_object_with_the_design_fields(json_correct):
    assert json_correct.returncode == 0
    v = json.loads(json_correct.stdout)
    assert v["schema"] == 1 and v["verdict"] == "correct" and v["correct"] is True
    assert v["speedup"] == {"eager": None, "compile": None}
    assert {"timing_ms", "checks", "diagnostics", "flags", "feedback", "device"} <= set(v)


def test_json_keeps_stderr_free_of_progress(json_correct):
    assert "krefine: test" not in json_correct.stderr


def test_wrong_candidate_exits_1_with_the_diff(wrong):
    r = cli("eval", PROBLEM, wrong, "--device", "cpu", "--json")
    v = json.loads(r.stdout)
    assert r.returncode == 1 and v["verdict"] == "incorrect"
    assert any(d["kind"] == "mismatch" for d in v["diagnostics"]) and "diff:constant_factor" in v["flags"]


@pytest.mark.parametrize("args, needle", [
    (["/nonexistent/problem.py", OK], "/nonexistent/problem.py"),
    ([PROBLEM, "/nonexistent/cand.py"], "/nonexistent/cand.py"),
    ([PROBLEM, OK, "--device", "tpu"], "invalid choice"),
    ([PROBLEM, OK, "--device", "cpu", "--min-speedup", "1.5"], "needs --device cuda"),
    ([PROBLEM, OK, "--min-speedup=-2"], "must be positive"),
    ([PROBLEM], "required"),
])
def test_bad_input_exits_2_with_one_line(args, needle):
    r = cli("eval", *args)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
    assert needle in r.stderr and "Traceback" not in r.stderr and r.stdout == ""


def test_the_session_uses_the_fork_server_started_before_the_problem_was_loaded(json_correct):
    v = json.loads(json_correct.stdout)
    # one cpu fork server served the session, and the verdict says when it was ready
    assert set(k for k in v["checks"]["session_s"] if k.startswith("forkserver_")) == {"forkserver_cpu_ready_after"}
    assert v["checks"]["worker_start"] == "forked" and "setup" in v["checks"]["phase_s"]


def _forkservers_under(root: Path) -> set[int]:
    """Fork servers whose environment names `root` (their home is a temp dir under the
    TMPDIR they were started with): this test's, not those of anything else running."""
    import subprocess
    out = subprocess.run(["pgrep", "-f", "tools.sandbox.forkserver"], capture_output=True, text=True).stdout
    found = set()
    for pid in out.split():
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes()
        except OSError:
            continue
        if str(root).encode() in environ:
            found.add(int(pid))
    return found


def test_a_static_reject_leaves_no_fork_server_running(tmp_path):
    import subprocess
    import sys

    from run_fixtures import REPO, cli_env
    cand = tmp_path / "lib.py"
    cand.write_text(Path(OK).read_text().replace("return y", "return torch.relu(x)"))
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    r = subprocess.run([sys.executable, "-m", "agent.cli", "eval", PROBLEM, str(cand), "--device", "cpu", "--json"],
                       cwd=REPO, env={**cli_env(), "TMPDIR": str(tmp)}, capture_output=True, text=True, timeout=300)
    assert json.loads(r.stdout)["verdict"] == "rejected"
    assert _forkservers_under(tmp) == set()
