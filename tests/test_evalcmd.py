"""`krefine eval` as a user runs it: exit statuses, the one JSON object, progress on stderr."""
from __future__ import annotations

import json
import os
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


@pytest.fixture(scope="module")
def plain_correct():
    return cli("eval", PROBLEM, OK, "--device", "cpu")


def test_correct_candidate_exits_0_and_says_so(plain_correct):
    r = plain_correct
    assert r.returncode == 0 and r.stdout.startswith("verdict: correct")


def test_progress_names_each_phase_on_stderr(plain_correct):
    r = plain_correct
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
    ([PROBLEM, OK, "--device", "cpu", "--gpu", "3"], "--gpu 3: judging on cpu uses no GPU"),
    ([PROBLEM, OK, "--device", "cpu", "--gpu=-1"], "--gpu must not be negative, got -1"),
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


def test_a_static_reject_leaves_no_fork_server_running(tmp_path):
    import subprocess
    import sys

    from run_fixtures import REPO, cli_env, processes_under
    cand = tmp_path / "lib.py"
    cand.write_text(Path(OK).read_text().replace("return y", "return torch.relu(x)"))
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    r = subprocess.run([sys.executable, "-m", "agent.cli", "eval", PROBLEM, str(cand), "--device", "cpu", "--json"],
                       cwd=REPO, env={**cli_env(), "TMPDIR": str(tmp)}, capture_output=True, text=True, timeout=300)
    assert json.loads(r.stdout)["verdict"] == "rejected"
    assert processes_under(tmp, "tools.sandbox.forkserver") == set()


# --- several candidates: one verdict each, in order ------------------------------------

SYNTAX = "import torch\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, x)\n        return x\n"
NOT_CANDIDATES = {"empty.py": b"", "binary.py": b"\x00\x01ELF", "no_model.py": b"x = 1\n"}


@pytest.fixture(scope="module")
def batch(tmp_path_factory, wrong):
    """ok, wrong, a syntax error and three files that are no candidate, judged at once."""
    d = tmp_path_factory.mktemp("batch")
    (d / "syntax.py").write_text(SYNTAX)
    for name, data in NOT_CANDIDATES.items():
        (d / name).write_bytes(data)
    paths = [OK, wrong, str(d / "syntax.py"), *(str(d / n) for n in NOT_CANDIDATES)]
    r = cli("eval", PROBLEM, *paths, "--device", "cpu", "--json")
    return r, paths, [json.loads(ln) for ln in r.stdout.splitlines()]


def test_a_batch_progress_line_names_the_candidate_it_is_about(tmp_path, wrong):
    r = cli("eval", PROBLEM, OK, wrong, "--device", "cpu")
    said = [ln for ln in r.stderr.splitlines() if ln.startswith("krefine: ") and ln.endswith("...")][1:]
    assert said and all(ln.startswith((f"krefine: {OK}: ", f"krefine: {wrong}: ")) for ln in said), said
    assert any(ln.startswith(f"krefine: {wrong}: ") for ln in said)


def test_a_batch_prints_one_verdict_per_candidate_in_order(batch):
    r, paths, docs = batch
    assert [d["candidate"] for d in docs] == paths, r.stderr
    assert [d["verdict"] for d in docs] == ["correct", "incorrect"] + ["compile_error"] * 4


def test_in_a_batch_a_syntax_error_is_that_candidates_compile_error_with_its_line(batch):
    _, _, docs = batch
    (diag,) = [d for d in docs[2]["diagnostics"] if d["kind"] == "syntax_error"]
    assert diag["line"] == 4 and "expected ':'" in diag["message"]


def test_in_a_batch_a_file_that_is_no_candidate_gets_a_compile_error_naming_why(batch):
    _, _, docs = batch
    faults = [[d["message"] for d in doc["diagnostics"] if d["kind"] == "bad_candidate"] for doc in docs[3:]]
    assert faults == [["candidate file is empty"], ["candidate file is binary, not Python source"],
                      ["candidate defines no ModelNew class"]]


def test_a_batch_with_a_candidate_not_correct_exits_1_and_says_nothing_on_stderr(batch):
    r, _, _ = batch
    assert r.returncode == 1 and r.stderr == "", r.stderr


