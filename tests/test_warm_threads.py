"""The warm request's compiles on several threads (tools/sandbox/warmpool.py): the mechanics
on CPU with a stand-in for Triton's AsyncCompileMode, the judge's verdicts on a GPU."""
from __future__ import annotations

import contextlib
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace

import pytest

from tools.sandbox import warmpool
from tools.sandbox.watch import Watch

HERE = Path(__file__).parent


class _Watch:
    """Counts the threads started inside own_threads, as the worker's watch exempts them."""
    def __init__(self):
        self.exempted = []

    @contextlib.contextmanager
    def own_threads(self, n):
        before = threading.active_count()
        yield
        self.exempted.append((n, threading.active_count() - before))


class _Mode:
    """AsyncCompileMode's contract: an executor in, every submitted compile waited for on exit."""
    def __init__(self, pool):
        self.pool = pool

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


class _Kernel:
    def __init__(self):
        self.loaded_on = None

    def _init_handles(self):
        self.loaded_on = threading.current_thread().name


def _worker():
    return SimpleNamespace(watch=_Watch(), pending=None)


def _pool_threads():
    return [t for t in threading.enumerate() if t.name.startswith("krefine-compile")]


def test_one_thread_leaves_the_launches_to_load_their_own_kernels():
    w = _worker()
    with warmpool.parallel(w, 1, _Mode) as used:
        assert w.pending is None
    assert used == 1 and w.watch.exempted == []


def test_a_triton_without_async_compile_mode_compiles_in_the_launching_thread(monkeypatch):
    monkeypatch.setattr(warmpool, "async_mode_class", lambda: None)
    w = _worker()
    with warmpool.parallel(w, 8) as used:
        assert w.pending is None
    assert used == 1


def test_every_pool_thread_is_started_inside_the_watchs_exemption():
    w = _worker()
    with warmpool.parallel(w, 4, _Mode):
        assert len(_pool_threads()) == 4
    assert w.watch.exempted == [(4, 4)]


def test_no_pool_thread_outlives_the_request():
    w = _worker()
    with warmpool.parallel(w, 3, _Mode):
        pass
    assert _pool_threads() == [] and w.pending is None


def test_each_warmed_kernel_is_loaded_on_a_pool_thread_before_the_block_ends():
    w = _worker()
    kernels = [_Kernel() for _ in range(5)]
    with warmpool.parallel(w, 2, _Mode):
        w.pending.extend(kernels + [None])
    assert all(k.loaded_on and k.loaded_on.startswith("krefine-compile") for k in kernels)


def test_a_compile_error_raised_on_leaving_the_mode_reaches_the_request_and_the_pool_is_joined():
    class Failing(_Mode):
        def __exit__(self, *exc):
            raise RuntimeError("CompilationError stand-in")
    w = _worker()
    with pytest.raises(RuntimeError, match="stand-in"):
        with warmpool.parallel(w, 2, Failing):
            w.pending.append(_Kernel())
    assert _pool_threads() == [] and w.pending is None


def test_the_watch_counts_thread_starts_outside_the_workers_own():
    watch, started = Watch(), []
    start = watch._starter(lambda *a: started.append(a))
    watch.watching = True
    with watch.own_threads(2):
        start(1), start(2)
        start(3)                    # a third start inside the window is not the worker's
    start(4)
    assert len(started) == 4 and watch.threads == 2 and watch.own_starts == 0


def test_with_this_tritons_async_compile_mode_a_submitted_compile_runs_on_a_pool_thread():
    """Inside `parallel`, Triton's own AsyncCompileMode is the active one and hands a launch's
    compile to the pool; leaving the block finishes it."""
    mode_class = warmpool.async_mode_class()
    if mode_class is None:
        pytest.skip("this Triton has no AsyncCompileMode")
    from triton.runtime import _async_compile
    ran, finished = [], []
    with warmpool.parallel(_worker(), 2):
        mode = _async_compile.active_mode.get()
        args = ("key", lambda: ran.append(threading.current_thread().name) or "kernel", finished.append)
        try:
            mode.submit(*args, lambda fk: None)        # Triton 3.9: a cleanup callback too
        except TypeError:
            mode.submit(*args)                          # Triton 3.6
    assert ran[0].startswith("krefine-compile") and finished == ["kernel"]
    assert _async_compile.active_mode.get() is None


