"""Inductor's Triton output rewritten in KernelBook format, and the Inductor seed of a run.

KernelLLM was fine-tuned on KernelBook: PyTorch modules paired with the code
torch.compile wrote for them (torch 2.5 era), as a `ModelNew`. Current Inductor writes
the same kernels in a different wrapper (heuristics decorators, an async_compile
module, `kernel.run(..., stream=...)`). `convert` turns that wrapper back into the
dialect the model was trained on:

  * the header KernelBook pairs open with (HEADER);
  * each kernel as a plain `@triton.jit` function, its body byte for byte as Inductor
    wrote it (hard-coded xnumel / r0_numel, persistent R0_BLOCK constants);
  * `call(args)` launching `kernel[grid(numels)](..., XBLOCK=.., num_warps=..,
    num_stages=..)` with the launch config the autotuner chose (recorded in the
    Capture) or, when none was recorded, the first config of Inductor's own heuristics;
  * `ModelNew(nn.Module)` built by Model's own __init__ (so it owns the same parameters,
    made in the same order from the same seed) whose forward passes parameters,
    buffers and inputs to call() in Inductor's argument order.

What the code alone does not say (which module tensor each call() argument is, the
configs the autotuner chose) comes with it in a `Capture` (tools/inductor_capture.py).
`seed_candidate` = capture + convert; `python -m tools.kernelbook seed PROBLEM
--device D` runs it in its own process (the agent never compiles in its own).

Not covered (ValueError naming the construct, never a guessed candidate): graph
breaks, template / cooperative / split-scan / combo kernels, graph partitions, aten
fallbacks and other wrapper statements not listed in `_rewrite_call`, models whose
forward returns anything but one tensor.
"""
from __future__ import annotations

import argparse
import ast
import re
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

from tools.inductor_capture import Capture, capture, capture_text, read_capture

HEADER = """\
import torch
import triton
import triton.language as tl
from torch._inductor.runtime.triton_heuristics import grid
from torch._C import _cuda_getCurrentRawStream as get_raw_stream
from torch._inductor.runtime import triton_helpers
from torch._inductor.runtime.triton_helpers import libdevice, math as tl_math
import torch.nn as nn
assert_size_stride = torch._C._dynamo.guards.assert_size_stride
empty_strided_cuda = torch._C._dynamo.guards._empty_strided_cuda
reinterpret_tensor = torch._C._dynamo.guards._reinterpret_tensor
"""
# KernelBook's files import extern_kernels right after torch, only when they use it
EXTERN_IMPORT = "from torch._inductor.select_algorithm import extern_kernels\n"

# launch-time constexprs a config may set, in the order KernelBook's launches name them
BLOCK_PARAMS = ("XBLOCK", "YBLOCK", "ZBLOCK", "R0_BLOCK", "R1_BLOCK", "RBLOCK")
# grid_type -> the numel parameters grid() takes, in KernelBook's order (grid(ynumel, xnumel))
GRID_NUMELS = {"Grid1D": ("xnumel",), "Grid2D": ("ynumel", "xnumel"), "Grid3D": ("znumel", "ynumel", "xnumel")}
HEURISTICS = ("pointwise", "reduction", "persistent_reduction")
_ALLOC = ("empty_strided_cuda", "empty_strided_cpu")
_DEVICE_GUARD = r"torch\.\w+\._DeviceGuard\(\d+\)"
_SET_DRIVER = r"triton_helpers\.set_driver_to_(gpu|cpu)\(\)"


@dataclass(frozen=True)
class _Kernel:
    name: str
    heuristic: str                 # pointwise | reduction | persistent_reduction
    jit_sources: tuple[str, ...]   # the kernel and any @triton.jit helpers its source defines
    params: tuple[str, ...]        # runtime parameters, in order
    constexprs: tuple[str, ...]    # constexpr parameters set at launch
    grid_type: str
    decorator: ast.Call            # the heuristics call, for the static config


