"""The GPU hold: compile phases share the GPU, trials, timing and profiling hold it alone.

The judge's one concurrency primitive between candidates. One lock per device for the
whole process (`gpu_lock`), so judges of different problems on one GPU (krefine bench,
the judge service, a Ray judge actor) never time beside each other, and never have more
than `[eval] parallel_compile` candidates compiling on it at once. A CUDA-graph capture
is kept apart from the process's GPU work outside these holds (a new session's device
check, the torch.compile baseline, memory released) by tools/perf/capture_guard.py.
"""
from __future__ import annotations

import contextlib
import threading


class GpuLock:
    """Shared holds (compile phases, at most `limit` at once) or one exclusive hold
    (trials, timing, profiling). Writers are preferred: a waiting exclusive hold stops
    new shared ones."""

    def __init__(self):
        self._cond = threading.Condition()
        self._shared = 0
        self._exclusive = False
        self._waiting = 0

    @contextlib.contextmanager
    def shared(self, limit: int | None = None):
        """`limit`: shared holds at once, this one included (None: no bound)."""
        cap = max(1, limit) if limit is not None else None
        with self._cond:
            self._cond.wait_for(lambda: not self._exclusive and not self._waiting
                                and (cap is None or self._shared < cap))
            self._shared += 1
        try:
            yield
        finally:
            with self._cond:
                self._shared -= 1
                self._cond.notify_all()

    @contextlib.contextmanager
    def exclusive(self):
        with self._cond:
            self._waiting += 1
            self._cond.wait_for(lambda: not self._exclusive and self._shared == 0)
            self._waiting -= 1
            self._exclusive = True
        try:
            yield
        finally:
            with self._cond:
                self._exclusive = False
                self._cond.notify_all()


_GPU_LOCKS: dict[str, GpuLock] = {}
_GPU_LOCKS_LOCK = threading.Lock()


def gpu_lock(dev: str) -> GpuLock:
    """The process's one lock per device: judges of different problems on one GPU
    (krefine bench runs several in one process) never time beside each other either."""
    with _GPU_LOCKS_LOCK:
        return _GPU_LOCKS.setdefault(dev, GpuLock())
