"""torch.compile of a problem, recorded for tools/dialect/kernelbook.py: the Inductor
output and what the code alone does not say.

`capture(problem, device)` compiles the problem's Model (the user's trusted module) with
Inductor under no_grad, in one graph (or, past `block_ops`, block by block and joined:
tools/dialect/blocks.py), in the mode the judge runs it (`[eval] module_mode`:
as constructed, i.e. training mode, by default), and returns a `Capture`: the output module that
run_and_get_code would return, which module tensor each call() argument is (the graph's
example inputs are the model's own parameters, buffers and the inputs, matched by
identity; a plain tensor attribute, `self.h0 = torch.randn(...)`, is "attr:h0", put on the
device first as the forward's `.to(x.device)` would), which call() output the forward
returns and which it stores on the module (an RNN cell's new hidden state), and on cuda
the launch config the autotuner settled on for each kernel. RNN / LSTM / GRU modules are
traced into the graph (Dynamo's allow_rnn), where Inductor writes them step by step.

On cpu, Inductor's Triton backend writes the kernels (cpu_backend="triton"; they load
in Triton's interpreter) and nothing of the compiled code runs: the configs then come
from the heuristics at conversion. Inductor's cache key asks Triton's active driver for
a target and there is none without a GPU, so sm_90's backend answers it.

`capture_text` / `read_capture` keep a capture in one Python file: the Inductor code
under a `# kernelbook-capture: {json}` line (tests/fixtures/inductor/ holds some).
Converting is tools/dialect/kernelbook.py's job; nothing here rewrites code.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from tools.dialect.capture_context import (_cpu_triton, _has_config, _triton_templates, capture_dir,
                                           causal_masks_as_given, nested_padding_zeroed, rnn_in_graph,
                                           warnings_out_of_graph)
from tools.dialect.module_state import (Held, changed_value, check_capturable, eager_outputs, misshapen_outputs,
                                       numpy_held, plain_held, plain_tensor_attributes, python_values, reads_self,
                                       stored_before_read, tensor_form, unread, unregistered, numpy_scalars_as_python)


@dataclass(frozen=True)
class Capture:
    """torch.compile's output for one problem, plus what the code alone does not say."""
    code: str                                   # the output module run_and_get_code returns
    arg_sources: tuple[str, ...] | None = None  # per call() argument: "input:0" | "param:ln.weight" | "buffer:w"
    launch_configs: dict[str, dict[str, int]] = field(default_factory=dict)  # kernel -> autotuner's choice
    device: str = "cuda"
    torch_version: str = ""
    templates: bool = False                     # compiled with Inductor's Triton templates (GEMM, conv)
    module_mode: str = "train"                  # [eval] module_mode the model was compiled in
    # which of call()'s outputs the forward returns (a list: the tuple of them it returns, "input:k" for an input
    # returned as it came; None: unrecorded, one)
    returned: int | list | None = None
    returned_list: bool = False                 # the forward returned them as a list, not a tuple
    # state the forward writes: (plain tensor attribute, "output:k" | the source it now is)
    state: tuple[tuple[str, str], ...] = ()
    # tensors Inductor keeps outside call() (`_tensor_constant0`: torch.tensor([...]) or a list index in the
    # forward): (name, dtype, shape, values flat), carried as ModelNew's buffers
    constants: tuple[tuple[str, str, tuple[int, ...], tuple], ...] = ()


BUILD_SEED = 42         # weights and inputs to compile with; their values do not change the code
CAPTURE_LINE = "# kernelbook-capture: "


def attention_as_matmuls(device: str, templates: bool) -> bool:
    """Whether the compile traces scaled-dot-product attention as matmuls and a softmax
    (Triton) rather than keeping flash / efficient attention's library op: the templates
    compile (level 1's 97 had no Triton kernel) and every cpu compile (nn.MultiheadAttention
    and F.scaled_dot_product_attention were a fallback to PyTorch there). Cuda's default
    keeps the op, which krefine's attention family then computes (tools/kernels/attention.py)."""
    return templates or device == "cpu"


