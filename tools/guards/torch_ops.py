"""The guard on PyTorch doing the work: `check_torch_compute`.

Rejects torch.*, F.*, aten, extern_kernels and Tensor compute methods, `@`, and nn
modules held in __init__ when they run in the forward path (also an op kept in set-up
to call later); a compiler or tracer taking the model over anywhere; and a forward
that is PyTorch's own (an nn layer subclassed, forward bound to a torch op). Torch
calls that allocate, describe or set up are allowed. Library work an operator hides
(`x * (x > 0)`) shows only at run time: the worker's aten counter (tools/sandbox/)
and the judge's time share check it.
"""
from __future__ import annotations

import ast
from typing import Iterator

from tools.guards.escapes import CONCURRENCY, FOREIGN, NETWORK, STREAMS
from tools.guards.names import is_layer, literal_getattr, resolve, words
from tools.guards.regions import DEAD, FORWARD, JIT, SETUP, Site, holder
from tools.guards.set_up import built_in_set_up, set_up_only
from tools.guards.source import Finding, Source, first, fn_name, line_of, spell, under
from tools.guards.tampering import TAMPER_PATHS
from tools.settings import GuardSettings

# torch calls that allocate, describe or set up, never compute the answer
_ALLOWED_TORCH = words("""
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
 torch.default_generator torch.default_generator.initial_seed torch.default_generator.get_offset
 torch.default_generator.set_offset torch.cuda.default_generators
""")   # the generators' seed and offset: read, and moved as a draw moves them (tools/kernels/draws.py); the
# worker still checks that a forward changes the global random state only where Model's does


_ALLOWED_TORCH_PREFIXES = ("torch.nn.init.", "torch.nn.Module.__init__", "torch.nn.modules.utils.",
                           "torch.autograd.Function.", "torch.library.", "torch.cuda.nvtx.",
                           "torch._inductor.runtime.", "torch.cuda.amp.", "torch.amp.",
                           # torch <= 2.2's paths of the same runtime modules (launch grids, jit
                           # helpers): absent from supported torch, so their import fails and
                           # the feedback names the new path (tools/dialect/causes.py)
                           "torch._inductor.triton_heuristics.", "torch._inductor.triton_helpers.")


