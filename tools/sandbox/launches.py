"""Triton launches in the worker: counted, and what ran compiled again for a real GPU.

Covers the hooks on JITFunction.run (and Autotuner.run, InterpretedFunction.run) that
count every launch for the judge's runtime guard and, during the warm request, compile
the forward's kernels without running them (while `worker.triton_off`, skip them:
tools/sandbox/ownership.py); `launch_spec` and `spec_json` describe one
launch well enough to compile it for sm_90 in a clean worker (`compile_launched`), since
Triton's interpreter hides GPU-only compile errors, registers and spills, and runs a kernel's
body as Python. Decides nothing: the judge reads the counts and the compile results.
"""
from __future__ import annotations

import contextlib
import sys
import types

from tools.sandbox.faults import def_line, short, source_line


def hook_launches(worker) -> None:
    """Count every Triton launch of `worker`'s process (Worker.note_launch; on cpu it also
    remembers specialisations) and the programs it runs (worker.watch.launch: the grid as
    Triton evaluates it), and compile without running while worker.compile_only. The
    hooks keep their own references to both: rebinding either later changes nothing."""
    from triton.runtime.jit import JITFunction
    note, watch = worker.note_launch, worker.watch
    log_launch = worker.launch_log.attach()   # tools/sandbox/signatures.py: each call's kernels and grids

    def wrap(orig):
        def run(fn, *args, grid, warmup, **kwargs):
            if worker.triton_off:   # tools/sandbox/ownership.py: the forward without its kernels
                worker.skipped += 1
                return None
            if worker.compile_only:
                worker.compiled += 1
                kernel = orig(fn, *args, grid=grid, warmup=True, **kwargs)
                if worker.pending is not None:   # tools/sandbox/warmpool.py: loaded on its threads
                    worker.pending.append(kernel)
                    return kernel
                # load it and build its launcher now (Triton 3.6 compiles a C launcher
                # per signature with gcc at the first launch), not under the GPU hold
                init = getattr(kernel, "_init_handles", None)
                if callable(init):
                    init()
                return kernel
            if warmup:
                return orig(fn, *args, grid=grid, warmup=warmup, **kwargs)
            if getattr(fn, "pre_run_hooks", None):   # host code Triton runs at every launch, no frame of the file's
                watch.note(f"the @triton.jit function {getattr(fn, '__name__', '?')} has pre-run hooks (host code "
                           "run at each launch)")
            note(fn, args, kwargs)
            return log_launch(watch.launch, orig, fn, args, grid, kwargs)
        return run

    JITFunction.run = wrap(JITFunction.run)
    try:
        from triton.runtime.autotuner import Autotuner

        def autotune_run(orig):
            def run(tuner, *args, **kwargs):
                if worker.triton_off:   # skipped, not benchmarked: no config is chosen on no work
                    worker.skipped += 1
                    return None
                if worker.compile_only:   # compile every config; benchmark none, cache none
                    kwargs.pop("warmup", None)
                    return tuner.warmup(*args, **kwargs)
                with watch.not_candidate(), _hooks_as_candidate(tuner, watch):   # benchmarking: Triton's reads
                    return orig(tuner, *args, **kwargs)
            return run
        Autotuner.run = autotune_run(Autotuner.run)
    except ImportError:
        pass
    try:
        from triton.runtime.interpreter import InterpretedFunction
        InterpretedFunction.run = wrap(InterpretedFunction.run)
        device_call = InterpretedFunction.__call__

        def called(fn, *args, **kwargs):   # outside a launch the interpreter runs its body as Python
            if watch.armed and watch.depth == 0:
                watch.note(f"the @triton.jit function {getattr(fn, '__name__', '?')} was called as Python outside a "
                           "launch (Triton's interpreter runs its body so; on a GPU it can only run in a kernel)")
            return device_call(fn, *args, **kwargs)
        InterpretedFunction.__call__ = called
    except ImportError:
        pass


@contextlib.contextmanager
def _hooks_as_candidate(tuner, watch):
    """The autotuner's callables the candidate hands it (configs' pre_hook, its pre_hook,
    post_hook, early_config_prune, perf_model) run as candidate code: host reads there count
    even when no frame of the candidate's file is between (a functools.partial of NumPy)."""
    slots = [(c, "pre_hook") for c in getattr(tuner, "configs", ())]
    slots += [(tuner, a) for a in ("pre_hook", "post_hook", "early_config_prune", "perf_model")]
    kept = [(o, a, getattr(o, a, None)) for o, a in slots if callable(getattr(o, a, None))]
    def as_candidate(f):
        def call(*args, **kwargs):
            with watch.as_candidate():
                return f(*args, **kwargs)
        return call
    for o, a, f in kept:
        setattr(o, a, as_candidate(f))
    try:
        yield
    finally:
        for o, a, f in kept:
            setattr(o, a, f)


