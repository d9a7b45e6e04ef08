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
    buffers and inputs to call() in Inductor's argument order
    (tools/dialect/kernelbook_model.py).

What the code alone does not say (which module tensor each call() argument is, the
configs the autotuner chose) comes with it in a `Capture`
(tools/dialect/inductor_capture.py); the wrapper's kernels are read by
tools/dialect/inductor_wrapper.py. `seed_candidate` = capture + convert; `python -m
tools.dialect seed PROBLEM --device D` (tools/dialect/__main__.py) runs it in its own
process (the agent never compiles in its own).

Template kernels (GEMMs and convolutions under max-autotune, `triton_heuristics.template`) launch on
the fixed grid call() gives them, with their decorator's num_warps / num_stages. `seed_candidate`
refuses a seed the static guards would reject (a library call left in it) and, on cuda, tries Inductor's
Triton templates when the default compile gives no pure-Triton seed; tools/dialect/seedcache.py keeps
seeds (and the captures they came from) across runs.

A library matrix product (`extern_kernels.mm / addmm / bmm / baddbmm(..., out=buf)`, what the default
compile leaves for nn.Linear and matmuls) becomes a launch of krefine's GEMM family (tools/kernels/gemm.py
`gemm`, exact dots) into the same buffer, the family's file copied into the candidate (`family_source`).
The seeds Inductor's random kernels key on become `draw_seeds` (tools/kernels/draws.py).

A library convolution (`buf = extern_kernels.convolution(...)`, what the default compile
leaves on cuda and on cpu) becomes a launch of krefine's convolution family
(tools/kernels/conv.py `conv_nd` / `conv_transpose_nd`, exact dots, its member and the
layout of the `assert_size_stride` that follows named; a bias and ReLU after it, one launch:
tools/dialect/conv_epilogue.py), and the family's file is copied into the candidate unchanged.

