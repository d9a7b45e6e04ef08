"""Detours around the watch's wrappers, seen where they reach Python: facts for the judge.

Covers three ways a candidate gets what tools/sandbox/watch.py's wrappers would have
counted, each seen at a point every spelling of it passes through:

  host reads of tensor memory no Tensor method hands over (`reads`): a process memory
    file opened (/proc/<pid>/... or /proc/self/... whatever the path's spelling, after
    symlinks; /dev/mem, /dev/kmem, /dev/port, /proc/kcore), any mmap, and a tensor or
    storage serialised (Tensor.__reduce_ex__, storages' __reduce__ and _write_file,
    torch.save: pickle, copyreg, copy and io buffers of storages all end there);
  operator registrations (`registrations`): every method of PyTorch's dispatcher module
    (each torch.library spelling, custom_op and register_kernel end there),
    OperatorBase.py_impl, the __torch_dispatch__ rules that would answer for a mode,
    and a shared library loaded from where candidate code can write (ctypes.dlopen from
    the temp dir, /dev/shm or a descriptor: the C++ operators of torch.ops.load_library
    register below Python; the system's own libraries are not the candidate's);
  introspection of the judge's code (tamper notes): frames grabbed by candidate code
    (sys._getframe, a traceback's or generator's frame) and the code or defaults of a
    tools function read (inspect.getclosurevars reads `__code__` first).

Each counts only when the candidate asked (`asked`): walking out from the code that
raised the event, the candidate's temp dir is met before Triton's or our own code, or
another file's module body (a library being imported does its own set-up). Frames and
code count when the candidate's code took them (`took`): itself, or through inspect.

Not covered: what raises no Python-level event: NumPy given a tensor's address through
`__array_interface__`, a ctypes pointer's reads, `__closure__`, `cell_contents`, `f_back`
and `f_locals`, torch.from_file's C-level open; frames handed over by other standard
library helpers (traceback.walk_stack); the static guards read those names
(tools/guards/host.py, tampering.py). The candidate shares the process: one that finds
and switches off these wrappers first is the static guards' to refuse (README "Sandbox").
"""
from __future__ import annotations

import os
import re
import sys
import sysconfig
import types

# process memory, whatever the pid (/proc/self resolves to /proc/<pid>), and shared memory
# (a storage moved there by share_memory_ is read through its file or descriptor)
_MEMORY_FILE = re.compile(r"/proc/(\d+|self|thread-self)(/|$)|/proc/kcore$|/dev/(k?mem|port)$|/dev/shm/|/memfd:")
# where else than its temp dir candidate code can write a library (tools/sandbox/lockdown.py)
_WRITABLE = ("/dev/shm/", "/proc/", "/memfd:")
# frames handed to the candidate: getattr events CPython audits
_FRAME_ATTRS = frozenset({"tb_frame", "gi_frame", "cr_frame", "ag_frame"})
_CODE_ATTRS = frozenset({"__code__", "__defaults__", "__kwdefaults__"})
EVENTS = frozenset({"open", "mmap.__new__", "ctypes.dlopen", "sys._getframe", "object.__getattr__"})
_MAX = 30

# (module, class or None, attribute): what hands a tensor's or a storage's bytes over
# (serialisation; a DLPack capsule, which NumPy maps without any Tensor method)...
_READERS = (("torch", "Tensor", "__reduce_ex__"), ("torch", "Tensor", "_reduce_ex_internal"),
            ("torch.storage", "UntypedStorage", "__reduce__"), ("torch.storage", "UntypedStorage", "_write_file"),
            ("torch.storage", "TypedStorage", "__reduce__"), ("torch.storage", "TypedStorage", "_write_file"),
            ("torch.serialization", None, "_save"), ("torch.serialization", None, "_legacy_save"),
            ("torch._C", None, "_to_dlpack"), ("torch._C", None, "_to_dlpack_versioned"))
# ... and what registers kernels outside the dispatcher module: Python kernels, and the
# __torch_dispatch__ rules that would answer for the aten counter's mode
_REGISTRARS = (("torch._ops", "OperatorBase", "py_impl"), ("torch._ops", "HigherOrderOperator", "py_impl"),
               ("torch._library.simple_registry", "GenericTorchDispatchRuleHolder", "register"),
               ("torch._library.simple_registry", "FakeImplHolder", "register"))