def is_jit(v) -> bool:
    try:
        from triton.runtime.jit import JITFunction
        from triton.runtime.autotuner import Autotuner, Heuristics
        kinds = (JITFunction, Autotuner, Heuristics)
        try:
            from triton.runtime.interpreter import InterpretedFunction
            kinds += (InterpretedFunction,)
        except ImportError:
            pass
        return isinstance(v, kinds)
    except ImportError:
        return False


_LAUNCH_OPTIONS = {"num_warps", "num_stages", "num_ctas", "maxnreg", "enable_fp_fusion",
                   "launch_cooperative_grid", "launch_pdl", "debug"}


def launch_spec(fn, args, kwargs):
    """(key, spec) describing one launch well enough to compile it for a GPU. An argument
    Triton cannot pass to a GPU kernel (no tensor, number or constexpr), or a launch that
    cannot be described at all, is kept as such: its build check fails (spec_json)."""
    try:
        import inspect
        from triton.runtime.jit import mangle_type
        py_fn = getattr(fn, "fn", fn)
        signature = inspect.signature(py_fn)
        names = list(signature.parameters)
        bound = dict(zip(names, args))
        bound.update({k: v for k, v in kwargs.items() if k in names})
        bound.update({n: p.default for n, p in signature.parameters.items()   # a default left out: Triton's
                      if n not in bound and p.default is not inspect.Parameter.empty})
        options = {k: v for k, v in kwargs.items() if k in _LAUNCH_OPTIONS and k != "debug"}
        sig, const = {}, {}
        annotations = getattr(py_fn, "__annotations__", {})
        for n in names:
            v = bound.get(n)
            is_const = "constexpr" in str(annotations.get(n, ""))
            if is_const or v is None or isinstance(v, (str, type)):
                sig[n], const[n] = "constexpr", v
                continue
            try:
                sig[n] = mangle_type(v)
            except TypeError:   # a dtype Triton takes as a constexpr; anything else no GPU launch takes
                sig[n], const[n] = ("constexpr", v) if _plain(v) else (f"?{type(v).__qualname__}", None)
        seen = globals_seen(py_fn)
        key = (py_fn.__qualname__, py_fn.__code__.co_firstlineno, tuple(sorted(sig.items())),
               repr(sorted(const.items(), key=lambda kv: kv[0])), repr(sorted(options.items())), seen)
        return key, (py_fn, sig, const, options, seen)
    except Exception as e:  # an odd launch: its trial runs, its build check fails
        name = getattr(fn, "__name__", "?")
        return ("?", name, type(e).__name__), ("?", name, f"{type(e).__name__}: {str(e)[:300]}")


def _plain(v) -> bool:
    """A constexpr a clean process can be handed as the value itself (`encode`): None, int,
    float, bool, str (exactly those types: a subclass may compare or print as it likes),
    tuples and lists of them, tl.constexpr of one, Triton's scalar dtypes, torch dtypes,
    jitted functions."""
    if v is None or type(v) in (int, float, bool, str):
        return True
    if type(v) in (tuple, list):
        return all(_plain(x) for x in v)
    import torch
    import triton.language as tl
    if type(v) is tl.constexpr:
        return _plain(v.value)
    return type(v) in (tl.dtype, torch.dtype) or _jitted(v)


def _jitted(v) -> bool:
    from triton.runtime.jit import JITFunction
    try:
        from triton.runtime.interpreter import InterpretedFunction
    except ImportError:
        InterpretedFunction = JITFunction
    return type(v) in (JITFunction, InterpretedFunction) and hasattr(getattr(v, "fn", None), "__code__")


def encode(v):
    """A plain constexpr as JSON a clean process turns back into the value (`decode`)."""
    import triton.language as tl
    if v is None or type(v) in (int, float, bool, str):
        return v
    if type(v) in (tuple, list):
        return {type(v).__name__: [encode(x) for x in v]}
    if type(v) is tl.constexpr:
        return {"constexpr": encode(v.value)}
    if type(v) is tl.dtype:
        return {"tl_dtype": v.name}
    if _jitted(v):
        return {"jit": [v.fn.__module__, v.fn.__qualname__, v.fn.__code__.co_firstlineno]}
    return {"torch_dtype": str(v).removeprefix("torch.")}


