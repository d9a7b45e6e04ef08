"""Static guards: refuse a candidate whose source shows a cheat, before any of it runs.

Covers what the candidate's AST shows: PyTorch doing the work in the forward path
(also behind getattr/eval disguises), try/except fallbacks, use of the reference
`Model`, monkeypatching torch, timers or the harness, threads, processes, streams,
network, file writes outside the temp dir, non-Triton kernel toolkits, a file with no
Triton kernel at all, and two flag-only hints (reduced precision, output caching).
Each guard is a plain function in STATIC_GUARDS, never looked up by name.

"The forward path" is every function body except `__init__`: helpers called from
forward do its work as much as forward itself. Module level, class bodies and
`__init__` are set-up, where torch may build and initialise weights. Top-level defs
nothing refers to (a pasted reference `Model`, `get_inputs`) never run and are skipped.

Not covered: what only shows when the code runs (whether a Triton kernel was
launched, GPU time share, in-place input mutation, caching without a visible key):
tools/evaluate.py and tools/sandbox/worker.py check those. Static reading of Python can be
evaded by a determined author; the aim is the tricks models do produce, and to make
every disguise (dynamic lookups, eval, frame walking) a reason to reject by itself.
Source that does not parse gets no findings: the compile step reports it.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass
from types import MappingProxyType
from typing import Callable, Iterable, Iterator, Mapping

from tools.settings import GuardSettings


@dataclass(frozen=True)
class Finding:
    guard: str            # which guard: "torch_compute", "monkeypatch", ...
    message: str          # one sentence a small model can act on
    line: int | None      # 1-based line in the candidate
    reject: bool          # True: verdict "rejected"; False: only a flag
    flag: str             # added to the verdict's flags


# where a node sits: what runs per forward call, what runs once, what never runs
SETUP, FORWARD, JIT, DEAD = "setup", "forward", "jit", "dead"


@dataclass(frozen=True)
class Site:
    node: ast.AST
    parent: ast.AST | None
    region: str
    func: ast.AST | None          # innermost def or lambda
    cls: ast.ClassDef | None      # innermost class


@dataclass(frozen=True)
class Ref:
    """A maximal dotted chain (`torch.nn.functional.relu`, `F.relu`, `getattr(torch, "mm")`)
    and every full path it can name after following imports and aliases."""
    node: ast.AST
    paths: tuple[str, ...]
    called: bool
    site: Site


@dataclass(frozen=True)
class Source:
    src: str
    tree: ast.Module
    lines: tuple[str, ...]
    sites: tuple[Site, ...]                      # every node, in document order
    refs: tuple[Ref, ...]                        # resolved chains and builtins
    imports: tuple[tuple[str, ast.AST], ...]     # ("torch.nn.functional", node) per imported name
    aliases: Mapping[str, tuple[str, ...]]       # local name -> dotted paths it is bound to
    self_attrs: Mapping[str, tuple[str, ...]]    # self.X -> dotted paths
    library_names: frozenset[str]                # names / self attrs holding torch.nn compute modules
    methods: Mapping[str, frozenset[str]]        # class name -> names of its methods
    module_names: frozenset[str]                 # names bound at module level (imports, defs too)
    op_namespaces: frozenset[str]                # "mylib" of torch.library ops the file defines ("mylib::op")


def _words(s: str) -> frozenset[str]:
    return frozenset(s.split())


# torch calls that allocate, describe or set up, never compute the answer
_ALLOWED_TORCH = _words("""
 torch.empty torch.empty_like torch.empty_strided torch.zeros torch.zeros_like torch.ones
 torch.ones_like torch.full torch.full_like torch.arange torch.tensor torch.as_tensor
 torch.scalar_tensor torch.rand torch.rand_like torch.randn torch.randn_like torch.randint
 torch.randint_like torch.randperm torch.manual_seed torch.Generator torch.Size torch.device
 torch.dtype torch.finfo torch.iinfo torch.is_tensor torch.is_floating_point torch.is_complex
 torch.numel torch.get_default_dtype torch.promote_types torch.result_type torch.can_cast
 torch.broadcast_shapes torch.is_grad_enabled torch.no_grad torch.enable_grad
 torch.inference_mode torch.set_grad_enabled torch.Tensor torch.as_strided torch.empty_cache
 torch.autocast torch.get_device torch.is_inference_mode_enabled
 torch.cuda.current_device torch.cuda.get_device_properties torch.cuda.device_count
 torch.cuda.is_available torch.cuda.get_device_capability torch.cuda.get_device_name
 torch.cuda.synchronize torch.cuda.set_device torch.cuda.device torch.cuda._DeviceGuard
 torch.cuda.current_stream torch.cuda.default_stream torch.cuda.Event torch.cuda.empty_cache
 torch.cuda.memory_allocated torch.cuda.max_memory_allocated torch.cuda.mem_get_info
 torch.cuda.is_initialized torch.cuda.init torch.cuda.manual_seed torch.cuda.manual_seed_all
 torch.nn.Module torch.nn.Parameter torch.nn.parameter.Parameter torch.nn.Buffer torch.nn.ModuleList
 torch.nn.ModuleDict torch.nn.ParameterList torch.nn.ParameterDict torch.jit.is_scripting
 torch.compiler.is_compiling torch.jit.annotate torch.autograd.Function
 torch._C._dynamo.guards.assert_size_stride torch._C._dynamo.guards._empty_strided_cuda
 torch._C._dynamo.guards._empty_strided_cpu torch._C._dynamo.guards._reinterpret_tensor
 torch._C._cuda_getCurrentRawStream torch._dynamo.testing.rand_strided
