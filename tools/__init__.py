"""krefine's evaluator: problem loading, the sandboxed worker, compile/test/time, guards.

Nothing under tools/ imports langgraph: this package must run on a GPU box that has
only torch and triton (plus the standard library, pynvml and nvtx when present).
"""