def decode(v, module):
    """`encode`'s value back, jitted functions found in `module` (the candidate) by name and line."""
    import torch
    import triton.language as tl
    if not isinstance(v, dict):
        return v
    (kind, x), = v.items()
    if kind in ("tuple", "list"):
        return (tuple if kind == "tuple" else list)(decode(y, module) for y in x)
    if kind == "constexpr":   # a launch's tl.constexpr(v) is v to the compiler
        return decode(x, module)
    if kind == "tl_dtype":
        return tl.dtype(x)
    if kind == "torch_dtype":
        return getattr(torch, x)
    fn = find_kernel(module if x[0] == "candidate" else None, x[1], x[2], wrapper=True)
    if fn is None:
        raise ValueError(f"jitted function {x[1]} (line {x[2]}), passed as a constexpr, is reached by no name")
    return fn


def spec_json(spec) -> dict:
    """The launch for a clean process: the kernel by module, qualified name and first line
    (two kernels of one name are two kernels), its constexprs by value (`encode`).
    `not_plain` names constexprs no value can stand for (an object of the candidate's own
    class; handed over as a stand-in such as its repr, the GPU build would check other code
    than the interpreter ran) and arguments no GPU launch takes; `undescribed`, a launch
    that could not be read. Each fails the build check."""
    if spec[0] == "?":
        return {"name": spec[1], "undescribed": spec[2]}
    py_fn, sig, const, options, seen = spec
    bad = [f"{k} ({type(v).__qualname__})" for k, v in const.items() if not _plain(v)]
    bad += [f"{k} ({t[1:]}, not a tensor, a number or a tl.constexpr)" for k, t in sig.items() if t.startswith("?")]
    return {"name": py_fn.__name__, "qualname": py_fn.__qualname__, "module": py_fn.__module__,
            "line": py_fn.__code__.co_firstlineno, "signature": sig,
            "constexprs": {k: encode(v) for k, v in const.items() if _plain(v)}, "options": options,
            "not_plain": bad, "globals": [list(g) for g in seen]}


def globals_seen(py_fn, depth: int = 0, done: set | None = None) -> tuple:
    """(name, what it is) for each global a kernel's body names, through the jitted helpers it
    calls: what the interpreter runs is what these are at the launch, what the clean build
    compiles is what they are once the file is imported. A helper rebound at run time (in
    ModelNew's __init__) or chosen by the environment (TRITON_INTERPRET) differs."""
    done = set() if done is None else done
    out, space = [], getattr(py_fn, "__globals__", {})
    for name in py_fn.__code__.co_names:
        if name not in space or (id(py_fn), name) in done:
            continue
        done.add((id(py_fn), name))
        v = space[name]
        if isinstance(v, types.ModuleType):
            out.append((name, f"module {v.__name__}"))
            continue
        inner = _wrapped(v)[-1]
        if is_jit(v) and hasattr(inner, "__code__"):
            out.append((name, f"jit {inner.__module__}.{inner.__qualname__}:{inner.__code__.co_firstlineno}"))
            if depth < 4:
                out += globals_seen(inner, depth + 1, done)
        elif _plain(v) and not _jitted(v):
            out.append((name, f"value {encode(v)!r}"))
        else:
            out.append((name, f"{'callable' if callable(v) else 'object'} {type(v).__qualname__}"))
    return tuple(out)


def _wrapped(obj) -> list:
    """`obj` and what it wraps, outermost first, down to a Python function (autotune,
    heuristics, jit, staticmethod: `.fn`, `__func__`)."""
    chain = [obj]
    while len(chain) < 6 and not hasattr(chain[-1], "__code__"):
        inner = getattr(chain[-1], "fn", None) or getattr(chain[-1], "__func__", None)
        if inner is None:
            break
        chain.append(inner)
    return chain


