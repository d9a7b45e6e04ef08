"""ModelNew for a KernelBook-format candidate, built from the problem's own Model.

Covers which module tensor or input each of Inductor's `call()` arguments is (recorded
in the Capture, else matched by asserted size and stride, never guessed), and the
ModelNew class: Model's own __init__ (so it owns the same parameters, made in the same
order from the same seed) with a forward passing parameters, buffers and inputs to
call() in Inductor's order, plus the problem's top-level definitions that __init__
needs. Used by tools/dialect/kernelbook.py's `convert`; runs no model code but a
meta-device construction of Model.
"""
from __future__ import annotations

import ast

from tools.dialect.inductor_wrapper import call_name, dotted

def meta_model(problem):
    """Model and its inputs on the meta device: names, shapes and strides, no memory."""
    import torch

    from tools.problem import split_init
    with torch.device("meta"):
        args, kwargs = split_init(problem.module.get_init_inputs())
        model = problem.module.Model(*args, **kwargs)
        inputs = list(problem.module.get_inputs())
    return model, inputs


def check_sources(sources, model, n_inputs: int) -> None:
    params = dict(model.named_parameters())
    buffers = dict(model.named_buffers())
    for s in sources:
        kind, _, name = s.partition(":")
        ok = ((kind == "input" and name.isdigit() and int(name) < n_inputs) or
              (kind == "param" and name in params) or (kind == "buffer" and name in buffers))
        if not ok:
            raise ValueError(f"call() argument source {s!r} is not an input, parameter or buffer of Model")


def infer_sources(call_fn, arg_names, model, inputs) -> tuple[str, ...]:
    """Without recorded sources: match each argument's asserted size and stride to one
    tensor of the model or its inputs; ambiguous matches are an error, not a guess."""
    import torch
    asserted = {}
    for stmt in ast.walk(call_fn):
        if isinstance(stmt, ast.Expr) and call_name(stmt) == "assert_size_stride":
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


def model_new(problem_src: str, arg_names: list[str], sources, n_inputs: int) -> tuple[str, str]:
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
    return any(isinstance(c, ast.Call) and dotted(c.func) == "super" and c.args and c.args[0] is name
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