# Tensor methods (and torch functions) that compute; views, casts and copies are not here
_COMPUTE_NAMES = words("""
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
    (words("matmul mm bmm mv dot addmm addmv baddbmm addbmm linear bilinear einsum tensordot "
           "__matmul__ __rmatmul__ chain_matmul inner outer"), "write it as a Triton kernel with tl.dot"),
    (frozenset(n for n in _COMPUTE_NAMES if n.startswith("conv")),
     "write the convolution as a Triton kernel (for example an implicit GEMM with tl.dot)"),
    (words("softmax log_softmax softmin"), "compute it in a Triton kernel with tl.max, tl.exp and tl.sum over each row"),
    (words("sum mean prod max min amax amin argmax argmin var std norm logsumexp cumsum cumprod"),
     "reduce inside a Triton kernel with tl.sum, tl.max, tl.min or tl.cumsum"),
)


_MODULE_HARMLESS = words("""parameters named_parameters buffers named_buffers to cuda cpu float
 double half type train eval state_dict requires_grad_ zero_grad extra_repr register_buffer
 register_parameter get_parameter get_buffer""")


# calls that hand the work to a compiler or library wherever they appear
_DELEGATORS = ("torch.compile", "torch.jit.script", "torch.jit.trace", "torch.jit.trace_module",
               "torch.jit.script_if_tracing", "torch.jit.freeze", "torch._dynamo", "torch.export",
               "torch.fx", "torch._inductor.compile", "torch._inductor.compile_fx", "torch.func")


# outside PyTorch but just as much not Triton, when called in the forward path
_OTHER_COMPUTE = ("numpy.asarray", "numpy.array", "numpy.ascontiguousarray", "numpy.frombuffer",
                  "numpy.from_dlpack", "torch.utils.dlpack", "einops.einsum", "einops.reduce", "opt_einsum")


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
    namespace = under(path, _COMPUTE_NAMESPACES)
    if namespace:
        return path != namespace   # F.relu is an op; F = torch.nn.functional only names the module
    return is_layer(path) or path.split(".")[-1] in _COMPUTE_NAMES


_COMPUTE_NAMESPACES = ("torch.nn.functional", "torch.ops.aten", "torch.ops.prims", "torch.special",
                       "torch.linalg", "torch.fft", "torch._C._nn", "torch._C._VariableFunctions",
                       "torch._VF", "torch._inductor.select_algorithm.extern_kernels")


def check_torch_compute(source: Source, settings: GuardSettings) -> Finding | None:
    """PyTorch (torch.*, F.*, aten, extern_kernels, Tensor methods, `@`, nn modules held
    in __init__) doing the work in the forward path, a compiler taking it over, or a
    forward that is PyTorch's own (an nn layer subclassed, forward bound to a torch op)."""
    reject = not settings.allow_library_ops
    return first(Finding("torch_compute", msg, line, reject, "library_ops")
                 for line, msg in (*_borrowed_forward(source), *_torch_refs(source), *_forward_syntax(source)))


def _work_msg(source: Source, node: ast.AST, site: Site, name: str) -> tuple[int | None, str]:
    return line_of(node), (f"`{spell(source, node)}` in `{fn_name(site)}` is a PyTorch library op doing "
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
    return line_of(node), (f"`{spell(source, node)}` in `{fn_name(site)}` runs extern_kernels.{name}, a "
                           f"library kernel (cuBLAS/cuDNN), not Triton; {advice}.")


def _type_test(source: Source, r) -> bool:
    """The reference is the class an `isinstance` / `issubclass` call tests against (alone or
    in its tuple): set-up that initialises weights by module type keeps nothing to call."""
    node, parent = r.node, r.site.parent
    if isinstance(parent, ast.Tuple):
        node, parent = parent, source.parents.get(id(parent))
    return (isinstance(parent, ast.Call) and isinstance(parent.func, ast.Name)
            and parent.func.id in ("isinstance", "issubclass") and len(parent.args) == 2 and parent.args[1] is node
            and parent.func.id not in source.module_names)


def _torch_refs(source: Source) -> Iterator[tuple[int | None, str]]:
    # a type annotation names a class, it computes nothing (`self.up: nn.Linear = nn.Linear(4, 8)`)
    annotations = {id(x) for n in ast.walk(source.tree) for a in (getattr(n, "annotation", None),
                   getattr(n, "returns", None)) if a is not None for x in ast.walk(a)}
    for r in source.refs:
        if id(r.node) in annotations:
            continue
        region = r.site.region
        for p in r.paths:
            if under(p, _DELEGATORS) and region != DEAD:
                yield line_of(r.node), (f"`{spell(source, r.node)}` hands the model to a PyTorch compiler or "
                                        "tracer; write the work as @triton.jit kernels instead.")
                break
            if region == FORWARD and under(p, _OTHER_COMPUTE):
                yield _work_msg(source, r.node, r.site, p.split(".")[-1])
                break
            if not p.startswith("torch.") or under(p, _OWNED_ELSEWHERE):
                continue
            if p.startswith("torch.ops.") and p.split(".")[2:3] and p.split(".")[2] in source.op_namespaces:
                continue   # torch.ops.mylib.op: the file's own custom op, whose body is checked itself
            if region in (FORWARD, JIT) and ((r.called and not _torch_allowed(p)) or
                                             (_torch_compute_ref(p) and not _type_test(source, r))):
                if under(p, (_EXTERN_KERNELS,)):
                    yield _extern_msg(source, r.site.parent if r.called else r.node, r.site, p.split(".")[-1])
                else:
                    yield _work_msg(source, r.node, r.site, p.split(".")[-1])
                break
            if region == SETUP and not r.called and _torch_compute_ref(p) and not _type_test(source, r) \
                    and not built_in_set_up(source, r) \
                    and not (isinstance(r.site.parent, ast.ClassDef) and any(b is r.node for b in r.site.parent.bases)
                             and set_up_only(source, r.site.parent)):
                # mm = torch.mm; OPS = {"mm": torch.mm}; self.act = F.relu: kept to be called
                # later, maybe through a path no alias tracking follows (type(self).mm)
                yield line_of(r.node), (f"`{spell(source, r.site.parent)}` keeps a PyTorch op to call later; "
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
            if isinstance(s.parent, ast.Attribute) and s.parent.value is n and \
                    s.parent.attr not in ("__call__", "__func__", "__wrapped__", "__get__"):
                continue   # self.embed.norm.weight: an object read for its attribute (a submodule), not a method
            if not resolve(base, source.aliases, source.self_attrs, frozenset()):
                yield _work_msg(source, n, s, n.attr)
        elif literal_getattr(n) and n.args[1].value in _COMPUTE_NAMES and \
                not resolve(n.args[0], source.aliases, source.self_attrs, frozenset()):
            yield _work_msg(source, n, s, n.args[1].value)   # getattr(x, "relu")
        elif isinstance(n, ast.Call):
            # self.conv(x), self.conv.forward(x), self.blocks[0](x), layer(x) for layer in self.layers
            f = n.func
            targets = [f, f.value] if isinstance(f, ast.Attribute) and f.attr not in _MODULE_HARMLESS else [f]
            for t in targets:
                while isinstance(t, ast.Subscript):
                    t = t.value
                if holder(t) in source.library_names:
                    yield line_of(n), (f"`{spell(source, n)}` runs a torch.nn module in `{fn_name(s)}`; keep the "
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
        if isinstance(n, ast.ClassDef) and not set_up_only(source, n):
            for b in n.bases:
                if any(is_layer(p) for p in resolve(b, source.aliases, source.self_attrs, frozenset())):
                    yield line_of(b), (f"class {n.name} inherits its forward from `{spell(source, b)}`; derive from "
                                       "nn.Module and compute in Triton kernels.")
        targets = n.targets if isinstance(n, ast.Assign) else [n.target] if isinstance(n, ast.AnnAssign) else []
        for t in targets:
            rebinds = (isinstance(t, ast.Attribute) and t.attr in ("forward", "__call__", "_call_impl")) or \
                (isinstance(t, ast.Name) and t.id in ("forward", "__call__") and isinstance(s.parent, ast.ClassDef))
            if rebinds:
                yield line_of(n), (f"`{spell(source, n)}` replaces forward with another callable; define "
                                   "`def forward` that launches Triton kernels.")


# torch paths another guard reports with a more precise message
_OWNED_ELSEWHERE = (*STREAMS, *FOREIGN, *CONCURRENCY, *NETWORK, *TAMPER_PATHS, "torch.save", "torch.load")