def find_kernel(module, qualname: str, line: int | None = None, wrapper: bool = False):
    """The plain Python function of the kernel `qualname` defined in `module` (at `line`
    when given), through class bodies, staticmethod and autotune / heuristics wrappers
    (`wrapper`: the jitted function around it); None when no name reaches it (a kernel
    defined inside a function). Names are read from the namespaces themselves (no
    getattr: a class's __getattr__ or descriptor could answer with another function)."""
    obj = module
    for part in qualname.split(".") if module is not None else ["<none>"]:
        space = vars(obj) if isinstance(obj, (type, types.ModuleType)) else None
        if space is None or part not in space:
            return None
        obj = space[part]
    *outer, fn = _wrapped(obj)
    if getattr(fn, "__qualname__", None) != qualname or not hasattr(fn, "__code__") or \
            line is not None and fn.__code__.co_firstlineno != line:
        return None
    return next((o for o in reversed(outer) if is_jit(o)), None) if wrapper else fn


def compile_launched(module, js: dict, arch: int) -> dict:
    """compile_for_gpu of one spec_json from a clean process that imported the candidate as
    `module`; a kernel it cannot reach, or one launched with a constexpr no value can
    stand for, fails: its GPU build cannot be checked on this CPU."""
    name = js["name"]
    if js.get("undescribed"):
        return {"ok": False, "name": name, "error_type": "UndescribedLaunch",
                "message": f"its launch could not be described for a GPU build ({js['undescribed']})"}
    if js.get("not_plain"):
        return {"ok": False, "name": name, "error_type": "ConstexprNotPlain", "line": js.get("line"),
                "message": f"argument {', '.join(js['not_plain'])} is not a plain value (int, float, bool, str, "
                           "None, a dtype, a tuple of these, a jitted function): its GPU build cannot be checked; "
                           "pass tensors, numbers and plain tl.constexpr values"}
    if js.get("module", "candidate") != "candidate":
        module = sys.modules.get(js["module"])
    fn = find_kernel(module, js.get("qualname", name), js.get("line")) if module is not None else None
    if fn is None:
        return {"ok": False, "name": name, "error_type": "KernelNotFound", "line": js.get("line"),
                "message": f"kernel {js.get('qualname', name)} (line {js.get('line')}) was launched but no name "
                           "in its module reaches it (defined inside a function?): its GPU build cannot be "
                           "checked; define @triton.jit kernels at module level or in a class body"}
    try:
        const = {k: decode(v, module) for k, v in js["constexprs"].items()}
    except ValueError as e:
        return {"ok": False, "name": name, "error_type": "KernelNotFound", "line": js.get("line"), "message": str(e)}
    ran, built = dict(map(tuple, js.get("globals", []))), dict(globals_seen(fn))
    for g in (n for n in ran if ran[n] != built.get(n)):   # in the body's order: the rebound helper first
        return {"ok": False, "name": name, "error_type": "GlobalsDiffer", "line": js.get("line"),
                "message": f"its global `{g}` was {ran[g]} when the interpreter ran it and is {built.get(g, 'missing')} "
                           "when the file is imported (rebound at run time, or chosen by the environment): the GPU "
                           "build would check other code than the interpreter ran"}
    return compile_for_gpu((fn, js["signature"], const, js["options"]), arch)


def compile_for_gpu(spec, arch: int) -> dict:
    py_fn, sig, const, options = spec
    try:
        import triton
        from triton.backends.compiler import GPUTarget
        from triton.compiler import ASTSource
        from triton.runtime.jit import JITFunction
        jf = JITFunction(py_fn)
        k = triton.compile(ASTSource(jf, sig, const), target=GPUTarget("cuda", arch, 32),
                           options=dict(options))
        info = {"ok": True, "name": py_fn.__name__, "arch": f"sm_{arch}",
                "num_warps": getattr(k.metadata, "num_warps", None),
                "num_stages": getattr(k.metadata, "num_stages", None),
                "shared": getattr(k.metadata, "shared", None)}
        try:
            from tools.perf.profiler import ptxas_resources
            info.update(ptxas_resources(k.asm["ptx"], arch=f"sm_{arch}a"))
        except Exception as e:  # resources are a nicety; the compile itself succeeded
            info["resources_error"] = short(str(e), 300)
        return info
    except Exception as e:
        line = None
        node = getattr(e, "node", None)
        if getattr(node, "lineno", None) is not None:
            line = def_line(py_fn) + node.lineno - 1 if def_line(py_fn) else None
        src_line = None
        if line:
            try:
                import inspect
                src_line = source_line(inspect.getsourcefile(py_fn), line)
            except TypeError:
                pass
        return {"ok": False, "name": py_fn.__name__, "arch": f"sm_{arch}",
                "error_type": type(e).__name__, "message": short(str(e), 2000),
                "line": line, "source_line": src_line}