Not covered (ValueError naming the construct, never a guessed candidate): graph
breaks, cooperative / split-scan / combo kernels, graph partitions, aten
fallbacks and other wrapper statements not listed in `_rewrite_call`, models whose
forward returns anything but a tensor or a flat tuple of tensors (what the judge compares).
"""
from __future__ import annotations

import ast
import re

from tools.dialect.families import (ADD_ONE_OP, ADDMM_ACT_OP, ATTENTION_FAMILY, BATCH_STATS_FAMILY, BATCH_STATS_OPS,
                                    CONV_FAMILY, COUNTER_FAMILY, DRAW_FAMILY, FAMILIES, GEMM_FAMILY, LOOKUP_FAMILY,
                                    RNN_FAMILY, RNN_OP, SCATTER_FAMILY, SELECT_FAMILY, _GEMM_CALLS, _LOOKUP_OPS,
                                    _SCATTER_OPS, _SELECT_OPS, _add_one_launch, _addmm_act_launch, _attention_launch,
                                    _batch_stats_launch, _conv_launch, CONV_BIAS_ACT_OP, _conv_bias_act_launch,
                                    _gemm_launch, _lookup_launch, _rnn_launch, _scatter_launch, _sdpa_op,
                                    _seed_draw_launch, _select_launch, conv_family_source, draw_fault,
                                    family_source)
from tools.dialect.inductor_capture import Capture, capture
from tools.dialect.interp_math import cpu_missing
from tools.dialect.inductor_wrapper import (BLOCK_PARAMS, FIXED_GRID, GRID_NUMELS, Kernel, call_name, dotted,
                                            load_scalar_tensors, read_wrapper, short_code, static_config, wide_scans,
                                            _asserted_layouts, _call_arg_names, add_call_args, copy_written_inputs,
                                            INPUT_COPY)
from tools.dialect.fallback_faults import fallback_fault, is_fallback
from tools.dialect.kernelbook_model import check_sources, infer_sources, meta_model, model_new
from tools.dialect.seed_build import SetUpRunsForward, check_builds
from tools.dialect.portable import portable, wrapper_imports

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


_ALLOC = ("empty_strided_cuda", "empty_strided_cpu")


_DEVICE_GUARD = r"torch\.\w+\._DeviceGuard\(\d+\)"


def _is_tensor(x) -> bool:
    import torch
    return isinstance(x, torch.Tensor)


def convert(problem, capture: Capture, whole=frozenset()) -> str:
    """KernelBook-format candidate source for `problem` (tools.problem.Problem); `whole`: module
    classes of the problem carried with their forward (`model_new`)."""
    # 1) the wrapper module: kernels and call()
    try:
        tree = ast.parse(capture.code)
    except SyntaxError as e:
        raise ValueError(f"Inductor output is not valid Python: {e.msg} (line {e.lineno})") from None
    carried = {c[0]: c for c in capture.constants}   # tensor constants, as ModelNew's buffers
    kernels, call_fn = read_wrapper(tree, frozenset(carried))
    if capture.device == "cpu":     # a scalar parameter's .item(): loaded in its kernel; scans as torch's cpu adds
        kernels = wide_scans(load_scalar_tensors(call_fn, kernels))
    # 2) which module tensor each call() argument is
    arg_names = _call_arg_names(call_fn)
    model, inputs = meta_model(problem)
    sources = capture.arg_sources or infer_sources(call_fn, arg_names, model, inputs)
    if len(sources) != len(arg_names):
        raise ValueError(f"call() takes {len(arg_names)} arguments but {len(sources)} sources were recorded")
    check_sources(sources, model, len(inputs))
    if carried:
        arg_names, sources = add_call_args(call_fn, list(carried)), (*sources, *(f"const:{n}" for n in carried))
    # 3) call() in KernelBook's shape, each launch with its config
    returned, copies = copy_written_inputs(call_fn, kernels, arg_names, sources, capture.returned or 0)
    used = [k for k in (returned if isinstance(returned, list) else [returned]) if isinstance(k, int)]
    named = {a: f"self.{w}" if k in ("param", "buffer", "attr") else f"input {w}" for a, (k, _, w) in
             zip(arg_names, (src.partition(":") for src in sources)) if k != "const"}   # for a reason's words
    call_src, externs = _rewrite_call(call_fn, kernels, capture.launch_configs,
                                      None if capture.returned is None else 1 + max([*used, *_state_outputs(capture)]),
                                      capture.module_mode, named)
    # 4) ModelNew from Model's own __init__
    prelude, model_src = model_new(problem.source, arg_names, sources, len(inputs), returned, capture.state,
                                   _asserted_layouts(call_fn), capture.returned_list, model,
                                   {i: x for i, x in enumerate(inputs) if not _is_tensor(x)}, whole,
                                   tuple(carried.values()))
    families = set(FAMILIES)
    if not kernels and not externs & families:
        empty = [f"input {i}: shape {tuple(x.shape)}" for i, x in enumerate(inputs) if _is_tensor(x) and not x.numel()]
        if empty:
            raise ValueError(f"the Inductor output has no Triton kernel: get_inputs() gives tensors with no elements "
                             f"({'; '.join(empty)}), so the forward has no work for a kernel (give them sizes above 0)")
        raise ValueError("the Inductor output has no Triton kernel: Model's forward computes nothing (what it "
                         "returns is a view or reshape of its inputs or weights), so there is no work to write")
    libraries = externs - families
    header = (HEADER if not libraries else HEADER.replace("import torch\n", "import torch\n" + EXTERN_IMPORT, 1)) + \
        wrapper_imports(call_src)
    family = [conv_family_source() if f == CONV_FAMILY else family_source(f) for f in FAMILIES if f in externs]
    jit = [s for k in kernels.values() for s in k.jit_sources]
    parts = [header + prelude] + family + list(dict.fromkeys(jit)) + [INPUT_COPY] * copies + [call_src, model_src]
    out = "\n\n\n".join(p.strip("\n") for p in parts if p.strip()) + "\n"
    compile(out, "<kernelbook candidate>", "exec")  # our own bug if this fails
    return out


def _state_outputs(cap: Capture) -> list[int]:
    return [int(now.partition(":")[2]) for _, now in cap.state if now.startswith("output:")]


def _rewrite_call(call_fn: ast.FunctionDef, kernels: dict[str, Kernel], recorded: dict[str, dict[str, int]],
                  n_used: int | None = None, module_mode: str = "train", named=None) -> tuple[str, set[str]]:
    """call(args) as KernelBook writes it; also the extern_kernels ops it uses. `n_used`:
    how many of its outputs the forward uses (the returned one, the state it stores; the
    graph may also return aliases of its inputs); None when the capture did not record
    it: exactly one output then. `named`: call()'s arguments as the user knows them (self.pos)."""
    fault = draw_fault(call_fn, kernels, module_mode)
    if fault is not None:    # named first: it is why no rewrite of the other statements can help
        raise fault
    pre, body, ret, externs = [], [], None, set()
    inputs = set(_call_arg_names(call_fn))
    stream_done = False
    sizes = _buffer_sizes(call_fn)
    stmts = list(call_fn.body)
    while stmts:
        stmt = stmts.pop(0)
        text = ast.unparse(stmt)
        if ret is not None:
            raise ValueError(f"call(): statement after its return: {short_code(stmt)}")
        if isinstance(stmt, ast.With) and re.fullmatch(_DEVICE_GUARD, ast.unparse(stmt.items[0].context_expr)):
            stmts = stmt.body + stmts            # the device guard is written again around the body
        elif isinstance(stmt, ast.Return):
            ret = stmt
        elif text == "args.clear()" or (isinstance(stmt, ast.Assign) and ast.unparse(stmt.value) == "args"):
            pre.append(stmt)
        elif call_name(stmt) == "assert_size_stride":
            stmt.value.args = stmt.value.args[:3]   # KernelBook's form has no argument name
            # an input's layout before the body; a buffer's (a library op's output) where it is made
            (pre if ast.unparse(stmt.value.args[0]) in inputs else body).append(stmt)
        elif call_name(stmt) == "assert_alignment" or re.fullmatch(r"torch\.\w+\.set_device\(\d+\)", text):
            continue
        elif isinstance(stmt, ast.Assign) and call_name(stmt) == "get_raw_stream":
            if not stream_done:
                body.append(ast.parse("get_raw_stream(0)").body[0])
                stream_done = True
        elif isinstance(stmt, ast.Expr) and call_name(stmt).endswith(".run") and call_name(stmt)[:-4] in kernels:
            body.append(_launch(stmt.value, kernels[call_name(stmt)[:-4]], recorded))
        elif isinstance(stmt, ast.Assign) and call_name(stmt) in _ALLOC:
            stmt.value.func = ast.Name("empty_strided_cuda", ast.Load())
            body.append(stmt)
        elif isinstance(stmt, ast.Delete) or (isinstance(stmt, ast.Assign) and (_plain_value(stmt.value) or
                                                                                call_name(stmt) == "input_copy")):
            body.append(stmt)
        elif isinstance(stmt, ast.Assign) and call_name(stmt) == "extern_kernels.convolution":
            # the layout Inductor asserts next is the one the launcher writes (out_stride)
            layout = stmts.pop(0) if stmts and call_name(stmts[0]) == "assert_size_stride" \
                and ast.unparse(stmts[0].value.args[0]) == ast.unparse(stmt.targets[0]) else None
            body.append(_conv_launch(stmt, layout, sizes))
            externs.add(CONV_FAMILY)
        elif isinstance(stmt, ast.Assign) and call_name(stmt) == CONV_BIAS_ACT_OP:   # into the launch before it
            body.append(_conv_bias_act_launch(stmt, body, stmts))
        elif isinstance(stmt, ast.Expr) and call_name(stmt) in _GEMM_CALLS:
            body.append(_gemm_launch(stmt))
            externs.add(GEMM_FAMILY)
        elif isinstance(stmt, ast.Expr) and call_name(stmt).startswith("extern_kernels."):
            externs.add(call_name(stmt))
            body.append(stmt)
        elif isinstance(stmt, ast.Assign) and _sdpa_op(call_name(stmt)):
            body.append(_attention_launch(stmt, module_mode))
            externs.add(ATTENTION_FAMILY)
        elif isinstance(stmt, ast.Assign) and call_name(stmt) == ADDMM_ACT_OP:
            body.append(_addmm_act_launch(stmt))
            externs.add(GEMM_FAMILY)
        elif isinstance(stmt, ast.Assign) and call_name(stmt) == RNN_OP:
            body.append(_rnn_launch(stmt))
            externs.add(RNN_FAMILY)
        elif isinstance(stmt, ast.Assign) and call_name(stmt) in _SELECT_OPS:
            body.append(_select_launch(stmt))
            externs.add(SELECT_FAMILY)
        elif isinstance(stmt, ast.Assign) and call_name(stmt) in _LOOKUP_OPS:
            body.append(_lookup_launch(stmt, stmts))
            externs.add(LOOKUP_FAMILY)
        elif isinstance(stmt, ast.Expr) and call_name(stmt) == ADD_ONE_OP:
            body.append(_add_one_launch(stmt))
            externs.add(COUNTER_FAMILY)
        elif isinstance(stmt, ast.Assign) and call_name(stmt) in BATCH_STATS_OPS:
            body.append(_batch_stats_launch(stmt))
            externs.add(BATCH_STATS_FAMILY)
        elif isinstance(stmt, ast.Expr) and call_name(stmt) in _SCATTER_OPS:
            body.append(_scatter_launch(stmt))
            externs.add(SCATTER_FAMILY)
        elif (drawn := _seed_draw_launch(stmt)) is not None:   # only where draw_fault above let it through
            body.append(drawn)
            externs.add(DRAW_FAMILY)
        elif is_fallback(stmt):
            # `buf = torch.ops.aten.X(...)`, or an in-place `aten.X_(buf, ...)` (scatter_reduce_)
            raise fallback_fault(stmt, stmts, call_fn)
        elif isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Call) and \
                getattr(stmt.value.func, "attr", "") == "item":   # u0: a size (x[:, :int(n.max())]); zuf0: a float
            read = (named or {}).get(ast.unparse(stmt.value.func.value))   # self.pos, not arg3_1
            if read and re.fullmatch(r"u\d+", ast.unparse(stmt.targets[0])):
                raise ValueError(f"the forward reads the value of {read} into a size or an offset (`.item()`, "
                                 "`int(t)`); a seed's sizes are fixed when it is made: index with the tensor instead "
                                 "(`x.index_copy_(dim, t + torch.arange(n), y)`, torch.gather)")
            raise ValueError("the forward reads a tensor's value into a size or an offset (`.item()`, `int(t)`: "
                             f"{short_code(stmt)}); a seed's sizes are fixed when it is made" if re.fullmatch(
                                 r"u\d+", ast.unparse(stmt.targets[0])) else "the forward reads a value it computed back "
                             f"to the host as a Python number (`.item()`: {short_code(stmt)}), which a seed's kernels "
                             "cannot take from each other; keep it a tensor (`self.count.copy_(t)`, not `fill_(t.item())`)")
        else:   # a fallback further on is the reason to give (a complex copy_ comes before torch.fft's)
            later = next((s for s in stmts if is_fallback(s)), None)
            raise fallback_fault(later, stmts[stmts.index(later) + 1:], call_fn) if later is not None else \
                ValueError(f"call(): unsupported statement: {short_code(stmt)}")
    if ret is None:
        raise ValueError("call() has no return")
    n_out = len(ret.value.elts) if isinstance(ret.value, ast.Tuple) else -1
    if n_out < (n_used or 1) or (n_used is None and n_out != 1):
        raise ValueError(f"call() returns {n_out if n_out >= 0 else 'a non-tuple of'} values, fewer than the "
                         f"{n_used or 1} the forward returns and stores")
    guard = ast.With(items=[ast.withitem(ast.parse("torch.cuda._DeviceGuard(0)", mode="eval").body)],
                     body=[ast.parse("torch.cuda.set_device(0)").body[0], *body])
    fn = ast.parse("def call(args):\n    pass").body[0]
    fn.body = [*pre, guard, ret]
    return ast.unparse(ast.fix_missing_locations(fn)), externs