# ---------------------------------------------------------------- convert

def convert(problem, capture: Capture) -> str:
    """KernelBook-format candidate source for `problem` (tools.problem.Problem)."""
    # 1) the wrapper module: kernels and call()
    try:
        tree = ast.parse(capture.code)
    except SyntaxError as e:
        raise ValueError(f"Inductor output is not valid Python: {e.msg} (line {e.lineno})") from None
    kernels, call_fn = _read_wrapper(tree)
    # 2) which module tensor each call() argument is
    arg_names = _call_arg_names(call_fn)
    model, inputs = _meta_model(problem)
    sources = capture.arg_sources or _infer_sources(call_fn, arg_names, model, inputs)
    if len(sources) != len(arg_names):
        raise ValueError(f"call() takes {len(arg_names)} arguments but {len(sources)} sources were recorded")
    _check_sources(sources, model, len(inputs))
    # 3) call() in KernelBook's shape, each launch with its config
    call_src, externs = _rewrite_call(call_fn, kernels, capture.launch_configs)
    # 4) ModelNew from Model's own __init__
    prelude, model_src = _model_new(problem.source, arg_names, sources, len(inputs))
    header = HEADER if not externs else HEADER.replace("import torch\n", "import torch\n" + EXTERN_IMPORT, 1)
    jit = [s for k in kernels.values() for s in k.jit_sources]
    parts = [header + prelude] + list(dict.fromkeys(jit)) + [call_src, model_src]
    out = "\n\n\n".join(p.strip("\n") for p in parts if p.strip()) + "\n"
    compile(out, "<kernelbook candidate>", "exec")  # our own bug if this fails
    return out


def _read_wrapper(tree: ast.Module) -> tuple[dict[str, _Kernel], ast.FunctionDef]:
    kernels: dict[str, _Kernel] = {}
    call_fn = None
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        if isinstance(node, ast.Assign) and _call_name(node).startswith("async_compile."):
            kind = _call_name(node).split(".", 1)[1]
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
        elif not _wrapper_boilerplate(node):
            raise ValueError(f"unsupported wrapper statement: {_short(node)}")
    if call_fn is None:
        raise ValueError("no call() function in the Inductor output")
    if not kernels:
        raise ValueError("the Inductor output has no Triton kernel")
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


def _read_kernel(node: ast.Assign) -> _Kernel:
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
                or _dotted(stmt.decorator_list[-1]) != "triton.jit":
            raise ValueError(f"kernel {name}: unsupported statement in its source: {_short(stmt)}")
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
    heuristic = _dotted(deco.func).rpartition(".")[2]
    if not _dotted(deco.func).startswith("triton_heuristics.") or heuristic not in HEURISTICS:
        raise ValueError(f"kernel {name}: unsupported heuristic {_dotted(deco.func)}")
    grid_type = _grid_type(deco)
    if grid_type not in GRID_NUMELS:
        raise ValueError(f"kernel {name}: unsupported grid type {grid_type}")
    params, constexprs = [], []
    for a in main.args.args:
        (constexprs if a.annotation is not None and "constexpr" in ast.unparse(a.annotation) else params).append(a.arg)
    unknown = [c for c in constexprs if c not in BLOCK_PARAMS]
    if unknown:
        raise ValueError(f"kernel {name}: unsupported constexpr parameter(s) {', '.join(unknown)}")
    return _Kernel(name=name, heuristic=heuristic, jit_sources=tuple(jit_sources), params=tuple(params),
                   constexprs=tuple(constexprs), grid_type=grid_type, decorator=deco)


def _grid_type(deco: ast.Call) -> str:
    """inductor_meta's grid_type (the dict also holds sets and enums: not a literal)."""
    meta = next((k.value for k in deco.keywords if k.arg == "inductor_meta"), None)
    m = re.search(r"'grid_type':\s*'(\w+)'", ast.unparse(meta)) if meta is not None else None
    return m.group(1) if m else "Grid1D"


