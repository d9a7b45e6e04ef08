"""The judge room: one Verdict per candidate, computed where candidate code never runs.

session.py is the session (Judge: one problem on one device, shared by many
candidates; `evaluate`, a session of one candidate); pool.py keeps every host's
Judges (SessionCache: built once per problem, settings and GPU, shared, closed when no
longer wanted; JudgePool, the in-process host); gpulock.py is the GPU hold. pipeline.py
runs a candidate's steps (`judge_in`, `profile_in`): static.py (guards), reference.py
(the problem's own Model), compile_phase.py, trials.py (with numerics.py and
mismatch.py comparing outputs), time_phase.py and profiling.py, all writing into an Evaluation
(record.py), which ends as a Verdict with feedback.py's text. service.py is the judge
service (the session cache behind a Unix socket, warm between `krefine eval`
invocations); client.py is its client (find, start, ask, stop). warm.py imports torch's
lazy modules once per judge process, before its threads run. Whether a fault of the
problem's own code is the file's is decided below the judge, by tools/blame.py (with
tools/recheck.py, the fresh process), since tools/problem.py asks it too.

This file only re-exports, lazily; modules under tools/ import the concrete submodules.
"""
from tools.lazy import reexport

_EXPORTS = {
    "GpuLock": "tools.judge.gpulock",
    "Judge": "tools.judge.session",
    "JudgePool": "tools.judge.pool",
    "SessionCache": "tools.judge.pool",
    "SessionKey": "tools.judge.pool",
    "default_device": "tools.judge.reference",
    "evaluate": "tools.judge.session",
    "judge_in": "tools.judge.pipeline",
    "profile_in": "tools.judge.pipeline",
}
__all__ = sorted(_EXPORTS)
__getattr__ = reexport(__name__, _EXPORTS, globals())
