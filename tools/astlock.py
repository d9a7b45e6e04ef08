"""One parse at a time: `ast.parse` is made thread-safe on the CPython releases where it is not.

CPython 3.11.0-3.11.7 and 3.12.0-3.12.1 keep the AST constructor's recursion counter in
interpreter-wide state; when the garbage collector lets another thread run in the middle of
one conversion and that thread parses too, either parse can fail with
`SystemError: AST constructor recursion depth mismatch (before=81, after=72)` (python/cpython
gh-106905, fixed by GH-113035 in 3.11.8 and 3.12.2). krefine parses in threads (a bench judges
problems side by side; Triton, torch and `inspect` parse kernel and module sources), so on
those releases `install()` wraps `ast.parse` in one process-wide lock. Every parser we and our
packages use goes through `ast.parse` at call time (none binds `from ast import parse`), so
the lock covers them. On fixed releases it changes nothing.
"""
from __future__ import annotations

import ast
import functools
import sys
import threading

_LOCK = threading.RLock()


def affected(version: tuple = tuple(sys.version_info[:3])) -> bool:
    """True on the CPython releases with the shared AST recursion counter (gh-106905)."""
    if sys.implementation.name != "cpython":
        return False
    return (3, 11, 0) <= version < (3, 11, 8) or (3, 12, 0) <= version < (3, 12, 2)


def install() -> bool:
    """Wrap `ast.parse` in the lock once, where the release needs it; True when wrapped."""
    if getattr(ast.parse, "_krefine_locked", False):
        return True
    if not affected():
        return False
    unlocked = ast.parse

    @functools.wraps(unlocked)
    def parse(*args, **kwargs):
        with _LOCK:
            return unlocked(*args, **kwargs)

    parse._krefine_locked = True
    ast.parse = parse
    return True
