"""Block-by-block capture of a graph too large to compile as one (tools/dialect/inductor_capture.py).

Dynamo's graph of the problem's forward is cut into blocks at module boundaries
(`block_plan`: a module whose ops exceed `max_ops` is cut into its submodules, and adjacent
pieces are joined again while they fit), each block is compiled by Inductor on its own, a
block equal to an earlier one (the same ops on inputs of the same shapes, strides and
dtypes: ResNet's repeated bottlenecks) is compiled once, and the blocks' output modules are
joined into one wrapper module (`stitch`) with one call() over the whole graph's inputs:
each block's call() inlined, its names prefixed, its arguments bound to the graph's inputs
or an earlier block's outputs. tools/dialect/kernelbook.py converts that module as it
converts any Inductor output; a block boundary costs at most one tensor written and read
again (what crosses a module boundary is mostly materialised anyway).
"""
from __future__ import annotations

import ast
import copy
import operator
import os
import re
from dataclasses import dataclass
from pathlib import Path

_COMPUTE = ("call_function", "call_method", "call_module")

# a graph of more ops than BLOCK_OPS is compiled block by block, in blocks of at most BLOCK_SIZE
# ops (level 3: ResNet101's graph has 449 ops, DenseNet201's 614, SwinV2's 780, ResNet-18's 89).
# Off (0) by default: Inductor's compile time grows linearly with the graph, so blocks save
# time only where equal blocks repeat; on an H200 ResNet-101 by blocks took as long as whole
# (77 s, 75 s), its seed as right (3.58e-4 against Model, since the kernel renames of 5bdbae7)
# (BENCHMARKS.md, "Block-by-block capture"). `python -m tools.dialect seed --block-ops N` turns it on.
BLOCK_OPS = 0
BLOCK_SIZE = 80


def module_path(node) -> tuple[str, ...]:
    """The submodule a Dynamo graph node was traced in, as path components ("layer3", "5",
    "conv1"); () for the forward's own ops."""
    stack = node.meta.get("nn_module_stack") or {}
    if not stack:
        return ()
    path = list(stack.values())[-1][0]
    path = re.sub(r"\[['\"]?([\w.]+?)['\"]?\]", r".\1", path.replace("L['self']", "", 1))
    return tuple(p for p in path.split(".") if p)


def block_plan(gm, max_ops: int) -> list[list] | None:
    """The graph's compute nodes cut into contiguous blocks of at most min(`max_ops`,
    BLOCK_SIZE) each, at module boundaries where it can, a node of several outputs (chunk,
    split, max with its indices) in the block of every getitem reading it (a block's outputs
    are tensors, not a tuple); None when the whole graph has no more than `max_ops` (or
    `max_ops` is 0), or reads what an in-place op returns (`buf.mul_(a).add_(b)`: a block
    would take the buffer and its alias as two inputs, which Inductor's call() takes as one),
    which is compiled whole. (An in-place op nothing reads, BatchNorm's num_batches_tracked += 1,
    is cut like any other.)"""
    nodes = [n for n in gm.graph.nodes if n.op in _COMPUTE]
    if max_ops <= 0 or len(nodes) <= max_ops or any(_in_place(n) and n.users for n in nodes):
        return None
    blocks = _cut(nodes, 0, min(max_ops, BLOCK_SIZE))
    where = {n: i for i, block in enumerate(blocks) for n in block}
    for i, block in enumerate(blocks):
        for n in list(block):
            j = where.get(n.args[0]) if n.target is operator.getitem and n.args else None
            if j is not None and j < i:     # with its producer, after it (it reads nothing else)
                block.remove(n)
                blocks[j].append(n)
                where[n] = j
    blocks = [b for b in blocks if b]
    return blocks if len(blocks) > 1 else None


_IN_PLACE = {operator.iadd, operator.isub, operator.imul, operator.itruediv, operator.ifloordiv, operator.imod,
             operator.ipow, operator.iand, operator.ior, operator.ixor, operator.ilshift, operator.irshift,
             operator.setitem}