def capture(problem, device: str, templates: bool = False, module_mode: str = "train", block_ops: int | None = None,
            only: list[str] | None = None) -> Capture:
    """torch.compile `problem`'s Model on `device` and record its Inductor output.

    module_mode: "train" compiles the forward of the module as constructed (training
    mode: BatchNorm on the batch's statistics), "eval" after .eval(), as the judge runs
    Model and ModelNew under the same `[eval] module_mode`.

    cuda: the compiled forward runs once, so the autotuner's chosen configs are read
    off the loaded kernels. cpu: Inductor's Triton backend writes the code and nothing
    of it runs (configs come from the heuristics at conversion). A graph break or a
    forward returning anything but a tensor or a flat tuple of tensors is a ValueError.

    templates (cuda): max-autotune with only Inductor's Triton templates as GEMM and
    convolution backends, so matmuls and convolutions become `triton_tem_*` kernels
    instead of cuBLAS / cuDNN calls (Inductor benchmarks each template config: slower);
    transposed, 1-D and dilated convolutions, which have no template, are rewritten as
    convolutions that have one (tools/dialect/conv_rewrite.py).

    block_ops: a graph of more ops than this (None: blocks.BLOCK_OPS) is compiled block by
    block (at module boundaries; one compile for equal blocks; several processes at once),
    and the blocks' modules joined into one (tools/dialect/blocks.py); 0: always one graph.
    `only` (a block worker, `python -m tools.dialect blocks`): compile these blocks and
    return {block: (its output module, its configs)} instead of a Capture.
    """
    import contextlib
    from unittest import mock

    import torch
    from torch._inductor import utils as inductor_utils
    from torch._inductor.compile_fx import compile_fx
    from torch._inductor.graph import GraphLowering

    from tools.dialect.blocks import BLOCK_OPS, block_plan, block_worker, compile_blocks, stitch
    from tools.dialect.rnn_op import recurrent_as_ops
    from tools.errors import describe_compile_error
    from tools.problem import build_model, importable, make_inputs, strict_fp32
    # 1) the model and inputs as the judge builds them; a plain tensor attribute (an RNN's
    #    hidden state: module.to() leaves it where __init__ made it) on the device, where
    #    the forward moves it (a cpu copy in the graph is a C++ kernel, not Triton)
    model = build_model(problem.module.Model, problem.module, BUILD_SEED, device, module_mode)
    inputs = make_inputs(problem.module, BUILD_SEED, device)
    attrs = plain_tensor_attributes(model)
    for path, t in attrs.items():
        _set_attribute(model, path, t.to(device))
    attrs = plain_tensor_attributes(model)
    numpy_scalars_as_python(model, problem.module)   # `self.scale = np.sqrt(d)`: a constant, not a graph input
    scalars = python_values(model, problem.module)
    check_capturable(model, inputs, problem.module, BUILD_SEED)
    # the module's tensors as the forward finds them: one it rebinds (`self.ema = 0.9 * self.ema + x`)
    # is a graph input under its old value and state under its new one
    params, buffers = dict(model.named_parameters()), dict(model.named_buffers())
    want = eager_outputs(model, inputs) if any(isinstance(m, torch.nn.RNNBase) for m in model.modules()) else None
    # 2) compile through a backend that sees the graph's inputs (real tensors, in call() order)
    #    and its outputs (which of them the forward returns, which it stores on the module)
    graph_inputs: list[list] = []
    graph_outputs: list = []

    # ops Inductor leaves to PyTorch, rewritten as ones it writes Triton for; in the templates
    # compile, also convolutions with no Triton template, rewritten as ones with one
    from torch._inductor.decomposition import select_decomp_table

    from tools.dialect.fallback_rewrite import eager_multilabel_margin, fallback_decompositions
    rewrites = {"decompositions": {**select_decomp_table(), **fallback_decompositions()}}
    if templates:
        from tools.dialect.conv_rewrite import template_decompositions
        rewrites["decompositions"].update(template_decompositions())

    split = {}

    def backend(gm, example_inputs):
        plan = block_plan(gm, BLOCK_OPS if block_ops is None else block_ops)
        if plan is not None or only is not None:
            if plan is None:
                raise ValueError("a block worker's graph is not cut into blocks")
            def compile_one(g, e):      # a block: its module and (cuda: run once) its configs
                n = len(codes)
                compiled = compile_fx(g, e, **rewrites)
                if device != "cpu":
                    compiled(*e)
                mine = _graph_module(codes[n:], len(e))
                if len(mine) != 1:
                    raise ValueError(f"a block: torch.compile produced {len(mine)} output modules; expected one")
                return mine[0], _chosen_configs(mine[0], exact=True) if device != "cpu" else {}
            split["blocks"], split["codes"] = compile_blocks(
                gm, example_inputs, plan, compile_one, only,
                lambda names, out: block_worker(problem, device, templates, module_mode, block_ops, names, out))
            run = gm.forward   # the blocks ran where they were compiled
        else:
            compiled = compile_fx(gm, example_inputs, **rewrites)
            run = compiled if device != "cpu" else gm.forward   # cpu: codegen only, run eagerly
        graph_inputs.append(list(example_inputs))   # compiled: not a try Dynamo restarted (a 0-dim float64 input)

        def recorded(*args):
            out = run(*args)
            graph_outputs.append(out)
            return out
        return recorded

    codes: list[str] = []
    held_constants: dict[int, dict] = {}   # id(a saved module's code) -> its lowering's constants
    with contextlib.ExitStack() as stack:
        # a cache hit would skip codegen, and with it save_output_code (torch < 2.7: fresh_inductor_cache)
        fresh = getattr(inductor_utils, "fresh_cache", None) or inductor_utils.fresh_inductor_cache
        # in a folder of ours: on an error Inductor keeps its cache folder; its compile workers make it again
        stack.enter_context(fresh(dir=stack.enter_context(capture_dir())))
        stack.enter_context(mock.patch.object(GraphLowering, "save_output_code", codes.append))
        stack.enter_context(_constants_kept(held_constants, codes))
        if device == "cpu":
            stack.enter_context(_cpu_triton())
        if templates:
            stack.enter_context(_triton_templates())
        if attention_as_matmuls(device, templates):
            from torch.nn.attention import SDPBackend, sdpa_kernel
            stack.enter_context(sdpa_kernel([SDPBackend.MATH]))
        stack.enter_context(strict_fp32())   # a template conv's ALLOW_TF32 follows cuDNN's flag
        if _has_config("emulate_precision_casts"):
            # a cast the forward makes (x.half().float()) rounds inside a fused kernel as eager
            # rounds it: by default Inductor keeps the wider value, and the seed missed eager
            stack.enter_context(torch._inductor.config.patch(emulate_precision_casts=True))
        stack.enter_context(importable(problem.module))   # for a decorated forward (tools/problem.py)
        stack.enter_context(warnings_out_of_graph())
        stack.enter_context(nested_padding_zeroed(model, inputs))   # before the fast path is off
        stack.enter_context(causal_masks_as_given())
        # no horizontal "foreach" kernels (a cat of graph inputs on cuda copies them in one
        # combo kernel, which the converter does not read): each copy is its own kernel
        stack.enter_context(mock.patch.object(GraphLowering, "register_operation_list", lambda self, names: ""))
        stack.enter_context(eager_multilabel_margin())   # torch's own decomposition of it is wrong
        stack.enter_context(rnn_in_graph())   # what recurrent_as_ops leaves (a projection, dropout)
        stack.enter_context(recurrent_as_ops(model, not templates))   # nn.RNN and co as one op; ReLU epilogues
        torch._dynamo.reset()
        try:
            with torch.no_grad():
                out = torch.compile(model, backend=backend, fullgraph=True)(*inputs)
        except Exception as e:
            in_list = next(iter(unregistered(model).values()), None)   # on cuda: left on the cpu by model.to()
            raise ValueError(plain_held(in_list, True) if in_list else
                             f"torch.compile failed: {describe_compile_error(e)}") from None
        if only is not None:
            return split["codes"]
        if split and len(graph_inputs) == 1:     # the blocks' modules joined, with their configs
            own = split["codes"]
            codes = [stitch(split["blocks"], {b: c for b, (c, _) in own.items()}, {b: k for b, (_, k) in own.items()})]
        elif len(codes) > 1 and len(graph_inputs) == 1:
            codes = _graph_module(codes, len(graph_inputs[0]))
        if not codes and len(graph_inputs) <= 1:   # no graph, or one of no op: Inductor wrote no module
            raise ValueError("Model's forward computes nothing (it returns its inputs or weights as they are), so "
                             "there is no work to write")
        if len(codes) != 1 or len(graph_inputs) != 1:
            raise ValueError(f"torch.compile produced {len(codes)} output modules; expected one graph")
        # the autotuner's choices live in the loaded module, which the fresh cache's exit
        # clears (PyCodeCache): read them here (on cpu nothing ran, so nothing was chosen)
        chosen = codes[0][1] if split else _chosen_configs(codes[0])
        codes = [codes[0][0]] if split else codes
        constants = () if split else _carried_constants(held_constants.get(id(codes[0]), {}), codes[0], device)
    flat = list(out) if isinstance(out, (tuple, list)) else [out]
    # eager's outputs (taken before a stateful forward moved on) against torch's LSTM decomposition (cuda h_n of
    if want is not None:   # (L, 1, N, P) on torch 2.11) or the recurrent op, which `type(m) is nn.LSTM` tells apart
        if misshapen := misshapen_outputs(want, flat):
            raise ValueError(f"torch.compile's graph gives {misshapen[0]}: a torch.compile defect with this module, "
                             "or a forward telling its recurrent module's class apart, so no seed follows from it")
    if not flat or not all(isinstance(o, torch.Tensor) for o in flat):
        bad = next((f"{type(out).__name__} whose item {k} is a {type(o).__name__}" for k, o in enumerate(flat)
                    if not isinstance(o, torch.Tensor)), "") if isinstance(out, (tuple, list)) else ""
        raise ValueError(f"Model.forward returns {bad or type(out).__name__}; a seed returns a tensor or a flat "
                         "tuple (or list) of tensors, as the judge compares them")
    moved = changed_value(scalars, python_values(model, problem.module),
                          {f"self.{p}" for p in plain_tensor_attributes(model)},
                          unread(model, problem.module, problem.source))
    if moved:
        raise ValueError(moved)
    # 3) name each graph input by what it is in the problem; a tensor dynamo passed as a
    #    copy leaves the sources unrecorded, for convert to infer from shapes (or refuse)
    names = {id(t): f"input:{i}" for i, t in enumerate(inputs) if isinstance(t, torch.Tensor)}
    names.update({id(t): f"param:{n}" for n, t in params.items()})
    names.update({id(t): f"buffer:{n}" for n, t in buffers.items()})
    names.update({id(t): f"attr:{n}" for n, t in attrs.items()})
    sources = [names.get(id(t)) for t in graph_inputs[0]]
    plain = unregistered(model) if None in sources else {}
    in_list = next((plain[id(t)] for t, s in zip(graph_inputs[0], sources) if s is None and id(t) in plain), None)
    if in_list:
        raise ValueError(plain_held(in_list))
    held = _held_elsewhere(problem.module, model) if None in sources else {}
    glob = next((held[id(t)] for t, s in zip(graph_inputs[0], sources) if s is None and id(t) in held), None)
    if glob:   # `W = torch.randn(16, 16)` at import, read by the forward: no name of Model's reaches it
        raise ValueError(f"the forward reads {glob[0]}, a tensor {glob[1]}, not a parameter or buffer of Model; a "
                         f"seed takes Model's tensors and its inputs: hold it in Model "
                         f"(self.register_buffer('{glob[0].rpartition('.')[2]}', ...))")
    if None in sources and (array := numpy_held(model, graph_inputs[0], sources)):   # not one of its shape
        raise ValueError(array)
    kept = {int(v): p for p, v in scalars.items() if isinstance(v, Held)} if None in sources else {}
    inner = next((kept[id(t)] for t, s in zip(graph_inputs[0], sources) if s is None and id(t) in kept), None)
    if inner:   # `self.cache = [torch.zeros(d)]`: model.to() and state_dict pass it by
        raise ValueError(f"the forward reads {inner}, a tensor held in a Python container or object, not a "
                         "parameter or buffer of Model; a seed takes Model's tensors and its inputs: hold it in Model "
                         "as a buffer (self.register_buffer)")
    # 4) what the forward returned and stored, as call()'s outputs or its arguments
    outs = graph_outputs[0] if graph_outputs else ()
    outs = list(outs) if isinstance(outs, (tuple, list)) else [outs]
    where = {id(t): f"output:{k}" for k, t in enumerate(outs)}
    where.update({id(t): s for t, s in zip(graph_inputs[0], sources) if s is not None})
    said = [where.get(id(o), "") or names.get(id(o), "") for o in flat]
    if any(not w.startswith(("output:", "input:")) for w in said) and len(flat) > 1:
        k, w = next((k, w) for k, w in enumerate(said) if not w.startswith(("output:", "input:")))
        kind, _, name = w.partition(":")
        if kind in ("buffer", "param", "attr"):   # Dynamo returns it from the module, after any in-place update
            raise ValueError(f"Model.forward returns self.{name} itself as output {k} (unchanged, or updated in "
                             f"place), not a tensor its graph computes; a seed returns only what its kernels compute: "
                             f"return a copy (self.{name}.clone())")
        raise ValueError(f"Model.forward returns a tensor no kernel of its graph writes unchanged as output {k}; a "
                         "seed returns only what its kernels compute")
    # one of several outputs that is an input as it came (a layer passing its points on beside its features):
    # the seed returns that input, as Model does ("input:k")
    indices = [int(w.partition(":")[2]) if w.startswith("output:") else w if w.startswith("input:") and len(flat) > 1
               else 0 for w in said]
    returned = indices if isinstance(out, (tuple, list)) else indices[0]
    state = []
    held = {**plain_tensor_attributes(model), **{p: t for p, t in model.named_buffers() if buffers.get(p) is not t}}
    before = {**attrs, **buffers}
    for path, t in held.items():
        now = where.get(id(t))
        if now is None and not (path in before and before[path] is t):
            raise ValueError(f"the forward stores a tensor in self.{path} that is neither an output of its "
                             "graph nor one of its inputs")
        if now is not None and now not in (f"attr:{path}", f"buffer:{path}"):
            if path not in before and reads_self(problem.source, path.rpartition(".")[2]) and \
                    not stored_before_read(model, inputs, path):
                raise ValueError(f"the forward sets self.{path}, which held no tensor before the call (None), and "
                                 "reads it: the graph holds that call's branch, so no seed can follow it from call "
                                 "to call; start it as a tensor (a zeros buffer)")
            old = before.get(path)
            if old is not None and (old.shape != t.shape or old.dtype != t.dtype):
                raise ValueError(f"the forward replaces self.{path} ({tensor_form(old)}) with a tensor of another size or "
                                 f"dtype ({tensor_form(t)}): a seed's sizes are fixed when it is made, so it cannot "
                                 "follow a state that grows from call to call")
            state.append((path, now))
    replaced = [p for p, t in model.named_parameters() if params.get(p) is not t]
    if replaced:
        raise ValueError(f"the forward replaces the parameter self.{replaced[0]}; a seed updates no parameter "
                         "between calls")
    return Capture(code=codes[0], arg_sources=None if None in sources else tuple(sources), device=device,
                   torch_version=torch.__version__, templates=templates, module_mode=module_mode,
                   launch_configs=chosen if device != "cpu" else {}, returned=returned, state=tuple(state),
                   returned_list=isinstance(out, list), constants=constants)


