"""The guards on tampering and disguise: `check_disguise`, `check_monkeypatch`,
`check_op_registration`.

Rejects lookups the guards cannot read (eval/exec, getattr with a computed name on
anything but the candidate's own objects, getattr/setattr passed around as values,
__dict__, star imports from torch, pickles, importlib) and tampering with anything the
file imports or does not own: assignments into imported modules, classes or functions
(each path read canonically: `os.sys.modules` is `sys.modules`), setattr/delattr on
anything but its own objects (tools/guards/own_objects.py: a helper's parameter is not
own), attribute stores through a parameter or a call's result, frame walking, gc object
walks, ctypes, dispatch interception, aten registrations, and detecting or switching off
the judge's tracers, profilers and dispatch modes (sys/threading setprofile and
settrace, sys.monitoring, torch.profiler, torch._C's dispatch-key and mode-stack
controls), introspection that reaches the judge's objects (inspect, closures' cells,
frames, tracebacks), and registering operators with PyTorch in any namespace
(torch.library in every spelling, custom ops, py_impl, loaded operator libraries: a
kernel registered so runs below the worker's op counter). Not covered: tampering that
only shows at run time, inside the worker's own process (README "Sandbox"); objects
reached through containers (`d["m"].mm = f` where d holds a module the file cannot see)
when no import names them.
"""
from __future__ import annotations

import ast
import re
from typing import Iterator

from tools.guards.host import _HOST_ATTRS
from tools.guards.modules import is_module
from tools.guards.names import literal_getattr, resolve, words
from tools.guards.regions import DEAD, JIT
from tools.guards.source import Finding, Ref, Source, first, line_of, path_hits, spell, under
from tools.settings import GuardSettings

_DISGUISE_PATHS = ("builtins.eval", "builtins.exec", "builtins.compile", "builtins.__import__",
                   "builtins.globals", "builtins.vars", "builtins.breakpoint", "importlib", "imp",
                   "runpy", "pkgutil", "zipimport", "pickle", "_pickle", "cPickle", "marshal", "dill",
                   "cloudpickle", "types.FunctionType", "types.CodeType", "types.LambdaType",
                   "code", "codeop", "pydoc", "inspect.getattr_static", "inspect.getmembers",
                   "operator.attrgetter", "operator.methodcaller", "operator.matmul",
                   "operator.imatmul", "operator.__matmul__",
                   # resolvers of dotted names and runners of code held in strings
                   "string.Formatter", "typing.get_type_hints", "typing.ForwardRef", "typing._eval_type",
                   "typing.evaluate_forward_ref", "annotationlib", "logging.config", "unittest.mock",
                   "timeit", "doctest", "pdb", "bdb", "cProfile", "profile", "trace")


_ATTR_BUILTINS = ("builtins.getattr", "builtins.setattr", "builtins.delattr")
# a string that is an attribute path ("0.apply_", "torch.Tensor.numpy", "{0.__base__}") through a
# name the guards refuse when spelled as an attribute: a resolver of dotted names (a format
# field, an annotation, a config loader) would look it up where no guard reads it
_PATH_STRING = re.compile(r"[\w.\[\]{}:!]+")
_PATH_PIECES = re.compile(r"[.\[\]{}:!]")