""")
_ALLOWED_TORCH_PREFIXES = ("torch.nn.init.", "torch.nn.Module.__init__", "torch.nn.modules.utils.",
                           "torch.autograd.Function.", "torch.library.", "torch.cuda.nvtx.",
                           "torch._inductor.runtime.", "torch.cuda.amp.", "torch.amp.",
                           # torch <= 2.2's paths of the same runtime modules (launch grids, jit
                           # helpers): absent from supported torch, so their import fails and
                           # the feedback names the new path (tools/dialect.py)
                           "torch._inductor.triton_heuristics.", "torch._inductor.triton_helpers.")

# Tensor methods (and torch functions) that compute; views, casts and copies are not here
_COMPUTE_NAMES = _words("""
 matmul mm bmm mv dot vdot inner outer ger addmm addmv addbmm baddbmm addr kron cross
 tensordot einsum chain_matmul linear bilinear conv1d conv2d conv3d conv_transpose1d
 conv_transpose2d conv_transpose3d convolution conv_tbc unfold_backward
 sum nansum mean nanmean prod cumsum cumprod cummax cummin logcumsumexp max min amax amin
 aminmax argmax argmin std var std_mean var_mean norm median nanmedian mode quantile
 nanquantile logsumexp count_nonzero softmax log_softmax softmin exp exp2 expm1 log log2
 log10 log1p sqrt rsqrt pow square abs absolute neg negative reciprocal sign sgn sin cos
 tan asin acos atan atan2 arctan2 sinh cosh tanh asinh acosh atanh sigmoid logit relu
 relu_ relu6 gelu silu mish elu selu celu leaky_relu hardtanh hardswish hardsigmoid
 softplus softsign tanhshrink threshold clamp clamp_ clip clip_ clamp_min clamp_max floor
 ceil round trunc frac erf erfc erfinv lerp addcmul addcdiv mul mul_ multiply div div_
 divide true_divide floor_divide add add_ sub sub_ subtract rsub remainder fmod maximum
 minimum fmax fmin where masked_fill masked_fill_ masked_scatter masked_select
 index_select gather scatter scatter_ scatter_add scatter_add_ scatter_reduce index_add
 index_add_ index_copy index_fill index_put index_put_ take take_along_dim topk sort
 argsort msort unique flip fliplr flipud roll rot90 tril triu diag trace logical_and
 logical_or logical_not logical_xor bitwise_and bitwise_or bitwise_xor bitwise_not eq ne
 lt le gt ge nan_to_num histc bincount kthvalue inverse det logdet cholesky pinverse
 matrix_power matrix_exp exp_ log_ sqrt_ pow_ tanh_ sigmoid_ abs_ neg_ addmm_ baddbmm_
 cumsum_ map_ map2_ lgamma digamma xlogy hypot heaviside logaddexp logaddexp2 cdist pdist
 cosine_similarity pairwise_distance dist renorm apply_ numpy cat concat concatenate
 stack hstack vstack dstack batch_norm layer_norm group_norm instance_norm rms_norm
 local_response_norm normalize dropout dropout_ feature_dropout alpha_dropout embedding
 embedding_bag max_pool1d max_pool2d max_pool3d avg_pool1d avg_pool2d avg_pool3d
 adaptive_avg_pool1d adaptive_avg_pool2d adaptive_avg_pool3d adaptive_max_pool1d
 adaptive_max_pool2d adaptive_max_pool3d lp_pool1d lp_pool2d pixel_shuffle interpolate
 upsample grid_sample pad cross_entropy nll_loss mse_loss l1_loss smooth_l1_loss
 __array__ __dlpack__ huber_loss kl_div binary_cross_entropy binary_cross_entropy_with_logits hinge_embedding_loss
 margin_ranking_loss triplet_margin_loss cosine_embedding_loss scaled_dot_product_attention
 multi_head_attention_forward one_hot prelu glu hardshrink softshrink rrelu
 __matmul__ __rmatmul__ __imatmul__ __mul__ __rmul__ __imul__ __add__ __radd__ __iadd__
 __sub__ __rsub__ __isub__ __truediv__ __rtruediv__ __itruediv__ __pow__ __rpow__ __neg__
 __abs__ __gt__ __lt__ __ge__ __le__
