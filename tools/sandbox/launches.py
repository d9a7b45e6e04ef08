"""Triton launches in the worker: counted, and what ran compiled again for a real GPU.

Covers the hooks on JITFunction.run (and Autotuner.run, InterpretedFunction.run) that
count every launch for the judge's runtime guard and, during the warm request, compile
the forward's kernels without running them (while `worker.triton_off`, skip them:
tools/sandbox/ownership.py); `launch_spec` and `spec_json` describe one
launch well enough to compile it for sm_90 in a clean worker (`find_kernel`,
`compile_for_gpu`), since Triton's interpreter hides GPU-only compile errors, registers
and spills. Decides nothing: the judge reads the counts and the compile results.
"""
from __future__ import annotations

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
        key = (py_fn.__name__, tuple(sorted(sig.items())), repr(sorted(const.items(), key=lambda kv: kv[0])),
               repr(sorted(options.items())))
        return key, (py_fn, sig, const, options)
    except Exception:  # an odd launch we cannot describe: skip its GPU compile, not the trial
        return None


def spec_json(spec) -> dict:
    py_fn, sig, const, options = spec
    def plain(v):
        return v if isinstance(v, (int, float, bool, str)) or v is None else repr(v)
    return {"name": py_fn.__name__, "signature": sig,
            "constexprs": {k: plain(v) for k, v in const.items()}, "options": options}


def find_kernel(module, name: str):
    """The plain Python function of kernel `name` (through autotune/heuristics wrappers)."""
    for v in vars(module).values():
        obj = v
        for _ in range(4):
            if getattr(obj, "__name__", None) == name and hasattr(obj, "__code__"):
                return obj
            inner = getattr(obj, "fn", None)
            if inner is None:
                break
            obj = inner
    return None


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
