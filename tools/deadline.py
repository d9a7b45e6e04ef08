"""A time limit on the problem's own code where it runs in krefine's process.

The problem file is trusted code that the judge runs in its own process (tools/problem.py
loads it; tools/judge/reference.py builds Model and runs its forward). A forward that never
returns (a `while` loop whose condition never turns, a `time.sleep` of a day) would hang
`krefine eval`, `run` and the judge service with no word. `Deadline(seconds, path, what)`
ends such a call as a BadInput naming the file, what was running and the line of the
file it was at:

- in the main thread by SIGALRM, whose handler raises: it ends a Python loop and a
  sleep or a blocking read alike;
- in any other thread (the judge service's requests, a bench's judges) by an exception
  set asynchronously on that thread (PyThreadState_SetAsyncExc), which Python raises at
  the next bytecode: it ends a Python loop, not a C call that blocks for ever.

Not covered: a C call that never returns outside the main thread (a lock acquired twice
in C); a problem that catches BaseException around its loop.
"""
from __future__ import annotations

import ctypes
import signal
import sys
import threading

from tools.errors import BadInput


class Overdue(BaseException):
    """Raised in the thread running the problem's code when its time is up. A BaseException,
    so the problem's own `except Exception` and krefine's fault handlers let it through."""


class Deadline:
    """`with Deadline(seconds, path, what):` runs the body; past `seconds` (0: no limit) the
    problem's code is interrupted and BadInput(path, "<what> did not return within N s ...")
    is raised. Nested deadlines: only the outermost one arms a timer."""

    _armed = threading.local()

    def __init__(self, seconds: float, path, what: str):
        self.seconds, self.path, self.what = float(seconds), path, what
        self._timer = self._old = None
        self._signal = False  # armed by SIGALRM (the main thread)
        self._owner = False   # this one armed the thread's timer (an inner one, nested, does not)
        self._lock = threading.Lock()
        self._fired = False
        self._line = ""

    def __enter__(self):
        if self.seconds <= 0 or getattr(self._armed, "on", False):
            return self
        self._armed.on = self._owner = True
        if threading.current_thread() is threading.main_thread() and hasattr(signal, "setitimer"):
            self._old, self._signal = signal.signal(signal.SIGALRM, self._alarm), True
            signal.setitimer(signal.ITIMER_REAL, self.seconds)
        else:
            self._tid = threading.get_ident()
            self._timer = threading.Timer(self.seconds, self._interrupt)
            self._timer.daemon = True
            self._timer.start()
        return self

    def _alarm(self, signum, frame):
        self._fired, self._line = True, self._where(frame)
        raise Overdue

    def _interrupt(self):
        with self._lock:
            if self._timer is None:   # the body ended meanwhile
                return
            self._fired = True
            frame = sys._current_frames().get(self._tid)
            self._line = self._where(frame)
            ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(self._tid), ctypes.py_object(Overdue))

    def _where(self, frame) -> str:
        """The innermost line of the problem file on `frame`'s stack, in words."""
        name = str(self.path)
        while frame is not None:
            if frame.f_code.co_filename == name:
                return f" (it was at line {frame.f_lineno}, in {frame.f_code.co_name})"
            frame = frame.f_back
        return ""

    def __exit__(self, kind, value, tb):
        if not self._owner:   # an outer deadline's Overdue is the outer one's to say
            return False
        try:
            self._disarm()
        except Overdue:   # raised just as the body ended, before the timer was disarmed
            kind = Overdue
            self._disarm()
        if kind is Overdue:
            raise BadInput(self.path, f"{self.what} did not return within {self.seconds:g} s{self._line}; "
                                      "a problem's own code must finish") from None
        return False

    def _disarm(self) -> None:
        """Idempotent: a second call after an Overdue raised inside the first finishes it."""
        try:
            if self._signal:
                signal.setitimer(signal.ITIMER_REAL, 0)
                signal.signal(signal.SIGALRM, self._old if self._old is not None else signal.SIG_DFL)
                self._signal = False
            elif self._timer is not None:
                with self._lock:
                    self._timer.cancel()
                    self._timer = None
                    if self._fired:   # set and not raised yet: withdrawn (the body ended in time for it)
                        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(self._tid), None)
        finally:
            if self._owner and not self._signal and self._timer is None:
                self._armed.on = self._owner = False
