"""The seed cache keeps the captures a seed came from (tools/dialect/seedcache.py): a
converter fix re-converts them without compiling again, and a fix to the cache's own
plumbing keeps every seed."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tools.dialect import seedcache
from tools.dialect.inductor_capture import read_capture
from tools.problem import load_problem

ROOT = Path(__file__).resolve().parents[1]
PROBLEM = ROOT / "tests" / "dialect" / "problems" / "triu_matmul.py"
TEMPLATE = ROOT / "tests" / "fixtures" / "inductor" / "gpu_triu_matmul_template.py"


@pytest.fixture
def compiles(monkeypatch):
    """Every capture() call (torch.compile) recorded; each returns the H100 template capture."""
    calls = []

    def fake(problem, device, templates=False, module_mode="train"):
        calls.append(templates)
        if not templates:
            raise ValueError("the Inductor output has no Triton kernel")
        return read_capture(TEMPLATE.read_text(encoding="utf-8"))
    monkeypatch.setattr(seedcache, "capture", fake)
    return calls


def test_a_seed_is_converted_again_from_kept_captures_without_compiling(tmp_path, compiles):
    problem = load_problem(PROBLEM)
    first = seedcache.cached_seed(problem, "cuda", tmp_path)
    for seed in tmp_path.glob("*.py"):
        seed.unlink()                        # as a converter change does: no seed under the new key
    assert (seedcache.cached_seed(problem, "cuda", tmp_path), compiles) == (first, [False, True])


def test_a_capture_that_failed_for_good_is_kept_as_its_reason(tmp_path, compiles):
    problem = load_problem(PROBLEM)
    seedcache.cached_seed(problem, "cuda", tmp_path)
    assert [p.read_text().strip() for p in tmp_path.glob("*.default.capture-err")] == \
        ["the Inductor output has no Triton kernel"]


def _keys(here: Path) -> tuple[str, str]:
    seedcache._digest.cache_clear()
    try:
        return (seedcache.seed_cache_key("src", "cuda", "2.11"), seedcache.capture_cache_key("src", "cuda", "2.11"))
    finally:
        seedcache._digest.cache_clear()


@pytest.fixture
def dialect_copy(tmp_path, monkeypatch):
    here = tmp_path / "dialect"
    shutil.copytree(ROOT / "tools" / "dialect", here, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "tools" / "kernels", tmp_path / "kernels", ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(seedcache, "_HERE", here)
    return here


def test_a_change_to_a_kernel_family_a_seed_copies_makes_new_seeds_from_the_same_captures(dialect_copy):
    before = _keys(dialect_copy)
    with (dialect_copy.parent / "kernels" / "conv.py").open("a") as f:
        f.write("# a fix\n")
    after = _keys(dialect_copy)
    assert (after[0] != before[0], after[1] == before[1]) == (True, True)


def test_a_converter_change_makes_new_seeds_from_the_same_captures(dialect_copy):
    before = _keys(dialect_copy)
    with (dialect_copy / "kernelbook.py").open("a") as f:
        f.write("# a fix\n")
    after = _keys(dialect_copy)
    assert (after[0] != before[0], after[1] == before[1]) == (True, True)


def test_a_capture_change_makes_new_captures_and_seeds(dialect_copy):
    before = _keys(dialect_copy)
    with (dialect_copy / "inductor_capture.py").open("a") as f:
        f.write("# a fix\n")
    after = _keys(dialect_copy)
    assert (after[0] != before[0], after[1] != before[1]) == (True, True)


def test_a_change_to_the_template_compiles_conv_rewrite_makes_new_captures(dialect_copy):
    before = _keys(dialect_copy)
    with (dialect_copy / "conv_rewrite.py").open("a") as f:
        f.write("# a fix\n")
    assert _keys(dialect_copy)[1] != before[1]


def test_a_change_to_the_cache_itself_keeps_every_seed(dialect_copy):
    before = _keys(dialect_copy)
    with (dialect_copy / "seedcache.py").open("a") as f:
        f.write("# a fix\n")
    assert _keys(dialect_copy) == before


def test_a_seed_process_asked_again_after_a_kept_timeout_compiles_again(tmp_path, compiles):
    # seed_in_subprocess starts the process only when its limit is longer than the kept one's
    problem = load_problem(PROBLEM)
    import torch
    seedcache.SeedCache(tmp_path).put(problem, "cuda", torch.__version__, None,
                                      "seed: torch.compile took longer than 200 s")
    assert "triton_tem_fused_mm_0[" in seedcache.cached_seed(problem, "cuda", tmp_path)


def test_a_seed_childs_temp_files_go_with_its_own_temp_dir(tmp_path, monkeypatch):
    seen = {}

    def child(command, problem_path, device, module_mode, cache_dir, out, timeout_s, env, deadline=None):
        seen.update(env)
        (Path(env["TMPDIR"]) / "tmpleft0ver").mkdir()   # what torch.compile leaves behind
        out.write_text("SEED")
    monkeypatch.setattr(seedcache, "run_dialect", child)
    assert seedcache.cached_or_child("seed", PROBLEM, "cpu", 60, None, None, "train") == "SEED"
    assert not Path(seen["TMPDIR"]).exists()
    assert seen["TORCHINDUCTOR_CACHE_DIR"].endswith("torchinductor_" + seedcache._user())


def test_a_portfolio_keeps_how_long_it_took_to_compile(tmp_path):
    problem = load_problem(ROOT / "tests" / "problems" / "relu.py")
    cache = seedcache.SeedCache(tmp_path)
    cache.put_portfolio(problem, "cpu", seedcache.torch_version(), "[]\n", seconds=12.5)
    assert seedcache.compile_seconds(problem.path, "cpu", tmp_path) == 12.5


def test_a_seed_child_killed_by_a_signal_is_named_so_not_by_a_warning_it_printed_first():
    import os
    import signal
    import subprocess
    import sys
    from tools.dialect.seedcache import child_reason
    proc = subprocess.run([sys.executable, "-c", "import os, signal, sys; print('UserWarning: x', file=sys.stderr);"
                           " print('  torch._C._set_onednn_allow_tf32(_allow_tf32)', file=sys.stderr); sys.stderr.flush();"
                           " os.kill(os.getpid(), signal.SIGKILL)"], capture_output=True, text=True)
    reason = child_reason(proc.returncode, proc.stderr)
    assert reason.startswith("the compile process was killed by SIGKILL") and "out-of-memory" in reason
    assert os.name != "posix" or proc.returncode == -signal.SIGKILL


def test_a_seed_childs_own_fault_line_is_its_reason_even_with_warnings_after_it():
    from tools.dialect.seedcache import child_reason
    stderr = "kernelbook: no kernel: extern_kernels.convolution\n/x.py:3: UserWarning: late\n  warnings.warn(\n"
    assert child_reason(1, stderr) == "no kernel: extern_kernels.convolution"


def test_a_seed_compiled_alone_keeps_how_long_it_took(tmp_path, monkeypatch):
    import time
    from tools.dialect import seedcache
    def slow_seed(problem, device, capture_fn=None):
        time.sleep(0.2)
        return "SEED"
    monkeypatch.setattr(seedcache, "seed_candidate", slow_seed)
    problem = seedcache.problem_file(ROOT / "tests" / "problems" / "relu.py")
    assert seedcache.cached_seed(problem, "cpu", tmp_path / "c") == "SEED"
    took = seedcache.compile_seconds(problem.path, "cpu", tmp_path / "c", command="seed")
    assert took is not None and 0.2 <= took < 30


def test_every_post_grad_pass_a_capture_runs_keys_the_captures():
    """Each module RecurrencePass imports (its passes over Inductor's post-grad graph) is capture code:
    a change to one makes new captures (CAPTURE_CODE) and misses Inductor's graph cache (its uuid)."""
    import re
    source = (ROOT / "tools" / "dialect" / "recurrence.py").read_text()
    passes = set(re.findall(r"from tools\.dialect\.(\w+) import \w+_pass", source))
    hashed = set(re.findall(r'"(\w+)\.py"', source[source.index("def _code_hash"):source.index("class RecurrencePass")]))
    assert {"cat_chain", "batch_stats", "counters", "gemm_epilogue"} <= passes
    assert {f"{p}.py" for p in passes} <= set(seedcache.CAPTURE_CODE) and passes <= hashed