def static_config(kernel: _Kernel) -> dict[str, int]:
    """The first config Inductor's heuristics list for this kernel (what it launches
    when there is nothing to autotune; with several, the autotuner would benchmark)."""
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


def _call_arg_names(call_fn: ast.FunctionDef) -> list[str]:
    for stmt in call_fn.body:
        if isinstance(stmt, ast.Assign) and ast.unparse(stmt.value) == "args":
            target = stmt.targets[0]
            elts = target.elts if isinstance(target, ast.Tuple) else [target]
            return [e.id for e in elts]
    raise ValueError("call() does not unpack its args")


def _rewrite_call(call_fn: ast.FunctionDef, kernels: dict[str, _Kernel],
                  recorded: dict[str, dict[str, int]]) -> tuple[str, set[str]]:
    """call(args) as KernelBook writes it; also the extern_kernels ops it uses."""
    pre, body, ret, externs = [], [], None, set()
    stream_done = False
    stmts = list(call_fn.body)
    while stmts:
        stmt = stmts.pop(0)
        text = ast.unparse(stmt)
        if ret is not None:
            raise ValueError(f"call(): statement after its return: {_short(stmt)}")
        if isinstance(stmt, ast.With) and re.fullmatch(_DEVICE_GUARD, ast.unparse(stmt.items[0].context_expr)):
            stmts = stmt.body + stmts            # the device guard is written again around the body
        elif isinstance(stmt, ast.Return):
            ret = stmt
        elif text == "args.clear()" or (isinstance(stmt, ast.Assign) and ast.unparse(stmt.value) == "args"):
            pre.append(stmt)
        elif _call_name(stmt) == "assert_size_stride":
            stmt.value.args = stmt.value.args[:3]   # KernelBook's form has no argument name
            pre.append(stmt)
        elif _call_name(stmt) == "assert_alignment" or re.fullmatch(r"torch\.\w+\.set_device\(\d+\)", text):
            continue
        elif isinstance(stmt, ast.Assign) and _call_name(stmt) == "get_raw_stream":
            if not stream_done:
                body.append(ast.parse("get_raw_stream(0)").body[0])
                stream_done = True
        elif isinstance(stmt, ast.Expr) and _call_name(stmt).endswith(".run") and _call_name(stmt)[:-4] in kernels:
            body.append(_launch(stmt.value, kernels[_call_name(stmt)[:-4]], recorded))
        elif isinstance(stmt, ast.Assign) and _call_name(stmt) in _ALLOC:
            stmt.value.func = ast.Name("empty_strided_cuda", ast.Load())
            body.append(stmt)
        elif isinstance(stmt, ast.Delete) or (isinstance(stmt, ast.Assign) and _plain_value(stmt.value)):
            body.append(stmt)
        elif isinstance(stmt, ast.Expr) and _call_name(stmt).startswith("extern_kernels."):
            externs.add(_call_name(stmt))
            body.append(stmt)
        else:
            raise ValueError(f"call(): unsupported statement: {_short(stmt)}")
    if ret is None:
        raise ValueError("call() has no return")
    n_out = len(ret.value.elts) if isinstance(ret.value, ast.Tuple) else -1
    if n_out != 1:
        raise ValueError(f"call() returns {n_out if n_out >= 0 else 'a non-tuple of'} values; "
                         "only a forward returning one tensor is supported")
    guard = ast.With(items=[ast.withitem(ast.parse("torch.cuda._DeviceGuard(0)", mode="eval").body)],
                     body=[ast.parse("torch.cuda.set_device(0)").body[0], *body])
    fn = ast.parse("def call(args):\n    pass").body[0]
    fn.body = [*pre, guard, ret]
    return ast.unparse(ast.fix_missing_locations(fn)), externs


