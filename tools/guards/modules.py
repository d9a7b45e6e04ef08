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

Imports nothing a candidate names: only `_PRELOAD` (stdlib parts, numpy, torch,
triton), once per process, so the walk sees the same modules in every judge. Not
covered: objects made at run time (`importlib.import_module(name)`, `sys.modules[k]`:
both rejected by themselves), attributes a module only gains when some code runs.
"""
from __future__ import annotations

import importlib
import sys
import threading
import types
from functools import lru_cache

# top-level names the walk may start from, and that the fallback reading looks for
_ROOTS = frozenset(sys.stdlib_module_names) | {"torch", "triton", "numpy"}

# imported once before the first walk, so the answer does not depend on what else the
# process happened to import; torch's lazily imported parts are never imported here
# (tools/judge/warm.py: importing them from a judge thread could deadlock)
_PRELOAD = ("os", "sys", "threading", "logging", "typing", "numpy", "torch", "triton", "triton.language")

_LOCK = threading.Lock()
_LOADED: list[bool] = []


def _preload() -> None:
    with _LOCK:
        if _LOADED:
            return
        for name in _PRELOAD:
            try:
                importlib.import_module(name)
            except Exception:  # noqa: BLE001 - an absent library only leaves its paths as spelled
                pass
        _LOADED.append(True)


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
    if not parts[0] or parts[0] not in _ROOTS:   # relative imports, candidate packages
        return _with_fallback((path,), parts, 1), False
    _preload()
    obj = sys.modules.get(parts[0])
    if not isinstance(obj, types.ModuleType):
        return _with_fallback((path,), parts, 1), False
    name, i = _module_name(obj, parts[0]), 1
    while i < len(parts):
        nxt = vars(obj).get(parts[i], _MISSING)
        if nxt is _MISSING:
            nxt = sys.modules.get(f"{name}.{parts[i]}", _MISSING)
        if nxt is _MISSING:   # not loaded here, or made at run time: read the rest as spelled
            return _with_fallback((".".join([name, *parts[i:]]),), parts, i), False
        if isinstance(nxt, types.ModuleType):
            obj, name, i = nxt, _module_name(nxt, f"{name}.{parts[i]}"), i + 1
            continue
        walked = ".".join([name, *parts[i:]])
        home = _home(nxt, name)
        return ((walked, ".".join([home, *parts[i + 1:]])) if home else (walked,)), False
    return (name,), True


_MISSING = object()


def _module_name(module: types.ModuleType, spelled: str) -> str:
    name = vars(module).get("__name__")
    return name if isinstance(name, str) and name else spelled


def _home(obj: object, via: str) -> str | None:
    """`module.qualname` of a function or class that lives in another package than the
    module it was reached through; None otherwise."""
    if not isinstance(obj, (types.FunctionType, types.BuiltinFunctionType, type)):
        return None
    try:
        module, qual = obj.__module__, obj.__qualname__
    except Exception:  # noqa: BLE001 - an object whose metadata raises keeps its spelled path
        return None
    if not (isinstance(module, str) and isinstance(qual, str)) or "<" in qual:
        return None
    root = module.split(".")[0]
    if root == via.split(".")[0] or root.lstrip("_") not in _ROOTS and root not in _ROOTS:
        return None
    return f"{module}.{qual}"


def _dedupe(*paths: str) -> tuple[str, ...]:
    return tuple(dict.fromkeys(paths))


def _with_fallback(paths: tuple[str, ...], parts: list[str], start: int) -> tuple[str, ...]:
    """`paths`, then the path from the first later component that names a known top-level
    module (walked itself): `pkg.sys._getframe` is also `sys._getframe`."""
    for j in range(max(start, 1), len(parts)):
        if parts[j] in _ROOTS:
            return _dedupe(*paths, *canonical(".".join(parts[j:])))
    return paths
