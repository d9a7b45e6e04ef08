"""The worker sandbox: scrubbed env, locked-down process, timeouts kill the group."""
from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from tools import sandbox

PROBLEM = Path(__file__).parent / "problems" / "relu.py"
SETUP = {"op": "setup", "device": "cpu", "max_file_mib": 16, "address_space_gib": 16,
         "gpu_cross_compile": False}


def started(src: str):
    w = sandbox.start_worker(src, device="cpu")
    hello, _ = w.request(SETUP, 120)
    assert hello["ok"]
    return w, hello


def load(w, timeout=60):
    return w.request({"op": "load", "problem": str(PROBLEM), "candidate": "candidate.py",
                      "init_seed": 42}, timeout)


def test_env_drops_unknown_variables(monkeypatch, tmp_path):
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "hunter2")
    env = sandbox.worker_env(tmp_path, "cpu", 0)
    assert "AWS_SECRET_ACCESS_KEY" not in env and env["HOME"] == str(tmp_path)
    assert env["TRITON_CACHE_DIR"].startswith(str(tmp_path)) and env["TRITON_INTERPRET"] == "1"


def test_env_pins_triton_s_fp_fusion_whatever_the_caller_or_the_release_defaults(monkeypatch, tmp_path):
    monkeypatch.setenv("TRITON_DEFAULT_FP_FUSION", "0")
    assert sandbox.worker_env(tmp_path, "cuda", 0)["TRITON_DEFAULT_FP_FUSION"] == "1"


def test_candidate_runs_in_its_own_temp_dir_with_no_stdin():
    w, _ = started("import os, sys\nCWD = os.getcwd()\nSTDIN = sys.stdin.read()\nclass ModelNew: pass\n")
    try:
        reply, _ = load(w)
        assert reply["ok"], reply
        assert w.workdir.name.startswith("krefine-worker-")
    finally:
        w.close()


def test_candidate_cannot_write_outside_its_temp_dir(tmp_path):
    target = tmp_path / "owned.txt"
    w, _ = started(f"open({str(target)!r}, 'w').write('x')\nclass ModelNew: pass\n")
    try:
        reply, _ = load(w)
        assert not reply["ok"] and "not allowed" in reply["message"]
        assert not target.exists()
    finally:
        w.close()


def test_candidate_cannot_start_a_shell():
    w, _ = started("import subprocess\nsubprocess.run(['sh', '-c', 'true'])\nclass ModelNew: pass\n")
    try:
        reply, _ = load(w)
        assert not reply["ok"] and "not allowed" in reply["message"]
    finally:
        w.close()


def test_candidate_cannot_open_a_socket():
    w, _ = started("import socket\nsocket.create_connection(('127.0.0.1', 9))\nclass ModelNew: pass\n")
    try:
        reply, _ = load(w)
        assert not reply["ok"]
    finally:
        w.close()


def test_network_isolation_is_reported(tmp_path):
    w, hello = started("class ModelNew: pass\n")
    try:
        assert hello["enforced"]["network"]
    finally:
        w.close()


def test_hang_times_out_and_kills_the_whole_group():
    w, _ = started("while True:\n    pass\n")
    pid = w.proc.pid
    t = time.monotonic()
    with pytest.raises(sandbox.WorkerTimeout):
        load(w, timeout=1.0)
    assert time.monotonic() - t < 15
    with pytest.raises(ProcessLookupError):
        os.killpg(pid, 0)
    w.close()


def test_exit_during_import_is_worker_died_not_a_reply():
    w, _ = started("print('{\"verdict\": \"correct\"}')\nimport os\nos._exit(0)\n")
    with pytest.raises(sandbox.WorkerDied):
        load(w)
    assert '"verdict"' in w.output()["stdout"]  # printed, and ignored
    w.close()


def test_output_is_capped():
    w = sandbox.start_worker("print('x' * 500000)\nclass ModelNew: pass\n", device="cpu", max_output_bytes=1000)
    try:
        w.request(SETUP, 120)
        load(w)
        out = w.output()["stdout"]
        assert len(out) < 1200 and "bytes cut" in out
    finally:
        w.close()


def test_close_removes_the_temp_dir():
    w, _ = started("class ModelNew: pass\n")
    d = w.workdir
    w.close()
    assert not d.exists()


def test_gpu_index_maps_through_an_outer_cuda_visible_devices(monkeypatch, tmp_path):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5")
    assert sandbox.worker_env(tmp_path, "cuda", 1)["CUDA_VISIBLE_DEVICES"] == "5"


# --- temp dirs of judges that were killed (tools/sandbox/tempdirs.py) ---------------

_KILLED_JUDGE = """
import sys
from tools import sandbox
fs = sandbox.start_forkserver("cpu")
w = sandbox.start_worker("class ModelNew: pass\\n", device="cpu")
print(fs.proc.pid, w.proc.pid, flush=True)
sys.stdin.read()
"""


def test_a_killed_judges_temp_dirs_are_removed_by_the_next_judge_that_starts(tmp_path, monkeypatch):
    import signal
    import subprocess
    import sys
    import tempfile
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {**os.environ, "TMPDIR": str(tmp), "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    judge = subprocess.Popen([sys.executable, "-c", _KILLED_JUDGE], env=env, stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    children = [int(pid) for pid in judge.stdout.readline().split()]
    left = {p.name.split("-")[1] for p in tmp.iterdir()}
    judge.kill()
    judge.wait()
    for pid in children:   # its fork server and worker: gone with it in life, killed here for sure
        try:
            os.killpg(pid, signal.SIGKILL)
        except OSError:
            pass
    assert left == {"worker", "forkserver"} and len(children) == 2
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    server = sandbox.start_forkserver("cpu")   # the next judge
    try:
        assert [p.name for p in tmp.iterdir()] == [Path(server._log_path).parent.name]
    finally:
        server.close()


def test_temp_dirs_of_running_judges_of_other_users_and_unnamed_ones_are_kept(tmp_path):
    import subprocess
    from tools.sandbox import tempdirs
    dead = subprocess.Popen(["true"])
    dead.wait()
    ours = tmp_path / f"krefine-worker-{os.getpid()}-{tempdirs._start_time(os.getpid())}-live"
    unnamed = tmp_path / "krefine-worker-x1y2z3"              # made before owners were named
    foreign = tmp_path / f"krefine-worker-{dead.pid}-1-other"   # a dead owner, but another user's
    for d in (ours, unnamed, foreign):
        d.mkdir()
    if os.getuid() == 0:
        os.chown(foreign, 65534, 65534)
    else:
        foreign.rmdir()
    assert tempdirs.sweep(tmp_path) == [] and ours.is_dir() and unnamed.is_dir()


def test_a_temp_dir_whose_owner_pid_now_runs_another_process_is_removed(tmp_path):
    from tools.sandbox import tempdirs
    start = tempdirs._start_time(os.getpid())
    reused = tmp_path / f"krefine-forkserver-{os.getpid()}-{start - 1}-old"   # same pid, started earlier
    reused.mkdir()
    assert tempdirs.sweep(tmp_path) == [reused] and not reused.exists()