def _launch(run: ast.Call, kernel: Kernel, recorded: dict[str, dict[str, int]]) -> ast.Expr:
    """kernel.run(a, b, n, stream=s) -> kernel[grid(n)](a, b, n, XBLOCK=.., num_warps=.., num_stages=..)"""
    extra = [k.arg for k in run.keywords if k.arg not in ("stream", "grid")]
    if extra or any(isinstance(a, ast.Starred) for a in run.args):
        raise ValueError(f"launch of {kernel.name}: unsupported arguments {', '.join(map(str, extra)) or '*args'}")
    if kernel.grid_type == FIXED_GRID:
        return _fixed_launch(run, kernel)
    if len(run.args) != len(kernel.params):
        raise ValueError(f"launch of {kernel.name}: {len(run.args)} arguments for {len(kernel.params)} parameters")
    old_grid = next((k.value for k in run.keywords if k.arg == "grid"), None)
    if isinstance(old_grid, ast.Call) and dotted(old_grid.func) == "grid":
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


def _fixed_launch(run: ast.Call, kernel: Kernel) -> ast.Expr:
    """A template: kernel.run(a, b, out, g0, g1, g2, stream=s) -> kernel[(g0, g1, g2)](a, b, out,
    num_warps=.., num_stages=..); its block sizes are constexprs declared in its own body."""
    if len(run.args) != len(kernel.params) + 3:
        raise ValueError(f"launch of {kernel.name}: {len(run.args)} arguments for {len(kernel.params)} "
                         "parameters and a 3-D grid")
    args, dims = run.args[:len(kernel.params)], run.args[len(kernel.params):]
    config = static_config(kernel)
    target = ast.Subscript(value=ast.Name(kernel.name, ast.Load()), slice=ast.Tuple(dims, ast.Load()), ctx=ast.Load())
    keywords = [ast.keyword(k, ast.Constant(int(config[k]))) for k in ("num_warps", "num_stages")]
    return ast.Expr(ast.Call(func=target, args=args, keywords=keywords))