MAX_CONSTANT = 4096     # elements of a tensor constant a seed carries as a literal


def _constants_kept(held: dict, codes: list[str]):
    """Each lowering's tensor constants, by the id of the module code it saved (a list of Python
    values becomes one: `torch.tensor([...])`, or `x[:, [0, 0, 1]]` past a few items)."""
    from unittest import mock

    from torch._inductor.graph import GraphLowering
    name = "_compile_to_module" if hasattr(GraphLowering, "_compile_to_module") else "compile_to_module"
    lower = getattr(GraphLowering, name)

    def to_module(self, *args, **kwargs):
        saved = len(codes)
        module = lower(self, *args, **kwargs)
        if len(codes) > saved:
            held[id(codes[-1])] = dict(getattr(self, "constants", None) or {})
        return module
    return mock.patch.object(GraphLowering, name, to_module)


def _carried_constants(held: dict, code: str, device: str) -> tuple:
    """`code`'s `_tensor_constant0 = None` and the rest as (name, dtype, shape, values), if a seed can carry all."""
    import torch
    out = []
    for name in re.findall(r"^(_tensor_constant\d+) = None\b", code, re.M):
        t = held.get(name)
        if t is None or t.numel() > MAX_CONSTANT or t.is_complex() or t.device.type != torch.device(device).type:
            return ()      # the converter names the construct
        out.append((name, str(t.dtype).removeprefix("torch."), tuple(t.shape), tuple(t.flatten().tolist())))
    return tuple(out)