def _in_place(node) -> bool:
    """An op writing a tensor it is given: `x.add_(y)`, `torch.relu_(x)`, `x += y`, `x[i] = y`."""
    name = node.target if node.op == "call_method" else getattr(node.target, "__name__", "")
    return node.target in _IN_PLACE or (isinstance(name, str) and name.endswith("_") and not name.startswith("_"))


def _cut(nodes: list, depth: int, max_ops: int) -> list[list]:
    if len(nodes) <= max_ops:
        return [nodes]
    runs, key = [], None
    for n in nodes:        # runs of nodes in the same submodule at this depth (own ops: a run each)
        path = module_path(n)
        k = path[:depth + 1] if len(path) > depth else None
        if runs and k is not None and k == key:
            runs[-1].append(n)
        else:
            runs.append([n])
        key = k
    if len(runs) == 1:
        if any(len(module_path(n)) > depth + 1 for n in nodes):
            return _cut(nodes, depth + 1, max_ops)
        return [nodes[i:i + max_ops] for i in range(0, len(nodes), max_ops)]   # one module's own ops
    out: list[list] = []
    for run in runs:
        for piece in _cut(run, depth + 1, max_ops):
            if out and len(out[-1]) + len(piece) <= max_ops:
                out[-1] = out[-1] + piece
            else:
                out.append(piece)
    return out


@dataclass
class Blocks:
    """The graph split: `top` calls `names` in order; `inputs[name]` are a block's example
    inputs (from one eager run); `same[name]` is the earlier block it equals, or itself;
    `bare`: the blocks returning one value, not a tuple (as split, before compile_fx makes
    every block's graph return a tuple)."""
    top: object
    names: list[str]
    inputs: dict[str, list]
    same: dict[str, str]
    bare: set


def split(gm, example_inputs, plan: list[list]) -> Blocks:
    """`gm` cut as `plan` says, its blocks' inputs recorded by running it once."""
    import torch
    from torch.fx import Interpreter
    from torch.fx.passes.split_module import split_module
    where = {n: i for i, block in enumerate(plan) for n in block}
    # a block with one output returns it bare (torch < 2.12 has no tuple_return): _top_call reads either
    top = split_module(gm, None, lambda n: where.get(n, 0), keep_original_order=True)
    names = [n.target for n in top.graph.nodes if n.op == "call_module"]
    if [n.target for n in top.graph.nodes if n.op == "placeholder"] != \
            [n.target for n in gm.graph.nodes if n.op == "placeholder"]:
        raise ValueError("block split: the split graph takes its inputs in another order")    # call()'s args
    inputs: dict[str, list] = {}

    class Recorder(Interpreter):
        def call_module(self, target, args, kwargs):
            inputs[target] = list(args)
            return super().call_module(target, args, kwargs)
    with torch.no_grad():
        Recorder(top).run(*example_inputs)
    first: dict[str, str] = {}
    same = {name: first.setdefault(block_key(getattr(top, name), inputs[name]), name) for name in names}
    bare = {name for name in names
            if not isinstance(getattr(top, name).graph.output_node().args[0], (tuple, list))}
    return Blocks(top, names, inputs, same, bare)