""")
_ADVICE = (
    (_words("matmul mm bmm mv dot addmm addmv baddbmm addbmm linear bilinear einsum tensordot "
            "__matmul__ __rmatmul__ chain_matmul inner outer"), "write it as a Triton kernel with tl.dot"),
    (frozenset(n for n in _COMPUTE_NAMES if n.startswith("conv")),
     "write the convolution as a Triton kernel (for example an implicit GEMM with tl.dot)"),
    (_words("softmax log_softmax softmin"), "compute it in a Triton kernel with tl.max, tl.exp and tl.sum over each row"),
    (_words("sum mean prod max min amax amin argmax argmin var std norm logsumexp cumsum cumprod"),
     "reduce inside a Triton kernel with tl.sum, tl.max, tl.min or tl.cumsum"),
)
# a torch.nn attribute that is a container or init helper, not a compute layer
_NN_CONTAINERS = _words("Module ModuleList ModuleDict Parameter ParameterList ParameterDict Buffer")
_MODULE_HARMLESS = _words("""parameters named_parameters buffers named_buffers to cuda cpu float
 double half type train eval state_dict requires_grad_ zero_grad extra_repr register_buffer
 register_parameter get_parameter get_buffer""")
# calls that hand the work to a compiler or library wherever they appear
_DELEGATORS = ("torch.compile", "torch.jit.script", "torch.jit.trace", "torch.jit.trace_module",
               "torch.jit.script_if_tracing", "torch.jit.freeze", "torch._dynamo", "torch.export",
               "torch.fx", "torch._inductor.compile", "torch._inductor.compile_fx", "torch.func")
# outside PyTorch but just as much not Triton, when called in the forward path
_OTHER_COMPUTE = ("numpy.asarray", "numpy.array", "numpy.ascontiguousarray", "numpy.frombuffer",
                  "numpy.from_dlpack", "torch.utils.dlpack", "einops.einsum", "einops.reduce", "opt_einsum")
_WATCHED_BUILTINS = _words("eval exec compile __import__ getattr setattr delattr open globals vars "
                           "locals breakpoint type id hash")
_JIT_DECORATORS = _words("jit autotune heuristics")


# --- building a Source ----------------------------------------------------------------

def _chain(node: ast.AST) -> tuple[ast.AST, list[str]] | None:
    """(root, [attr, ...]) for `a.b.c` and `getattr(a, "b")`; None for anything else."""
    parts: list[str] = []
    while True:
        if isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        elif _literal_getattr(node):
            parts.append(node.args[1].value)
            node = node.args[0]
        elif isinstance(node, ast.Name):
            return node, parts[::-1]
        else:
            return None


def _literal_getattr(node: ast.AST) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr"
            and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str))


def _resolve(node: ast.AST, aliases, self_attrs, unbound: frozenset[str]) -> tuple[str, ...]:
    return tuple(_via_torch(p) for p in _resolve_raw(node, aliases, self_attrs, unbound))


def _via_torch(path: str) -> str:
    """`triton.testing.torch.relu` is torch.relu: modules re-export what they import."""
    parts = path.split(".")
    for i in range(len(parts) - 1, 0, -1):
        if parts[i] == "torch":
            return ".".join(parts[i:])
    return path


def _resolve_raw(node: ast.AST, aliases, self_attrs, unbound: frozenset[str]) -> tuple[str, ...]:
    got = _chain(node)
    if got is None:
        return ()
    root, parts = got
    if root.id in ("self", "cls") and parts and parts[0] in self_attrs:
        return tuple(".".join([p, *parts[1:]]) for p in self_attrs[parts[0]])
    if root.id in aliases:
        return tuple(".".join([p, *parts]) for p in aliases[root.id])
    if root.id in unbound and root.id in _WATCHED_BUILTINS:
        return (".".join(["builtins", root.id, *parts]),)
    return ()


def _module_bindings(tree: ast.Module) -> set[str]:
    """Names bound at module level (not inside defs or classes). Only these shadow a
    builtin everywhere: a parameter named `open` somewhere must not blind the guards
    to open() elsewhere."""
    names, todo = set(), list(tree.body)
    while todo:
        n = todo.pop()
        if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
            names.add(n.id)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(n.name)
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in n.names)
        if not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            todo.extend(ast.iter_child_nodes(n))
    return names


def _collect_aliases(tree: ast.Module, unbound: frozenset[str]):
    aliases: dict[str, set[str]] = {}
    self_attrs: dict[str, set[str]] = {}
    imports: list[tuple[str, ast.AST]] = []
    for n in ast.walk(tree):
        if isinstance(n, ast.Import):
            for a in n.names:
                imports.append((a.name, n))
                if a.asname:
                    aliases.setdefault(a.asname, set()).add(a.name)
                else:
                    top = a.name.split(".")[0]
                    aliases.setdefault(top, set()).add(top)
        elif isinstance(n, ast.ImportFrom):
            mod = "." * n.level + (n.module or "")
            for a in n.names:
                full = f"{mod}.{a.name}" if mod else a.name
                imports.append((full, n))
                if a.name != "*":
                    aliases.setdefault(a.asname or a.name, set()).add(full)
    pairs = []   # (target, value) of simple bindings: x = torch.mm, self.f = F.relu
    for n in ast.walk(tree):
        if isinstance(n, ast.Assign):
            for t in n.targets:
                pairs.extend(_unpack(t, n.value))
        elif isinstance(n, (ast.AnnAssign, ast.NamedExpr)) and n.value is not None:
            pairs.extend(_unpack(n.target, n.value))
    for _ in range(4):   # aliases of aliases
        changed = False
        for target, value in pairs:
            paths = _resolve(value, aliases, self_attrs, unbound)
            if not paths:
                continue
            if isinstance(target, ast.Name):
                table, key = aliases, target.id
            elif (isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name)
                  and target.value.id in ("self", "cls")):
                table, key = self_attrs, target.attr
            else:
                continue
            before = len(table.get(key, ()))
            table.setdefault(key, set()).update(paths)
            changed |= len(table[key]) != before
        if not changed:
            break
    # class-level `act = torch.relu` is reached through self.act
    for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
        for stmt in cls.body:
            if isinstance(stmt, ast.Assign):
                for t in stmt.targets:
                    if isinstance(t, ast.Name):
                        paths = _resolve(stmt.value, aliases, self_attrs, unbound)
                        if paths:
                            self_attrs.setdefault(t.id, set()).update(paths)
    freeze = lambda d: MappingProxyType({k: tuple(sorted(v)) for k, v in d.items()})  # noqa: E731
    return freeze(aliases), freeze(self_attrs), tuple(imports)


def _unpack(target: ast.AST, value: ast.AST) -> Iterator[tuple[ast.AST, ast.AST]]:
    if isinstance(target, (ast.Tuple, ast.List)) and isinstance(value, (ast.Tuple, ast.List)) \
            and len(target.elts) == len(value.elts):
        for t, v in zip(target.elts, value.elts):
            yield from _unpack(t, v)
    else:
        yield target, value


def _is_layer(path: str) -> bool:
    parts = path.split(".")
    return (path.startswith("torch.nn.") and parts[-1][:1].isupper()
            and parts[-1] not in _NN_CONTAINERS and "init" not in parts)


def _is_jit(fn: ast.AST, aliases, self_attrs, unbound) -> bool:
    for d in getattr(fn, "decorator_list", ()):
        target = d.func if isinstance(d, ast.Call) else d
        for p in _resolve(target, aliases, self_attrs, unbound):
            if p.startswith("triton.") and p.split(".")[-1] in _JIT_DECORATORS:
                return True
    return False


def _dead_defs(tree: ast.Module) -> set[int]:
    """Top-level defs nothing refers to (a pasted reference Model, get_inputs): their
    bodies never run, so torch code in them does no work. Referencing one by name, by
    string (getattr, globals) or decorating it keeps it alive."""
    loads: dict[str, list[ast.AST]] = {}
    strings = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
            loads.setdefault(n.id, []).append(n)
        elif isinstance(n, ast.Attribute):
            loads.setdefault(n.attr, []).append(n)
        elif isinstance(n, ast.Constant) and isinstance(n.value, str):
            strings.add(n.value)
    dead = set()
    for d in tree.body:
        if not isinstance(d, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        if d.name == "ModelNew" or d.decorator_list or d.name in strings:
            continue
        if isinstance(d, ast.ClassDef) and d.keywords:
            continue
        inside = {id(x) for x in ast.walk(d)}
        if all(id(x) in inside for x in loads.get(d.name, ())):
            dead.add(id(d))
    return dead


def _walk_regions(tree: ast.Module, aliases, self_attrs, unbound) -> list[Site]:
    dead = _dead_defs(tree)
    backward_used = any(isinstance(n, ast.Attribute) and n.attr == "backward" and isinstance(n.ctx, ast.Load)
                        for n in ast.walk(tree))
    sites: list[Site] = []
    stack: list[tuple[ast.AST, ast.AST | None, str, ast.AST | None, ast.ClassDef | None, bool]] = \
        [(s, tree, SETUP, None, None, False) for s in reversed(tree.body)]
    while stack:
        node, parent, region, func, cls, dead_cls = stack.pop()
        sites.append(Site(node, parent, region, func, cls))
        children: list[tuple[ast.AST, str, ast.AST | None, ast.ClassDef | None, bool]] = []
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if region in (JIT, DEAD):
                inner = region
            elif _is_jit(node, aliases, self_attrs, unbound):
                inner = JIT
            elif id(node) in dead or dead_cls:
                inner = DEAD
            elif isinstance(parent, ast.ClassDef) and node.name == "__init__":
                inner = SETUP
            elif (isinstance(parent, ast.ClassDef) and node.name == "backward" and not backward_used
                  and any("autograd" in p for b in parent.bases
                          for p in _resolve(b, aliases, self_attrs, unbound))):
                inner = SETUP   # autograd backward: not on the evaluated forward path
            else:
                inner = FORWARD
            children += [(d, region, func, cls, False) for d in node.decorator_list]
            children += [(node.args, inner, node, cls, False)]
            children += [(s, inner, node, cls, False) for s in node.body]
            if node.returns is not None:
                children.append((node.returns, region, func, cls, False))
        elif isinstance(node, ast.Lambda):
            inner = region if region in (JIT, DEAD) else FORWARD
            children = [(c, inner, node, cls, False) for c in ast.iter_child_nodes(node)]
        elif isinstance(node, ast.ClassDef):
            is_dead = id(node) in dead
            children = [(c, region, func, cls, False) for c in (*node.decorator_list, *node.bases, *node.keywords)]
            children += [(s, region, func, node, is_dead) for s in node.body]
        else:
            children = [(c, region, func, cls, False) for c in ast.iter_child_nodes(node)]
        for c, r, f, k, dc in reversed(children):
            stack.append((c, node, r, f, k, dc))
    return sites


def _library_names(tree: ast.Module, sites, aliases, self_attrs, unbound) -> frozenset[str]:
    """Names and self attributes holding torch.nn compute modules (nn.Conv2d(...), a
    Sequential or ModuleList of them), and loop variables running over them."""
    def holds_layer(expr: ast.AST) -> bool:
        # nn.Conv2d(...), nn.ModuleList([...]), [nn.Linear(...) for ...]; not
        # nn.Parameter(nn.Linear(...).weight), which keeps only a weight
        if isinstance(expr, ast.Call):
            paths = _resolve(expr.func, aliases, self_attrs, unbound)
            if any(_is_layer(p) for p in paths):
                return True
            container = any(p.split(".")[-1] in ("ModuleList", "ModuleDict") for p in paths) or \
                (isinstance(expr.func, ast.Name) and expr.func.id in ("list", "tuple", "dict"))
            return container and any(holds_layer(a) for a in (*expr.args, *(k.value for k in expr.keywords)))
        if isinstance(expr, (ast.List, ast.Tuple, ast.Set)):
            return any(holds_layer(e) for e in expr.elts)
        if isinstance(expr, ast.Dict):
            return any(holds_layer(v) for v in expr.values)
        if isinstance(expr, (ast.ListComp, ast.GeneratorExp, ast.SetComp)):
            return holds_layer(expr.elt)
        if isinstance(expr, ast.DictComp):
            return holds_layer(expr.value)
        if isinstance(expr, ast.IfExp):
            return holds_layer(expr.body) or holds_layer(expr.orelse)
        return False
    found: set[str] = set()
    for s in sites:
        n = s.node
        if isinstance(n, ast.Assign) and holds_layer(n.value):
            for t in n.targets:
                for leaf in ast.walk(t):
                    if isinstance(leaf, ast.Name) and isinstance(leaf.ctx, ast.Store):
                        found.add(leaf.id)
                    elif isinstance(leaf, ast.Attribute) and isinstance(leaf.ctx, ast.Store):
                        found.add("self." + leaf.attr)
        elif (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
              and n.func.attr in ("add_module", "register_module") and len(n.args) >= 2
              and isinstance(n.args[0], ast.Constant) and holds_layer(n.args[1])):
            found.add(f"self.{n.args[0].value}")
        elif (isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "setattr"
              and len(n.args) >= 3 and isinstance(n.args[1], ast.Constant) and holds_layer(n.args[2])):
            found.add(f"self.{n.args[1].value}")
    for _ in range(2):   # `for layer in self.layers:` and `blk = self.blocks[0]`
        for s in sites:
            n = s.node
            if isinstance(n, (ast.For, ast.comprehension)) and _mentions(n.iter, found):
                found.update(x.id for x in ast.walk(n.target) if isinstance(x, ast.Name))
            elif isinstance(n, ast.Assign) and isinstance(n.value, (ast.Subscript, ast.Attribute, ast.Name)) \
                    and _mentions(n.value, found, shallow=True):
                found.update(t.id for t in n.targets if isinstance(t, ast.Name))
    return frozenset(found)


def _holder(node: ast.AST) -> str | None:
    """'self.X' for self.X, 'name' for a bare name: how _library_names spells holders."""
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
        return "self." + node.attr
    if isinstance(node, ast.Name):
        return node.id
    return None


def _mentions(expr: ast.AST, holders: set[str] | frozenset[str], shallow: bool = False) -> bool:
    if shallow:
        while isinstance(expr, ast.Subscript):
            expr = expr.value
        return _holder(expr) in holders
    return any(_holder(x) in holders for x in ast.walk(expr))


def parse_source(src: str) -> Source | None:
    """Parse and precompute the facts the guards share; None when it does not parse."""
    try:
        tree = ast.parse(src)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    module_names = _module_bindings(tree)
    unbound = frozenset(_WATCHED_BUILTINS - module_names)
    aliases, self_attrs, imports = _collect_aliases(tree, unbound)
    sites = _walk_regions(tree, aliases, self_attrs, unbound)
    parents = {id(s.node): s.parent for s in sites}
    refs = []
    for s in sites:
        n = s.node
        if not (isinstance(n, (ast.Name, ast.Attribute)) or _literal_getattr(n)):
            continue
        if isinstance(n, (ast.Name, ast.Attribute)) and not isinstance(n.ctx, ast.Load):
            continue
        p = parents.get(id(n))
        if isinstance(p, ast.Attribute) or (_literal_getattr(p) and p.args[0] is n):
            continue   # not the whole chain
        paths = _resolve(n, aliases, self_attrs, unbound)
        if paths:
            refs.append(Ref(n, paths, isinstance(p, ast.Call) and p.func is n, s))
    methods = {c.name: frozenset(f.name for f in c.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)))
               for c in ast.walk(tree) if isinstance(c, ast.ClassDef)}
    namespaces = {c.value.split("::")[0] for c in ast.walk(tree) if isinstance(c, ast.Constant)
                  and isinstance(c.value, str) and "::" in c.value} - {"aten", "prims"}
    return Source(src=src, tree=tree, lines=tuple(src.splitlines()), sites=tuple(sites),
                  refs=tuple(refs), imports=imports, aliases=aliases, self_attrs=self_attrs,
                  library_names=_library_names(tree, sites, aliases, self_attrs, unbound),
                  methods=MappingProxyType(methods), module_names=frozenset(module_names),
                  op_namespaces=frozenset(namespaces))


# --- helpers the guards share ---------------------------------------------------------

def _spell(source: Source, node: ast.AST, limit: int = 60) -> str:
    text = ast.get_source_segment(source.src, node) or ""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _under(path: str, prefixes: Iterable[str]) -> str | None:
    """The first prefix that `path` is, or lies under (component-wise; 'os.spawn*' is a
    plain string prefix)."""
    for pre in prefixes:
        if pre.endswith("*"):
            if path.startswith(pre[:-1]):
                return pre[:-1]
        elif path == pre or path.startswith(pre + "."):
            return pre
    return None


def _path_hits(source: Source, prefixes: Iterable[str], with_imports: bool = True,
               skip_dead: bool = False) -> Iterator[tuple[str, ast.AST]]:
    prefixes = tuple(prefixes)
    if with_imports:
        for path, node in source.imports:
            if _under(path, prefixes):
                yield path, node
    for r in source.refs:
        if skip_dead and r.site.region == DEAD:
            continue
        for p in r.paths:
            if _under(p, prefixes):
                yield p, r.node
                break


def _first(findings: Iterable[Finding]) -> Finding | None:
    """The finding to report: a rejecting one before a flag, then the earliest line."""
    return min(findings, key=lambda f: (not f.reject, f.line or 0), default=None)


def _line(node: ast.AST) -> int | None:
    return getattr(node, "lineno", None)


def _fn_name(site: Site) -> str:
    f = site.func
    return getattr(f, "name", "a lambda") if f is not None else "module code"


def _advice(name: str) -> str:
    for names, text in _ADVICE:
        if name in names:
            return text
    return "compute it in a @triton.jit kernel with tl.* operations instead"


def _torch_allowed(path: str) -> bool:
    if path in _ALLOWED_TORCH or path.startswith(_ALLOWED_TORCH_PREFIXES):
        return True
    if path.startswith("torch.Tensor."):
        return path.split(".")[-1] not in _COMPUTE_NAMES
    return False


def _torch_compute_ref(path: str) -> bool:
    """An uncalled reference that names a compute op (op = torch.mm; map(F.relu, ...))."""
    if not path.startswith("torch.") or _torch_allowed(path):
        return False
    namespace = _under(path, _COMPUTE_NAMESPACES)
    if namespace:
        return path != namespace   # F.relu is an op; F = torch.nn.functional only names the module
    return _is_layer(path) or path.split(".")[-1] in _COMPUTE_NAMES


_COMPUTE_NAMESPACES = ("torch.nn.functional", "torch.ops.aten", "torch.ops.prims", "torch.special",
                       "torch.linalg", "torch.fft", "torch._C._nn", "torch._C._VariableFunctions",
                       "torch._VF", "torch._inductor.select_algorithm.extern_kernels")


# --- the guards -------------------------------------------------------------------------

def check_torch_compute(source: Source, settings: GuardSettings) -> Finding | None:
    """PyTorch (torch.*, F.*, aten, extern_kernels, Tensor methods, `@`, nn modules held
    in __init__) doing the work in the forward path, a compiler taking it over, or a
    forward that is PyTorch's own (an nn layer subclassed, forward bound to a torch op)."""
    reject = not settings.allow_library_ops
    return _first(Finding("torch_compute", msg, line, reject, "library_ops")
                  for line, msg in (*_borrowed_forward(source), *_torch_refs(source), *_forward_syntax(source)))