def _buffer_sizes(call_fn: ast.FunctionDef) -> dict[str, tuple]:
    """Each tensor's size where call() states it: `assert_size_stride(name, size, ..)` or
    `name = empty_strided_*(size, ..)`."""
    sizes = {}
    for node in ast.walk(call_fn):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        try:
            if dotted(node.func) == "assert_size_stride" and isinstance(node.args[0], ast.Name):
                sizes[node.args[0].id] = ast.literal_eval(node.args[1])
        except ValueError:
            continue
    for stmt in ast.walk(call_fn):
        if isinstance(stmt, ast.Assign) and call_name(stmt) in _ALLOC and isinstance(stmt.targets[0], ast.Name):
            try:
                sizes.setdefault(stmt.targets[0].id, ast.literal_eval(stmt.value.args[0]))
            except ValueError:
                continue
    return sizes


def _plain_value(node: ast.expr) -> bool:
    """`buf1 = buf0`, `buf2 = reinterpret_tensor(buf0, ...)` and `buf3 = buf2[0]` (an output
    of a call that returns a tuple, the attention family's): aliases, no compute."""
    return isinstance(node, ast.Name) or (isinstance(node, ast.Call) and dotted(node.func) == "reinterpret_tensor") \
        or (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name)
            and isinstance(node.slice, ast.Constant) and type(node.slice.value) is int)


