"""Inductor's wrapper module as tools/dialect/kernelbook.py reads it: its kernels.

Covers finding each `async_compile.triton(...)` kernel and `call()` in the module
torch.compile wrote (refusing, with a ValueError naming the construct, every wrapper
statement not known to be boilerplate), reading a kernel's source, heuristic, grid type
and launch-time constexprs (`Kernel`), and the first config Inductor's own heuristics
give it (`static_config`, when the autotuner recorded none); plus the small AST
helpers the conversion shares. Rewrites nothing: tools/dialect/kernelbook.py does.
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass, replace

# launch-time constexprs a config may set, in the order KernelBook's launches name them
BLOCK_PARAMS = ("XBLOCK", "YBLOCK", "ZBLOCK", "R0_BLOCK", "R1_BLOCK", "RBLOCK")


# grid_type -> the numel parameters grid() takes, in KernelBook's order (grid(ynumel, xnumel)).
# Grid2DWithYZOverflow (a y grid that may pass CUDA's 65535: the kernel reads its y block as
# program_id(1) + program_id(2) * num_programs(1)) is torch <= 2.6's grid(ynumel, xnumel),
# which spills y into z the same way (tools/dialect/inductor_grid.py)
GRID_NUMELS = {"Grid1D": ("xnumel",), "Grid2D": ("ynumel", "xnumel"),
               "Grid2DWithYZOverflow": ("ynumel", "xnumel"), "Grid3D": ("znumel", "ynumel", "xnumel")}


HEURISTICS = ("pointwise", "reduction", "persistent_reduction", "template")


# a template kernel (GEMM, convolution under max-autotune) is launched on a grid fixed at the
# launch site: call() passes its three dimensions after the kernel's own arguments
FIXED_GRID = "FixedGrid"


_SET_DRIVER = r"triton_helpers\.set_driver_to_(gpu|cpu)\(\)"


@dataclass(frozen=True)
class Kernel:
    name: str
    heuristic: str                 # pointwise | reduction | persistent_reduction
    jit_sources: tuple[str, ...]   # the kernel and any @triton.jit helpers its source defines
    params: tuple[str, ...]        # runtime parameters, in order
    constexprs: tuple[str, ...]    # constexpr parameters set at launch
    grid_type: str
    decorator: ast.Call            # the heuristics call, for the static config


def read_wrapper(tree: ast.Module, carried=frozenset()) -> tuple[dict[str, Kernel], ast.FunctionDef]:
    kernels: dict[str, Kernel] = {}
    call_fn = None
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        if isinstance(node, ast.Assign) and call_name(node).startswith("async_compile."):
            kind = call_name(node).split(".", 1)[1]
            if kind != "triton":
                raise ValueError(f"unsupported kernel kind async_compile.{kind} ({_target(node)})")
            kernel = _read_kernel(node)
            kernels[kernel.name] = kernel
        elif isinstance(node, ast.ClassDef) and node.name == "Runner":
            call_fn = next((f for f in node.body if isinstance(f, ast.FunctionDef) and f.name == "call"), None)
        elif isinstance(node, ast.FunctionDef) and node.name == "call":
            call_fn = node
        elif isinstance(node, ast.FunctionDef) and node.name.startswith("partition_"):
            raise ValueError(f"graph partitions are not supported ({node.name})")
        elif isinstance(node, ast.Assign) and re.fullmatch(r"_tensor_constant\d+", _target(node)):
            if _target(node) not in carried:   # carried: call() takes it from ModelNew's buffer (`add_call_args`)
                raise ValueError("the forward makes a tensor from Python values (`torch.tensor([[1., 0.], ...])`, or "
                                 "an index that is a Python list of several items), which Inductor keeps as a constant "
                                 "outside call(); a seed carries one of up to 4096 real, integer or bool values: make "
                                 "it in __init__ as a buffer (self.register_buffer(...)) and read it from there")
        elif not _wrapper_boilerplate(node):
            raise ValueError(f"unsupported wrapper statement: {short_code(node)}")
    if call_fn is None:
        raise ValueError("no call() function in the Inductor output")
    return kernels, call_fn


def _wrapper_boilerplate(node: ast.stmt) -> bool:
    """Module-level lines of the wrapper that KernelBook's header replaces or drops."""
    if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
        value = ast.unparse(node.value)
        return (value.startswith(("torch._C.", "torch.ops.", "torch._C._", "AsyncCompile(", "Runner(", "runner."))
                or node.targets[0].id in ("aten", "inductor_ops", "_quantized", "align"))
    if isinstance(node, ast.Expr):
        return ast.unparse(node.value) == "async_compile.wait(globals())" or isinstance(node.value, ast.Constant)
    if isinstance(node, ast.Delete):
        return ast.unparse(node) == "del async_compile"
    if isinstance(node, ast.FunctionDef):
        return node.name in ("get_raw_stream", "get_args", "benchmark_compiled_module")
    if isinstance(node, ast.If):
        return ast.unparse(node.test) == "__name__ == '__main__'"
    return False