def _set_attribute(model, path: str, value) -> None:
    owner, _, name = path.rpartition(".")
    setattr(model.get_submodule(owner) if owner else model, name, value)


def _graph_module(codes: list[str], n_inputs: int) -> list[str]:
    """max-autotune also saves a module per choice it benchmarks (subgraphs of the GEMM):
    the graph's own module is the last one saved whose call() unpacks the graph's inputs."""
    def takes(code: str) -> bool:
        m = re.search(r"^\s*def call\((?:self, )?args\):\n\s*(.+?) = args$", code, re.M)
        return m is not None and len([a for a in m.group(1).split(",") if a.strip()]) == n_inputs
    own = [c for c in codes if takes(c)]
    return own[-1:] if own else codes


def _chosen_configs(code: str, exact: bool = False) -> dict[str, dict[str, int]]:
    """Each kernel's config as the autotuner left it in the loaded wrapper module (one
    launcher per kernel once it has run); kernels it did not settle are left out. The module
    is the one loaded from `code`, else the last that has all its kernels (`exact`: none
    then: a block's kernels share their names with other blocks' of other shapes)."""
    from torch._inductor.codecache import PyCodeCache
    names = re.findall(r"^(\w+) = async_compile\.triton\(", code, re.M)
    modules = [*PyCodeCache.modules, *getattr(PyCodeCache, "modules_no_attr", {}).values()]
    having = [m for m in modules if names and all(hasattr(m, n) for n in names)]
    module = next((m for m in reversed(having) if _loaded_from(m) == code), None if exact else (having or [None])[-1])
    chosen = {}
    for n in names if module is not None else ():
        launchers = getattr(getattr(module, n), "launchers", None) or []
        if len(launchers) == 1 and getattr(launchers[0], "config", None) is not None:
            cfg = launchers[0].config
            chosen[n] = {**{k: v for k, v in cfg.kwargs.items() if isinstance(v, int)},
                         "num_warps": int(cfg.num_warps), "num_stages": int(cfg.num_stages)}
    return chosen