def check_disguise(source: Source, settings: GuardSettings) -> Finding | None:
    """Lookups the guards cannot read: eval/exec, getattr with a computed name on anything
    but the candidate's own objects (on self too when it holds nn layers), getattr and
    setattr passed around as values, __dict__, star imports from torch, pickles."""
    out = []
    for path, node in path_hits(source, _DISGUISE_PATHS):
        what = spell(source, node) if not isinstance(node, (ast.Import, ast.ImportFrom)) else f"import {path}"
        out.append(Finding("disguise", f"`{what}` hides which code runs; call Triton kernels and name "
                           "every helper directly.", line_of(node), True, "disguised_op"))
    for r in source.refs:   # functools.reduce(getattr, names, torch), setattr.__call__: getattr as a value
        if any(under(p, _ATTR_BUILTINS) and not (r.called and p in _ATTR_BUILTINS) for p in r.paths):
            out.append(Finding("disguise", f"`{spell(source, r.site.parent)}` passes getattr around to look "
                               "attributes up indirectly; name what you call directly.", line_of(r.node), True,
                               "disguised_op"))
    for r in _escaped_modules(source):
        out.append(Finding("disguise", f"`{spell(source, r.site.parent)}` hands the module `{spell(source, r.node)}` "
                           "on as a value, where the guards cannot follow what is done to it; use modules "
                           "only by name (`torch.empty(...)`).", line_of(r.node), True, "disguised_op"))
    for path, node in source.imports:
        if path.endswith(".*") and path.split(".")[0] == "torch":
            out.append(Finding("disguise", f"`from {path[:-2]} import *` hides which torch ops are used; "
                               "import names explicitly.", line_of(node), True, "disguised_op"))
    by_string = _HOST_ATTRS | _FRAME_ATTRS | words("apply_ map_ map2_ _version __dict__ __getattribute__")
    for s in source.sites:
        n = s.node
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and "." in n.value and s.region != DEAD \
                and not isinstance(s.parent, ast.Expr) and _PATH_STRING.fullmatch(n.value) \
                and by_string.intersection(_PATH_PIECES.split(n.value)):
            out.append(Finding("disguise", f"the string {repr(n.value)[:60]} is an attribute path through "
                               f"`{sorted(by_string.intersection(_PATH_PIECES.split(n.value)))[0]}`, for a lookup "
                               "by name the guards cannot read; name what you call directly.", line_of(n), True,
                               "disguised_op"))
        elif s.region != DEAD and (isinstance(n, ast.Attribute) and n.attr == "_version" or isinstance(n, ast.Constant)
                                   and n.value == "_version" and not isinstance(s.parent, ast.Expr)):
            out.append(Finding("disguise", f"`{spell(source, n)}` reads autograd's in-place counter of a tensor, which "
                               "tells a repeated call on unchanged inputs from a new one (a result kept for it skips "
                               "the work under timing); recompute the output on every call.", line_of(n), True,
                               "caching"))
        elif isinstance(n, ast.Attribute) and n.attr in ("__dict__", "__getattribute__", "__getattr__"):
            out.append(Finding("disguise", f"`{spell(source, n)}` looks attributes up by string; name "
                               "what you call directly.", line_of(n), True, "disguised_op"))
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "getattr" \
                and len(n.args) >= 2 and not literal_getattr(n):
            if id(n.args[0]) in source.own and not source.library_names:
                continue   # getattr(self, f"w{i}"): a parameter of the candidate's own module
            out.append(Finding("disguise", f"`{spell(source, n)}` picks an attribute by a computed name; "
                               "name the function you call directly.", line_of(n), True, "disguised_op"))
    return first(out)


TAMPER_PATHS = ("sys.modules", "sys._getframe", "sys._current_frames", "sys.settrace", "sys.setprofile",
                "sys.addaudithook", "inspect.stack", "inspect.currentframe",
                "inspect.getouterframes", "inspect.getinnerframes", "inspect.trace", "inspect.getframeinfo",
                "gc.get_objects", "gc.get_referrers", "gc.get_referents", "traceback.walk_stack",
                "traceback.extract_stack", "os.putenv", "os.unsetenv", "os.environ.update",
                "os.environ.setdefault", "os.environ.pop", "os.environ.clear", "os.environ.popitem",
                "os.environ.__setitem__", "ctypes", "_ctypes", "cffi", "builtins.__dict__", "__builtin__",
                "tools", "agent", "krefine", "signal", "atexit", "resource", "torch.overrides",
                "candidate",   # tools/sandbox/worker.py registers the candidate itself under this name
                "torch.utils._python_dispatch", "torch._C._set_dispatch_mode", "faulthandler",
                # detecting or switching off the judge's tracers, profilers and dispatch modes
                # (the worker's aten counter is a TorchDispatchMode: tools/sandbox/outputs.py)
                "sys.getprofile", "sys.gettrace", "sys.call_tracing", "sys.monitoring",
                "threading.setprofile", "threading.settrace", "threading.setprofile_all_threads",
                "threading.settrace_all_threads", "threading.getprofile", "threading.gettrace",
                "torch.profiler", "torch.autograd.profiler", "torch.autograd.profiler_util",
                "torch.autograd.profiler_legacy", "torch.autograd._profiler_enabled", "torch.cuda.profiler",
                "torch.cuda.cudart", "torch._C._autograd", "torch._C._profiler", "torch._C._DisableTorchDispatch",
                "torch._C.DisableTorchFunction*", "torch._C._DisablePythonDispatcher", "torch._C._Enable*",
                "torch._C._ExcludeDispatchKeyGuard", "torch._C.ExcludeDispatchKeyGuard",
                "torch._C._IncludeDispatchKeyGuard", "torch._C._ForceDispatchKeyGuard",
                "torch._C._PreserveDispatchKeyGuard", "torch._C._SetExcludeDispatchKeyGuard",
                "torch._C._AutoDispatchBelow*", "torch._C._dispatch_*", "torch._C._push_on_torch*",
                "torch._C._pop_torch*", "torch._C._get_dispatch_*", "torch._C._len_torch*",
                "torch._C._unset_dispatch_mode", "torch._C._set_torch_function_state",
                "torch._C._set_skip_next_torch_function", "torch._C._skip_one_hop_torch_function",
                # the GIL's switch interval is the worker's, tuned for the judge's threads
                "sys.setswitchinterval",
                # introspection reaches the judge's objects: closures, frames, tracebacks' frames
                "inspect", "traceback.walk_tb", "traceback.extract_tb", "traceback.TracebackException",
                "traceback.StackSummary", "sys._getframemodulename", "sys.exc_info", "sys.exception",
                "sys.last_traceback", "sys.last_value", "sys.last_exc", "types.CellType")