def _read_kernel(node: ast.Assign) -> Kernel:
    call = node.value
    if len(call.args) < 2 or not all(isinstance(a, ast.Constant) and isinstance(a.value, str) for a in call.args[:2]):
        raise ValueError(f"async_compile.triton without literal name and source ({_target(node)})")
    name, src = call.args[0].value, call.args[1].value
    ktree = ast.parse(src)
    lines = src.splitlines()
    jit_sources, main = [], None
    for stmt in ktree.body:
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            continue
        if isinstance(stmt, ast.Expr) and re.fullmatch(_SET_DRIVER, ast.unparse(stmt)):
            continue
        if not isinstance(stmt, ast.FunctionDef) or not stmt.decorator_list \
                or dotted(stmt.decorator_list[-1]) != "triton.jit":
            raise ValueError(f"kernel {name}: unsupported statement in its source: {short_code(stmt)}")
        jit = stmt.decorator_list[-1]
        jit_sources.append("\n".join(lines[jit.lineno - 1: stmt.end_lineno]))
        if stmt.name == name:
            main = stmt
        elif len(stmt.decorator_list) > 1:
            raise ValueError(f"kernel {name}: a second decorated kernel {stmt.name} in its source")
    if main is None:
        raise ValueError(f"kernel {name}: its source defines no function of that name")
    if len(main.decorator_list) != 2 or not isinstance(main.decorator_list[0], ast.Call):
        raise ValueError(f"kernel {name}: expected one heuristics decorator above @triton.jit")
    deco = main.decorator_list[0]
    heuristic = dotted(deco.func).rpartition(".")[2]
    if not dotted(deco.func).startswith("triton_heuristics.") or heuristic not in HEURISTICS:
        raise ValueError(f"kernel {name}: unsupported heuristic {dotted(deco.func)}")
    grid_type = _grid_type(deco)
    if (heuristic == "template") != (grid_type == FIXED_GRID):
        raise ValueError(f"kernel {name}: grid type {grid_type} with heuristic {heuristic}")
    if grid_type == FIXED_GRID:
        _check_fixed_grid(name, deco)
    elif grid_type not in GRID_NUMELS:
        raise ValueError(f"kernel {name}: unsupported grid type {grid_type}")
    params, constexprs = [], []
    for a in main.args.args:
        (constexprs if a.annotation is not None and "constexpr" in ast.unparse(a.annotation) else params).append(a.arg)
    unknown = [c for c in constexprs if c not in BLOCK_PARAMS]
    if unknown:
        raise ValueError(f"kernel {name}: unsupported constexpr parameter(s) {', '.join(unknown)}")
    return Kernel(name=name, heuristic=heuristic, jit_sources=tuple(jit_sources), params=tuple(params),
                  constexprs=tuple(constexprs), grid_type=grid_type, decorator=deco)


def _check_fixed_grid(name: str, deco: ast.Call) -> None:
    """A template's launcher takes exactly the three grid dimensions after the kernel's
    arguments, and its decorator names its launch config (num_warps, num_stages)."""
    meta = next((k.value for k in deco.keywords if k.arg == "inductor_meta"), None)
    text = ast.unparse(meta) if meta is not None else ""
    grid = re.search(r"'fixed_grid':\s*(\[[^\]]*\])", text)
    extra = re.search(r"'extra_launcher_args':\s*(\[[^\]]*\])", text)
    if not grid or not extra or ast.literal_eval(grid.group(1)) != ast.literal_eval(extra.group(1)) \
            or len(ast.literal_eval(grid.group(1))) != 3:
        raise ValueError(f"kernel {name}: unsupported template launcher (fixed grid "
                         f"{grid.group(1) if grid else '?'}, extra arguments {extra.group(1) if extra else '?'})")
    missing = [k for k in ("num_warps", "num_stages") if not isinstance(_keyword(deco, k), ast.Constant)]
    if missing:
        raise ValueError(f"kernel {name}: its template decorator sets no literal {', '.join(missing)}")


