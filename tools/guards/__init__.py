"""Static guards: refuse a candidate whose source shows a cheat, before any of it runs.

Covers what the candidate's AST shows: PyTorch doing the work in the forward path
(also behind getattr/eval disguises), tensor data copied to the host there, try/except
fallbacks, use of the reference `Model`, monkeypatching anything imported or not the
candidate's own (setattr through helpers included), switching off the judge's
profilers and dispatch modes, threads, processes, streams, network, file writes outside
the temp dir, non-Triton kernel toolkits, a file with no Triton kernel at all, and two
flag-only hints (reduced precision, output caching). Every dotted path is read in its
canonical form, through the modules the judge has loaded (`os.sys.modules` is
`sys.modules`: modules.py; where torch is not imported, as module_table.py's table has
them). Each guard is a plain function in STATIC_GUARDS (suite.py), never looked up by
name; one module per family: torch_ops.py, host.py, tampering.py,
own_work.py, escapes.py, flags.py. They read a Source (source.py, built with names.py,
modules.py, regions.py and own_objects.py).

Not covered: what only shows when the code runs (whether a Triton kernel was
launched, GPU time share, in-place input mutation, caching without a visible key):
tools/judge/ and tools/sandbox/worker.py check those. Static reading of Python can be
evaded by a determined author; the aim is the tricks models do produce, and to make
every disguise (dynamic lookups, eval, frame walking) a reason to reject by itself.
Source that does not parse gets no findings: the compile step reports it.

This file only re-exports; modules under tools/ import the concrete submodules.
"""
from tools.guards.source import Finding, Source, parse_source
from tools.guards.suite import STATIC_GUARDS, run_static_guards

__all__ = ["STATIC_GUARDS", "Finding", "Source", "parse_source", "run_static_guards"]
