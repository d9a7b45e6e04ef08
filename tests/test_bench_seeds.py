"""agent/bench/seeds.py: a bench's Inductor seed portfolios compiled first, in parallel,
into the seed cache, and each run then finding its seed there."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from agent.bench import suite as bench
from agent.bench.seeds import seed_tasks
from agent.cli import main
from agent.config import load_config
from tools.dialect.portfolio import PortfolioEntry, entries_json
from tools.dialect.seedcache import SeedCache, torch_version
from tools.problem import load_problem

ROOT = Path(__file__).resolve().parents[1]


def _jobs(tmp_path, overrides: dict, names=("1_relu", "2_relu")) -> list[bench.Job]:
    suite = tmp_path / "suite"
    suite.mkdir(exist_ok=True)
    setting = bench.Setting("s", overrides)
    jobs = []
    for n in names:
        shutil.copy(ROOT / "tests" / "problems" / "relu.py", suite / f"{n}.py")   # tiny: seeds compile in seconds
        jobs.append(bench.Job(setting, suite / f"{n}.py", n, tmp_path / "out" / n))
    return jobs


def _load(setting):
    return load_config(None, setting.overrides)


def test_every_problem_without_a_cached_seed_is_a_seed_task(tmp_path):
    jobs = _jobs(tmp_path, {"search.seed_kernel": "inductor", "search.seed_cache": str(tmp_path / "c")})
    tasks, per_gpu = seed_tasks(jobs, _load, "cpu")
    assert [t.name for t in tasks] == ["1_relu", "2_relu"] and per_gpu == 4


def test_a_problem_whose_portfolio_or_reason_is_cached_is_not_compiled_again(tmp_path):
    cache = tmp_path / "c"
    jobs = _jobs(tmp_path, {"search.seed_kernel": "inductor", "search.seed_cache": str(cache)})
    SeedCache(cache).put_portfolio(load_problem(jobs[0].problem), "cpu", torch_version(),
                                   entries_json([PortfolioEntry("default", "SEED")]))
    SeedCache(cache).put_portfolio(load_problem(jobs[1].problem), "cpu", torch_version(), None,
                                   "portfolio: torch.compile took longer than 900 s")
    assert seed_tasks(jobs, _load, "cpu")[0] == []


def test_a_problem_with_a_cached_seed_but_no_portfolio_is_a_seed_task(tmp_path):
    cache = tmp_path / "c"
    jobs = _jobs(tmp_path, {"search.seed_kernel": "inductor", "search.seed_cache": str(cache)}, names=("1_relu",))
    SeedCache(cache).put(load_problem(jobs[0].problem), "cpu", torch_version(), "SEED")
    assert [t.name for t in seed_tasks(jobs, _load, "cpu")[0]] == ["1_relu"]


def test_no_seed_tasks_without_the_inductor_seed_a_cache_or_seed_jobs(tmp_path):
    cache = str(tmp_path / "c")
    for overrides in ({"search.seed_kernel": "none", "search.seed_cache": cache},
                      {"search.seed_kernel": "inductor", "search.seed_cache": ""},
                      {"search.seed_kernel": "inductor", "search.seed_cache": cache, "bench.seed_jobs": 0}):
        assert seed_tasks(_jobs(tmp_path, overrides), _load, "cpu")[0] == [], overrides


@pytest.mark.slow
def test_a_bench_compiles_its_seeds_first_and_each_run_judges_the_cached_one(tmp_path, capsys):
    cache, suite = tmp_path / "cache", tmp_path / "suite"
    _jobs(tmp_path, {})
    rc = main(["bench", str(suite), "--model", "none", "--device", "cpu", "--out", str(tmp_path / "b"),
               "--set", "search.seed_kernel=inductor", "--set", f"search.seed_cache={cache}",
               "--set", "search.sweep_variants=0", "--set", "bench.seed_jobs=2"])
    assert rc == 0
    out = capsys.readouterr().out
    assert "seeds: 2 to compile" in out and "seeds: 2/2" in out
    cached = sorted(p.read_text() for p in cache.glob("*.py"))
    runs = sorted((tmp_path / "b" / "default" / n / "candidates" / "r00-c00.py").read_text()
                  for n in ("1_relu", "2_relu"))
    assert len(cached) == 2 and runs == cached        # one entry per problem file, judged as cached


def test_seeds_only_fills_the_cache_and_judges_nothing(tmp_path, capsys):
    cache, suite = tmp_path / "cache", tmp_path / "suite"
    _jobs(tmp_path, {}, names=("1_relu",))
    rc = main(["bench", str(suite), "--seeds-only", "--device", "cpu", "--out", str(tmp_path / "b"),
               "--set", "search.seed_kernel=inductor", "--set", f"search.seed_cache={cache}"])
    assert (rc, len(list(cache.glob("*.py"))), (tmp_path / "b").exists()) == (0, 1, False)
    assert "1 problems, 0 already cached, 1 compiled now (0 without a seed" in capsys.readouterr().out


def test_seeds_only_without_the_inductor_seed_is_one_line_and_exit_2(tmp_path, capsys):
    _jobs(tmp_path, {}, names=("1_relu",))
    assert main(["bench", str(tmp_path / "suite"), "--seeds-only", "--device", "cpu"]) == 2
    assert 'needs [search] seed_kernel = "inductor"' in capsys.readouterr().err


def test_seed_compiles_at_once_share_the_cpus_for_inductors_compile_workers(monkeypatch):
    from agent.bench import seeds
    monkeypatch.delenv("TORCHINDUCTOR_COMPILE_THREADS", raising=False)
    monkeypatch.setattr(seeds.os, "sched_getaffinity", lambda pid: set(range(64)), raising=False)
    assert seeds.compile_threads(12) == 5 and seeds.compile_threads(1) == 32 and seeds.compile_threads(100) == 1


def test_a_users_torchinductor_compile_threads_is_left_to_the_seed_compiles(monkeypatch):
    from agent.bench import seeds
    monkeypatch.setenv("TORCHINDUCTOR_COMPILE_THREADS", "3")
    assert seeds.compile_threads(12) is None


def test_a_seed_compile_that_raises_unexpectedly_leaves_its_worker_to_the_next_seed(monkeypatch, tmp_path):
    from agent.bench import seeds
    from tools.dialect import portfolio
    seen = []

    def compile_one(problem, device, timeout_s, cache, env=None, module_mode="train", templates_s=0.0):
        seen.append(Path(problem).name)
        if len(seen) == 1:
            raise OSError("[Errno 39] Directory not empty: 'triton'")
        return [PortfolioEntry("default", "code", "")]
    monkeypatch.setattr(portfolio, "portfolio_in_subprocess", compile_one)
    tasks = [seeds.SeedTask(tmp_path / f"{n}.py", n, str(tmp_path / "c"), 5.0) for n in ("a", "b")]
    lines = []
    failed = seeds.prepare_seeds(tasks, [None], 1, "cpu", lines.append)
    assert seen == ["a.py", "b.py"] and list(failed) == ["a"] and "internal error: OSError" in failed["a"]
    assert lines[1].startswith("seeds: 2/2 b: seed")


def test_with_seed_portfolio_false_a_cached_seed_is_enough_and_a_missing_one_is_compiled_alone(tmp_path):
    cache = tmp_path / "c"
    jobs = _jobs(tmp_path, {"search.seed_kernel": "inductor", "search.seed_cache": str(cache),
                            "search.seed_portfolio": False})
    SeedCache(cache).put(load_problem(jobs[0].problem), "cpu", torch_version(), "SEED")
    tasks = seed_tasks(jobs, _load, "cpu")[0]
    assert [(t.name, t.portfolio) for t in tasks] == [("2_relu", False)]


def test_a_seed_task_without_the_portfolio_compiles_the_seed_alone(monkeypatch, tmp_path):
    from agent.bench import seeds
    from tools.dialect import portfolio, seedcache
    called = []
    monkeypatch.setattr(portfolio, "portfolio_in_subprocess", lambda *a, **k: called.append("portfolio"))
    monkeypatch.setattr(seedcache, "seed_in_subprocess", lambda *a, **k: called.append("seed") or "SEED")
    lines = []
    seeds.prepare_seeds([seeds.SeedTask(tmp_path / "a.py", "a", str(tmp_path / "c"), 5.0, "train", False)],
                        [None], 1, "cpu", lines.append)
    assert called == ["seed"] and lines == ["seeds: 1/1 a: seed (0 s)"]


INTERRUPTED = """
import json, os, signal, sys, threading, time
from pathlib import Path
from agent.bench import seeds
from tools.dialect import portfolio
started, ended = [], threading.Event()
def killed_by_the_stop(problem, device, timeout_s, cache, env=None, module_mode="train", templates_s=0.0):
    started.append(Path(problem).name)
    os.kill(os.getpid(), signal.SIGINT)   # as the bench's SIGTERM handler: KeyboardInterrupt in the main thread
    time.sleep(1.0)                       # ... while the stop reaches this child's process group
    ended.set()
    raise ValueError("the compile process was killed by SIGTERM")
portfolio.portfolio_in_subprocess = killed_by_the_stop
tasks = [seeds.SeedTask(Path(sys.argv[1]) / f"{n}.py", n, sys.argv[1], 5.0) for n in ("a", "b")]
lines, interrupted = [], False
try:
    seeds.prepare_seeds(tasks, [None], 1, "cpu", lines.append)
except KeyboardInterrupt:
    interrupted = True
ended.wait(10)
time.sleep(0.5)                           # the line, and a second task if one were started
print(json.dumps({"interrupted": interrupted, "started": started, "lines": lines}))
"""


def test_a_seed_whose_child_ends_with_an_interrupted_bench_is_reported_stopped_not_failed(tmp_path):
    # its own process: the signal this simulates must reach a main thread that imported no torch
    import json
    import subprocess
    import sys
    done = subprocess.run([sys.executable, "-c", INTERRUPTED, str(tmp_path)], capture_output=True, text=True,
                          cwd=Path(__file__).resolve().parents[1], timeout=120)
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["interrupted"] and out["started"] == ["a.py"] and len(out["lines"]) == 1
    assert out["lines"][0].startswith("seeds: 1/2 a: stopped with the bench") and "no seed" not in out["lines"][0]