def _launch(run: ast.Call, kernel: _Kernel, recorded: dict[str, dict[str, int]]) -> ast.Expr:
    """kernel.run(a, b, n, stream=s) -> kernel[grid(n)](a, b, n, XBLOCK=.., num_warps=.., num_stages=..)"""
    extra = [k.arg for k in run.keywords if k.arg not in ("stream", "grid")]
    if extra or any(isinstance(a, ast.Starred) for a in run.args):
        raise ValueError(f"launch of {kernel.name}: unsupported arguments {', '.join(map(str, extra)) or '*args'}")
    if len(run.args) != len(kernel.params):
        raise ValueError(f"launch of {kernel.name}: {len(run.args)} arguments for {len(kernel.params)} parameters")
    old_grid = next((k.value for k in run.keywords if k.arg == "grid"), None)
    if isinstance(old_grid, ast.Call) and _dotted(old_grid.func) == "grid":
        numels = old_grid.args          # torch <= 2.6 wrote the grid at the launch
    elif old_grid is not None:
        raise ValueError(f"launch of {kernel.name}: unsupported grid {ast.unparse(old_grid)}")
    else:
        numels = []
        for p in GRID_NUMELS[kernel.grid_type]:
            if p not in kernel.params:
                raise ValueError(f"launch of {kernel.name}: {kernel.grid_type} needs a {p} parameter")
            numels.append(run.args[kernel.params.index(p)])
    config = recorded.get(kernel.name) or static_config(kernel)
    missing = [c for c in kernel.constexprs if c not in config]
    if missing:
        raise ValueError(f"launch of {kernel.name}: its config sets no {', '.join(missing)}")
    keywords = [ast.keyword(c, ast.Constant(int(config[c]))) for c in sorted(kernel.constexprs, key=BLOCK_PARAMS.index)]
    keywords += [ast.keyword(k, ast.Constant(int(config[k]))) for k in ("num_warps", "num_stages")]
    target = ast.Subscript(value=ast.Name(kernel.name, ast.Load()),
                           slice=ast.Call(func=ast.Name("grid", ast.Load()), args=numels, keywords=[]), ctx=ast.Load())
    return ast.Expr(ast.Call(func=target, args=run.args, keywords=keywords))


def _plain_value(node: ast.expr) -> bool:
    """`buf1 = buf0` and `buf2 = reinterpret_tensor(buf0, ...)`: aliases, no compute."""
    return isinstance(node, ast.Name) or (isinstance(node, ast.Call) and _dotted(node.func) == "reinterpret_tensor")


# ---------------------------------------------------------------- arguments and ModelNew

def _meta_model(problem):
    """Model and its inputs on the meta device: names, shapes and strides, no memory."""
    import torch

    from tools.problem import split_init
    with torch.device("meta"):
        args, kwargs = split_init(problem.module.get_init_inputs())
        model = problem.module.Model(*args, **kwargs)
        inputs = list(problem.module.get_inputs())
    return model, inputs


def _check_sources(sources, model, n_inputs: int) -> None:
    params = dict(model.named_parameters())
    buffers = dict(model.named_buffers())
    for s in sources:
        kind, _, name = s.partition(":")
        ok = ((kind == "input" and name.isdigit() and int(name) < n_inputs) or
              (kind == "param" and name in params) or (kind == "buffer" and name in buffers))
        if not ok:
            raise ValueError(f"call() argument source {s!r} is not an input, parameter or buffer of Model")


