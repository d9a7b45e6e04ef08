"""The modules a judge has loaded, as tools/guards/modules.py's walk reads them, without
importing torch, triton or numpy into a process that has not: `krefine eval` refuses a
statically refused candidate without them (they cost more than the whole refusal).

A module table is a fresh interpreter's modules after `PRELOAD` (stdlib parts, numpy,
torch, triton): every module object it holds (in sys.modules or as some module's
attribute), each with its `__name__` and, per attribute name, what the walk reads of the
value: another module (its number in the table), the other name of a function or class
(`home`: `io.open` is also `_io.open`), or nothing more. It is written once per installation by
this file run as a script in a subprocess of the first process that wants it (that
process imports none of it itself), to ~/.cache/krefine/, under a key of the Python and
of the directories numpy, torch and triton are installed in (installing or upgrading a
package changes their mtimes: a table is never read for another installation).

`Loaded` is what the walk sees: this process's modules, and with a table the table's
besides, a module in both read as one (a table's attribute first, then this process's):
a process that imported what the table holds sees the same.

Stdlib only, and the script imports nothing else before `PRELOAD`: the table is what
they load. Not covered: what a module gains only when later code runs (a lazy submodule
imported by a judge's own work: the table is a fresh import, as a CLI's preload was),
and environment variables that change what torch imports.
"""
from __future__ import annotations

import hashlib
import importlib
import importlib.util
import marshal
import os
import sys
import types
from pathlib import Path

# imported before a table is read off the interpreter, and by a process that reads
# paths through its own modules instead (modules.py)
PRELOAD = ("os", "sys", "threading", "logging", "typing", "numpy", "torch", "triton", "triton.language")
FORMAT = 2
CACHE_DIR = Path.home() / ".cache" / "krefine"
BUILD_TIMEOUT_S = 300.0   # one fresh import of torch and triton, with room to spare

MISSING = object()

# top-level names a walk may start from, and whose functions and classes keep their own name
ROOTS = frozenset(sys.stdlib_module_names) | {"torch", "triton", "numpy"}


def origin(value: object) -> tuple[str, str] | None:
    """A function's or class's (__module__, __qualname__), as the walk names what it reaches."""
    if not isinstance(value, (types.FunctionType, types.BuiltinFunctionType, type)):
        return None
    try:
        module, qual = value.__module__, value.__qualname__
    except Exception:  # noqa: BLE001 - an object whose metadata raises keeps its spelled path
        return None
    return (module, qual) if isinstance(module, str) and isinstance(qual, str) else None


def home(found: tuple[str, str] | None, via: str) -> str | None:
    """`module.qualname` of a function or class (`found`: its origin) that lives in
    another package than the module `via` it was reached through; None otherwise."""
    if found is None:
        return None
    module, qual = found
    if "<" in qual:
        return None
    root = module.split(".")[0]
    if root == via.split(".")[0] or root.lstrip("_") not in ROOTS and root not in ROOTS:
        return None
    return f"{module}.{qual}"


def module_name(module: types.ModuleType) -> str | None:
    name = vars(module).get("__name__")
    return name if isinstance(name, str) and name else None


class Table:
    """A table as read from its file. Module i: `names[i]`, and `attrs[i]` = (its other
    attribute names, newline-joined, read only when a walk comes by: most modules it
    never visits; {attribute: value}) where a value is a module's number, a function's or
    class's home (a str) or origin (a tuple: module i has no name to reach it by), or
    None. `sys_modules`: {key: the same values, origins for non-modules}."""

    def __init__(self, names: list, attrs: list, sys_modules: dict):
        self.names, self.attrs, self.sys_modules = names, attrs, sys_modules
        self.number = {n: i for i, n in reversed(list(enumerate(names))) if n}
        self._plain: dict[int, frozenset[str]] = {}

    def attr(self, i: int, part: str):
        value = self.attrs[i][1].get(part, MISSING)
        if value is MISSING:
            plain = self._plain.get(i)
            if plain is None:
                joined = self.attrs[i][0]
                plain = self._plain[i] = frozenset(joined.split("\n") if joined else ())
            value = None if part in plain else MISSING
        return value


class Module:
    """One module as a judge has it: this process's object, the table's entry, or both."""
    __slots__ = ("loaded", "real", "index", "name")

    def __init__(self, loaded: Loaded, real: types.ModuleType | None, index: int | None):
        self.loaded, self.real, self.index = loaded, real, index
        self.name = loaded.table.names[index] if index is not None else module_name(real)

    def attr(self, part: str, via: str):
        """`vars(module).get(part)` as the walk reads it, reached as `via`: a Module, the
        home of a function or class (a str), None (another value) or MISSING."""
        if self.index is not None:
            value = self.loaded.table.attr(self.index, part)
            if value is not MISSING:
                return self.loaded.of_table(value, via)
        if self.real is not None:
            value = vars(self.real).get(part, MISSING)
            if value is not MISSING:
                return self.loaded.of_real(value, via)
        return MISSING


