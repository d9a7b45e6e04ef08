"""The toolchain modules a candidate names, imported before the worker's watch starts
(tools/sandbox/worker.py calls `preimport_toolchain` just before the watch's baseline)."""
from __future__ import annotations

import importlib
import sys

# the toolchain: modules of these packages a candidate imports are imported before the watch starts
_TOOLCHAIN = ("torch", "triton")


def preimport_toolchain(path: str) -> list[str]:
    """Import the torch / Triton modules the candidate's source names (`import torch._inductor...`,
    `from torch._inductor.runtime import triton_helpers`), before the watch's baseline: what
    those trusted modules do when first imported (on cuda, torch's Inductor runtime sets up
    its own hooks) is then part of the baseline, not a change the candidate made. Nothing of
    the candidate runs here; a name that does not import is left for the candidate's own
    import to fail on. Returns the modules imported."""
    import ast
    try:
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read())
    except (OSError, SyntaxError, ValueError):
        return []
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.append(node.module)
            names += [f"{node.module}.{a.name}" for a in node.names if a.name != "*"]
    done = []
    for name in dict.fromkeys(names):
        if name.split(".")[0] not in _TOOLCHAIN or name in sys.modules:
            continue
        try:
            importlib.import_module(name)   # a submodule, or (from X import attr) nothing: ImportError
            done.append(name)
        except Exception:  # noqa: BLE001 - an attribute, not a module; or the candidate's own fault later
            pass
    return done