def _work_msg(source: Source, node: ast.AST, site: Site, name: str) -> tuple[int | None, str]:
    return _line(node), (f"`{_spell(source, node)}` in `{_fn_name(site)}` is a PyTorch library op doing "
                         f"the work; {_advice(name)}.")


_EXTERN_KERNELS = "torch._inductor.select_algorithm.extern_kernels"
_EXTERN_ADVICE = {
    "mm": "write the matmul as a @triton.jit kernel that loads BLOCK_M x BLOCK_K and BLOCK_K x BLOCK_N "
          "tiles and accumulates tl.dot(a, b) in fp32 over K",
    "convolution": "write the convolution as a @triton.jit kernel: an implicit GEMM accumulating tl.dot "
                   "over tiles of (input channels x kernel window)",
}
_EXTERN_ADVICE.update(addmm=_EXTERN_ADVICE["mm"] + ", adding the bias in the same kernel",
                      bmm=_EXTERN_ADVICE["mm"] + ", one batch per program along a grid axis",
                      baddbmm=_EXTERN_ADVICE["mm"] + ", one batch per program, adding the input in the same kernel")


def _extern_msg(source: Source, node: ast.AST, site: Site, name: str) -> tuple[int | None, str]:
    """KernelBook's torch.compile output hands matmuls and convolutions to cuBLAS/cuDNN."""
    advice = _EXTERN_ADVICE.get(name, _advice(name))
    return _line(node), (f"`{_spell(source, node)}` in `{_fn_name(site)}` runs extern_kernels.{name}, a "
                         f"library kernel (cuBLAS/cuDNN), not Triton; {advice}.")


