"""The judge service `krefine eval` keeps warm (tools/judge/service.py, client.py), as a
user meets it: the second eval reuses the session, rejects need no service, bad input
is still exit 2, dead or outdated services are replaced, idle ones go away."""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from run_fixtures import REPO, cli_env, processes_under

HERE = Path(__file__).parent
PROBLEM = str(HERE / "problems" / "relu.py")
OK = str(HERE / "problems" / "relu_ok.py")


@pytest.fixture
def svc():
    """A private service directory (short: a socket path has ~100 bytes) and an env
    that uses the service; every service in it is stopped afterwards."""
    d = Path(tempfile.mkdtemp(prefix="kj", dir="/tmp")) / "s"
    env = {**cli_env(), "KREFINE_JUDGE_DIR": str(d)}
    env.pop("KREFINE_KEEP_JUDGE_S")
    yield env, d
    subprocess.run([sys.executable, "-m", "agent.cli", "judge", "stop"], env=env, cwd=REPO,
                   capture_output=True, timeout=60)
    _gone(d, timeout_s=20)
    shutil.rmtree(d.parent, ignore_errors=True)


def kcli(env, *args, timeout=300):
    return subprocess.run([sys.executable, "-m", "agent.cli", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=timeout)


def eval_json(env, *cands, keep="60", extra=()):
    r = kcli(env, "eval", PROBLEM, *cands, "--device", "cpu", "--json", "--keep-judge", keep, *extra)
    return r, [json.loads(ln) for ln in r.stdout.splitlines() if ln.startswith("{")]


def _gone(d: Path, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not list(d.glob("*.sock")):
            return True
        time.sleep(0.1)
    return False


def _service(doc: dict) -> dict:
    return doc["checks"]["judge_service"]


def test_a_second_eval_reuses_the_warm_session(svc):
    env, _ = svc
    r1, (v1,) = eval_json(env, OK)
    r2, (v2,) = eval_json(env, OK)
    assert (r1.returncode, r2.returncode) == (0, 0), r1.stderr + r2.stderr
    assert v1["verdict"] == v2["verdict"] == "correct"
    assert _service(v1)["started_now"] and not _service(v1)["reused_session"]
    assert not _service(v2)["started_now"] and _service(v2)["reused_session"]
    assert _service(v1)["pid"] == _service(v2)["pid"]


def _fallback(tmp_path) -> str:
    """A candidate whose forward returns torch.relu: a static guard rejects it."""
    cand = tmp_path / "fallback.py"
    cand.write_text(Path(OK).read_text().replace("def forward(self, x):",
                                                 "def forward(self, x):\n        return torch.relu(x)", 1))
    return str(cand)


def test_a_static_reject_is_decided_without_starting_a_service(svc, tmp_path):
    env, d = svc
    r, (v,) = eval_json(env, _fallback(tmp_path))
    assert r.returncode == 1 and v["verdict"] == "rejected", r.stderr
    assert "judge_service" not in v["checks"]
    assert not list(d.glob("*.sock"))


def test_a_problem_failing_at_import_is_exit_2_in_one_line_and_the_service_lives_on(svc, tmp_path):
    env, _ = svc
    _, (first,) = eval_json(env, OK)
    bad = tmp_path / "bad_problem.py"
    bad.write_text(Path(PROBLEM).read_text() + "\nraise RuntimeError('boom at import')\n")
    r = kcli(env, "eval", str(bad), OK, "--device", "cpu", "--json", "--keep-judge", "60")
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "bad_problem.py" in lines[0] and "boom at import" in lines[0], r.stderr
    _, (after,) = eval_json(env, OK)
    assert _service(after)["pid"] == _service(first)["pid"] and _service(after)["reused_session"]


def test_a_reference_that_never_returned_is_exit_2_again_on_the_next_eval(svc, tmp_path):
    from test_deadline import hanging_files   # the reference forward hangs on real tensors only
    env, _ = svc
    problem, cand, config = hanging_files(tmp_path)
    codes = [kcli(env, "eval", problem, cand, "--device", "cpu", "--keep-judge", "60", "--config", config).returncode
             for _ in range(2)]
    assert codes == [2, 2]


def test_several_candidates_come_back_in_order_with_rejects_decided_here(svc, tmp_path):
    env, _ = svc
    wrong = tmp_path / "double.py"
    wrong.write_text(Path(OK).read_text().replace("tl.maximum(x, 0.0)", "tl.maximum(x, 0.0) * 2.0"))
    rejected = _fallback(tmp_path)
    r, docs = eval_json(env, OK, rejected, str(wrong))
    assert r.returncode == 1, r.stderr
    assert [d["candidate"] for d in docs] == [OK, rejected, str(wrong)]
    assert [d["verdict"] for d in docs] == ["correct", "rejected", "incorrect"]
    assert "judge_service" in docs[0]["checks"] and "judge_service" not in docs[1]["checks"]


def test_judge_status_lists_the_service_and_stop_ends_it(svc):
    env, d = svc
    _, (v,) = eval_json(env, OK)
    status = kcli(env, "judge", "status")
    assert f"pid {_service(v)['pid']}" in status.stdout and "relu.py (1 judged)" in status.stdout, status.stdout
    stop = kcli(env, "judge", "stop")
    assert stop.returncode == 0 and "asked 1 judge service to stop" in stop.stdout
    assert _gone(d, 20)
    assert "no judge service is running" in kcli(env, "judge", "status").stdout


@pytest.mark.slow
def test_an_idle_service_exits_after_its_keep_time_and_cleans_up(svc):
    env, d = svc
    r, (v,) = eval_json(env, OK, keep="1")
    assert r.returncode == 0 and _service(v)["started_now"]
    assert _gone(d, 20), list(d.iterdir())
    assert not list(d.iterdir())   # its lock and log went with it


@pytest.mark.slow
def test_a_killed_service_is_replaced_by_the_next_eval(svc):
    env, _ = svc
    _, (v1,) = eval_json(env, OK)
    os.kill(_service(v1)["pid"], signal.SIGKILL)
    r, (v2,) = eval_json(env, OK)
    assert r.returncode == 0 and v2["verdict"] == "correct", r.stderr
    assert _service(v2)["started_now"] and _service(v2)["pid"] != _service(v1)["pid"]


@pytest.mark.slow
def test_a_service_of_other_code_or_settings_is_asked_to_stop(svc):
    env, d = svc
    _, (v1,) = eval_json(env, OK)
    old = list(d.glob("*.sock"))
    # the key covers the environment that steers torch and triton (and tools/ sources)
    _, (v2,) = eval_json({**env, "KREFINE_JUDGE_KEY_SALT": "other"}, OK)
    assert _service(v2)["started_now"] and _service(v2)["pid"] != _service(v1)["pid"]
    deadline = time.monotonic() + 20
    while any(p.exists() for p in old) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(p.exists() for p in old)


@pytest.mark.slow
def test_two_first_evals_at_once_share_one_service(svc):
    env, _ = svc
    cmd = [sys.executable, "-m", "agent.cli", "eval", PROBLEM, OK, "--device", "cpu", "--json", "--keep-judge", "60"]
    procs = [subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    docs = [json.loads(p.communicate(timeout=300)[0].strip().splitlines()[-1]) for p in procs]
    assert [d["verdict"] for d in docs] == ["correct", "correct"]
    assert _service(docs[0])["pid"] == _service(docs[1])["pid"]


def test_a_client_gone_mid_eval_leaves_the_service_usable(svc, tmp_path):
    env, d = svc
    # the candidate waits at import for a gate file: the eval cannot end before the client
    # is interrupted, however fast or busy the machine is
    gate = d.parent / "gate"
    held = tmp_path / "held.py"
    held.write_text(Path(OK).read_text().replace(
        "import triton\n", f"import triton\nimport os\nimport time\nwhile not os.path.exists({str(gate)!r}):\n"
        "    time.sleep(0.05)\n", 1))
    p = subprocess.Popen([sys.executable, "-m", "agent.cli", "eval", PROBLEM, str(held), "--device", "cpu",
                          "--keep-judge", "60"], cwd=REPO, env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    for line in p.stderr:
        if "compile:" in line:   # the service is judging this candidate now, held at the gate
            p.send_signal(signal.SIGINT)
            break
    try:
        assert p.wait(timeout=60) == 130
    finally:
        gate.touch()
    r, (v,) = eval_json(env, OK)
    assert r.returncode == 0 and v["verdict"] == "correct" and not _service(v)["started_now"], r.stderr


def test_garbage_on_the_socket_gets_an_error_and_the_service_answers_the_next(svc):
    env, d = svc
    eval_json(env, OK)
    (path,) = d.glob("*.sock")
    for junk in (b"not json\n", b"[1, 2]\n", b'{"op": "format_disk"}\n'):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(str(path))
        s.sendall(junk)
        reply = json.loads(s.makefile().readline())
        s.close()
        assert reply["error"] == "bad_request"
    assert "pid" in kcli(env, "judge", "status").stdout


@pytest.mark.slow
def test_the_service_keeps_at_most_two_problem_sessions(svc, tmp_path):
    env, _ = svc
    for i in range(3):
        prob = tmp_path / f"relu_{i}.py"
        prob.write_text(Path(PROBLEM).read_text() + f"\n# copy {i}\n")
        r = kcli(env, "eval", str(prob), OK, "--device", "cpu", "--json", "--keep-judge", "60")
        assert r.returncode == 0, r.stderr
    (info,) = [json.loads(ln) for ln in kcli(env, "judge", "status", "--json").stdout.splitlines()]
    assert [Path(s["problem"]).name for s in info["sessions"]] == ["relu_1.py", "relu_2.py"]


@pytest.mark.parametrize("args, env_keep, needle", [
    (("--keep-judge", "-1"), None, "--keep-judge must be between 0 and 86400"),
    ((), "soon", "KREFINE_KEEP_JUDGE_S must be a number"),
])
def test_a_bad_keep_time_is_exit_2_in_one_line(svc, args, env_keep, needle):
    env, d = svc
    if env_keep is not None:
        env = {**env, "KREFINE_KEEP_JUDGE_S": env_keep}
    r = kcli(env, "eval", PROBLEM, OK, "--device", "cpu", *args)
    assert r.returncode == 2 and needle in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert not list(d.glob("*.sock"))


def test_a_service_directory_others_can_enter_is_refused_with_exit_3(tmp_path):
    d = tmp_path / "open"
    d.mkdir(mode=0o755)
    d.chmod(0o755)
    env = {**cli_env(), "KREFINE_JUDGE_DIR": str(d)}
    env.pop("KREFINE_KEEP_JUDGE_S")
    r = kcli(env, "eval", PROBLEM, OK, "--device", "cpu", "--json", "--keep-judge", "60")
    assert r.returncode == 3 and "not a private directory" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert not list(d.iterdir())


@pytest.mark.gpu
def test_on_the_gpu_the_second_eval_is_timed_in_the_warm_session(svc):
    env, _ = svc
    docs = []
    for _ in range(2):
        r = kcli(env, "eval", str(REPO / "examples" / "relu.py"), str(REPO / "benchmarks" / "throughput" / "gate_correct.py"),
                 "--json", "--no-profile", "--keep-judge", "60")
        assert r.returncode == 0, r.stderr
        docs.append(json.loads(r.stdout.strip().splitlines()[-1]))
    first, second = (_service(d) for d in docs)
    assert first["started_now"] and second["reused_session"] and first["pid"] == second["pid"]
    assert docs[1]["device"]["type"] == "cuda" and docs[1]["timing_ms"]["candidate"]["median"] > 0
    assert docs[1]["speedup_interval"]["eager"]["low"] > 0


@pytest.mark.slow
def test_a_service_gone_before_answering_is_replaced_once(svc):
    """A service that timed out idle just as a client connected answers nothing: the
    client starts a fresh one and asks again."""
    import threading
    env, d = svc
    path = subprocess.run([sys.executable, "-c", "from tools.judge import client; print(client.socket_path('cpu', 0))"],
                          env=env, cwd=REPO, capture_output=True, text=True, check=True).stdout.strip()
    fake = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    fake.bind(path)
    fake.listen(1)

    def vanish():   # accept the client, then go away without a word, as an idle exit does
        conn, _ = fake.accept()
        conn.recv(1 << 16)
        os.unlink(path)
        conn.close()
        fake.close()
    t = threading.Thread(target=vanish, daemon=True)
    t.start()
    r, (v,) = eval_json(env, OK)
    t.join(10)
    assert r.returncode == 0 and v["verdict"] == "correct", r.stderr
    assert _service(v)["started_now"]


@pytest.mark.skipif(os.path.exists("/dev/nvidiactl"), reason="needs a machine without a GPU")
def test_device_cuda_without_a_gpu_is_exit_2_through_the_service_too(svc):
    env, _ = svc
    r = kcli(env, "eval", PROBLEM, OK, "--device", "cuda", "--json", "--keep-judge", "60")
    assert r.returncode == 2 and "no CUDA device is visible" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


@pytest.mark.slow
def test_a_dead_fork_server_is_replaced_and_the_session_kept(svc):
    env, _ = svc
    _, (v1,) = eval_json(env, OK)
    found = subprocess.run(["pgrep", "-P", str(_service(v1)["pid"]), "-f", "tools.sandbox.forkserver"],
                           capture_output=True, text=True).stdout.split()
    assert found
    for pid in found:
        os.kill(int(pid), signal.SIGKILL)
    time.sleep(0.5)
    r, (v2,) = eval_json(env, OK)
    assert r.returncode == 0 and v2["verdict"] == "correct", r.stderr
    assert _service(v2)["reused_session"] and _service(v2)["pid"] == _service(v1)["pid"]


def _left_running(tmp: Path, timeout_s: float = 15.0) -> set[int]:
    """Services and fork servers started under TMPDIR `tmp` still running after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while True:
        left = processes_under(tmp, "tools.judge.service") | processes_under(tmp, "tools.sandbox.forkserver")
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.2)


@pytest.mark.skipif(os.path.exists("/dev/nvidiactl"), reason="needs a machine without a GPU")
def test_device_cuda_without_a_gpu_leaves_no_service_or_fork_server_running(svc, tmp_path):
    env, d = svc
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    r = kcli({**env, "TMPDIR": str(tmp)}, "eval", PROBLEM, OK, "--device", "cuda", "--json", "--keep-judge", "60")
    assert r.returncode == 2 and r.stderr.strip() == \
        "krefine: error: --device cuda but no CUDA device is visible (use --device cpu)", r.stderr
    assert _left_running(tmp) == set() and not list(d.glob("*.sock"))


def test_a_gpu_this_machine_lacks_is_exit_2_and_leaves_nothing_running(svc, tmp_path):
    env, d = svc
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    r = kcli({**env, "TMPDIR": str(tmp)}, "eval", PROBLEM, OK, "--gpu", "99", "--json", "--keep-judge", "60")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert r.stderr.startswith("krefine: error: --gpu 99: ")
    assert _left_running(tmp) == set() and not list(d.glob("*.sock"))


def test_gpu_with_device_cpu_is_refused_before_any_service_starts(svc):
    env, d = svc
    r = kcli(env, "eval", PROBLEM, OK, "--device", "cpu", "--gpu", "3", "--keep-judge", "60")
    assert r.returncode == 2 and r.stderr.strip() == \
        "krefine: error: --gpu 3: judging on cpu uses no GPU (leave --gpu out, or use --device cuda)", r.stderr
    assert not d.exists() or not list(d.iterdir())


def test_the_eval_that_starts_the_service_says_once_on_stderr_what_it_leaves_running(svc):
    env, _ = svc
    r1, (v1,) = eval_json(env, OK, keep="45")
    r2, _ = eval_json(env, OK, keep="45")
    assert r1.stderr.splitlines() == [
        f"krefine: left the judge service for cpu:0 running (pid {_service(v1)['pid']}); it exits after 45 s "
        "without an eval, `krefine judge stop` ends it now"]
    assert r2.stderr == ""


def test_a_batch_through_the_service_gives_a_syntax_error_its_own_verdict_in_order(svc, tmp_path):
    env, _ = svc
    syntax = tmp_path / "syntax.py"
    syntax.write_text(Path(OK).read_text().replace("def forward(self, x):", "def forward(self, x)", 1))
    empty = tmp_path / "empty.py"
    empty.write_text("")
    r, docs = eval_json(env, str(syntax), OK, str(empty))
    assert r.returncode == 1, r.stderr
    assert [(d["candidate"], d["verdict"]) for d in docs] == [
        (str(syntax), "compile_error"), (OK, "correct"), (str(empty), "compile_error")]
    assert [(d["kind"], d["line"]) for d in docs[0]["diagnostics"]] == [("syntax_error", 21)]


def test_a_judge_dir_that_is_a_file_is_bad_input_naming_the_variable(tmp_path, monkeypatch):
    from tools.errors import BadInput
    from tools.judge.client import service_dir
    (tmp_path / "f").write_text("")
    monkeypatch.setenv("KREFINE_JUDGE_DIR", str(tmp_path / "f"))
    with pytest.raises(BadInput, match="KREFINE_JUDGE_DIR"):
        service_dir()


def test_a_judge_dir_too_long_for_a_socket_path_is_bad_input(tmp_path, monkeypatch):
    from tools.errors import BadInput
    from tools.judge.client import service_dir
    monkeypatch.setenv("KREFINE_JUDGE_DIR", str(tmp_path / ("y" * 100)))
    with pytest.raises(BadInput, match="too long for the judge service's sockets"):
        service_dir()


def test_a_temp_dir_too_long_for_a_socket_path_gives_way_to_tmp(tmp_path, monkeypatch):
    import os
    from tools.judge.client import MAX_DIR_BYTES, service_dir
    long = tmp_path / ("y" * 100)
    long.mkdir()
    monkeypatch.delenv("KREFINE_JUDGE_DIR", raising=False)
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    monkeypatch.setattr("tempfile.gettempdir", lambda: str(long))
    got = service_dir()
    assert len(os.fsencode(str(got))) <= MAX_DIR_BYTES and got == Path(f"/tmp/krefine-{os.getuid()}")