_TAMPER_IMPORTS = ("builtins",)


_FRAME_ATTRS = words("f_back f_globals f_locals f_builtins f_code tb_frame gi_frame cr_frame ag_frame "
                     "__globals__ __code__ __closure__ __subclasses__ __bases__ __base__ __mro__ "
                     "__builtins__ __torch_function__ __torch_dispatch__ __setattr__ __delattr__ "
                     "cell_contents __wrapped__ __defaults__ __kwdefaults__ __traceback__ tb_next f_trace "
                     "gi_code cr_code ag_code gi_yieldfrom cr_await")


def check_monkeypatch(source: Source, settings: GuardSettings) -> Finding | None:
    """Assigning into torch/triton/time/sys/os/builtins/the harness, setattr on them,
    frame walking, gc object walks, ctypes, dispatch interception, aten overrides."""
    out = []

    def add(node, what):
        out.append(Finding("monkeypatch", f"`{what}` tampers with torch, the timer or the harness; "
                           "leave them unchanged.", line_of(node), True, "monkeypatch"))

    for path, node in path_hits(source, TAMPER_PATHS):
        add(node, spell(source, node) if not isinstance(node, (ast.Import, ast.ImportFrom)) else f"import {path}")
    for path, node in source.imports:
        if under(path, _TAMPER_IMPORTS):
            add(node, f"import {path}")
    for s in source.sites:
        n = s.node
        if isinstance(n, (ast.Attribute, ast.Subscript)) and isinstance(n.ctx, (ast.Store, ast.Del)):
            if resolve(n.value, source.aliases, source.self_attrs, frozenset()):
                add(n, spell(source, n))   # into an imported module, class or function
            elif isinstance(n, ast.Attribute) and _foreign_root(source, n.value):
                out.append(Finding("monkeypatch", f"`{spell(source, n)}` sets an attribute on an object this "
                                   "file does not own (a parameter, a call's result); set attributes only on "
                                   "self or your own objects.", line_of(n), True, "monkeypatch"))
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in ("setattr", "delattr") \
                and n.args and id(n.args[0]) not in source.own:
            out.append(Finding("monkeypatch", f"`{spell(source, n)}` sets an attribute on an object this file "
                               "does not provably own; use setattr only on self or your own objects.",
                               line_of(n), True, "monkeypatch"))
        elif literal_getattr(n) and n.args[1].value in _FRAME_ATTRS:
            add(n, spell(source, n))   # getattr(object, "__setattr__")
        elif isinstance(n, ast.Attribute) and n.attr in _FRAME_ATTRS:
            if n.attr in ("__setattr__", "__delattr__") and isinstance(n.value, ast.Call) \
                    and isinstance(n.value.func, ast.Name) and n.value.func.id == "super":
                continue   # super().__setattr__ inside an nn.Module
            add(n, spell(source, n))
        elif isinstance(n, ast.Name) and n.id == "__builtins__":
            add(n, n.id)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name in ("__torch_function__",
                                                                                   "__torch_dispatch__"):
            add(n, f"def {n.name}")
    for r in source.refs:   # torch.library registrations on aten ops replace PyTorch itself
        if r.called and any(p.startswith("torch.library.") for p in r.paths):
            call = r.site.parent
            if any(isinstance(a, ast.Constant) and isinstance(a.value, str) and a.value.startswith(("aten", "prims"))
                   for a in (*call.args, *(k.value for k in call.keywords))):
                add(call, spell(source, call))
    return first(out)


# everything that registers operators or kernels with PyTorch's dispatcher
_REGISTRATION_PATHS = ("torch.library", "torch._library", "torch._custom_op", "torch._custom_ops",
                       "torch.ops.load_library", "torch.classes.load_library",
                       "torch._C._DispatchModule", "torch._C._dispatch_library", "torch.utils.cpp_extension")
_REGISTRATION_ATTRS = words("py_impl py_kernels load_library _dispatch_library")


def check_op_registration(source: Source, settings: GuardSettings) -> Finding | None:
    """Registering operators or kernels with PyTorch, in any namespace, however the
    namespace is given: the registered code runs below the op counter, and an aten
    kernel replaced changes PyTorch for everything after it."""
    def bad(node, what):
        return Finding("op_registration", f"`{what}` registers operators with PyTorch; a kernel registered "
                       "so runs below the judge's op counter. Call your Triton kernels directly and "
                       "register nothing.", line_of(node), True, "library_ops")
    out = [bad(node, f"import {path}" if isinstance(node, (ast.Import, ast.ImportFrom)) else spell(source, node))
           for path, node in path_hits(source, _REGISTRATION_PATHS, skip_dead=True)]
    out += [bad(s.node, spell(source, s.node)) for s in source.sites if s.region != DEAD and
            isinstance(s.node, ast.Attribute) and s.node.attr in _REGISTRATION_ATTRS]
    return first(out)


