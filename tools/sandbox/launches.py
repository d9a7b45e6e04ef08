"""Triton launches in the worker: counted, and what ran compiled again for a real GPU.

Covers the hooks on JITFunction.run (and Autotuner.run, InterpretedFunction.run) that
count every launch for the judge's runtime guard and, during the warm request, compile
the forward's kernels without running them (while `worker.triton_off`, skip them:
tools/sandbox/ownership.py); `launch_spec` and `spec_json` describe one
launch well enough to compile it for sm_90 in a clean worker (`compile_launched`), since
Triton's interpreter hides GPU-only compile errors, registers and spills. Decides nothing: the judge reads the counts and the compile results.
"""
from __future__ import annotations

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
                with watch.not_candidate():   # benchmarking: Triton's reads, not the candidate's
                    return orig(tuner, *args, **kwargs)
            return run
        Autotuner.run = autotune_run(Autotuner.run)
    except ImportError:
        pass
    try:
        from triton.runtime.interpreter import InterpretedFunction
        InterpretedFunction.run = wrap(InterpretedFunction.run)
    except ImportError:
        pass


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
    """(key, spec) describing one launch well enough to compile it for a GPU."""
    try:
        import inspect
        from triton.runtime.jit import mangle_type
        py_fn = getattr(fn, "fn", fn)
        names = list(inspect.signature(py_fn).parameters)
        bound = dict(zip(names, args))
        bound.update({k: v for k, v in kwargs.items() if k in names})
        options = {k: v for k, v in kwargs.items() if k in _LAUNCH_OPTIONS and k != "debug"}
        sig, const = {}, {}
        annotations = getattr(py_fn, "__annotations__", {})
        for n in names:
            v = bound.get(n)
            is_const = "constexpr" in str(annotations.get(n, ""))
            if is_const or v is None or isinstance(v, (str, type)):
                sig[n], const[n] = "constexpr", v
            else:
                sig[n] = mangle_type(v)
        key = (py_fn.__qualname__, py_fn.__code__.co_firstlineno, tuple(sorted(sig.items())),
               repr(sorted(const.items(), key=lambda kv: kv[0])), repr(sorted(options.items())))
        return key, (py_fn, sig, const, options)
    except Exception:  # an odd launch we cannot describe: skip its GPU compile, not the trial
        return None


def _plain(v) -> bool:
    """A constexpr a clean process can be handed as the value itself: None, int, float, bool,
    str (exactly those types: a subclass may compare or print as it likes), tuples and lists
    of them, Triton's dtypes, torch dtypes, jitted functions."""
    if v is None or type(v) in (int, float, bool, str):
        return True
    if type(v) in (tuple, list):
        return all(_plain(x) for x in v)
    import torch
    import triton.language as tl
    from triton.runtime.jit import JITFunction
    if type(v) is tl.constexpr:
        return _plain(v.value)
    return type(v) in (tl.dtype, tl.pointer_type, tl.block_type, torch.dtype, JITFunction)


def spec_json(spec) -> dict:
    """The launch for a clean process: the kernel by module, qualified name and first line
    (two kernels of one name are two kernels), its constexprs by value. `not_plain` names
    constexprs no value can stand for (an object of the candidate's own class): compiled
    from a stand-in such as its repr, the GPU build would check other code than the
    interpreter ran, so they fail the compile check instead."""
    py_fn, sig, const, options = spec
    def plain(v):
        return v if isinstance(v, (int, float, bool, str)) or v is None else repr(v)
    return {"name": py_fn.__name__, "qualname": py_fn.__qualname__, "module": py_fn.__module__,
            "line": py_fn.__code__.co_firstlineno, "signature": sig,
            "constexprs": {k: plain(v) for k, v in const.items()}, "options": options,
            "not_plain": [f"{k} ({type(v).__qualname__})" for k, v in const.items() if not _plain(v)]}


def find_kernel(module, qualname: str, line: int | None = None):
    """The plain Python function of the kernel `qualname` defined in `module` (at `line`
    when given), through class bodies, staticmethod and autotune / heuristics wrappers;
    None when no name reaches it (a kernel defined inside a function). Names are read
    from the namespaces themselves (no getattr: a class's __getattr__ or descriptor
    could answer with another function)."""
    obj = module
    for part in qualname.split("."):
        space = vars(obj) if isinstance(obj, (type, types.ModuleType)) else None
        if space is None or part not in space:
            return None
        obj = space[part]
    for _ in range(5):
        code = getattr(obj, "__code__", None)
        if code is not None and getattr(obj, "__qualname__", None) == qualname:
            return obj if line is None or code.co_firstlineno == line else None
        obj = getattr(obj, "fn", None) or getattr(obj, "__func__", None)
        if obj is None:
            return None
    return None


def compile_launched(module, js: dict, arch: int) -> dict:
    """compile_for_gpu of one spec_json from a clean process that imported the candidate as
    `module`; a kernel it cannot reach, or one launched with a constexpr no value can
    stand for, fails: its GPU build cannot be checked on this CPU."""
    name = js["name"]
    if js.get("not_plain"):
        return {"ok": False, "name": name, "error_type": "ConstexprNotPlain", "line": js.get("line"),
                "message": f"constexpr argument {', '.join(js['not_plain'])} is not a plain value (int, float, "
                           "bool, str, None, a dtype, a tuple of these, a jitted function): its GPU build cannot "
                           "be checked; pass plain values as tl.constexpr"}
    if js.get("module", "candidate") != "candidate":
        import sys
        module = sys.modules.get(js["module"])
    fn = find_kernel(module, js.get("qualname", name), js.get("line")) if module is not None else None
    if fn is None:
        return {"ok": False, "name": name, "error_type": "KernelNotFound", "line": js.get("line"),
                "message": f"kernel {js.get('qualname', name)} (line {js.get('line')}) was launched but no name "
                           "in its module reaches it (defined inside a function?): its GPU build cannot be "
                           "checked; define @triton.jit kernels at module level or in a class body"}
    return compile_for_gpu((fn, js["signature"], js["constexprs"], js["options"]), arch)


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
