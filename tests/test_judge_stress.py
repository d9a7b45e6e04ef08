"""benchmarks/judge_stress.py, small: several clients of one judge service, several
problems at once, honest and capture-hostile candidates mixed; every verdict under load
is the verdict the same candidate got alone, and none is exit 3 (issue 49). The full
run (8 clients, 200 verdicts, on a GPU) is the benchmark's; these are its analogues."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from run_fixtures import REPO


def _stress(tmp_path, *args: str) -> dict:
    out = tmp_path / "stress.json"
    r = subprocess.run([sys.executable, str(REPO / "benchmarks" / "judge_stress.py"), *args, "--out", str(out)],
                       cwd=REPO, capture_output=True, text=True, timeout=900)
    assert out.exists(), r.stdout[-3000:] + r.stderr[-3000:]
    doc = json.loads(out.read_text())
    assert r.returncode == 0, r.stdout[-3000:]
    return doc["summary"]


@pytest.mark.slow
def test_on_cpu_three_clients_of_one_service_get_every_verdict_as_alone(tmp_path):
    summary = _stress(tmp_path, "--device", "cpu", "--clients", "3", "--verdicts", "6", "--problems", "3",
                      "--kinds", "honest,equal_sync,raising")
    assert (summary["verdicts"], summary["differ_from_alone"], summary["exit_3"]) == (6, 0, 0)
    assert len(summary["service_pids"]) == 1   # one service judged them all


@pytest.mark.gpu
def test_on_the_gpu_three_clients_of_one_service_get_every_verdict_as_alone(tmp_path):
    summary = _stress(tmp_path, "--device", "cuda", "--clients", "3", "--verdicts", "12", "--problems", "3",
                      "--kinds", "honest,equal_sync,wild_store")
    assert (summary["verdicts"], summary["differ_from_alone"], summary["exit_3"]) == (12, 0, 0)
    assert len(summary["service_pids"]) == 1
