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
