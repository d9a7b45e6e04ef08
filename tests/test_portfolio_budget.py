"""A seed portfolio whose budget runs out while a later configuration compiles keeps the seed
it has (tools/dialect/portfolio.py `partial_portfolio`): the configuration is dropped, not
the seed."""
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tools.dialect import read_capture
from tools.dialect import portfolio as pf
from tools.dialect import seedcache
from tools.problem import load_problem

ROOT = Path(__file__).resolve().parents[1]
CAPTURE = ROOT / "tests" / "fixtures" / "inductor" / "gpu_linear_relu.py"
PROBLEM = ROOT / "tests" / "dialect" / "problems" / "linear_relu.py"
DEFAULT = pf.PortfolioEntry("default", "class ModelNew: pass\n")


def test_a_finished_default_is_kept_and_the_configuration_still_compiling_is_named_dropped():
    entries = pf.partial_portfolio(pf.partial_json([DEFAULT], ["templates"]), 300)
    assert [(e.label, e.code is not None) for e in entries] == [("default", True), ("templates", False)] and \
        entries[1].reason.startswith("dropped: the seed portfolio ran past its 300 s budget")


def test_a_partial_portfolio_without_a_seed_keeps_nothing():
    assert pf.partial_portfolio(pf.partial_json([pf.PortfolioEntry("default", None, "x")], ["templates"]), 300) is None


def test_the_portfolio_tells_its_progress_before_it_compiles_the_templates():
    heard = []

    def capture_fn(problem, device, templates):
        if templates:
            raise ValueError("templates: not compiled in this test")
        return read_capture(CAPTURE.read_text(encoding="utf-8"))
    pf.seed_portfolio(load_problem(PROBLEM), "cuda", capture_fn=capture_fn,
                      on_progress=lambda done, pending: heard.append(([e.label for e in done], pending)))
    assert heard == [(["default+gemm", "default+gemm+tf32x3"], ["templates"])]


def _past_budget_after_the_default(monkeypatch, calls: list | None = None) -> None:
    """The portfolio child, faked: its default compile done (the partial file), then past its budget."""
    def child(command, problem_path, device, module_mode, cache_dir, out, timeout_s, env, deadline=None):
        if calls is not None:
            calls.append(timeout_s)
        out.mkdir()
        (out / pf.PARTIAL_FILE).write_text(pf.partial_json([DEFAULT], ["templates"]), encoding="utf-8")
        raise subprocess.TimeoutExpired("python -m tools.dialect portfolio", timeout_s)
    monkeypatch.setattr(seedcache, "run_dialect", child)


def test_a_child_past_its_budget_after_the_default_leaves_its_seed_to_the_caller(monkeypatch, tmp_path):
    _past_budget_after_the_default(monkeypatch)
    entries = pf.portfolio_in_subprocess(PROBLEM, "cuda", 5, cache_dir=tmp_path / "cache")
    assert entries[0].code == DEFAULT.code and entries[1].reason.startswith("dropped")


def test_a_kept_default_is_not_cached_as_the_whole_portfolio(monkeypatch, tmp_path):
    calls = []
    _past_budget_after_the_default(monkeypatch, calls)
    pf.portfolio_in_subprocess(PROBLEM, "cuda", 5, cache_dir=tmp_path / "cache")
    pf.portfolio_in_subprocess(PROBLEM, "cuda", 50, cache_dir=tmp_path / "cache")
    assert calls == [5, 50]


def test_a_child_past_its_budget_before_any_seed_is_still_no_seed(monkeypatch, tmp_path):
    def child(command, problem_path, device, module_mode, cache_dir, out, timeout_s, env, deadline=None):
        raise subprocess.TimeoutExpired("python -m tools.dialect portfolio", timeout_s)
    monkeypatch.setattr(seedcache, "run_dialect", child)
    with pytest.raises(ValueError, match="took longer than 5 s"):
        pf.portfolio_in_subprocess(PROBLEM, "cuda", 5, cache_dir=tmp_path / "cache")


def test_a_portfolio_cut_short_is_read_back_under_the_same_budget_without_a_second_compile(monkeypatch, tmp_path):
    calls = []
    _past_budget_after_the_default(monkeypatch, calls)
    first = pf.portfolio_in_subprocess(PROBLEM, "cuda", 5, cache_dir=tmp_path / "cache")
    again = pf.portfolio_in_subprocess(PROBLEM, "cuda", 5, cache_dir=tmp_path / "cache")
    assert calls == [5] and again == first and again[1].reason.startswith("dropped")