class Loaded:
    """The modules a judge has loaded: this process's, and the table's (None: none)."""

    def __init__(self, table: Table | None):
        self.table = table

    def entry(self, key: str):
        """`sys.modules.get(key)` as Module.attr reads a value."""
        via = key.rpartition(".")[0]
        if self.table is not None:
            value = self.table.sys_modules.get(key, MISSING)
            if value is not MISSING:
                return self.of_table(value, via)
        value = sys.modules.get(key, MISSING)
        return value if value is MISSING else self.of_real(value, via)

    def of_real(self, value: object, via: str):
        if not isinstance(value, types.ModuleType):
            return home(origin(value), via)
        name = module_name(value)
        return Module(self, value, self.table.number.get(name) if self.table is not None and name else None)

    def of_table(self, value, via: str):
        if isinstance(value, tuple):
            return home(value, via)
        if not isinstance(value, int):
            return value
        name = self.table.names[value]
        real = sys.modules.get(name) if name else None
        return Module(self, real if isinstance(real, types.ModuleType) and module_name(real) == name else None, value)


def load_table() -> Table | None:
    """This installation's table, written first (in a subprocess) where there is none or
    it cannot be read; None where none can be written."""
    path = _table_path()
    if path is None:
        return None
    table = _read(path)
    if table is None:
        import subprocess
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            subprocess.run([sys.executable, "-P", __file__, str(path)],   # -P: nothing of tools/guards on its path
                           stdin=subprocess.DEVNULL,                       # it reads nothing
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,   # torch's warnings are not ours
                           timeout=BUILD_TIMEOUT_S, check=False)
        except (OSError, subprocess.SubprocessError):
            return None
        table = _read(path)
    return table


def _read(path: Path) -> Table | None:
    try:
        fmt, names, attrs, sys_modules = marshal.loads(path.read_bytes())
    except (OSError, EOFError, ValueError, TypeError):
        return None
    return Table(names, attrs, sys_modules) if fmt == FORMAT else None


def _table_path() -> Path | None:
    """Where this installation's table is, or None where its key cannot be read."""
    parts = [sys.version, sys.executable, str(FORMAT), *PRELOAD]
    try:
        for name in ("numpy", "torch", "triton"):
            spec = importlib.util.find_spec(name)   # finds the package without importing it
            where = Path(spec.origin).parent if spec is not None and spec.origin else None
            parts += [name] + ([f"{p}:{p.stat().st_mtime_ns}" for p in (where, where.parent)] if where else [])
    except (OSError, ImportError, ValueError):
        return None
    return CACHE_DIR / f"guard-modules-{hashlib.sha256(chr(10).join(parts).encode()).hexdigest()[:16]}.marshal"


def _write_table(path: str) -> None:
    """Import PRELOAD, then write what the walk can read of every module reached."""
    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - an absent library only leaves its paths as spelled
            pass
    import warnings
    warnings.simplefilter("ignore")   # isinstance() on a deprecated alias warns
    numbers: dict[int, int] = {}
    order: list[types.ModuleType] = []

    def number(module: types.ModuleType) -> int:
        if id(module) not in numbers:
            numbers[id(module)] = len(order)
            order.append(module)
        return numbers[id(module)]

    # the interpreter's own __main__ is this script: a reading process has its own
    sys_modules = {k: number(v) if isinstance(v, types.ModuleType) else origin(v)
                   for k, v in list(sys.modules.items()) if isinstance(k, str) and k != "__main__"}
    names, attrs = [], []
    while len(names) < len(order):
        module = order[len(names)]
        via = module_name(module)
        names.append(via)
        plain, special = [], {}
        for k, v in list(vars(module).items()):
            if not isinstance(k, str) or "\n" in k:   # no walk reads such a name
                continue
            value = number(v) if isinstance(v, types.ModuleType) else \
                home(origin(v), via) if via else origin(v)
            if value is None:
                plain.append(k)
            else:
                special[k] = value
        attrs.append(("\n".join(plain), special))
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "wb") as f:
        marshal.dump((FORMAT, names, attrs, sys_modules), f)
    os.replace(tmp, path)   # whole or not at all, whoever else writes it meanwhile


if __name__ == "__main__":
    _write_table(sys.argv[1])