# a seed's attempts, in order: the default compile, then (cuda) Inductor's Triton templates
ATTEMPTS = (("default", False), ("with Triton templates", True))


def seed_candidate(problem, device: str, capture_fn=None) -> str:
    """The Inductor seed: torch.compile's kernels for `problem` in KernelBook format made
    portable (tools/dialect/portable.py), and only @triton.jit kernels: a seed the static
    guards would reject (a cuBLAS / cuDNN call left in it, `extern_kernels.mm`) is no seed. On cuda, when the default compile gives
    no such seed (GEMMs and convolutions go to libraries), Inductor compiles again with
    its Triton templates (max-autotune). ValueError naming every attempt's reason.
    `capture_fn(problem, device, templates=...)` records a compile (tools/dialect/
    seedcache.py passes one that keeps captures on disk)."""
    attempts = ATTEMPTS if device == "cuda" else ATTEMPTS[:1]
    capture_fn = capture_fn or capture
    return seed_from(problem, [(label, lambda t=templates: capture_fn(problem, device, templates=t))
                               for label, templates in attempts])


def seed_from(problem, attempts) -> str:
    """The first of `attempts` ((label, () -> Capture) pairs, tried in order) that converts
    to a seed the static guards accept; ValueError with every attempt's reason (each
    labelled when there are several) when none does. A thunk may raise ValueError itself."""
    reasons = []
    for label, get in attempts:
        prefix = f"{label}: " if len(attempts) > 1 else ""
        try:
            return accepted_seed(problem, get())
        except ValueError as e:
            reasons.append(f"{prefix}{e}")
    raise ValueError("; ".join(reasons))


def accepted_seed(problem, cap: Capture) -> str:
    """`cap` converted and made portable, when the static guards accept it; ValueError why not."""
    whole, first = frozenset(), None
    while True:   # a class Model's set-up runs (a dummy call sizing a head): carried with its forward
        code = portable(convert(problem, cap, whole))
        cpu_missing(code, cap.device)   # ValueError: a libdevice call the cpu judge cannot run
        rejected = guard_rejection(code, made_portable=True)   # the guards read the code returned
        if rejected is not None:
            raise ValueError(f"{first}; carried with their forward, the guards would reject it ({rejected})"
                             if first else f"the guards would reject it ({rejected})")
        try:
            check_builds(problem, code)
            return code
        except SetUpRunsForward as e:
            if e.cls in whole:
                raise
            whole, first = whole | {e.cls}, first or str(e)


def guard_rejection(code: str, made_portable: bool = False) -> str | None:
    """The first rejecting static finding on a converted seed in the form it is judged in
    (portable: made so here unless `made_portable`), as one line; None if none (default guard
    settings: a seed is pure Triton whatever a run allows its model)."""
    from tools.guards.suite import run_static_guards
    from tools.settings import GuardSettings
    rejecting = [f for f in run_static_guards(code if made_portable else portable(code), GuardSettings()) if f.reject]
    if not rejecting:
        return None
    f = rejecting[0]
    return f"{f.guard}: {' '.join(f.message.split())}" + (f" (line {f.line})" if f.line else "")