def test_a_batch_naming_a_file_that_does_not_exist_is_exit_2(tmp_path):
    r = cli("eval", PROBLEM, OK, str(tmp_path / "gone.py"), "--device", "cpu")
    assert r.returncode == 2 and r.stdout == "" and "gone.py: candidate file does not exist" in r.stderr


def test_a_single_candidate_with_a_syntax_error_is_its_compile_error_in_json(tmp_path):
    cand = tmp_path / "syntax.py"
    cand.write_text(SYNTAX)
    r = cli("eval", PROBLEM, str(cand), "--device", "cpu", "--json")
    assert r.returncode == 1, r.stderr
    (doc,) = [json.loads(line) for line in r.stdout.splitlines()]
    assert doc["verdict"] == "compile_error"
    assert [d["line"] for d in doc["diagnostics"] if d["kind"] == "syntax_error"] == [4]


@pytest.mark.slow   # a whole judgement in a process of its own (~12 s)
def test_what_the_problem_prints_goes_to_stderr_so_json_stays_one_object_per_line(tmp_path):
    problem = tmp_path / "noisy_relu.py"
    problem.write_text(Path(PROBLEM).read_text() + "\nprint('loaded the noisy problem')\n"
                       "import os\nos.write(1, b'and wrote to descriptor 1\\n')\n")
    r = cli("eval", str(problem), OK, "--device", "cpu", "--json", "--keep-judge", "0")
    assert [json.loads(line)["verdict"] for line in r.stdout.splitlines()] == ["correct"]
    assert "loaded the noisy problem" in r.stderr and "and wrote to descriptor 1" in r.stderr


@pytest.mark.parametrize("where", ["before", "after"])
def test_debug_anywhere_shows_the_traceback_and_keeps_the_exit_status(tmp_path, capsys, where):
    from agent.cli import main
    args = ["eval", str(Path(__file__).parent / "problems" / "relu.py"), str(tmp_path / "missing.py")]
    assert main(["--debug", *args] if where == "before" else [*args, "--debug"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" in err and err.rstrip().splitlines()[-1].startswith("krefine: error:")


@pytest.mark.slow
def test_ctrl_c_while_a_candidate_hangs_ends_eval_at_once_not_at_its_timeout(tmp_path):
    import signal
    import subprocess
    import sys
    import time
    from run_fixtures import REPO, cli_env
    ok = (HERE / "exploits" / "ok_relu.py").read_text()
    hang = tmp_path / "hang.py"
    hang.write_text(ok.replace("        return out\n", "        while n > 0:\n            pass\n        return out\n"))
    assert hang.read_text() != ok
    proc = subprocess.Popen([sys.executable, "-m", "agent.cli", "eval", PROBLEM, str(hang), "--device", "cpu",
                             "--keep-judge", "0"], cwd=REPO, env=cli_env(), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        for line in proc.stderr:   # the trials have begun: the forward is spinning in its worker
            if "test:" in line:
                break
        time.sleep(2)
        t = time.monotonic()
        proc.send_signal(signal.SIGINT)
        code = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert code == 130 and time.monotonic() - t < 30
    assert proc.stderr.read().rstrip().endswith("krefine: interrupted")


@pytest.mark.parametrize("command", ["eval", "inspect", "resume", "export", "bench"])
def test_a_path_name_too_long_for_the_system_is_bad_input_in_one_line(tmp_path, capsys, command):
    from agent.cli import main
    long = str(tmp_path / ("a" * 300))
    args = [command, long, str(HERE / "exploits" / "ok_relu.py")] if command == "eval" else [command, long]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "File name too long" in err


def test_a_bad_keep_judge_from_the_environment_names_the_variable(monkeypatch, capsys):
    from agent.cli import main
    monkeypatch.setenv("KREFINE_KEEP_JUDGE_S", "nan")
    assert main(["eval", PROBLEM, str(HERE / "exploits" / "ok_relu.py"), "--device", "cpu"]) == 2
    assert "KREFINE_KEEP_JUDGE_S must be between" in capsys.readouterr().err
