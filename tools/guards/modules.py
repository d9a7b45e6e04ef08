"""What a dotted path really names: `os.sys.modules` is `sys.modules`, `torch.os` is `os`.

Modules re-export what they import, so one module is reachable under many spellings
(`os.sys`, `typing.sys`, `torch.os`, `from os import sys as s`). `canonical(path)`
walks the path through the module objects the judge has loaded, attribute by attribute
in each module's own `__dict__` (no `__getattr__`, no imports), and renames each prefix
that is a module to that module's `__name__`. A function or class reached through a
module of another package is also named by its own `__module__` and `__qualname__`
(`io.open` is also `_io.open`). Where the walk cannot go on (a module the judge has not
loaded, a candidate's own package), every later component naming a stdlib module,
torch, triton or numpy starts another reading (`some_pkg.sys._getframe` is also
`sys._getframe`). The guard tables then see every path in its canonical form;
`is_module(path)` says whether the walk ended on a module object.

Imports nothing a candidate names, and reads the same modules in every judge: those of
`module_table.PRELOAD` (stdlib parts, numpy, torch, triton). A process that has imported
torch imports the rest of them once; one that has not (`krefine eval` deciding what the
files alone decide) reads them from the installation's module table instead
(module_table.py), so a candidate is refused there without importing any of them. Not
covered: objects made at run time (`importlib.import_module(name)`, `sys.modules[k]`:
both rejected by themselves), attributes a module only gains when some code runs.
"""
from __future__ import annotations

import importlib
import sys
import threading
from functools import lru_cache

from tools.guards.module_table import MISSING, PRELOAD, ROOTS, Loaded, Module, load_table

_LOCK = threading.Lock()
_LOADED: list[Loaded] = []


def _loaded() -> Loaded:
    """What every walk of this process reads, decided at the first: a process that has
    imported torch imports the rest of PRELOAD too, so the answer does not depend on what
    else it happened to import (torch's lazily imported parts never: tools/judge/warm.py,
    importing them from a judge thread could deadlock); any other reads the module table,
    or imports PRELOAD where there is no table."""
    with _LOCK:
        if not _LOADED:
            table = None if "torch" in sys.modules else load_table()
            if table is None:
                for name in PRELOAD:
                    try:
                        importlib.import_module(name)
                    except Exception:  # noqa: BLE001 - an absent library only leaves its paths as spelled
                        pass
            _LOADED.append(Loaded(table))
        return _LOADED[0]


def canonical(path: str) -> tuple[str, ...]:
    """Every name `path` stands for, the walked one first (it replaces the spelling: `torch.os`
    is no torch path); `(path,)` when nothing is known about it."""
    return _walk(path)[0]


def is_module(path: str) -> bool:
    """Does `path` name a module object the judge has loaded (`os.sys`, `tl`'s triton.language)?"""
    return _walk(path)[1]


@lru_cache(maxsize=8192)
def _walk(path: str) -> tuple[tuple[str, ...], bool]:
    """(canonical(path), is_module(path))."""
    parts = path.split(".")
    if not parts[0] or parts[0] not in ROOTS:   # relative imports, candidate packages
        return _with_fallback((path,), parts, 1), False
    loaded = _loaded()
    obj = loaded.entry(parts[0])
    if not isinstance(obj, Module):
        return _with_fallback((path,), parts, 1), False
    name, i = obj.name or parts[0], 1
    while i < len(parts):
        nxt = obj.attr(parts[i], name)
        if nxt is MISSING:
            nxt = loaded.entry(f"{name}.{parts[i]}")
        if nxt is MISSING:   # not loaded here, or made at run time: read the rest as spelled
            return _with_fallback((".".join([name, *parts[i:]]),), parts, i), False
        if isinstance(nxt, Module):
            obj, name, i = nxt, nxt.name or f"{name}.{parts[i]}", i + 1
            continue
        walked = ".".join([name, *parts[i:]])   # nxt: a function's or class's home, or None
        return ((walked, ".".join([nxt, *parts[i + 1:]])) if nxt else (walked,)), False
    return (name,), True


def _dedupe(*paths: str) -> tuple[str, ...]:
    return tuple(dict.fromkeys(paths))


def _with_fallback(paths: tuple[str, ...], parts: list[str], start: int) -> tuple[str, ...]:
    """`paths`, then the path from the first later component that names a known top-level
    module (walked itself): `pkg.sys._getframe` is also `sys._getframe`."""
    for j in range(max(start, 1), len(parts)):
        if parts[j] in ROOTS:   # a top-level name a walk may start from
            return _dedupe(*paths, *canonical(".".join(parts[j:])))
    return paths
