"""The capture guard: a CUDA-graph capture in this process runs alone among its GPU work.

CUDA refuses some calls while any stream of the process is capturing, whatever thread
makes them ("operation not permitted when stream is capturing"), and the refusal also
invalidates that capture: a device-wide synchronize (the health check, a staging
buffer's free), freeing the allocator's cache, a Triton module unloaded by a garbage
collection, a random draw on the device's default generator (its state is in capture
mode), torch.compile's first call (autotuning waits for the device). Capture mode
"thread_local" (tools/perf/timer.py) only spares other threads the calls CUDA merely
calls unsafe. So one process-wide reader-writer lock:

- `capture()`: exclusive, held by tools/perf/timer.py from a capture's warm-up to its
  first replay (or its recovery from a failed capture);
- `gpu_work()`: shared, held around each piece of the process's GPU work that does not
  already exclude captures (the judge's GpuLock does, for trials and timing): the
  device check, memory release, a session's build and close, the torch.compile baseline.

A capture waits for the shared holds in flight, and new shared holds wait while one is
waiting (captures are short; a steady trickle of health checks must not starve them).
Shared holds are re-entrant per thread, also while a capture waits. The guard is taken
last: a thread holding it never waits for another thread of ours (a join) or for a lock
a capture's thread may hold while it waits for the guard (the GpuLock, the precision
flags' lock of tools/problem.py); take those first. Otherwise the capture would wait for
that hold, the hold for the capture's lock, and neither would end.

Process-wide, not per device: a garbage collection may unload a module of any device.
Does not order captures among themselves across processes (each process has its own
CUDA context, which a capture in another cannot touch).
"""
from __future__ import annotations

import contextlib
import threading
import time


class CaptureGuard:
    """See the module docstring. `waited_s`, `captures`, `max_wait_s`: what captures
    paid for it (the judge service reports them)."""

    def __init__(self):
        self._cond = threading.Condition()
        self._shared = 0               # shared holds in flight, re-entries counted once
        self._capturing: int | None = None   # the thread ident holding it exclusively
        self._capture_waiting = 0
        self._shared_waiting = 0
        self._mine = threading.local()  # this thread's shared depth
        self.captures = 0
        self.waited_s = 0.0
        self.max_wait_s = 0.0

    def _depth(self) -> int:
        return getattr(self._mine, "depth", 0)

    @contextlib.contextmanager
    def gpu_work(self):
        """Shared: no capture of this process runs while the block does."""
        me = threading.get_ident()
        if self._depth() or self._capturing == me:   # re-entry, or the capture's own thread
            self._mine.depth = self._depth() + 1
            try:
                yield
            finally:
                self._mine.depth -= 1
            return
        with self._cond:
            self._shared_waiting += 1
            try:
                self._cond.wait_for(lambda: self._capturing is None and not self._capture_waiting)
            finally:
                self._shared_waiting -= 1
            self._shared += 1
        self._mine.depth = 1
        try:
            yield
        finally:
            self._mine.depth = 0
            with self._cond:
                self._shared -= 1
                self._cond.notify_all()

    @contextlib.contextmanager
    def capture(self):
        """Exclusive: the block is the only GPU work of this process's guarded kind."""
        me = threading.get_ident()
        if self._depth() or self._capturing == me:
            raise RuntimeError("a CUDA graph capture was begun inside GPU work that holds the capture "
                               "guard: it would wait for itself")
        t = time.monotonic()
        with self._cond:
            self._capture_waiting += 1
            try:
                self._cond.wait_for(lambda: self._capturing is None and self._shared == 0)
            finally:
                self._capture_waiting -= 1
            self._capturing = me
            waited = time.monotonic() - t
            self.captures += 1
            self.waited_s += waited
            self.max_wait_s = max(self.max_wait_s, waited)
        try:
            yield
        finally:
            with self._cond:
                self._capturing = None
                self._cond.notify_all()

    # --- for the service's report and for tests -----------------------------------------
    def capturing(self) -> bool:
        """A capture holds the guard now."""
        return self._capturing is not None

    def waiting(self) -> tuple[int, int]:
        """(captures, shared holds) waiting for the guard now."""
        with self._cond:
            return self._capture_waiting, self._shared_waiting

    def stats(self) -> dict:
        with self._cond:
            return {"captures": self.captures, "capture_wait_s": round(self.waited_s, 3),
                    "max_capture_wait_s": round(self.max_wait_s, 3)}


GUARD = CaptureGuard()


def gpu_work():
    """GUARD's shared hold (see the module docstring)."""
    return GUARD.gpu_work()


def capture():
    """GUARD's exclusive hold, for a CUDA-graph capture."""
    return GUARD.capture()
