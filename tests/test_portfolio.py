"""The seed portfolio (tools/dialect/portfolio.py): every Inductor configuration's seed of
a problem, today's seed first, cached beside it, and `python -m tools.dialect portfolio`.

Compiles are faked with the recorded captures of tests/fixtures/inductor/ (the
gpu_triu_matmul_* pair was recorded on an H100: the default compile calls cuBLAS, the
template compile is pure Triton with an exact-fp32 `tl.dot`).
"""
from __future__ import annotations

import ast
import dataclasses
import json
import subprocess
from pathlib import Path

import pytest

from tools.dialect import kernelbook, portfolio, seedcache
from tools.dialect.__main__ import main
from tools.dialect.inductor_capture import read_capture
from tools.dialect.portfolio import (SAME_AS_DEFAULT, PortfolioEntry, cached_portfolio, entries_json, no_portfolio,
                                     portfolio_in_subprocess, seed_portfolio)
from tools.dialect.seedcache import SeedCache
from tools.precision import dot_precisions
from tools.problem import load_problem

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures" / "inductor"
PROBLEMS = ROOT / "tests" / "dialect" / "problems"
TRIU, SOFTMAX = PROBLEMS / "triu_matmul.py", PROBLEMS / "long_softmax.py"


def _capture(name: str):
    return read_capture((FIXTURES / f"{name}.py").read_text(encoding="utf-8"))


def _compiles(default, with_templates, calls: list | None = None):
    """A fake capture(): each compile's fixture name, a Capture, or a ValueError it raises;
    `calls` records the `templates` of each compile."""
    def fake(problem, device, templates=False, module_mode="train"):
        if calls is not None:
            calls.append(templates)
        got = with_templates if templates else default
        if isinstance(got, Exception):
            raise got
        return _capture(got) if isinstance(got, str) else got
    return fake


def _labels(entries: list[PortfolioEntry]) -> list[str]:
    return [e.label for e in entries]


def test_todays_seed_comes_first_then_the_other_compile_then_the_tf32x3_variants():
    fake = _compiles("gpu_triu_matmul_extern", "gpu_triu_matmul_template")
    entries = seed_portfolio(load_problem(TRIU), "cuda", fake)
    # the default compile's library matmul goes to krefine's GEMM family: "+gemm"
    assert _labels(entries) == ["default+gemm", "templates", "default+gemm+tf32x3", "templates+tf32x3"]
    assert entries[0].code == kernelbook.seed_candidate(load_problem(TRIU), "cuda", fake)


def test_a_failing_configuration_keeps_its_reason_and_stops_no_other():
    fake = _compiles(ValueError("torch.compile failed: InductorError: boom"), "gpu_triu_matmul_template")
    entries = seed_portfolio(load_problem(TRIU), "cuda", fake)
    assert [(e.label, e.code is not None, e.reason) for e in entries] == [
        ("templates", True, ""), ("default", False, "torch.compile failed: InductorError: boom"),
        ("templates+tf32x3", True, "")]


def test_a_tf32x3_variant_exists_only_for_a_seed_with_exact_fp32_dots():
    entries = seed_portfolio(load_problem(SOFTMAX), "cuda", _compiles("gpu_long_softmax", "gpu_long_softmax"))
    assert "tl.dot(" not in entries[0].code and _labels(entries) == ["default", "templates"]


def test_a_tf32x3_variant_differs_from_its_seed_only_in_the_dots_precision_keywords():
    entries = seed_portfolio(load_problem(TRIU), "cuda", _compiles("gpu_triu_matmul_extern", "gpu_triu_matmul_template"))
    seed, variant = entries[1], entries[3]      # the templates compile and its variant
    a, b = ast.parse(seed.code), ast.parse(variant.code)
    for tree in (a, b):
        for call in ast.walk(tree):
            if isinstance(call, ast.Call) and ast.unparse(call.func) == "tl.dot":
                call.keywords = [k for k in call.keywords if k.arg not in ("allow_tf32", "input_precision")]
    assert ast.dump(a) == ast.dump(b)
    assert (dot_precisions(ast.parse(seed.code)), dot_precisions(ast.parse(variant.code))) == \
        ({"ieee": 1}, {"tf32x3": 1})


