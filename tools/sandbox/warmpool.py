"""The warm request's Triton compiles spread over threads (cuda): a whole network's kernels at once.

A level-3 network's forward launches a hundred or more distinct kernels. Compiled one after
another at their first launch they cost the judge 50-200 ms each: Triton's passes, ptxas, and
on Triton 3.6 a C launcher built by gcc for each signature. ResNet101's 566 kernels took 39 s
of one worker's warm request on an H200 host. That time is spent per candidate, since each
candidate has a Triton cache of its own (tools/sandbox/env.py).

Triton's AsyncCompileMode (triton/runtime/_async_compile.py, Triton 3.6 and later) hands each
compile to an executor: a launch made under it specialises the kernel in the calling thread,
exactly as a launch would, and submits only `triton.compile` (the same source, target and
options; a second launch of one key shares the first's compile). Leaving the mode waits for
every compile and raises the first compile error; a launch of a key after that finds the
compiled kernel. The compiler releases the GIL in its passes and runs ptxas as a process, so
threads overlap: 16 sm_90 compiles took 3.4 s one after another and 2.0 s on two threads of
a 2-core machine; on an H200 host (16 cores a GPU) level 3's candidates compiled at 63 ms a
kernel on 8 threads, ResNet101's 566 in 8-9 s (BENCHMARKS.md, "KernelBench level 3 on two
H200s"). Loading each kernel and building its launcher (`_init_handles`, gcc on 3.6) then
runs on the same threads.

The threads are the worker's own: started before the forward runs (Watch.own_threads: those
starts are not the candidate's) and joined before the request answers, so none outlives it.
Where this Triton has no AsyncCompileMode, or `threads` is 1, the kernels compile in the
launching thread as before. This decides nothing: what compiles, and its errors, are the same.
"""
from __future__ import annotations

import contextlib
import threading
from concurrent.futures import ThreadPoolExecutor


def async_mode_class():
    """Triton's AsyncCompileMode, or None where this Triton lacks it."""
    try:
        from triton.runtime._async_compile import AsyncCompileMode
    except ImportError:
        return None
    return AsyncCompileMode


@contextlib.contextmanager
def parallel(worker, threads: int, mode_class=None):
    """Around a compile-only forward: launches compile on `threads` threads, and the kernels
    they return are loaded there too, before this block ends. `worker.pending` is the list
    tools/sandbox/launches.py appends each warmed kernel to while this is active (None
    otherwise: it then loads each kernel as it compiles). Yields the thread count used."""
    mode_class = mode_class or async_mode_class()
    if threads <= 1 or mode_class is None:
        yield 1
        return
    pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="krefine-compile")
    try:
        _start_all(worker, pool, threads)
        worker.pending = []
        with mode_class(pool):
            yield threads
        # every compile is done (or the first error was raised): load each kernel, build its launcher
        for f in [pool.submit(_load, k) for k in worker.pending]:
            f.result()
    finally:
        worker.pending = None
        pool.shutdown(wait=True, cancel_futures=True)


def _start_all(worker, pool: ThreadPoolExecutor, threads: int) -> None:
    """Start every thread of `pool` now, under the watch's exemption for the worker's own
    starts: the executor starts one per submit while none is idle, up to `threads`."""
    gate = threading.Barrier(threads + 1)
    with worker.watch.own_threads(threads):
        started = [pool.submit(gate.wait) for _ in range(threads)]
        gate.wait()
    for f in started:
        f.result()


def _load(kernel) -> None:
    """Load one warmed kernel and build its launcher: a FutureKernel's compiled kernel."""
    if kernel is None:
        return
    if type(kernel).__name__ == "FutureKernel":
        kernel = kernel.result()
    init = getattr(kernel, "_init_handles", None)
    if callable(init):
        init()