def test_a_portfolio_cut_short_records_its_budget_as_its_compile_seconds(monkeypatch, tmp_path):
    _past_budget_after_the_default(monkeypatch)
    pf.portfolio_in_subprocess(PROBLEM, "cuda", 7, cache_dir=tmp_path / "cache")
    assert seedcache.compile_seconds(PROBLEM, "cuda", tmp_path / "cache") == 7.0


# ---------------------------------------------------------------- [search] templates_timeout_s

def _default_then_a_long_templates_compile(monkeypatch, calls: list | None = None) -> None:
    """The portfolio child, faked: its default compile done (the partial file), then a
    templates compile that would take 60 s, in a real process the deadline can end."""
    def child(command, problem_path, device, module_mode, cache_dir, out, timeout_s, env, deadline=None):
        if calls is not None:
            calls.append(timeout_s)
        out.mkdir()
        (out / pf.PARTIAL_FILE).write_text(pf.partial_json([DEFAULT], ["templates"]), encoding="utf-8")
        seedcache.run_child([sys.executable, "-c", "import time; time.sleep(60)"], dict(os.environ), timeout_s,
                            None if deadline is None else (lambda: deadline(out)))
    monkeypatch.setattr(seedcache, "run_dialect", child)


def test_the_templates_budget_ends_the_templates_compile_and_keeps_the_default(monkeypatch, tmp_path):
    _default_then_a_long_templates_compile(monkeypatch)
    t0 = time.monotonic()
    entries = pf.portfolio_in_subprocess(PROBLEM, "cuda", 50, cache_dir=tmp_path / "cache", templates_s=1)
    assert time.monotonic() - t0 < 10
    assert entries[0].code == DEFAULT.code and \
        entries[1].reason.startswith("dropped: the templates compile ran past its own 1 s budget")


def test_a_portfolio_cut_by_the_templates_budget_records_the_seconds_it_ran_not_the_whole_budget(monkeypatch, tmp_path):
    _default_then_a_long_templates_compile(monkeypatch)
    pf.portfolio_in_subprocess(PROBLEM, "cuda", 50, cache_dir=tmp_path / "cache", templates_s=1)
    assert 1.0 <= seedcache.compile_seconds(PROBLEM, "cuda", tmp_path / "cache") < 10


def test_a_portfolio_cut_by_the_templates_budget_is_compiled_again_under_a_longer_one(monkeypatch, tmp_path):
    calls = []
    _default_then_a_long_templates_compile(monkeypatch, calls)
    for templates_s in (1, 1, 0.5, 2):
        pf.portfolio_in_subprocess(PROBLEM, "cuda", 50, cache_dir=tmp_path / "cache", templates_s=templates_s)
    assert len(calls) == 2      # 1 compiled; 1 and 0.5 read back; 2 compiled again


def test_a_portfolio_cut_by_the_templates_budget_is_compiled_again_without_one(tmp_path):
    cache = seedcache.SeedCache(tmp_path)
    problem = seedcache.problem_file(PROBLEM)
    cache.put_partial_portfolio(problem, "cuda", "2.13", "[]", 150, templates_s=30)
    assert cache.get_portfolio(problem, "cuda", "2.13", 150, templates_s=30) == "[]"
    with pytest.raises(KeyError):
        cache.get_portfolio(problem, "cuda", "2.13", 150)


def test_a_portfolio_cut_by_the_whole_budget_is_read_back_under_any_templates_budget(tmp_path):
    cache = seedcache.SeedCache(tmp_path)
    problem = seedcache.problem_file(PROBLEM)
    cache.put_partial_portfolio(problem, "cuda", "2.13", "[]", 150)
    assert cache.get_portfolio(problem, "cuda", "2.13", 150, templates_s=30) == "[]"
    with pytest.raises(KeyError):
        cache.get_portfolio(problem, "cuda", "2.13", 200, templates_s=30)


def test_a_child_is_killed_at_the_time_its_deadline_gives():
    t0 = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        seedcache.run_child([sys.executable, "-c", "import time; time.sleep(60)"], dict(os.environ), 50,
                            lambda: t0 + 1)
    assert time.monotonic() - t0 < 10


def test_a_child_that_ends_in_time_gives_its_status_and_stderr():
    code, err = seedcache.run_child([sys.executable, "-c", "import sys; sys.exit('why: no seed')"],
                                    dict(os.environ), 30, lambda: None)
    assert code == 1 and err.strip() == "why: no seed"
