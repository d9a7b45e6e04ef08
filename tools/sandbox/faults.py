"""Where a candidate's exception points: its line in the candidate file, and that line.

Covers the innermost traceback frame inside the candidate (following the chain of
causes), the `def` line Triton numbers a kernel's lines from, a CompilationError's
kernel-relative line mapped to the file, and `short` for capping long texts. The
worker's error replies (tools/sandbox/worker.py) and its sm_90 compiles
(tools/sandbox/launches.py) use them. Reads the candidate's file; judges nothing.
"""
from __future__ import annotations

import os
import sys


def short(s: str, n: int) -> str:
    return s if len(s) <= n else s[: n // 2] + "\n...\n" + s[-n // 2:]


def candidate_line(e: BaseException, cand_path: str) -> tuple[int | None, str | None]:
    """Innermost traceback frame inside the candidate file (not in a helper that sets
    `__tracebackhide__`, tools/dialect/portable.py's), following the chain of causes (the
    interpreter wraps a kernel's error in its own InterpreterError)."""
    line, seen = None, set()
    target = os.path.realpath(cand_path or "")
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        found = None
        if isinstance(e, SyntaxError) and e.filename and os.path.realpath(e.filename) == target:
            found = e.lineno
        tb = e.__traceback__
        while tb is not None:
            if cand_path and os.path.realpath(tb.tb_frame.f_code.co_filename) == target \
                    and "__tracebackhide__" not in tb.tb_frame.f_code.co_varnames:
                found = tb.tb_lineno   # a helper that hides itself reports at its caller
            tb = tb.tb_next
        line = found or line
        e = e.__cause__ or e.__context__
    return line, source_line(cand_path, line)


def source_line(path: str, line: int | None) -> str | None:
    if not line or not path:
        return None
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
        return lines[line - 1].strip() if 0 < line <= len(lines) else None
    except OSError:
        return None


def def_line(py_fn) -> int | None:
    """Line of `def` in the file: Triton numbers a kernel's lines from its def, after
    the decorators, while inspect starts at the first decorator."""
    import inspect
    try:
        lines, start = inspect.getsourcelines(py_fn)
    except (OSError, TypeError):
        return None
    for i, text in enumerate(lines):
        if text.lstrip().startswith("def "):
            return start + i
    return None


def triton_error_line(e, cand_path: str):
    """Map a CompilationError's function-relative line to a line of the candidate file."""
    rel = getattr(getattr(e, "node", None), "lineno", None)
    tb, fn_line = e.__traceback__, None
    while tb is not None:
        local = tb.tb_frame.f_locals
        # the launch's JITFunction (`fn`), or the ASTSource a compile on another thread was
        # given (`src` in triton.compile, `self` in its make_ir: tools/sandbox/warmpool.py)
        objs = [local.get("fn")] + [getattr(local.get(n), "fn", None) for n in ("src", "self")
                                    if type(local.get(n)).__name__ == "ASTSource"]
        for obj in objs:
            py_fn = getattr(obj, "fn", None)
            if callable(py_fn) and getattr(py_fn, "__code__", None) is not None:
                fn_line = def_line(py_fn) or fn_line
        tb = tb.tb_next
    if rel is None or fn_line is None:
        return None
    line = fn_line + rel - 1
    return line, source_line(cand_path, line)


def audit_where() -> str:
    """Where an audited event came from, for its tamper note: the Python frame that raised
    it (" (from torch/_foo/bar.py:12)"); with KREFINE_WATCH_WHERE=1, twelve frames."""
    frames, f = [], sys._getframe(2)     # 0: here, 1: Watch._audit (tools/sandbox/watch.py), 2: the code that raised it
    while f is not None and len(frames) < 12:
        frames.append(f"{'/'.join(f.f_code.co_filename.rsplit('/', 3)[-3:])}:{f.f_lineno}")
        f = f.f_back
    if not frames:
        return ""
    if os.environ.get("KREFINE_WATCH_WHERE") == "1":
        return " [at " + " < ".join(frames) + "]"
    return f" (from {frames[0]})"
