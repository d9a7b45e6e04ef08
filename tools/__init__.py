"""krefine's evaluator: problem loading, the sandboxed worker, compile/test/time, guards.

Rooms: judge/ (the session and the steps that decide a Verdict), sandbox/ (the worker
where candidate code runs, its fork server, the channel to it), guards/ (static
guards, one module per family), perf/ (timer, speedup, profiling, roofline, GPU
profiles), dialect/ (KernelBook's dialect and the Inductor seed). At this level only
what every room and the agent share: errors, settings, verdict, problem, jsonio.

Nothing under tools/ imports langgraph: this package must run on a GPU box that has
only torch and triton (plus the standard library, pynvml and nvtx when present).
"""

import warnings as _warnings

from tools import astlock as _astlock

_astlock.install()  # before any thread parses: python/cpython gh-106905 on 3.11.0-3.11.7

# Inductor's Triton helpers warn "Could not find an active CPU backend. Generated kernels will
# not be executable!" on a machine without a GPU; krefine runs those kernels in Triton's
# interpreter there (tools/dialect/runtime.py), so the line only misleads.
_warnings.filterwarnings("ignore", message="Could not find an active CPU backend")