def _keyword(call: ast.Call, name: str):
    return next((k.value for k in call.keywords if k.arg == name), None)


def _grid_type(deco: ast.Call) -> str:
    """inductor_meta's grid_type (the dict also holds sets and enums: not a literal)."""
    meta = next((k.value for k in deco.keywords if k.arg == "inductor_meta"), None)
    m = re.search(r"'grid_type':\s*'(\w+)'", ast.unparse(meta)) if meta is not None else None
    return m.group(1) if m else "Grid1D"


def static_config(kernel: Kernel) -> dict[str, int]:
    """The first config Inductor's heuristics list for this kernel (what it launches
    when there is nothing to autotune; with several, the autotuner would benchmark)."""
    if kernel.grid_type == FIXED_GRID:     # a template: one config, written on its decorator
        return {k: int(_keyword(kernel.decorator, k).value) for k in ("num_warps", "num_stages")}
    from torch._inductor.runtime import hints, triton_heuristics
    deco = ast.Call(func=kernel.decorator.func, args=kernel.decorator.args,
                    keywords=[*kernel.decorator.keywords, ast.keyword("return_configs", ast.Constant(True))])
    expr = ast.fix_missing_locations(ast.Expression(deco))
    scope = {"triton_heuristics": triton_heuristics, "__file__": f"{kernel.name}.py",
             **{n: getattr(hints, n) for n in ("AutotuneHint", "ReductionHint", "TileHint", "DeviceProperties")}}
    try:
        configs = eval(compile(expr, kernel.name, "eval"), scope)  # Inductor's own decorator arguments
    except Exception as e:
        raise ValueError(f"kernel {kernel.name}: its heuristics gave no config ({type(e).__name__}: {e})") from None
    if not configs:
        raise ValueError(f"kernel {kernel.name}: its heuristics gave no config")
    first = configs[0]
    return {**first.kwargs, "num_warps": first.num_warps, "num_stages": first.num_stages}


def dotted(node) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = dotted(node.value)
        return f"{base}.{node.attr}" if base else ""
    return ""


def call_name(stmt: ast.stmt) -> str:
    value = getattr(stmt, "value", None)
    return dotted(value.func) if isinstance(value, ast.Call) else ""


def _target(node: ast.Assign) -> str:
    return ast.unparse(node.targets[0])


def short_code(node: ast.AST) -> str:
    return " ".join(ast.unparse(node).split())[:100]


def load_scalar_tensors(call_fn: ast.FunctionDef, kernels: dict[str, Kernel]) -> dict[str, Kernel]:
    """Inductor's cpu wrapper hands a 0-dim tensor input (a scalar nn.Parameter: a gate, a
    temperature, CLIP's logit_scale) to its kernel as a number, `kernel.run(buf, arg3_1.item(), ...)`:
    a host read the judge rejects. Where every launch of a kernel passes `NAME.item()` at one
    position, the launch passes NAME itself and the kernel loads the value first
    (`in_ptr0 = tl.load(in_ptr0)`): the same number, read on the device. For the cpu capture
    only: a cuda wrapper's `.item()` reads a cpu tensor, which a GPU kernel cannot load.
    Returns `kernels` with those kernels' sources rewritten; call_fn's launches are edited in place."""
    launches: dict[str, list[ast.Call]] = {}
    for node in ast.walk(call_fn):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "run" \
                and dotted(node.func.value) in kernels:
            launches.setdefault(dotted(node.func.value), []).append(node)
    out = dict(kernels)
    for name, calls in launches.items():
        kernel = kernels[name]
        positions = set.intersection(*({i for i, a in enumerate(c.args) if _item_of_name(a)} for c in calls))
        positions = sorted(i for i in positions if i < len(kernel.params))
        if not positions:
            continue
        for c in calls:
            for i in positions:
                c.args[i] = c.args[i].func.value
        out[name] = replace(kernel, jit_sources=tuple(
            _load_first(src, name, [kernel.params[i] for i in positions]) for src in kernel.jit_sources))
    return out


# Inductor's combine function of a sum or product scan (torch.cumsum / cumprod)
_SUM_OR_PRODUCT = re.compile(r"def (_triton_helper_fn_\w+)\(arg0_0, arg1_0\):\n    tmp0 = arg0_0 [+*] arg1_0\n"
                             r"    return tmp0\n?")


