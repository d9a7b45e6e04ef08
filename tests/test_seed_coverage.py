"""benchmarks/seed_coverage.py's --phases on a CPU: where one seed's seconds go."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "seed_coverage.py"


@pytest.mark.slow   # a seed compiled in a child: about 10 s
def test_phases_name_each_step_of_a_seed_with_its_seconds(tmp_path):
    shutil.copy(ROOT / "tests" / "problems" / "relu.py", tmp_path / "relu.py")
    out = tmp_path / "coverage.json"
    done = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path), "--device", "cpu", "--jobs", "1", "--phases",
                           "--out", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(out.read_text())["results"][0]
    # on a CPU nothing of Inductor's module runs, so there is no first run to time
    assert (result["seed"], sorted(result["phases"])) == \
        (True, ["capture_rest_s", "convert_s", "load_s", "trace_to_codegen_s"])
    assert 0 < sum(result["phases"].values()) <= result["seconds"]


def test_phases_refuse_a_capture_block_by_block(tmp_path):
    done = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path), "--phases", "--block-ops", "4"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert (done.returncode, "leave out --block-ops" in done.stderr) == (2, True)