class Detours:
    """Facts since the watch's baseline (each once): reads, registrations; notes to `watch`."""

    def __init__(self, watch):
        self.watch = watch
        self.reads: list[str] = []
        self.registrations: list[str] = []
        self._busy = False   # our own frame and code reads raise the events we handle
        self._home = ""
        self._stops: tuple[str, ...] = ()
        self._stdlib: tuple[str, ...] = ()
        self._sites: tuple[str, ...] = ()
        self._kind: dict[str, bool] = {}   # file name -> is it the standard library's
        self._inspect = ""

    def install(self, stops: tuple[str, ...]) -> None:
        """At the watch's set-up, before any candidate code: the candidate's home (the
        worker's temp cwd), the code whose work is its own (`stops`: Triton's, ours) and
        the wrappers on serialisation and registration."""
        import torch
        self._home = os.path.join(os.getcwd(), "")
        self._stops = tuple(d for d in stops if d)
        paths = sysconfig.get_paths()
        self._stdlib = tuple({paths["stdlib"], paths["platstdlib"]})
        self._sites = tuple({paths["purelib"], paths["platlib"]})
        import inspect
        self._inspect = inspect.__file__
        for table, into, with_args in ((_READERS, self.reads, False), (_REGISTRARS, self.registrations, True)):
            for module_name, cls_name, name in table:
                owner = sys.modules.get(module_name)
                owner = getattr(owner, cls_name, None) if cls_name else owner
                orig = getattr(owner, name, None) if owner is not None else None
                if orig is None:
                    self.watch.gaps.append(f"detour {cls_name or module_name}.{name}")
                    continue
                _replace(owner, name, orig, self._wrap(into, f"{cls_name or module_name}.{name}", orig, with_args))
        module = torch._C._DispatchModule
        for name, orig in list(vars(module).items()):
            if callable(orig) and not name.startswith("_") and name != "reset":
                setattr(module, name, self._wrap(self.registrations, f"dispatcher {name}", orig, True))

    def _wrap(self, into: list, label: str, orig, with_args: bool):
        detours, getframe = self, sys._getframe

        def seen(*args, **kwargs):
            if detours.watch.watching and detours.asked(getframe(1)):
                what = label
                if with_args:
                    what += "(" + ", ".join(repr(a)[:40] for a in args[1:3] if isinstance(a, (str, int))) + ")"
                detours.add(into, what)
            return orig(*args, **kwargs)
        seen.__name__ = seen.__qualname__ = getattr(orig, "__name__", label)
        seen.__doc__ = getattr(orig, "__doc__", None)
        return seen

    def add(self, into: list, what: str) -> None:
        if what not in into and len(into) < _MAX:
            into.append(what)

    # the audit hook's share (tools/sandbox/watch.py calls it for EVENTS) ---------------------
    def audit(self, event: str, args: tuple) -> None:
        if self._busy or not self.watch.watching:
            return
        if event == "object.__getattr__" and not (len(args) == 2 and (
                args[1] in _FRAME_ATTRS or (args[1] in _CODE_ATTRS and type(args[0]) is types.FunctionType))):
            return   # the cheap test first: CPython audits every frame's f_code read
        self._busy = True
        try:
            self._audit(event, args, sys._getframe(2))   # 0: here, 1: Watch._audit, 2: the code that raised it
        except Exception as e:   # our bug, raised inside whatever opened a file: recorded, never passed on
            self.add(self.watch.gaps, f"detours: {type(e).__name__}: {e}"[:120])
        finally:
            self._busy = False

    def _audit(self, event: str, args: tuple, frame) -> None:
        if event == "open":
            path = args[0] if args else None
            if isinstance(path, int):   # an inherited or shared descriptor: what it is open on
                path = f"/proc/self/fd/{path}"
            if isinstance(path, (str, bytes, os.PathLike)):
                real = os.path.realpath(os.fsdecode(path))
                if _MEMORY_FILE.match(real) and self.asked(frame):
                    self.add(self.reads, f"open {real}")
        elif event == "mmap.__new__":
            if self.asked(frame):
                self.add(self.reads, f"mmap of {'anonymous memory' if args and args[0] == -1 else 'a file'}")
        elif event == "ctypes.dlopen":
            name = os.fsdecode(args[0]) if args and isinstance(args[0], (str, bytes, os.PathLike)) else ""
            real = os.path.realpath(name) if "/" in name else ""   # a bare name: the loader's search path
            if real.startswith((self._home, *_WRITABLE)) and self.asked(frame):
                self.add(self.registrations, f"shared library loaded ({real[-80:]})")
        elif event == "sys._getframe":
            if self.took(frame):
                self.watch.note("a frame taken by candidate code (sys._getframe)")
        elif args[1] in _FRAME_ATTRS:
            if self.took(frame):
                self.watch.note(f"a frame taken by candidate code (.{args[1]})")
        elif _ours(args[0]) and self.took(frame):
            fn = args[0]
            self.watch.note(f"the judge's code introspected ({args[1]} of {fn.__module__}.{fn.__qualname__})")

    def asked(self, frame) -> bool:
        """Did the candidate's code ask for what `frame` (the code that raised it) does?"""
        while frame is not None:
            name = frame.f_code.co_filename
            if name.startswith(self._home):
                return True
            if name.startswith(self._stops) or frame.f_code.co_name == "<module>":
                return False
            frame = frame.f_back
        return False

    def took(self, frame) -> bool:
        """Did the candidate's code take the frame or code object that `frame` reads: itself,
        or through inspect (whose API hands frames, closures and code over)? A library
        reading them for itself (logging's caller, traceback's text) hands none over."""
        if frame is not None and frame.f_code.co_filename == self._inspect:
            while frame is not None and self._is_stdlib(frame.f_code.co_filename):
                frame = frame.f_back
        return frame is not None and frame.f_code.co_filename.startswith(self._home)

    def _is_stdlib(self, name: str) -> bool:
        kind = self._kind.get(name)
        if kind is None:
            kind = self._kind[name] = name.startswith("<frozen") or (
                name.startswith(self._stdlib) and not name.startswith(self._sites))
        return kind

    def report(self, reply: dict) -> None:
        if self.reads:
            reply["memory_reads"] = list(self.reads)
        if self.registrations:
            reply["op_registrations"] = list(self.registrations)


def _replace(owner, name: str, orig, wrapper) -> None:
    """`owner.name` (a class's, or a module function's wherever torch's modules hold it:
    torch.utils.dlpack.to_dlpack is torch._C._to_dlpack) now `wrapper`."""
    setattr(owner, name, wrapper)
    if isinstance(owner, type):
        return
    for module_name, module in list(sys.modules.items()):
        if module is not None and (module_name == "torch" or module_name.startswith("torch.")):
            space = getattr(module, "__dict__", {})
            for key, value in list(space.items()):
                if value is orig:
                    space[key] = wrapper


def _ours(fn) -> bool:
    module = fn.__module__
    return type(module) is str and (module == "tools" or module.startswith("tools."))