def wide_scans(kernels: dict[str, Kernel]) -> dict[str, Kernel]:
    """On cpu, torch's cumsum and cumprod of float32 add in float64 (at::acc_type) and round
    once at the end; a float32 scan of thousands of elements is then less exact than the
    reference by far more than the fp32 tolerance allows where a running sum passes near
    zero (a row of 8192 standard normals). A scan with a sum or product combine function
    scans float64 here: its operand cast (`tl.associative_scan((tmp2.to(tl.float64),), ...)`)
    and its carry across the loop over the row (Inductor's `tl.full([XBLOCK, 1], nan, ...)`)
    float64; the stores round to the output's float32; the kernel's other work (a fused
    LayerNorm's Welford) is left as it is. For the cpu capture only: on a GPU torch scans
    float32 in float32. Returns `kernels`, those kernels' own sources rewritten."""
    out = dict(kernels)
    for name, kernel in kernels.items():
        helpers = "|".join(m.group(1) for src in kernel.jit_sources for m in [_SUM_OR_PRODUCT.search(src)] if m)
        scan = re.compile(rf"tl\.associative_scan\(\((\w+),\), (\w+), ({helpers})\)") if helpers else None
        if scan is None or not any(scan.search(src) for src in kernel.jit_sources):
            continue
        out[name] = replace(kernel, jit_sources=tuple(
            scan.sub(r"tl.associative_scan((\1.to(tl.float64),), \2, \3)", src).replace(
                "tl.full([XBLOCK, 1], float('nan'), tl.float32)", "tl.full([XBLOCK, 1], float('nan'), tl.float64)")
            if f"def {name}(" in src else src for src in kernel.jit_sources))
    return out


def _item_of_name(node: ast.expr) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "item" \
        and isinstance(node.func.value, ast.Name) and not node.args and not node.keywords


def _load_first(src: str, name: str, params: list[str]) -> str:
    """`src` (one @triton.jit function's text) with `P = tl.load(P)` for each of `params` as the
    first lines of its body, when it is the function `name`; other functions unchanged."""
    fn = next((s for s in ast.parse(src).body if isinstance(s, ast.FunctionDef)), None)
    if fn is None or fn.name != name:
        return src
    first = fn.body[0]
    lines = src.splitlines()
    pad = " " * first.col_offset
    # a block of one, not a 0-dim value: Triton's interpreter cannot `|` a 0-dim mask with a block
    # (`minimum(exp(p), 100.0)`'s NaN test), and a block of one broadcasts wherever the number did
    loads = [f"{pad}{p} = tl.load({p} + tl.zeros([1], tl.int32))   # a 0-dim tensor the cpu wrapper read with .item()"
             for p in params]
    return "\n".join(lines[:first.lineno - 1] + loads + lines[first.lineno - 1:])


def _asserted_layouts(call_fn: ast.FunctionDef) -> dict[str, tuple[str, str]]:
    """{argument: (size, stride) source text} of call()'s `assert_size_stride(arg, size, stride)`."""
    out = {}
    for node in ast.walk(call_fn):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "assert_size_stride" \
                and len(node.args) >= 3 and isinstance(node.args[0], ast.Name):
            out.setdefault(node.args[0].id, (ast.unparse(node.args[1]), ast.unparse(node.args[2])))
    return out


def _call_arg_names(call_fn: ast.FunctionDef) -> list[str]:
    for stmt in call_fn.body:
        if isinstance(stmt, ast.Assign) and ast.unparse(stmt.value) == "args":
            target = stmt.targets[0]
            elts = target.elts if isinstance(target, ast.Tuple) else [target]
            return [e.id for e in elts]
    raise ValueError("call() does not unpack its args")


def add_call_args(call_fn: ast.FunctionDef, names: list[str]) -> list[str]:
    """call()'s argument names with `names` (module-level constants of the wrapper) unpacked
    from `args` after them, so that the forward hands them in."""
    for stmt in call_fn.body:
        if isinstance(stmt, ast.Assign) and ast.unparse(stmt.value) == "args":
            target = stmt.targets[0]
            elts = list(target.elts) if isinstance(target, ast.Tuple) else [target]
            stmt.targets[0] = ast.Tuple(elts=elts + [ast.Name(id=n, ctx=ast.Store()) for n in names], ctx=ast.Store())
            return [e.id for e in stmt.targets[0].elts]
    raise ValueError("call() does not unpack its args")