def _loaded_from(module) -> str | None:
    try:
        return open(module.__file__, encoding="utf-8").read()
    except (AttributeError, OSError, TypeError):
        return None


def _held_elsewhere(module, model) -> dict[int, tuple[str, str]]:
    """{id: (name, where)} of the tensors the problem file holds outside Model's names: at
    module level, and as class attributes of Model's modules."""
    import torch
    held = {id(v): (k, "the problem file makes at module level") for k, v in vars(module).items()
            if isinstance(v, torch.Tensor)}
    held.update({id(v): (f"{type(m).__name__}.{k}", "held as a class attribute") for m in model.modules()
                 for c in type(m).__mro__ for k, v in vars(c).items() if isinstance(v, torch.Tensor)})
    return held


def capture_text(cap: Capture) -> str:
    """A capture as one Python file: the Inductor code under a one-line JSON header."""
    meta = {"arg_sources": list(cap.arg_sources or ()), "launch_configs": cap.launch_configs,
            "device": cap.device, "torch": cap.torch_version, "templates": cap.templates,
            "module_mode": cap.module_mode}
    if cap.returned is not None:
        meta.update(returned=cap.returned, state=[list(s) for s in cap.state])
    if cap.returned_list:
        meta.update(returned_list=True)
    if cap.constants:
        meta.update(constants=[[n, d, list(shape), list(v)] for n, d, shape, v in cap.constants])
    return CAPTURE_LINE + json.dumps(meta, sort_keys=True) + "\n" + cap.code


def read_capture(text: str) -> Capture:
    first, _, rest = text.partition("\n")
    if not first.startswith(CAPTURE_LINE):
        return Capture(code=text)      # bare Inductor output: sources inferred, configs static
    meta = json.loads(first[len(CAPTURE_LINE):])
    return Capture(code=rest, arg_sources=tuple(meta.get("arg_sources") or ()) or None,
                   launch_configs=meta.get("launch_configs") or {}, device=meta.get("device", "cuda"),
                   torch_version=meta.get("torch", ""), templates=bool(meta.get("templates")),
                   # a header without it was written when every capture was compiled in eval mode
                   module_mode=meta.get("module_mode", "eval"), returned=meta.get("returned"),
                   state=tuple(tuple(s) for s in meta.get("state") or ()), returned_list=bool(meta.get("returned_list")),
                   constants=tuple((n, d, tuple(shape), tuple(v)) for n, d, shape, v in meta.get("constants") or ()))