def _torch_refs(source: Source) -> Iterator[tuple[int | None, str]]:
    for r in source.refs:
        region = r.site.region
        for p in r.paths:
            if _under(p, _DELEGATORS) and region != DEAD:
                yield _line(r.node), (f"`{_spell(source, r.node)}` hands the model to a PyTorch compiler or "
                                      "tracer; write the work as @triton.jit kernels instead.")
                break
            if region == FORWARD and _under(p, _OTHER_COMPUTE):
                yield _work_msg(source, r.node, r.site, p.split(".")[-1])
                break
            if not p.startswith("torch.") or _under(p, _OWNED_ELSEWHERE):
                continue
            if p.startswith("torch.ops.") and p.split(".")[2:3] and p.split(".")[2] in source.op_namespaces:
                continue   # torch.ops.mylib.op: the file's own custom op, whose body is checked itself
            if region in (FORWARD, JIT) and ((r.called and not _torch_allowed(p)) or _torch_compute_ref(p)):
                if _under(p, (_EXTERN_KERNELS,)):
                    yield _extern_msg(source, r.site.parent if r.called else r.node, r.site, p.split(".")[-1])
                else:
                    yield _work_msg(source, r.node, r.site, p.split(".")[-1])
                break
            if region == SETUP and not r.called and _torch_compute_ref(p):
                # mm = torch.mm; OPS = {"mm": torch.mm}; self.act = F.relu: kept to be called
                # later, maybe through a path no alias tracking follows (type(self).mm)
                yield _line(r.node), (f"`{_spell(source, r.site.parent)}` keeps a PyTorch op to call later; "
                                      f"{_advice(p.split('.')[-1])}.")
                break


def _forward_syntax(source: Source) -> Iterator[tuple[int | None, str]]:
    """`@`, Tensor compute methods and nn modules called in the forward path."""
    for s in source.sites:
        n = s.node
        if s.region != FORWARD:
            continue
        if isinstance(n, (ast.BinOp, ast.AugAssign)) and isinstance(n.op, ast.MatMult):
            yield _work_msg(source, n, s, "matmul")
        elif isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Load) and n.attr in _COMPUTE_NAMES:
            # x.sum(), w.t().matmul(x), f = x.relu: a Tensor method; but self.pad or
            # self.relu(x) is the module's own attribute or method, and math.exp,
            # tl.sum, torch.* are judged by what they resolve to
            base = n.value
            if isinstance(base, ast.Name) and (base.id in ("self", "cls") or n.attr in source.methods.get(base.id, ())):
                continue
            if not _resolve(base, source.aliases, source.self_attrs, frozenset()):
                yield _work_msg(source, n, s, n.attr)
        elif _literal_getattr(n) and n.args[1].value in _COMPUTE_NAMES and \
                not _resolve(n.args[0], source.aliases, source.self_attrs, frozenset()):
            yield _work_msg(source, n, s, n.args[1].value)   # getattr(x, "relu")
        elif isinstance(n, ast.Call):
            # self.conv(x), self.conv.forward(x), self.blocks[0](x), layer(x) for layer in self.layers
            f = n.func
            targets = [f, f.value] if isinstance(f, ast.Attribute) and f.attr not in _MODULE_HARMLESS else [f]
            for t in targets:
                while isinstance(t, ast.Subscript):
                    t = t.value
                if _holder(t) in source.library_names:
                    yield _line(n), (f"`{_spell(source, n)}` runs a torch.nn module in `{_fn_name(s)}`; keep the "
                                     "module only for its weights and compute with them in a Triton kernel.")
                    break


def _borrowed_forward(source: Source) -> Iterator[tuple[int | None, str]]:
    """A forward that is PyTorch's: ModelNew = nn.ReLU, class X(nn.Conv2d), forward = torch.relu."""
    for p in source.aliases.get("ModelNew", ()):
        if p.startswith("torch."):
            yield None, f"ModelNew is PyTorch's `{p}`; define class ModelNew(nn.Module) with Triton kernels."
    for s in source.sites:
        n = s.node
        if s.region == DEAD:
            continue
        if isinstance(n, ast.ClassDef):
            for b in n.bases:
                if any(_is_layer(p) for p in _resolve(b, source.aliases, source.self_attrs, frozenset())):
                    yield _line(b), (f"class {n.name} inherits its forward from `{_spell(source, b)}`; derive from "
                                     "nn.Module and compute in Triton kernels.")
        targets = n.targets if isinstance(n, ast.Assign) else [n.target] if isinstance(n, ast.AnnAssign) else []
        for t in targets:
            rebinds = (isinstance(t, ast.Attribute) and t.attr in ("forward", "__call__", "_call_impl")) or \
                (isinstance(t, ast.Name) and t.id in ("forward", "__call__") and isinstance(s.parent, ast.ClassDef))
            if rebinds:
                yield _line(n), (f"`{_spell(source, n)}` replaces forward with another callable; define "
                                 "`def forward` that launches Triton kernels.")


_DISGUISE_PATHS = ("builtins.eval", "builtins.exec", "builtins.compile", "builtins.__import__",
                   "builtins.globals", "builtins.vars", "builtins.breakpoint", "importlib", "imp",
                   "runpy", "pkgutil", "zipimport", "pickle", "_pickle", "cPickle", "marshal", "dill",
                   "cloudpickle", "types.FunctionType", "types.CodeType", "types.LambdaType",
                   "code", "codeop", "pydoc", "inspect.getattr_static", "inspect.getmembers",
                   "operator.attrgetter", "operator.methodcaller", "operator.matmul",
                   "operator.imatmul", "operator.__matmul__")