def compile_blocks(gm, example_inputs, plan: list[list], compile_one, only: list[str] | None = None,
                   spawn=None) -> tuple[Blocks, dict[str, tuple[str, dict]]]:
    """Compile each distinct block of `gm` cut as `plan` says with `compile_one(gm, inputs)`
    -> (its Inductor output module, its kernels' configs). Returns the split and {block:
    (module, configs)} for the distinct blocks (`only` these when given: a worker's share).
    `spawn(names, out_path)` starts a worker process compiling `names` into the JSON file
    `out_path`: with `block_jobs()` > 1 the distinct blocks are dealt round-robin to this
    process and `block_jobs() - 1` workers."""
    import json
    import tempfile

    import torch
    blocks = split(gm, example_inputs, plan)
    distinct = list(dict.fromkeys(blocks.same.values()))
    jobs = min(block_jobs(), len(distinct)) if only is None and spawn is not None else 1
    mine = only if only is not None else distinct[::jobs]
    with tempfile.TemporaryDirectory(prefix="krefine-blocks-") as tmp:
        workers = [(spawn(distinct[j::jobs], f"{tmp}/{j}.json"), f"{tmp}/{j}.json") for j in range(1, jobs)]
        own = {}
        for name in mine:
            with torch._guards.tracing(None):    # a graph of its own, not Dynamo's (its shape env, its fakes)
                own[name] = compile_one(_fresh(getattr(blocks.top, name)), blocks.inputs[name])
        for proc, out in workers:
            _, err = proc.communicate()
            if proc.returncode != 0:
                said = [line[len("kernelbook:"):].strip() for line in (err or "").splitlines()
                        if line.startswith("kernelbook:")]
                last = said or (err or "").strip().splitlines() or [f"exit status {proc.returncode}"]
                raise ValueError(f"a block worker failed: {last[-1]}")
            own.update({k: tuple(v) for k, v in json.loads(Path(out).read_text(encoding="utf-8")).items()})
    blocks.inputs.clear()            # the activations they were compiled with
    return blocks, own


def block_worker(problem, device: str, templates: bool, module_mode: str, block_ops, names: list[str], out: str):
    """`python -m tools.dialect blocks`, compiling `names` of the problem's blocks into `out`."""
    import subprocess
    import sys
    from pathlib import Path
    cmd = [sys.executable, "-m", "tools.dialect", "blocks", str(problem.path), "--device", device,
           "--module-mode", module_mode, "--names", ",".join(names), "--out", out]
    cmd += ["--block-ops", str(block_ops)] if block_ops is not None else []
    return subprocess.Popen(cmd + (["--templates"] if templates else []), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, cwd=Path(__file__).resolve().parents[2],
                            preexec_fn=_die_with_parent)