# an input the forward writes in place, copied first (tools/dialect/kernelbook.py): the seed's kernels
# write the copy, and the caller's tensor is left as it came, as the judge requires of every candidate
INPUT_COPY = '''
@triton.jit
def input_copy_kernel(src_ptr, dst_ptr, span, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst_ptr + i, tl.load(src_ptr + i, mask=i < span), mask=i < span)


def input_copy(t):
    """`t`'s values in memory of its own, laid out as `t` (sizes, strides): Model writes this
    input in place, the seed writes the copy, and the caller's tensor is left as it came."""
    out = torch.empty_strided(tuple(t.shape), tuple(t.stride()), dtype=t.dtype, device=t.device)
    span = 1 + sum((n - 1) * s for n, s in zip(t.shape, t.stride())) if t.numel() else 0
    if span:
        input_copy_kernel[(-(-span // 1024),)](t, out, span, BLOCK=1024)
    return out
'''


def copy_written_inputs(call_fn: ast.FunctionDef, kernels: dict[str, Kernel], arg_names: list[str],
                        sources, returned):
    """Rebind each input of call() (a source "input:k") that a statement writes to its
    `input_copy` first: a kernel's out_ptr / in_out_ptr argument, an op's out=, an in-place
    aten op's first argument, directly or through a view or rename of the input. An input
    the forward returns as it came ("input:k" in `returned`) is then returned by call() as
    that copy. Returns (`returned` with those indices, whether any input was copied)."""
    base = {a: a for a, s in zip(arg_names, sources) if str(s).startswith("input:")}
    written: list[str] = []
    for stmt in _statements(call_fn.body):
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            v = stmt.value
            src = v if isinstance(v, ast.Name) else v.args[0] if isinstance(v, ast.Call) and v.args and (
                dotted(v.func) in ("reinterpret_tensor", "torch.as_strided") or
                getattr(v.func, "attr", "") in ("view", "as_strided", "reshape")) else None
            if isinstance(src, ast.Name) and src.id in base:
                base[stmt.targets[0].id] = base[src.id]
        for call in (n for n in ast.walk(stmt) if isinstance(n, ast.Call)):
            name, kernel = dotted(call.func), None
            if name.endswith(".run"):
                kernel = kernels.get(name[:-4])
            targets = [kw.value for kw in call.keywords if kw.arg == "out"]
            if kernel is not None:
                targets += [a for p, a in zip(kernel.params, call.args) if p.startswith(("out_ptr", "in_out_ptr"))]
            elif re.search(r"\w_(\.|$)", name) and call.args:   # aten.scatter_reduce_.two(buf, ...)
                targets.append(call.args[0])
            written += [base[t.id] for t in targets if isinstance(t, ast.Name) and t.id in base
                        and base[t.id] not in written]
    if not written:
        return returned, False
    at = next(i + 1 for i, s in enumerate(call_fn.body) if isinstance(s, ast.Assign) and ast.unparse(s.value) == "args")
    if at < len(call_fn.body) and ast.unparse(call_fn.body[at]) == "args.clear()":
        at += 1
    call_fn.body[at:at] = [ast.parse(f"{a} = input_copy({a})").body[0] for a in written]
    ret = next((s for s in call_fn.body if isinstance(s, ast.Return)), None)
    if isinstance(returned, list) and ret is not None and isinstance(ret.value, ast.Tuple):
        copied = {s: a for a, s in zip(arg_names, sources) if a in written}
        returned = list(returned)
        for j, r in enumerate(returned):
            if isinstance(r, str) and r in copied:   # the copy as Model's input after the call
                ret.value.elts.append(ast.Name(copied[r], ast.Load()))
                returned[j] = len(ret.value.elts) - 1
                _kept(call_fn.body, copied[r])
    ast.fix_missing_locations(call_fn)
    return returned, True


def _statements(body: list):
    """Statements in order, the bodies of `with` blocks (Inductor's device guard) flattened."""
    for stmt in body:
        if isinstance(stmt, ast.With):
            yield from _statements(stmt.body)
        else:
            yield stmt


def _kept(body: list, name: str) -> None:
    """`del name` taken out of `body` (and its `with` blocks): call() returns it."""
    for stmt in list(body):
        if isinstance(stmt, ast.With):
            _kept(stmt.body, name)
        elif isinstance(stmt, ast.Delete):
            stmt.targets = [t for t in stmt.targets if not (isinstance(t, ast.Name) and t.id == name)]
            if not stmt.targets:
                body.remove(stmt)
