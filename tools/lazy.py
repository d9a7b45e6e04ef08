"""Lazy re-exports for a package's __init__.py (PEP 562): importing the package stays
cheap, and a name is imported from its module on first use (the `krefine eval` client
imports a few submodules of tools.judge and tools.perf, never a whole room)."""
from __future__ import annotations

import importlib


def reexport(package: str, exports: dict[str, str], namespace: dict):
    """The package's module-level __getattr__ for `exports` ({name: module})."""
    def __getattr__(name: str):
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value
    return __getattr__