def _die_with_parent() -> None:
    """In a block worker before it runs (Linux): the kernel kills it when its parent dies, as
    a seed compile past its budget does (its parent kills it alone, not its process group)."""
    import ctypes
    import signal
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)    # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def block_jobs() -> int:
    """Processes compiling a graph's blocks at once: a quarter of the compile threads this
    process may use (TORCHINDUCTOR_COMPILE_THREADS, which `krefine bench` sets to each seed
    compile's share of the host; else the CPUs), at most 4."""
    threads = os.environ.get("TORCHINDUCTOR_COMPILE_THREADS", "")
    threads = int(threads) if threads.isdigit() else (os.cpu_count() or 1)
    return max(1, min(4, threads // 4))


def _fresh(sub):
    """The block without the metadata Dynamo left on its nodes (fake tensors and symbols
    of the whole graph's trace), as if traced on its own."""
    for n in sub.graph.nodes:
        n.meta = {k: v for k, v in n.meta.items() if k in ("nn_module_stack", "stack_trace", "source_fn_stack")}
    return sub


def block_key(sub, args) -> str:
    """What a block compiles to depends on: its ops and how they connect (not the nodes'
    names, which carry the module path), its constants, and its inputs' metadata."""
    import torch
    index: dict = {}
    ops = []
    for i, n in enumerate(sub.graph.nodes):
        index[n] = i
        norm = torch.fx.node.map_arg((n.args, n.kwargs), lambda a: f"%{index[a]}")
        ops.append((n.op, "" if n.op == "placeholder" else _target_name(n), repr(norm)))
    consts = [(k, tuple(v.shape), v.dtype, v.tolist() if v.numel() <= 64 else id(v))
              for k, v in sorted({**dict(sub.named_parameters()), **dict(sub.named_buffers())}.items())]
    metas = [(tuple(a.shape), tuple(a.stride()), str(a.dtype), str(a.device)) if isinstance(a, torch.Tensor)
             else repr(a) for a in args]
    return repr((ops, consts, metas))


def _target_name(n) -> str:
    if n.op == "call_module" or n.op == "get_attr":
        return f"{n.op}:{n.target}"
    return getattr(n.target, "__qualname__", None) or str(n.target)


def stitch(blocks: Blocks, codes: dict[str, str], configs: dict[str, dict]) -> tuple[str, dict]:
    """One wrapper module for the whole graph from each distinct block's Inductor module
    (`codes`, by block name; a block equal to an earlier one reuses that one's) and its
    autotuner's configs (by kernel); also the configs by the joined module's kernel names."""
    from tools.dialect.inductor_wrapper import read_wrapper
    kernel_defs: list[ast.stmt] = []
    joined: set[str] = set()          # the joined module's kernel names
    shared: dict[str, str] = {}       # a kernel's source with its name left out -> its joined name
    joined_configs: dict[str, dict] = {}
    calls: dict[str, ast.FunctionDef] = {}
    for name in dict.fromkeys(blocks.same.values()):
        code, renames = codes[name], {}
        found = {kernel: _renamed(src, kernel, "KERNEL") for kernel, src in _kernel_sources(code).items()}
        for kernel, norm in found.items():         # an earlier block's kernel of the same code: its name
            if norm in shared:
                renames[kernel] = shared[norm]
        used = joined | set(renames.values())
        for kernel, norm in found.items():         # a new kernel: a name no other kernel has
            if kernel not in renames:
                new, n = kernel, 0
                while new in used:
                    n += 1
                    new = f"{kernel}_b{name.rpartition('_')[2]}" + (f"_{n}" if n > 1 else "")
                renames[kernel] = shared[norm] = new
                used.add(new)
        code = _rename_all(code, renames)           # at once: a new name may be another's old one
        tree = ast.parse(code)
        kernels, calls[name] = read_wrapper(tree)
        for node in tree.body:
            target = node.targets[0].id if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name) \
                else None
            if target in kernels and target not in joined:
                joined.add(target)
                kernel_defs.append(node)
        for kernel, new in renames.items():
            if kernel in configs.get(name, {}):
                joined_configs[new] = configs[name][kernel]
    head = _head([codes[n] for n in dict.fromkeys(blocks.same.values())])
    call_fn = _top_call(blocks, calls)
    text = "\n\n".join([head, *(ast.unparse(n) for n in kernel_defs), ast.unparse(call_fn)]) + "\n"
    return text, joined_configs


def _kernel_sources(code: str) -> dict[str, str]:
    tree = ast.parse(code)
    out = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) \
                and ast.unparse(node.value.func) == "async_compile.triton" and node.value.args \
                and isinstance(node.value.args[0], ast.Constant):
            out[node.value.args[0].value] = ast.unparse(node.value)
    return out


def _rename_all(code: str, renames: dict[str, str]) -> str:
    moved = {old: new for old, new in renames.items() if old != new}
    if not moved:
        return code
    pattern = r"\b(" + "|".join(sorted(map(re.escape, moved), key=len, reverse=True)) + r")\b"
    return re.sub(pattern, lambda m: moved[m.group(1)], code)


def _renamed(src: str, old: str, new: str) -> str:
    return re.sub(rf"\b{re.escape(old)}\b", new, src)


def _head(codes: list[str]) -> str:
    """The blocks' module-level lines before their first kernel, each once: imports and the
    wrapper's own names (async_compile, empty_strided_cuda, ...)."""
    head: dict[str, None] = {}
    for code in codes:
        for node in ast.parse(code).body:
            kernel = isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) \
                and ast.unparse(node.value.func).startswith("async_compile.")
            if kernel or isinstance(node, ast.FunctionDef):
                break
            head[ast.unparse(node)] = None
    return "\n".join(head)


