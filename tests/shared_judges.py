"""One judge session per (problem, device, settings) for the whole test run.

A judge session costs seconds to start on a CPU (the reference's outputs, the fork
server, the seeds); a candidate judged in a warm one costs about a second. Tests that
only read a verdict share sessions through `verdict_of`, as `krefine run` judges every
candidate of a problem in one session: a case that crashes, hangs or tampers must leave
the session able to judge the next one, which is itself a property these tests then
check on every case after it. A test about how a session starts, ends or fails keeps a
session of its own (`tools.judge.evaluate` or `Judge(...)`).

Each pytest process (an xdist worker too) has its own sessions; the conftest closes
them when the process's tests are done. Nothing here is product code.
"""
from __future__ import annotations

import threading
from pathlib import Path

_SESSIONS: dict = {}
_LOCK = threading.Lock()


def verdict_of(problem, src: str, *, device: str = "cpu", settings=None,
               candidate_name: str = "candidate.py", profile: bool = False):
    """What `tools.judge.evaluate(problem, src, ...)` answers, judged in the session this
    test run keeps for (problem, device, settings)."""
    from tools.judge import Judge
    from tools.judge.static import static_verdict
    from tools.settings import EvalSettings
    settings = settings if settings is not None else EvalSettings()
    # as evaluate(): a static reject or a syntax error needs no session
    quick = static_verdict(src, candidate_name, settings, device, 0)
    if quick is not None:
        return quick
    key = (str(Path(problem.path).resolve()), problem.source, device, settings)
    with _LOCK:
        judge = _SESSIONS.get(key)
        if judge is None or judge.closed:
            judge = _SESSIONS[key] = Judge(problem, device=device, settings=settings)
    return judge.judge(src, candidate_name=candidate_name, profile=profile)


def close_all() -> None:
    with _LOCK:
        judges = list(_SESSIONS.values())
        _SESSIONS.clear()
    for judge in judges:
        judge.close()
