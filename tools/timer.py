"""The one timer, built like triton.testing.do_bench: L2 flush before every call,
CUDA events, fixed counts; plus nvtx ranges and the host-clock helper.

The same code times the candidate (in its worker) and the eager / torch.compile
baselines (in the judge), so the three figures differ only by what was timed. A
device-wide synchronize sits inside the timed region, after the call, so work the
callable leaves on other streams is counted (KernelBench's issue: side-stream work
timed as ~0.001 ms). Does not decide anything about the figures.
"""
from __future__ import annotations

import contextlib
import time
from typing import Callable

_FLUSH_BYTES = 256 << 20   # > L2 of every GPU we know (H200: 60 MiB, B200: 126 MiB)


@contextlib.contextmanager
def nvtx_range(name: str):
    """A push/pop NVTX range (ncu --nvtx-include selects these). The nvtx package when
    installed, else torch's own binding; a no-op without CUDA."""
    push = pop = None
    try:
        import nvtx
        push, pop = (lambda: nvtx.push_range(message=name)), nvtx.pop_range
    except ImportError:
        try:
            import torch
            if torch.cuda.is_available():
                push, pop = (lambda: torch.cuda.nvtx.range_push(name)), torch.cuda.nvtx.range_pop
        except ImportError:
            pass
    if push is not None:
        push()
    try:
        yield
    finally:
        if pop is not None:
            pop()


def time_cuda(fn: Callable[[], object], *, warmup: int, iters: int, device=None,
              name: str = "krefine.timed") -> list[float]:
    """Milliseconds of `iters` calls of fn, each after an L2 flush, one event pair each."""
    import torch
    device = torch.device(device or "cuda")
    flush = torch.empty(_FLUSH_BYTES, dtype=torch.int8, device=device)
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize(device)
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    with nvtx_range(name):
        for i in range(iters):
            flush.zero_()
            starts[i].record()
            fn()
            # device-wide: side-stream work must finish inside the timed region
            torch.cuda.synchronize(device)
            ends[i].record()
        torch.cuda.synchronize(device)
    return [s.elapsed_time(e) for s, e in zip(starts, ends)]


def time_host(fn: Callable[[], object], *, iters: int, device=None) -> float:
    """Wall-clock ms per call of `iters` back-to-back calls, ended by a device sync."""
    import torch
    torch.cuda.synchronize(device)
    t0 = time.perf_counter()
    for _ in range(iters):
        fn()
    torch.cuda.synchronize(device)
    return (time.perf_counter() - t0) * 1e3 / iters