def check_disguise(source: Source, settings: GuardSettings) -> Finding | None:
    """Lookups the guards cannot read: eval/exec, getattr with a computed name on torch
    (or on a module holding nn layers), __dict__, star imports from torch, pickles."""
    out = []
    for path, node in _path_hits(source, _DISGUISE_PATHS):
        what = _spell(source, node) if not isinstance(node, (ast.Import, ast.ImportFrom)) else f"import {path}"
        out.append(Finding("disguise", f"`{what}` hides which code runs; call Triton kernels and name "
                           "every helper directly.", _line(node), True, "disguised_op"))
    for r in source.refs:   # functools.reduce(getattr, names, torch): getattr as a value
        if not r.called and any(p in ("builtins.getattr", "builtins.setattr", "builtins.delattr") for p in r.paths):
            out.append(Finding("disguise", f"`{_spell(source, r.site.parent)}` passes getattr around to look "
                               "attributes up indirectly; name what you call directly.", _line(r.node), True,
                               "disguised_op"))
    for path, node in source.imports:
        if path.endswith(".*") and path.split(".")[0] == "torch":
            out.append(Finding("disguise", f"`from {path[:-2]} import *` hides which torch ops are used; "
                               "import names explicitly.", _line(node), True, "disguised_op"))
    for s in source.sites:
        n = s.node
        if isinstance(n, ast.Attribute) and n.attr in ("__dict__", "__getattribute__", "__getattr__"):
            out.append(Finding("disguise", f"`{_spell(source, n)}` looks attributes up by string; name "
                               "what you call directly.", _line(n), True, "disguised_op"))
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "getattr" \
                and len(n.args) >= 2 and not _literal_getattr(n):
            obj = n.args[0]
            on_self = (_holder(obj) or "").split(".")[0] in ("self", "cls")
            if on_self and not source.library_names:
                continue   # getattr(self, f"w{i}"): a parameter of the candidate's own module
            out.append(Finding("disguise", f"`{_spell(source, n)}` picks an attribute by a computed name; "
                               "name the function you call directly.", _line(n), True, "disguised_op"))
    return _first(out)


def check_fallback(source: Source, settings: GuardSettings) -> Finding | None:
    """A try/except whose handler does work (falls back when the kernel fails)."""
    import_errors = {"ImportError", "ModuleNotFoundError"}
    for s in source.sites:
        n = s.node
        if not isinstance(n, (ast.Try, getattr(ast, "TryStar", ast.Try))) or s.region == DEAD or not n.handlers:
            continue
        if s.func is None and s.cls is None and all(isinstance(b, (ast.Import, ast.ImportFrom)) for b in n.body):
            names = [x.id for h in n.handlers if h.type is not None
                     for x in ast.walk(h.type) if isinstance(x, ast.Name)]
            if names and set(names) <= import_errors:
                continue   # try: import x / except ImportError: the usual optional import
        for h in n.handlers:
            if _handler_does_work(h):
                return Finding("fallback", f"the try/except at line {n.lineno} runs other code when the "
                               "kernel fails; remove it and let errors surface.", _line(h), True, "fallback")
    for s in source.sites:   # `return` in `finally` swallows any exception: a handler in disguise
        if isinstance(s.node, ast.Try) and s.region != DEAD and \
                any(isinstance(x, ast.Return) for b in s.node.finalbody for x in ast.walk(b)):
            return Finding("fallback", f"the `return` in the finally block of line {s.node.lineno} hides the "
                           "kernel's errors; return after the try instead.", _line(s.node), True, "fallback")
    return None


def _handler_does_work(handler: ast.ExceptHandler) -> bool:
    for stmt in handler.body:
        if isinstance(stmt, (ast.Pass, ast.Raise, ast.Continue, ast.Break)):
            continue
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
            continue
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and isinstance(stmt.value, ast.Constant):
            continue   # n_sm = 108
        return True
    return False


