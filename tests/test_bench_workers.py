"""A bench's GPU workers (agent/bench/workers.py): how many GPUs there are, and what
runs before the first problem is handed out."""
from __future__ import annotations

import sys
import types

import pytest

from agent.bench import suite as bench
from agent.bench import workers


class FakeNvml(types.ModuleType):
    """pynvml with `count` GPUs; `mig`: whether they are split by MIG; `fail`: init raises."""
    class NVMLError(Exception):
        pass

    def __init__(self, count: int, mig: bool = False, fail: bool = False):
        super().__init__("pynvml")
        self.count, self.mig, self.fail, self.shut = count, mig, fail, False

    def nvmlInit(self):
        if self.fail:
            raise self.NVMLError("driver not loaded")

    def nvmlShutdown(self):
        self.shut = True

    def nvmlDeviceGetCount(self):
        return self.count

    def nvmlDeviceGetHandleByIndex(self, i):
        return i

    def nvmlDeviceGetMigMode(self, handle):
        return (1 if self.mig else 0, 0)


@pytest.fixture
def torch_count(monkeypatch):
    import torch
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 5)


def test_the_gpus_are_counted_by_nvml(monkeypatch, torch_count):
    nv = FakeNvml(2)
    monkeypatch.setitem(sys.modules, "pynvml", nv)
    assert workers.gpu_count() == 2 and nv.shut


def test_a_gpu_split_by_mig_is_counted_by_torch(monkeypatch, torch_count):
    monkeypatch.setitem(sys.modules, "pynvml", FakeNvml(2, mig=True))
    assert workers.gpu_count() == 5


def test_nvml_failing_leaves_the_count_to_torch(monkeypatch, torch_count):
    monkeypatch.setitem(sys.modules, "pynvml", FakeNvml(2, fail=True))
    assert workers.gpu_count() == 5


def test_without_cuda_visible_devices_one_worker_per_counted_gpu(monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setattr(workers, "gpu_count", lambda: 3)
    assert bench.visible_gpus("cuda", None) == ["0", "1", "2"]


@pytest.mark.slow
def test_the_workers_are_started_before_first_and_no_problem_runs_before_it_ends(tmp_path):
    """`first` (the bench's seeds) finds the workers started, no problem is loaded while it
    runs (the workers would have had time to: they start in ~2 s here), and every problem
    finds what `first` wrote."""
    import multiprocessing
    import time
    marker = tmp_path / "seeds-ready"
    suite = tmp_path / "suite"
    suite.mkdir()
    for i in range(3):
        (suite / f"{i}_p.py").write_text(
            "import os, pathlib\nclass Model: pass\ndef get_inputs(): return []\ndef get_init_inputs(): return []\n"
            f"pathlib.Path({str(tmp_path)!r}, 'loading{i}').touch()\n"
            f"raise RuntimeError('ready=' + str(os.path.exists({str(marker)!r})))\n")
    jobs = [bench.Job(bench.Setting("default", {"run.device": "cpu"}), path, name, tmp_path / "out" / name)
            for name, path in bench.find_problems(suite, [])]
    children, loaded = [], []

    def first():
        children.append(len(multiprocessing.active_children()))
        deadline = time.monotonic() + 6.0
        while time.monotonic() < deadline and not loaded:
            loaded.extend(tmp_path.glob("loading*"))
            time.sleep(0.1)
        marker.touch()

    errors = bench.run_jobs(jobs, ["7", "9"], None, None, bench.Console(quiet=True), first=first)
    assert children and children[0] >= 2
    assert loaded == []
    assert len(errors) == 3 and all("ready=True" in e for e in errors.values())