def _foreign_root(source: Source, target: ast.AST) -> bool:
    """Is the object an attribute store lands on reached from a call's result (`type(x).f`,
    except super()), through `__class__`, or from a parameter that is not own (a helper's
    `def patch(m): m.mm = f`)?"""
    while isinstance(target, (ast.Attribute, ast.Subscript)):
        if isinstance(target, ast.Attribute) and target.attr in ("__class__", "__func__", "__self__"):
            return True
        target = target.value
    if isinstance(target, ast.Call):
        return not (isinstance(target.func, ast.Name) and target.func.id == "super")
    return isinstance(target, ast.Name) and id(target) in source.params


# builtins that only read a module handed to them
_READ_ONLY = frozenset(("hasattr", "isinstance", "issubclass", "print", "repr", "str", "callable", "id"))


def _escaped_modules(source: Source) -> Iterator[Ref]:
    """Modules used as values where alias tracking cannot follow them: `patch(torch)`,
    `MODS = {"t": torch}`, `for m in [torch]`, `return os`. Binding one to a plain name
    or a self attribute (`T = torch`, `self.lib = tl`) is tracked, and so allowed."""
    imported = {(a.asname or a.name).split(".")[0] for _, node in source.imports
                if isinstance(node, ast.Import) for a in node.names}
    for r in source.refs:
        parent = r.site.parent
        if r.called or r.site.region in (DEAD, JIT) or literal_getattr(r.node):
            continue
        if not (any(is_module(p) for p in r.paths) or (isinstance(r.node, ast.Name) and r.node.id in imported)):
            continue
        if isinstance(parent, (ast.Assign, ast.AnnAssign, ast.NamedExpr)) and parent.value is r.node:
            targets = parent.targets if isinstance(parent, ast.Assign) else [parent.target]
            if all(isinstance(t, ast.Name) or (isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name)
                                               and t.value.id in ("self", "cls")) for t in targets):
                continue
        elif isinstance(parent, (ast.Expr, ast.Compare)) or (
                isinstance(parent, ast.Call) and isinstance(parent.func, ast.Name) and parent.func.id in _READ_ONLY):
            continue
        yield r


# Triton's own machinery a kernel file has no business touching: its C module (the interpreter's
# load/store read memory by address), the interpreter, its knobs (the interpreter switch, launch
# hooks), and the names by which code reaches a block's host data under the interpreter (a
# block's `handle` is a NumPy array there, an IR value in a GPU build) or runs at a launch (a
# JIT function's pre-run hooks) or passes as a Triton builtin (`__triton_builtin__`)
_TRITON_INTERNAL_PATHS = ("triton._C", "triton.runtime.interpreter", "triton.knobs")
_TRITON_INTERNAL_NAMES = words("handle pre_run_hooks add_pre_run_hook __triton_builtin__")


def check_triton_internals(source: Source, settings: GuardSettings) -> Finding | None:
    """Triton's C module, interpreter and knobs, and the names that reach a block's host data
    under the interpreter, add a launch hook or pass a class as a Triton builtin: on a CPU,
    where the interpreter runs a kernel's body as Python, each lets Python do a kernel's work
    where a GPU build compiles nothing of it."""
    out = []
    for path, node in path_hits(source, _TRITON_INTERNAL_PATHS):
        what = f"import {path}" if isinstance(node, (ast.Import, ast.ImportFrom)) else spell(source, node)
        out.append(Finding("triton_internals", f"`{what}` reaches Triton's own runtime (its C module, the "
                           "interpreter, its knobs); a kernel file uses triton and triton.language only.",
                           line_of(node), True, "tampering"))
    for s in source.sites:
        n = s.node
        named = n.attr if isinstance(n, ast.Attribute) else n.id if isinstance(n, ast.Name) and n.id.startswith("__") \
            else n.value if isinstance(n, ast.Constant) and isinstance(n.value, str) and not isinstance(s.parent, ast.Expr) \
            else None   # a variable named `handle` is the file's own; `__triton_builtin__ = True` in a class is not
        if named in _TRITON_INTERNAL_NAMES:
            out.append(Finding("triton_internals", f"`{spell(source, n)}` names `{named}`, which reaches a block's "
                               "host data under Triton's interpreter (or runs host code at a launch); on a GPU it is "
                               "not there. Compute with triton.language in the kernel.", line_of(n), True,
                               "tampering"))
    return first(out)
