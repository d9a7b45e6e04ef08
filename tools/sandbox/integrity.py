"""Whether the functions, classes and modules the judge relies on are still the same objects.

`Snapshot` records, once the worker's hooks are installed and before the candidate is
imported, the identity of every attribute whose value is code (a function, builtin,
method descriptor, property, class or module) of a list of modules and classes:
torch and the parts of it that count and dispatch (torch.Tensor, torch._C, torch.cuda,
nn.Module, the Python dispatch modes, torch._ops), Triton's launch paths (jit,
autotuner, interpreter), sys, builtins, time, threading, _thread, gc, os, and every
tools.* module the worker has loaded (all their attributes, data too, and the classes
they define). `changes()` names each entry that changed or vanished, a callable added
to one of those classes (it would shadow an inherited one) or to a tools module, and
each sys.modules entry that now holds another module. tools/sandbox/watch.py runs it
after every call and request; the judge decides what a change means.

Not covered: plain data of torch and the standard library (torch flips its own flags,
profiler-enabled and the like, legitimately), triton.language (Triton's interpreter
patches it while a kernel runs), objects changed in place (a list or dict the judge's
code holds is still the same object), and a change made and undone within one call.
"""
from __future__ import annotations

import functools
import sys
import types

_CODE_KINDS = (types.FunctionType, types.BuiltinFunctionType, types.MethodDescriptorType,
               types.WrapperDescriptorType, types.ClassMethodDescriptorType, types.GetSetDescriptorType,
               types.MemberDescriptorType, types.MethodWrapperType, types.ModuleType, type, property,
               classmethod, staticmethod, functools.partial)

# modules (and classes found in them by dotted name) whose code the judge relies on
_MODULES = ("torch", "torch._C", "torch.cuda", "torch.nn.modules.module", "torch.utils._python_dispatch",
            "torch._ops", "torch.autograd.grad_mode", "triton", "triton.runtime.jit", "triton.runtime.autotuner",
            "triton.runtime.interpreter", "sys", "builtins", "time", "threading", "_thread", "gc", "os")
_CLASSES = ("torch.Tensor", "torch.nn.modules.module.Module", "torch.utils._python_dispatch.TorchDispatchMode",
            "torch._ops.OpOverload", "torch._ops.OpOverloadPacket", "torch.autograd.grad_mode.no_grad",
            "triton.runtime.jit.JITFunction", "triton.runtime.jit.KernelInterface",
            "triton.runtime.autotuner.Autotuner", "triton.runtime.autotuner.Heuristics",
            "triton.runtime.interpreter.InterpretedFunction", "triton.runtime.interpreter.GridExecutor",
            "triton.runtime.interpreter.InterpreterBuilder", "threading.Thread", "torch.storage.UntypedStorage",
            "torch.storage.TypedStorage")
_MISSING = object()


class Snapshot:
    """The identities above as they are now; `changes()` compares them with later ones."""

    def __init__(self):
        self.entries: list[tuple[str, object, str, object]] = []   # (label, namespace, name, value)
        self.class_keys: list[tuple[str, object, frozenset]] = []  # (label, namespace, its keys)
        self.modules: dict[str, object] = {}                      # sys.modules name -> module
        self.missing: list[str] = []                               # named above, absent here
        seen: set[int] = set()
        for name in _MODULES:
            module = sys.modules.get(name)
            if module is None:
                self.missing.append(name)
                continue
            self._add(name, module, code_only=True, seen=seen)
        for dotted in _CLASSES:
            cls = _lookup(dotted)
            if cls is None:
                self.missing.append(dotted)
                continue
            self._add(dotted, cls, code_only=True, seen=seen)
        for name, module in list(sys.modules.items()):
            if name == "tools" or name.startswith("tools."):
                self._add(name, module, code_only=False, seen=seen)
                for attr, value in list(vars(module).items()):
                    if isinstance(value, type) and value.__module__ == name:
                        self._add(f"{name}.{attr}", value, code_only=True, seen=seen)

    def _add(self, label: str, owner, code_only: bool, seen: set[int]) -> None:
        if id(owner) in seen:
            return
        seen.add(id(owner))
        if isinstance(owner, types.ModuleType):
            self.modules[label] = owner
        space = vars(owner)   # the namespace itself: reading it runs no descriptor
        for name, value in list(space.items()):
            if code_only and not isinstance(value, _CODE_KINDS):
                continue
            if not code_only and name.startswith("__") and name not in ("__getattr__", "__dir__"):
                continue   # __builtins__, __loader__, __spec__...: the import system's
            self.entries.append((label, space, name, value))
        if isinstance(owner, type) or not code_only:   # a class, or one of our own modules
            self.class_keys.append((label, space, frozenset(space)))

    def changes(self) -> list[str]:
        """'LABEL.NAME changed' / 'vanished' / 'added', 'sys.modules[NAME] replaced'."""
        out = []
        for label, space, name, value in self.entries:
            now = space.get(name, _MISSING)
            if now is not value:
                out.append(f"{label}.{name} {'vanished' if now is _MISSING else 'changed'}")
        for label, space, keys in self.class_keys:
            if len(space) != len(keys) or not keys.issuperset(space):   # a submodule imported later is no change
                out += [f"{label}.{k} added" for k in list(space) if k not in keys
                        and isinstance(space.get(k), _CODE_KINDS) and not isinstance(space.get(k), types.ModuleType)]
        modules = sys.modules
        out += [f"sys.modules[{name!r}] replaced" for name, module in self.modules.items()
                if modules.get(name) is not module]
        return out


def _lookup(dotted: str):
    """The class at `dotted` (a loaded module's attribute), or None."""
    module_name, _, attr = dotted.rpartition(".")
    module = sys.modules.get(module_name)
    value = vars(module).get(attr) if module is not None else None
    return value if isinstance(value, type) else None