def _infer_sources(call_fn, arg_names, model, inputs) -> tuple[str, ...]:
    """Without recorded sources: match each argument's asserted size and stride to one
    tensor of the model or its inputs; ambiguous matches are an error, not a guess."""
    import torch
    asserted = {}
    for stmt in ast.walk(call_fn):
        if isinstance(stmt, ast.Expr) and _call_name(stmt) == "assert_size_stride":
            a = stmt.value.args
            asserted[ast.unparse(a[0])] = (ast.literal_eval(a[1]), ast.literal_eval(a[2]))
    pool = {f"input:{i}": x for i, x in enumerate(inputs) if isinstance(x, torch.Tensor)}
    pool.update({f"param:{n}": p for n, p in model.named_parameters()})
    pool.update({f"buffer:{n}": b for n, b in model.named_buffers()})
    sources = []
    for name in arg_names:
        if name not in asserted:
            raise ValueError(f"cannot tell which tensor {name} is (no assert_size_stride); record arg_sources")
        hits = [s for s, t in pool.items() if (tuple(t.shape), tuple(t.stride())) == asserted[name]]
        if len(hits) != 1:
            raise ValueError(f"cannot tell which tensor {name} is ({len(hits)} candidates); record arg_sources")
        sources.append(hits[0])
    if len(set(sources)) != len(sources):
        raise ValueError("two call() arguments matched the same tensor; record arg_sources")
    return tuple(sources)


def _model_new(problem_src: str, arg_names: list[str], sources, n_inputs: int) -> tuple[str, str]:
    """(top-level definitions Model.__init__ needs, the ModelNew class)."""
    tree = ast.parse(problem_src)
    model = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Model"), None)
    if model is None:
        raise ValueError("problem defines no class Model")
    if [ast.unparse(b) for b in model.bases] not in (["nn.Module"], ["torch.nn.Module"], ["Module"]):
        raise ValueError(f"Model subclasses {', '.join(ast.unparse(b) for b in model.bases)}, not nn.Module")
    init = next((f for f in model.body if isinstance(f, ast.FunctionDef) and f.name == "__init__"), None)
    if init is None:
        init = ast.parse("def __init__(self):\n    super().__init__()").body[0]
    for node in ast.walk(init):
        if isinstance(node, ast.Name) and node.id == "Model":
            node.id = "ModelNew"   # super(Model, self) and nothing else: checked below
    if any(isinstance(n, ast.Name) and n.id == "ModelNew" and not _in_super(init, n) for n in ast.walk(init)):
        raise ValueError("Model.__init__ refers to Model other than in super()")
    # the forward KernelBook writes: module tensors and inputs, in call()'s order
    lines = [f"def forward(self, {', '.join(f'input_{i}' for i in range(n_inputs))}):"]
    for name, src in zip(arg_names, sources):
        kind, _, what = src.partition(":")
        lines.append(f"    {name} = " + (f"input_{what}" if kind == "input" else "self." + _attr_path(what)))
    lines += [f"    output = call([{', '.join(arg_names)}])", "    return output[0]"]
    forward = ast.parse("\n".join(lines)).body[0]
    cls = ast.ClassDef(name="ModelNew", bases=[ast.parse("nn.Module", mode="eval").body], keywords=[],
                       body=[init, forward], decorator_list=[], type_params=[])
    model_src = ast.unparse(ast.fix_missing_locations(cls)).replace("(nn.Module):\n\n", "(nn.Module):\n", 1)
    return _needed_definitions(problem_src, tree, init), model_src


def _in_super(init: ast.FunctionDef, name: ast.Name) -> bool:
    return any(isinstance(c, ast.Call) and _dotted(c.func) == "super" and c.args and c.args[0] is name
               for c in ast.walk(init))


def _attr_path(dotted: str) -> str:
    """"net.0.weight" -> "net[0].weight" (Sequential / ModuleList children)."""
    out = ""
    for part in dotted.split("."):
        out += f"[{part}]" if part.isdigit() else (f".{part}" if out else part)
    return out