def check_reference_model(source: Source, settings: GuardSettings) -> Finding | None:
    """Subclassing, calling or importing the reference Model (or its input makers)."""
    defined = {n.name for n in source.tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    for path, node in source.imports:
        name = path.split(".")[-1]
        if name in ("Model", "get_inputs", "get_init_inputs") or path.split(".")[0] == "__main__":
            return Finding("reference_model", f"importing `{name}` reaches for the reference "
                           "implementation; ModelNew must compute on its own.", _line(node), True, "reference_model")
    for s in source.sites:
        n = s.node
        if s.region == DEAD or not isinstance(n, (ast.Name, ast.Attribute)) or not isinstance(n.ctx, ast.Load):
            continue
        name = n.id if isinstance(n, ast.Name) else n.attr
        if name == "Model" or (name in ("get_inputs", "get_init_inputs") and name not in defined
                               and isinstance(n, ast.Name)):
            how = "subclasses" if isinstance(s.parent, ast.ClassDef) and n in s.parent.bases else "uses"
            return Finding("reference_model", f"ModelNew {how} the reference `{name}`; implement the "
                           "computation yourself in Triton kernels.", _line(n), True, "reference_model")
    return None


_PROTECTED_ROOTS = _words("torch triton time sys builtins os tools agent krefine numpy math "
                          "random gc inspect importlib signal threading")
_TAMPER_PATHS = ("sys.modules", "sys._getframe", "sys._current_frames", "sys.settrace", "sys.setprofile",
                 "sys.addaudithook", "inspect.stack", "inspect.currentframe",
                 "inspect.getouterframes", "inspect.getinnerframes", "inspect.trace", "inspect.getframeinfo",
                 "gc.get_objects", "gc.get_referrers", "gc.get_referents", "traceback.walk_stack",
                 "traceback.extract_stack", "os.putenv", "os.unsetenv", "os.environ.update",
                 "os.environ.setdefault", "os.environ.pop", "os.environ.clear", "os.environ.popitem",
                 "os.environ.__setitem__", "ctypes", "_ctypes", "cffi", "builtins.__dict__", "__builtin__",
                 "tools", "agent", "krefine", "signal",
                 "candidate",   # tools/sandbox/worker.py registers the candidate itself under this name "atexit", "resource", "torch.overrides",
                 "torch.utils._python_dispatch", "torch._C._set_dispatch_mode")
_TAMPER_IMPORTS = ("builtins",)
_FRAME_ATTRS = _words("f_back f_globals f_locals f_builtins f_code tb_frame gi_frame cr_frame ag_frame "
                      "__globals__ __code__ __closure__ __subclasses__ __bases__ __base__ __mro__ "
                      "__builtins__ __torch_function__ __torch_dispatch__ __setattr__ __delattr__")


def check_monkeypatch(source: Source, settings: GuardSettings) -> Finding | None:
    """Assigning into torch/triton/time/sys/os/builtins/the harness, setattr on them,
    frame walking, gc object walks, ctypes, dispatch interception, aten overrides."""
    out = []

    def add(node, what):
        out.append(Finding("monkeypatch", f"`{what}` tampers with torch, the timer or the harness; "
                           "leave them unchanged.", _line(node), True, "monkeypatch"))

    for path, node in _path_hits(source, _TAMPER_PATHS):
        add(node, _spell(source, node) if not isinstance(node, (ast.Import, ast.ImportFrom)) else f"import {path}")
    for path, node in source.imports:
        if _under(path, _TAMPER_IMPORTS):
            add(node, f"import {path}")
    for s in source.sites:
        n = s.node
        if isinstance(n, (ast.Attribute, ast.Subscript)) and isinstance(n.ctx, (ast.Store, ast.Del)):
            paths = _resolve(n.value, source.aliases, source.self_attrs, frozenset())
            if any(p.split(".")[0] in _PROTECTED_ROOTS for p in paths):
                add(n, _spell(source, n))
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in ("setattr", "delattr") and n.args:
            obj = n.args[0]
            paths = _resolve(obj, source.aliases, source.self_attrs, frozenset())
            if any(p.split(".")[0] in _PROTECTED_ROOTS for p in paths) or \
                    (isinstance(obj, ast.Call) and isinstance(obj.func, ast.Name) and obj.func.id == "type") or \
                    (isinstance(obj, ast.Attribute) and obj.attr == "__class__"):
                add(n, _spell(source, n))
        elif isinstance(n, ast.Attribute) and n.attr in _FRAME_ATTRS:
            if n.attr in ("__setattr__", "__delattr__") and isinstance(n.value, ast.Call) \
                    and isinstance(n.value.func, ast.Name) and n.value.func.id == "super":
                continue   # super().__setattr__ inside an nn.Module
            add(n, _spell(source, n))
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
                add(call, _spell(source, call))
    return _first(out)


_CONCURRENCY = ("threading", "_thread", "multiprocessing", "concurrent", "asyncio", "subprocess",
                "torch.multiprocessing", "pty", "sched", "os.system", "os.popen", "os.fork", "os.forkpty",
                "os.spawn*", "os.exec*", "os.posix_spawn*", "os.kill", "os.killpg", "os.register_at_fork",
                "os.setsid", "os.setpgid", "os.setpgrp", "torch.jit.fork", "torch.jit._fork", "torch.futures")
_NETWORK = ("socket", "ssl", "http", "urllib", "urllib3", "requests", "httpx", "aiohttp", "ftplib",
            "smtplib", "poplib", "imaplib", "telnetlib", "xmlrpc", "socketserver", "websocket", "websockets",
            "paramiko", "grpc", "zmq", "webbrowser", "torch.distributed")
_STREAMS = ("torch.cuda.Stream", "torch.cuda.stream", "torch.cuda.set_stream", "torch.cuda.ExternalStream",
            "torch.cuda.StreamContext", "torch.cuda.streams", "torch.Stream", "torch.cuda.graph",
            "torch.cuda.graphs", "torch.cuda.CUDAGraph", "torch.cuda.make_graphed_callables",
            "torch.cuda.set_sync_debug_mode")
_FOREIGN = ("torch.utils.cpp_extension", "cupy", "numba", "pycuda", "cuda", "jax", "tensorflow", "tvm",
            "tilelang", "cutlass", "pyopencl", "taichi", "torch.cuda.jiterator", "torch.cuda._compile_kernel",
            "scipy", "numexpr", "sklearn")


def _table_guard(source: Source, prefixes, guard: str, flag: str, why: str) -> Finding | None:
    for path, node in _path_hits(source, prefixes):
        what = f"import {path}" if isinstance(node, (ast.Import, ast.ImportFrom)) else _spell(source, node)
        return Finding(guard, f"`{what}` {why}", _line(node), True, flag)
    return None


def check_concurrency(source: Source, settings: GuardSettings) -> Finding | None:
    """Threads, processes, subprocesses: work the timer and the sandbox cannot follow."""
    return _table_guard(source, _CONCURRENCY, "concurrency", "concurrency",
                        "starts threads or processes; do all work in the forward call, in Triton kernels.")


def check_network(source: Source, settings: GuardSettings) -> Finding | None:
    return _table_guard(source, _NETWORK, "network", "network",
                        "uses the network; a candidate must compute everything locally in Triton kernels.")


def check_side_stream(source: Source, settings: GuardSettings) -> Finding | None:
    """Work on another CUDA stream or in a graph escapes the timer's events."""
    found = _table_guard(source, _STREAMS, "side_stream", "side_stream",
                         "moves work off the current CUDA stream; launch kernels on the default stream.")
    if found:
        return found
    for s in source.sites:
        n = s.node
        if isinstance(n, ast.Attribute) and n.attr in ("wait_stream", "record_stream", "wait_event"):
            return Finding("side_stream", f"`{_spell(source, n)}` synchronizes CUDA streams; launch kernels "
                           "on the default stream.", _line(n), True, "side_stream")
    return None


def check_foreign_kernel(source: Source, settings: GuardSettings) -> Finding | None:
    return _table_guard(source, _FOREIGN, "foreign_kernel", "foreign_kernel",
                        "computes outside Triton; krefine evaluates @triton.jit kernels only.")


_FS_ALWAYS = ("os.write", "os.writev", "os.pwrite", "os.fdopen", "os.dup", "os.dup2", "os.close",
              "os.closerange", "os.open", "os.chdir", "os.fchdir", "os.chroot", "os.truncate",
              "os.ftruncate", "os.mkfifo", "os.mknod", "shutil", "tempfile", "io.FileIO")
_FS_PATH_ARG = ("os.remove", "os.unlink", "os.rmdir", "os.removedirs", "os.rename", "os.renames",
                "os.replace", "os.makedirs", "os.mkdir", "os.chmod", "os.chown", "os.link", "os.symlink",
                "os.utime", "builtins.open", "io.open", "codecs.open", "torch.save", "torch.load",
                "numpy.save", "numpy.savez", "numpy.savetxt", "numpy.load")
_FS_METHODS = _words("write_text write_bytes touch unlink rmdir mkdir symlink_to hardlink_to rename tofile")


def check_filesystem(source: Source, settings: GuardSettings) -> Finding | None:
    """Opening files for writing, raw descriptors, deletes, renames or directories outside
    the temp cwd, absolute paths. A kernel needs no files."""
    def bad(node, what):
        return Finding("filesystem", f"`{what}` touches files outside the candidate's temp directory; "
                       "a kernel needs no files.", _line(node), True, "filesystem")

    for path, node in _path_hits(source, _FS_ALWAYS):
        return bad(node, f"import {path}" if isinstance(node, (ast.Import, ast.ImportFrom)) else _spell(source, node))
    for r in source.refs:
        if not r.called or not any(_under(p, _FS_PATH_ARG) for p in r.paths):
            continue
        call = r.site.parent
        target = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg in ("file", "f", "path")), None)
        mode = next((k.value for k in call.keywords if k.arg == "mode"), call.args[1] if len(call.args) > 1 else None)
        is_open = any(_under(p, ("builtins.open", "io.open", "codecs.open")) for p in r.paths)
        literal = isinstance(target, ast.Constant) and isinstance(target.value, str)
        if not literal or target.value.startswith(("/", "~")) or ".." in target.value.split("/") or \
                "\\" in target.value:
            return bad(call, _spell(source, call))
        if is_open and _writes(mode):
            return bad(call, _spell(source, call))
    for s in source.sites:
        n = s.node
        if isinstance(n, ast.Attribute) and n.attr == "open" and isinstance(s.parent, ast.Call) \
                and s.parent.func is n and not _resolve(n.value, source.aliases, source.self_attrs, frozenset()):
            call = s.parent   # Path(...).open("w")
            mode = next((k.value for k in call.keywords if k.arg == "mode"), call.args[0] if call.args else None)
            if _writes(mode):
                return bad(call, _spell(source, call))
        if isinstance(n, ast.Attribute) and n.attr in _FS_METHODS and isinstance(s.parent, ast.Call) \
                and s.parent.func is n:
            if not _resolve(n.value, source.aliases, source.self_attrs, frozenset()) or \
                    any(_under(p, ("pathlib", "numpy")) for p in
                        _resolve(n.value, source.aliases, source.self_attrs, frozenset())):
                return bad(n, _spell(source, s.parent))
    return None


def _writes(mode: ast.AST | None) -> bool:
    """An open() mode that writes, or one the guard cannot read."""
    if mode is None:
        return False
    if not (isinstance(mode, ast.Constant) and isinstance(mode.value, str)):
        return True
    return any(c in mode.value for c in "wax+")