def test_a_variant_differing_in_precision_keywords_alone_is_not_read_by_the_guards_again(monkeypatch):
    """The seed was accepted by the guards; its tf32x3 variant changes dots' precision keywords only,
    which no guard rejects: on a 1.3 MB seed each guard pass took 15-30 s."""
    seed = seed_portfolio(load_problem(TRIU), "cuda", _compiles("gpu_triu_matmul_extern", "gpu_triu_matmul_template"))[0]
    read = []
    monkeypatch.setattr(portfolio, "guard_rejection", lambda code, *a, **k: read.append(code))
    variant = portfolio._precision_variant(seed)
    assert variant.code is not None and variant.code != seed.code and read == []


def test_a_variant_differing_in_more_than_precision_is_read_by_the_guards():
    seed = seed_portfolio(load_problem(TRIU), "cuda", _compiles("gpu_triu_matmul_extern", "gpu_triu_matmul_template"))[0]
    other = seed.code.replace("precision='ieee'", "precision='tf32x3'") + "\nimport socket\n"
    assert "network" in portfolio._guarded(seed, other)


def test_a_precision_value_no_variant_writes_is_read_by_the_guards(monkeypatch):
    seed = seed_portfolio(load_problem(TRIU), "cuda", _compiles("gpu_triu_matmul_extern", "gpu_triu_matmul_template"))[0]
    read = []
    monkeypatch.setattr(portfolio, "guard_rejection", lambda code, *a, **k: read.append(code))
    portfolio._guarded(seed, seed.code.replace("precision='ieee'", "precision='bf16'"))
    assert len(read) == 1


def test_the_variants_of_the_portfolio_kept_while_templates_compile_are_made_once(monkeypatch):
    portfolio._variants.cache_clear()
    made = []
    real = portfolio._precision_variant
    monkeypatch.setattr(portfolio, "_precision_variant", lambda e: made.append(e.label) or real(e))
    seen = []
    seed_portfolio(load_problem(TRIU), "cuda", _compiles("gpu_triu_matmul_extern", "gpu_triu_matmul_template"),
                   on_progress=lambda entries, pending: seen.append(len(entries)))
    assert seen == [2] and made == ["default+gemm", "templates"]


def test_templates_are_not_compiled_when_the_default_seed_calls_no_library():
    calls = []
    entries = seed_portfolio(load_problem(SOFTMAX), "cuda", _compiles("gpu_long_softmax", "gpu_long_softmax", calls))
    assert calls == [False] and entries[1] == PortfolioEntry("templates", None, SAME_AS_DEFAULT)


def test_on_cpu_the_portfolio_never_compiles_templates():
    calls = []
    entries = seed_portfolio(load_problem(PROBLEMS / "relu_odd.py"), "cpu", _compiles("cpu_relu_odd", None, calls))
    assert calls == [False] and _labels(entries) == ["default"]


def test_a_code_identical_to_an_earlier_entrys_is_left_out():
    # a default compile with a library call whose templates compile writes the very same kernels
    template = _capture("gpu_triu_matmul_template")
    default = dataclasses.replace(template, code=template.code + "\n# extern_kernels.mm(arg0_1, arg1_1, out=buf0)\n")
    calls = []
    entries = seed_portfolio(load_problem(TRIU), "cuda", _compiles(default, template, calls))
    assert calls == [False, True] and _labels(entries) == ["default", "default+tf32x3"]


@pytest.fixture
def compiles(monkeypatch):
    """Every compile through the seed cache recorded; the H100 pair of triu_matmul."""
    calls = []
    monkeypatch.setattr(seedcache, "capture", _compiles("gpu_triu_matmul_extern", "gpu_triu_matmul_template", calls))
    return calls


def test_a_cached_portfolio_is_read_back_without_compiling_or_converting(tmp_path, compiles, monkeypatch):
    first = cached_portfolio(load_problem(TRIU), "cuda", tmp_path)
    monkeypatch.setattr(portfolio, "seed_portfolio", lambda *a, **k: pytest.fail("made again"))
    assert (cached_portfolio(load_problem(TRIU), "cuda", tmp_path), compiles) == (first, [False, True])