# ---------------------------------------------------------------- on a GPU

def _kernels_src(n: int, broken: int | None = None) -> str:
    """`n` distinct ReLU kernels applied one after another (ReLU is idempotent): a candidate
    for tests/problems/relu.py with `n` kernels to compile; kernel `broken` does not compile."""
    head = "import torch\nimport torch.nn as nn\nimport triton\nimport triton.language as tl\n"
    body = []
    for i in range(n):
        width = "1000" if i == broken else "BLOCK"      # tl.arange needs a power of two
        body.append(f"""
@triton.jit
def relu_{i}(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, {width})
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    tl.store(y_ptr + offs, tl.maximum(x, {float(-i)}) * 0.0 + tl.maximum(x, 0.0), mask=m)
""")
    calls = "".join(f"        y = torch.empty_like(x)\n        relu_{i}[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024)\n"
                    f"        x = y\n" for i in range(n))
    return head + "".join(body) + f"""

class ModelNew(nn.Module):
    def forward(self, x):
        n = x.numel()
{calls}        return x
"""


@pytest.mark.gpu
def test_a_candidate_of_many_kernels_is_compiled_on_threads_and_judged_correct():
    from tools.judge import evaluate
    from tools.judge.precompile import MAX_JOBS, compile_jobs
    from tools.problem import load_problem
    from tools.verdict import Status
    v = evaluate(load_problem(HERE / "problems" / "relu.py"), _kernels_src(12), device="cuda", profile=False)
    assert v.status is Status.CORRECT, v.diagnostics
    assert v.checks["warm"]["compiled"] == 12
    assert v.checks["warm"]["threads"] == compile_jobs(MAX_JOBS)


@pytest.mark.gpu
def test_a_kernel_that_fails_to_compile_on_a_thread_is_a_compile_error_at_its_line():
    from tools.judge import evaluate
    from tools.problem import load_problem
    from tools.verdict import Status
    src = _kernels_src(8, broken=5)
    v = evaluate(load_problem(HERE / "problems" / "relu.py"), src, device="cuda", profile=False)
    assert v.status is Status.COMPILE_ERROR, v.diagnostics
    line = src.splitlines().index("    offs = tl.program_id(0) * BLOCK + tl.arange(0, 1000)") + 1
    assert any(d.kind == "triton_compile" and d.line == line for d in v.diagnostics), v.diagnostics


def test_a_compile_error_raised_on_a_pool_thread_is_mapped_to_its_candidate_line(tmp_path):
    """What the judge reports for a kernel compiled on a warm thread: the frames there hold
    the ASTSource (triton.compile's `src`), not the launch's JITFunction."""
    import importlib.util
    import os
    if os.environ.get("TRITON_INTERPRET") == "1":
        pytest.skip("TRITON_INTERPRET is set in this process")
    triton = pytest.importorskip("triton")
    try:
        from triton.backends.compiler import GPUTarget
        from triton.compiler import ASTSource
    except ImportError:
        pytest.skip("this Triton has no ASTSource / GPUTarget")
    from tools.sandbox.faults import triton_error_line
    path = tmp_path / "cand.py"
    path.write_text(_kernels_src(1, broken=0), encoding="utf-8")
    spec = importlib.util.spec_from_file_location("cand_broken", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    sig = {"x_ptr": "*fp32", "y_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"}
    with ThreadPoolExecutor(1) as pool:
        future = pool.submit(triton.compile, ASTSource(mod.relu_0, sig, {"BLOCK": 1024}),
                             target=GPUTarget("cuda", 90, 32))
        with pytest.raises(Exception) as caught:
            future.result()
    line, text = triton_error_line(caught.value, str(path))
    assert text == "offs = tl.program_id(0) * BLOCK + tl.arange(0, 1000)"