def check_triton_kernel(source: Source, settings: GuardSettings) -> Finding | None:
    """A candidate must define at least one @triton.jit kernel."""
    for s in source.sites:
        if isinstance(s.node, (ast.FunctionDef, ast.AsyncFunctionDef)) and \
                _is_jit(s.node, source.aliases, source.self_attrs, frozenset()):
            return None
    for r in source.refs:
        if r.called and any(p.startswith("triton.") and p.split(".")[-1] in _JIT_DECORATORS for p in r.paths):
            return None   # kernel = triton.jit(fn)
    return Finding("no_triton_kernel", "the file defines no @triton.jit kernel; write the forward's work as "
                   "a Triton kernel and launch it with kernel[grid](...).", None, True, "no_triton_kernel")


_HALF_PATHS = ("torch.float16", "torch.half", "torch.bfloat16", "torch.float8*", "triton.language.float16",
               "triton.language.bfloat16", "triton.language.float8*", "torch.autocast", "torch.cuda.amp",
               "torch.amp")


def check_reduced_precision(source: Source, settings: GuardSettings) -> Finding | None:
    """Flag only: fp16/bf16/tf32 math; an fp32 problem computed so will miss 1e-4."""
    def flag(node, what):
        return Finding("reduced_precision", f"`{what}` computes in reduced precision (fp16/bf16/tf32); for an "
                       "fp32 problem keep fp32 math or the 1e-4 tolerance will fail.", _line(node), False,
                       "reduced_precision")
    for path, node in _path_hits(source, _HALF_PATHS, with_imports=False, skip_dead=True):
        return flag(node, _spell(source, node))
    for s in source.sites:
        n = s.node
        if s.region == DEAD:
            continue
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in ("half", "bfloat16"):
            return flag(n, _spell(source, n))
        if isinstance(n, ast.keyword) and ((n.arg == "input_precision" and isinstance(n.value, ast.Constant)
                                            and str(n.value.value).startswith("tf32"))
                                           or (n.arg == "allow_tf32" and isinstance(n.value, ast.Constant)
                                               and n.value.value is True)):
            return flag(n.value, _spell(source, n.value))
    return None


_KEY_ATTRS = _words("data_ptr shape size stride _version untyped_storage storage_offset")


def check_caching(source: Source, settings: GuardSettings) -> Finding | None:
    """Flag only: forward keeps results between calls: returns state held on self or in
    a global, looks inputs up in such a store (`key in self.cache`), keys it by shape or
    pointer, or is wrapped in functools.cache. Fresh inputs per trial make it fail anyway."""
    by_func: dict[int, list[Site]] = {}
    for s in source.sites:
        if s.region == FORWARD and s.func is not None:
            by_func.setdefault(id(s.func), []).append(s)
        if isinstance(s.node, (ast.FunctionDef, ast.AsyncFunctionDef)) and s.region != DEAD:
            for d in s.node.decorator_list:
                for p in _resolve(d.func if isinstance(d, ast.Call) else d, source.aliases, source.self_attrs, frozenset()):
                    if p in ("functools.lru_cache", "functools.cache"):
                        return _caching(d, "@" + p.split(".")[-1])
    for sites in by_func.values():
        globals_ = {x for s in sites if isinstance(s.node, ast.Global) for x in s.node.names}
        held = lambda e: _persistent(e, globals_, source.module_names)  # noqa: E731
        keyed = lambda e: any((isinstance(x, ast.Attribute) and x.attr in _KEY_ATTRS) or  # noqa: E731
                              (isinstance(x, ast.Call) and isinstance(x.func, ast.Name) and x.func.id in ("id", "hash"))
                              for x in ast.walk(e))
        stores = any(isinstance(s.node, (ast.Attribute, ast.Subscript, ast.Name)) and
                     isinstance(s.node.ctx, ast.Store) and held(s.node) for s in sites)
        # locals that alias held state: prev = self.ready if ... else ...
        aliases = {t.id for s in sites if isinstance(s.node, ast.Assign) and _branches_held(s.node.value, held)
                   for t in s.node.targets if isinstance(t, ast.Name)}
        for s in sites:
            n = s.node
            if isinstance(n, ast.Return) and n.value is not None and (
                    held(n.value) or (isinstance(n.value, ast.Name) and n.value.id in aliases)):
                return _caching(n, _spell(source, n))
            if isinstance(n, ast.Compare):
                sides = [n.left, *n.comparators]
                if any(isinstance(op, (ast.In, ast.NotIn)) for op in n.ops) and held(n.comparators[-1]):
                    return _caching(n, _spell(source, n))
                if stores and any(held(x) for x in sides) and any(keyed(x) for x in sides):
                    return _caching(n, _spell(source, n))
            if isinstance(n, ast.Subscript) and held(n.value) and keyed(n.slice):
                return _caching(n, _spell(source, n))
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and held(n.func.value) and \
                    n.func.attr in ("get", "setdefault", "__setitem__", "__getitem__") and n.args and keyed(n.args[0]):
                return _caching(n, _spell(source, n))
    return None


def _branches_held(expr: ast.AST, held) -> bool:
    """Is `expr`, or one branch of it (x if c else y, a or b), held state?"""
    if isinstance(expr, ast.IfExp):
        return _branches_held(expr.body, held) or _branches_held(expr.orelse, held)
    if isinstance(expr, ast.BoolOp):
        return any(_branches_held(v, held) for v in expr.values)
    return held(expr)


def _persistent(expr: ast.AST, globals_: set[str], module_names: frozenset[str]) -> bool:
    """Does `expr` name state that outlives the call: self.x, self.x[k], a global?"""
    if isinstance(expr, ast.Name):
        return expr.id in globals_
    while isinstance(expr, (ast.Attribute, ast.Subscript)):
        expr = expr.value
        if isinstance(expr, ast.Name):
            return expr.id in ("self", "cls") or expr.id in globals_ or expr.id in module_names
    return False


def _caching(node, what) -> Finding:
    return Finding("caching", f"`{what}` keeps results between forward calls; recompute the output from "
                   "the inputs on every call.", _line(node), False, "caching")


# torch paths another guard reports with a more precise message
_OWNED_ELSEWHERE = (*_STREAMS, *_FOREIGN, *_CONCURRENCY, *_NETWORK, *_TAMPER_PATHS, "torch.save", "torch.load")

STATIC_GUARDS: tuple[Callable[[Source, GuardSettings], Finding | None], ...] = (
    check_torch_compute,
    check_disguise,
    check_fallback,
    check_reference_model,
    check_monkeypatch,
    check_concurrency,
    check_network,
    check_side_stream,
    check_foreign_kernel,
    check_filesystem,
    check_triton_kernel,
    check_reduced_precision,
    check_caching,
)


def run_static_guards(src: str, settings: GuardSettings) -> list[Finding]:
    """Every guard's finding, rejecting ones first; [] when `src` does not parse."""
    source = parse_source(src)
    if source is None:
        return []
    try:
        findings = [f for f in (guard(source, settings) for guard in STATIC_GUARDS) if f is not None]
    except RecursionError:   # nesting deeper than the guards can read: refuse, never wave through
        return [Finding("unreadable", "the code is nested too deeply for the guards to read; flatten "
                        "the expressions.", None, True, "unreadable")]
    return sorted(findings, key=lambda f: not f.reject)