def _top_call(blocks: Blocks, calls: dict[str, ast.FunctionDef]) -> ast.FunctionDef:
    """call(args) over the whole graph's inputs: each block's body inlined in order."""
    value: dict = {}
    body: list[ast.stmt] = []
    placeholders = [n for n in blocks.top.graph.nodes if n.op == "placeholder"]
    names = [f"arg{i}_1" for i in range(len(placeholders))]
    for n, a in zip(placeholders, names):
        value[n] = a
    for node in (n for n in blocks.top.graph.nodes if n.op in ("call_module", "call_function")):
        if node.op == "call_function":
            if node.target is not operator.getitem:
                raise ValueError(f"block split: unexpected top-level node {node.format_node()}")
            value[node] = value[node.args[0]][node.args[1]]
            continue
        fn = calls[blocks.same[node.target]]
        prefix = f"b{node.target.rpartition('_')[2]}_"
        args = [value[a] for a in node.args]
        outs = _inline(fn, prefix, args, body)
        value[node] = outs[0] if node.target in blocks.bare else outs
    out = blocks.top.graph.output_node().args[0]
    outs = out if isinstance(out, (tuple, list)) else (out,)
    fn = ast.parse("def call(args):\n" + (f"    {', '.join(names)}, = args\n" if names else "") + "    args.clear()\n"
                   + "    return (" + "".join(f"{value[o]}, " for o in outs) + ")\n").body[0]
    # an input's layout, as a block asserts it, asserted on the input itself too (before the
    # body, where the converter reads the layouts call() asserts of its arguments)
    alias = {f"{p.targets[0].id}": ast.unparse(p.value) for p in body if isinstance(p, ast.Assign)
             and isinstance(p.value, ast.Name) and p.value.id in names}
    hoisted = {}
    for stmt in body:
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) \
                and ast.unparse(stmt.value.func) == "assert_size_stride" \
                and isinstance(stmt.value.args[0], ast.Name) and stmt.value.args[0].id in alias:
            on_input = copy.deepcopy(stmt)
            on_input.value.args[0] = ast.Name(alias[stmt.value.args[0].id], ast.Load())
            hoisted.setdefault(on_input.value.args[0].id, on_input)
    fn.body[-1:-1] = [*hoisted.values(), *body]
    return ast.fix_missing_locations(fn)


def _inline(fn: ast.FunctionDef, prefix: str, args: list[str], body: list[ast.stmt]) -> list[str]:
    """Append `fn`'s statements to `body`, its locals prefixed and its arguments bound to
    `args`; the names holding its outputs."""
    params = None
    stmts = []
    for stmt in copy.deepcopy(fn.body):    # an equal block inlines the same call() again
        text = ast.unparse(stmt)
        if isinstance(stmt, ast.Assign) and ast.unparse(stmt.value) == "args":
            target = stmt.targets[0]
            params = [e.id for e in (target.elts if isinstance(target, ast.Tuple) else [target])]
        elif text != "args.clear()":
            stmts.append(stmt)
    params = params or []
    if len(params) != len(args):
        raise ValueError(f"block split: a block's call() takes {len(params)} arguments, given {len(args)}")
    local = set(params)
    for node in ast.walk(ast.Module(body=stmts, type_ignores=[])):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            local.add(node.id)
    for node in ast.walk(ast.Module(body=stmts, type_ignores=[])):
        if isinstance(node, ast.Name) and node.id in local:
            node.id = prefix + node.id
    for p, a in zip(params, args):
        body.append(ast.parse(f"{prefix}{p} = {a}").body[0])
    ret = stmts.pop() if stmts and isinstance(stmts[-1], ast.Return) else None
    if ret is None:
        raise ValueError("block split: a block's call() does not end in a return")
    body.extend(stmts)
    elts = ret.value.elts if isinstance(ret.value, ast.Tuple) else [ret.value]
    outs = []
    for i, e in enumerate(elts):
        if isinstance(e, ast.Name):
            outs.append(e.id)
        else:
            body.append(ast.parse(f"{prefix}out{i} = {ast.unparse(e)}").body[0])
            outs.append(f"{prefix}out{i}")
    return outs