def _needed_definitions(src: str, tree: ast.Module, init: ast.FunctionDef) -> str:
    """The problem's top-level imports, constants, functions and classes that __init__
    uses, directly or through each other, in source order."""
    defs: dict[str, ast.stmt] = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "Model":
            continue
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name not in ("get_inputs", "get_init_inputs"):
            defs[node.name] = node
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                for n in ast.walk(t):
                    if isinstance(n, ast.Name):
                        defs[n.id] = node
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for a in node.names:
                defs[(a.asname or a.name).split(".")[0]] = node
    provided = {"torch", "triton", "tl", "nn", "grid", "get_raw_stream", "triton_helpers", "libdevice", "tl_math"}
    need, todo = set(), [init]
    while todo:
        for n in ast.walk(todo.pop()):
            if isinstance(n, ast.Name) and n.id in defs and n.id not in provided and id(defs[n.id]) not in need:
                need.add(id(defs[n.id]))
                todo.append(defs[n.id])
    return "\n".join(ast.get_source_segment(src, n) or ast.unparse(n)
                     for n in tree.body if id(n) in need)


# ---------------------------------------------------------------- the seed

def seed_candidate(problem, device: str) -> str:
    """The Inductor seed: torch.compile's kernels for `problem` in KernelBook format."""
    return convert(problem, capture(problem, device))


def seed_in_subprocess(problem_path: str | Path, device: str, timeout_s: float) -> str:
    """seed_candidate in a fresh `python -m tools.kernelbook seed` process (compiling the
    problem loads torch.compile and, on cuda, a CUDA context: not in the agent's own
    process). ValueError with the child's one-line reason when it fails."""
    import os
    import subprocess
    import tempfile
    with tempfile.TemporaryDirectory(prefix="krefine-seed-") as tmp:
        out = Path(tmp) / "seed.py"
        try:
            proc = subprocess.run(
                [sys.executable, "-m", "tools.kernelbook", "seed", str(problem_path), "--device", device,
                 "--out", str(out)],
                cwd=Path(__file__).resolve().parent.parent,  # the repo root: tools/ importable
                env=dict(os.environ),                         # inherited: the agent's own environment
                stdin=subprocess.DEVNULL,                     # never waits on input
                capture_output=True, text=True,               # stderr's last line is the reason
                timeout=timeout_s)                            # torch.compile of a hung problem
        except subprocess.TimeoutExpired:
            raise ValueError(f"seed: torch.compile took longer than {timeout_s:.0f} s") from None
        if proc.returncode != 0 or not out.exists():
            lines = [ln for ln in proc.stderr.splitlines() if ln.strip()] or [f"exit status {proc.returncode}"]
            raise ValueError(lines[-1].removeprefix("kernelbook: "))
        return out.read_text(encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    """python -m tools.kernelbook seed PROBLEM --device D [--out FILE]
       python -m tools.kernelbook capture PROBLEM --device D --out FILE   (Inductor code + header)
       python -m tools.kernelbook convert PROBLEM CAPTURE [--out FILE]"""
    from tools.errors import BadInput
    from tools.problem import load_problem
    ap = argparse.ArgumentParser(prog="python -m tools.kernelbook")
    ap.add_argument("command", choices=("seed", "capture", "convert"))
    ap.add_argument("problem")
    ap.add_argument("capture_file", nargs="?")
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    try:
        problem = load_problem(args.problem)
        if args.command == "convert":
            if not args.capture_file:
                raise ValueError("convert needs a CAPTURE file")
            text = convert(problem, read_capture(Path(args.capture_file).read_text(encoding="utf-8")))
        elif args.command == "capture":
            text = capture_text(capture(problem, args.device))
        else:
            text = seed_candidate(problem, args.device)
    except (ValueError, BadInput) as e:
        print(f"kernelbook: {e}", file=sys.stderr)
        return 2 if isinstance(e, BadInput) else 1
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 0


# ---------------------------------------------------------------- small helpers

def _dotted(node) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else ""
    return ""


def _call_name(stmt: ast.stmt) -> str:
    value = getattr(stmt, "value", None)
    return _dotted(value.func) if isinstance(value, ast.Call) else ""


def _target(node: ast.Assign) -> str:
    return ast.unparse(node.targets[0])


def _short(node: ast.AST) -> str:
    return " ".join(ast.unparse(node).split())[:100]


if __name__ == "__main__":
    sys.exit(main())