def test_the_portfolios_first_entry_is_kept_as_the_seed(tmp_path, compiles):
    problem = load_problem(TRIU)
    entries = cached_portfolio(problem, "cuda", tmp_path)
    assert seedcache.cached_seed(problem, "cuda", tmp_path) == entries[0].code


def test_a_portfolio_with_a_failure_that_may_not_repeat_is_not_cached(tmp_path, monkeypatch):
    oom = ValueError("torch.compile failed: CUDA out of memory")
    monkeypatch.setattr(seedcache, "capture", _compiles("gpu_triu_matmul_extern", oom))
    cached_portfolio(load_problem(TRIU), "cuda", tmp_path)
    assert list(tmp_path.glob("*.portfolio.*")) == []


def test_a_cached_portfolio_is_read_without_starting_a_process(tmp_path, monkeypatch):
    problem = load_problem(TRIU)
    entries = [PortfolioEntry("default", "SEED"), PortfolioEntry("templates", None, SAME_AS_DEFAULT)]
    SeedCache(tmp_path).put_portfolio(problem, "cpu", seedcache.torch_version(), entries_json(entries))
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: pytest.fail("a process was started"))
    assert portfolio_in_subprocess(problem.path, "cpu", 60, tmp_path) == entries


def test_a_portfolio_without_code_is_one_value_error_naming_every_reason(tmp_path):
    problem = load_problem(TRIU)
    entries = [PortfolioEntry("default", None, "no Triton kernel"), PortfolioEntry("templates", None, "NoValidChoices")]
    SeedCache(tmp_path).put_portfolio(problem, "cuda", seedcache.torch_version(), entries_json(entries))
    with pytest.raises(ValueError, match="^default: no Triton kernel; templates: NoValidChoices$"):
        portfolio_in_subprocess(problem.path, "cuda", 60, tmp_path)


def test_configurations_that_failed_alike_give_their_reason_once():
    entries = [PortfolioEntry("default", None, "draws random numbers"), PortfolioEntry("templates", None, "other"),
               PortfolioEntry("templates+tf32x3", None, "draws random numbers")]
    assert no_portfolio(entries) == "default, templates+tf32x3: draws random numbers; templates: other"


def test_the_cli_writes_portfolio_json(tmp_path, monkeypatch):
    monkeypatch.setattr(portfolio, "capture", _compiles("gpu_triu_matmul_extern", "gpu_triu_matmul_template"))
    assert main(["portfolio", str(TRIU), "--device", "cuda", "--out", str(tmp_path / "out")]) == 0
    written = json.loads((tmp_path / "out" / "portfolio.json").read_text())
    assert [(sorted(d), d["label"], d["code"] is None) for d in written] == [
        (["code", "label", "reason"], "default+gemm", False), (["code", "label", "reason"], "templates", False),
        (["code", "label", "reason"], "default+gemm+tf32x3", False),
        (["code", "label", "reason"], "templates+tf32x3", False)]


def test_a_bad_problem_path_is_one_line_and_exit_2(tmp_path, capsys):
    assert main(["portfolio", str(tmp_path / "missing.py"), "--device", "cpu", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("kernelbook: ") and err.count("\n") == 1


def test_a_change_to_the_portfolio_code_makes_new_portfolios_and_keeps_every_seed(tmp_path, monkeypatch):
    import shutil
    here = tmp_path / "dialect"
    shutil.copytree(ROOT / "tools" / "dialect", here, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "tools" / "precision.py", tmp_path / "precision.py")
    shutil.copytree(ROOT / "tools" / "kernels", tmp_path / "kernels", ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(seedcache, "_HERE", here)

    def keys():
        seedcache._digest.cache_clear()
        return seedcache.seed_cache_key("src", "cuda", "2.11"), seedcache.portfolio_cache_key("src", "cuda", "2.11")
    before = keys()
    with (here / "portfolio.py").open("a") as f:
        f.write("# a fix\n")
    after = keys()
    seedcache._digest.cache_clear()
    assert (after[0] == before[0], after[1] != before[1]) == (True, True)
