"""Library calls Inductor leaves, written as launches of krefine's own kernel families.

A seed is pure Triton: what the compile leaves to a library becomes a call of a family
under tools/kernels/, whose file the seed carries unchanged (`family_source`):

  extern_kernels.convolution (cuDNN, the cpu library)  -> conv_nd / conv_transpose_nd (conv.py)
  extern_kernels.mm / addmm / bmm / baddbmm (cuBLAS)   -> gemm (gemm.py)
  torch.ops.krefine.addmm_act (gemm_epilogue.py)       -> gemm(..., act=) (gemm.py)
  torch.ops.krefine.conv_bias_act (conv_epilogue.py)   -> the conv_nd launch before it takes bias, activation=
  torch.ops.aten._scaled_dot_product_*_attention       -> sdpa (attention.py)
  torch.ops.krefine.rnn (nn.LSTM / GRU / RNN: rnn_op.py) -> rnn_seq (rnn.py)
  torch.ops.aten.topk / sort (fallback kernels)        -> topk_op / sort_op (select.py)
  torch.ops.aten._embedding_bag / _cdist_forward        -> embedding_bag_op / cdist_op (lookup.py)
  aten.scatter_reduce_.two (cpu: scatter_add, ...)      -> scatter_reduce_op_ (scatter.py)
  torch.ops.krefine.add_one_ (counters.py: BatchNorms' num_batches_tracked) -> add_one (counters.py)
  torch.ops.krefine.batch_stats(_) (batch_stats.py: a BatchNorm's statistics) -> batch_stats (batchnorm.py)
  aten.randint.low_out (the seeds of Inductor's random kernels)               -> draw_seeds (draws.py)

Each launch keeps the buffer Inductor allocated (or the layout it asserts next) and exact
"ieee" dots; the portfolio's tf32x3 variants change only `precision=`. Used by
tools/dialect/kernelbook.py's `_rewrite_call`.
"""
from __future__ import annotations

import ast
import re

from tools.dialect.inductor_wrapper import call_name, dotted, short_code


CONV_FAMILY = "tools/kernels/conv.py"
# launcher keywords in the order F.conv* / F.conv_transpose* take them
_CONV_KEYWORDS = ("stride", "padding", "dilation", "groups")
_CONV_T_KEYWORDS = ("stride", "padding", "output_padding", "groups", "dilation")


def conv_family_source() -> str:
    """krefine's convolution family as the seed carries it: the file's text, unchanged,
    under a line naming where it comes from."""
    from pathlib import Path
    text = (Path(__file__).resolve().parents[1] / "kernels" / "conv.py").read_text()
    return f"# krefine's convolution kernels ({CONV_FAMILY}), copied unchanged\n{text}"


GEMM_FAMILY = "tools/kernels/gemm.py"
# extern_kernels.<name>(operands..., out=buf) -> the names of the operands gemm() takes
_GEMM_CALLS = {"extern_kernels.mm": ("a", "b"), "extern_kernels.bmm": ("a", "b"),
               "extern_kernels.addmm": ("bias", "a", "b"), "extern_kernels.baddbmm": ("bias", "a", "b")}


def family_source(path: str) -> str:
    """A kernel family of tools/kernels/ as a seed carries it: the file's text, unchanged,
    under a line naming where it comes from."""
    from pathlib import Path
    text = (Path(__file__).resolve().parents[2] / path).read_text()
    return f"# krefine's kernels ({path}), copied unchanged\n{text}"


def _gemm_launch(stmt: ast.Expr) -> ast.Expr:
    """`extern_kernels.addmm(bias, a, b, alpha=1, beta=1, out=buf)` (cuBLAS, or the cpu
    library; mm / bmm / baddbmm alike) -> `gemm(a, b, out=buf, bias=bias, alpha=1, beta=1,
    precision='ieee')`: krefine's GEMM family (tools/kernels/gemm.py) writing into the
    buffer Inductor allocated."""
    call = stmt.value
    names = _GEMM_CALLS[call_name(stmt)]
    kw = {k.arg: k.value for k in call.keywords}
    if len(call.args) != len(names) or "out" not in kw or set(kw) - {"out", "alpha", "beta"} \
            or any(isinstance(a, ast.Starred) for a in call.args):
        raise ValueError(f"call(): unsupported matrix product call: {short_code(stmt)}")
    operands = dict(zip(names, call.args))
    keywords = [ast.keyword("out", kw["out"])]
    if "bias" in operands:
        keywords.append(ast.keyword("bias", operands["bias"]))
    keywords += [ast.keyword(k, kw[k]) for k in ("alpha", "beta") if k in kw]
    keywords.append(ast.keyword("precision", ast.Constant("ieee")))
    return ast.Expr(ast.Call(ast.Name("gemm", ast.Load()), [operands["a"], operands["b"]], keywords))


ADDMM_ACT_OP = "torch.ops.krefine.addmm_act.default"


def _addmm_act_launch(stmt: ast.Assign) -> ast.Assign:
    """`buf = torch.ops.krefine.addmm_act.default(bias, a, b, 'relu')` (a Linear and its ReLU,
    tools/dialect/gemm_epilogue.py) -> `buf = gemm(a, b, bias=bias, act='relu', precision='ieee')`:
    the GEMM family, the ReLU in its epilogue, into an output it allocates (as the op did)."""
    call = stmt.value
    if len(call.args) != 4 or call.keywords or any(isinstance(a, ast.Starred) for a in call.args) \
            or not isinstance(call.args[3], ast.Constant):
        raise ValueError(f"call(): unsupported product-and-activation call: {short_code(stmt)}")
    bias, a, b, act = call.args
    stmt.value = ast.Call(ast.Name("gemm", ast.Load()), [a, b], [
        ast.keyword("bias", bias), ast.keyword("act", act), ast.keyword("precision", ast.Constant("ieee"))])
    return stmt


ATTENTION_FAMILY = "tools/kernels/attention.py"
# the library attention ops Inductor leaves (F.scaled_dot_product_attention, nn.MultiheadAttention)
_SDPA_OPS = ("_scaled_dot_product_flash_attention_for_cpu", "_scaled_dot_product_flash_attention",
             "_scaled_dot_product_efficient_attention", "_scaled_dot_product_cudnn_attention")


def _sdpa_op(name: str) -> str | None:
    """The op of `torch.ops.aten.<op>.default` when it is a library attention op, else None."""
    m = re.fullmatch(r"torch\.ops\.aten\.(\w+)\.default", name)
    return m.group(1) if m and m.group(1) in _SDPA_OPS else None


def _attention_launch(stmt: ast.Assign, module_mode: str = "train") -> ast.Assign:
    """`buf = torch.ops.aten._scaled_dot_product_X.default(q, k, v, ...)` -> `buf = sdpa('_scaled_
    dot_product_X', q, k, v, ..., precision='ieee')`: krefine's attention family
    (tools/kernels/attention.py), the op's arguments as they were, a tuple as the op returns.
    An attention dropout (dropout_p > 0, random) is a ValueError here, not a seed that
    raises at its first call."""
    from tools.kernels.attention import _SDPA_OPS as PARAMETERS
    op = _sdpa_op(call_name(stmt))
    names = PARAMETERS[op][0]
    given = {**dict(zip(names, stmt.value.args[3:])), **{k.arg: k.value for k in stmt.value.keywords}}
    p = given.get("dropout_p")
    if isinstance(p, ast.Constant) and isinstance(p.value, (int, float)) and p.value:
        raise ValueError(f"call(): the forward draws random numbers (attention dropout, dropout_p={p.value}): no kernel "
                         "can reproduce torch's generator draw for draw; " + (
                             "a dropout is random in training mode (--set eval.module_mode=eval judges inference)"
                             if module_mode == "train" else "one the forward asks for in eval mode too (a dropout_p "
                             "not tied to self.training)"))
    return _as_family_call(stmt, "sdpa", "attention", [ast.Constant(op)])


def _as_family_call(stmt: ast.Assign, name: str, what: str, lead: list[ast.expr]) -> ast.Assign:
    """`buf = OP(args..., k=v...)` -> `buf = name(*lead, args..., k=v..., precision='ieee')`: a
    library op Inductor left, as the family function taking the same arguments."""
    call = stmt.value
    if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
        raise ValueError(f"call(): unsupported {what} call: {short_code(stmt)}")
    keywords = [*call.keywords, ast.keyword("precision", ast.Constant("ieee"))]
    stmt.value = ast.Call(ast.Name(name, ast.Load()), [*lead, *call.args], keywords)
    return stmt


def _conv_launch(stmt: ast.Assign, layout: ast.stmt | None, sizes: dict[str, tuple]) -> ast.Assign:
    """`buf = extern_kernels.convolution(x, w, bias, stride=.., transposed=.., ...)` (cuDNN, or
    the cpu library) -> `buf = conv_nd(x, w, bias, stride=.., ..., precision='ieee',
    member=.., out_stride=..)` or `conv_transpose_nd(...)`: the family's launcher, its
    member named, writing the layout the next statement asserts (what call()'s later
    kernels read)."""
    from tools.kernels.conv import conv_member
    call = stmt.value
    kw = {k.arg: k.value for k in call.keywords}
    args = list(call.args)
    if len(args) == 2:
        args.append(kw.pop("bias", ast.Constant(None)))
    if len(args) != 3 or set(kw) - {"stride", "padding", "dilation", "transposed", "output_padding", "groups"}:
        raise ValueError(f"call(): unsupported convolution call: {short_code(stmt)}")
    try:
        transposed = bool(ast.literal_eval(kw.pop("transposed", ast.Constant(False))))
        groups = int(ast.literal_eval(kw.get("groups", ast.Constant(1))))
    except ValueError:
        raise ValueError(f"call(): a convolution whose transposed / groups are not literals: {short_code(stmt)}") \
            from None
    names = _CONV_T_KEYWORDS if transposed else _CONV_KEYWORDS
    keywords = [ast.keyword(n, kw[n]) for n in names if n in kw]
    keywords.append(ast.keyword("precision", ast.Constant("ieee")))
    weight = sizes.get(ast.unparse(args[1]))
    if weight is not None and len(weight) >= 3:   # forward: (out, in / groups, ..); transposed: (in, ..)
        c_group = weight[0] // groups if transposed else weight[1]
        keywords.append(ast.keyword("member", ast.Constant(conv_member(transposed, groups, c_group))))
    if layout is not None:
        keywords.append(ast.keyword("out_stride", layout.value.args[2]))
    name = "conv_transpose_nd" if transposed else "conv_nd"
    return ast.Assign(targets=stmt.targets, value=ast.Call(ast.Name(name, ast.Load()), args, keywords),
                      lineno=stmt.lineno)


CONV_BIAS_ACT_OP = "torch.ops.krefine.conv_bias_act.default"


def _conv_bias_act_launch(stmt: ast.Assign, body: list[ast.stmt], rest: list[ast.stmt]) -> ast.stmt:
    """`buf3 = torch.ops.krefine.conv_bias_act.default(buf2, bias, 'relu')` (a convolution's bias and
    ReLU, tools/dialect/conv_epilogue.py), `buf2` written by a family launch already in `body` ->
    that launch writes buf3, `buf2 = conv_nd(x, w, bias, ..., activation='relu', ...)` becoming
    `buf3 = conv_nd(x, w, bias, ..., activation='relu', ...)`: one launch. What is returned stands
    where the op stood for buf2: buf3 itself where call() only deletes buf2 after, else a buffer of
    its own (call() reuses buf2's memory for a later buffer, which must not be buf3's)."""
    call = stmt.value
    if len(stmt.targets) != 1 or len(call.args) != 3 or call.keywords or not isinstance(call.args[2], ast.Constant) \
            or not isinstance(call.args[0], ast.Name):
        raise ValueError(f"call(): unsupported convolution bias-and-activation call: {short_code(stmt)}")
    src, (bias, act) = call.args[0].id, call.args[1:]
    launch = next((s for s in reversed(body) if isinstance(s, ast.Assign) and ast.unparse(s.targets[0]) == src), None)
    if launch is None or not re.fullmatch(r"conv(_transpose)?_nd\(.*", ast.unparse(launch.value)) \
            or ast.unparse(launch.value.args[2]) != "None":
        raise ValueError(f"call(): a convolution's bias and activation whose input ({src}) is not a convolution "
                         f"launch without a bias: {short_code(stmt)}")
    made_after = {ast.unparse(t) for s in body[body.index(launch) + 1:] + rest if isinstance(s, ast.Assign)
                  for t in s.targets}   # conv_epilogue takes a given bias only; one made later cannot go in the launch
    if ast.unparse(bias) in made_after:
        raise ValueError(f"call(): a convolution's bias ({ast.unparse(bias)}) is made after its launch: "
                         f"{short_code(stmt)}")
    launch.value.args[2] = bias
    launch.value.keywords.append(ast.keyword("activation", act))
    launch.targets = stmt.targets
    later = [n for s in rest if not isinstance(s, ast.Delete) for n in ast.walk(s) if isinstance(n, ast.Name)]
    out = ast.unparse(stmt.targets[0])
    return ast.parse(f"{src} = empty_strided_cuda({out}.size(), {out}.stride(), {out}.dtype)"
                     if any(n.id == src for n in later) else f"{src} = {out}").body[0]


RNN_FAMILY = "tools/kernels/rnn.py"
RNN_OP = "torch.ops.krefine.rnn.default"


def _rnn_launch(stmt: ast.Assign) -> ast.Assign:
    """`buf = torch.ops.krefine.rnn.default(x, h0, c0, [w, ...], mode, ...)` (a recurrent module
    the capture ran as one op, tools/dialect/rnn_op.py) -> `buf = rnn_seq(x, h0, c0, [w, ...],
    mode, ..., precision='ieee')`: krefine's recurrent family, the same arguments."""
    return _as_family_call(stmt, "rnn_seq", "recurrent", [])


SELECT_FAMILY = "tools/kernels/select.py"
# the fallback ops of top-k and sort Inductor leaves -> the family function taking their arguments
_SELECT_OPS = {"torch.ops.aten.topk.default": "topk_op", "torch.ops.aten.sort.default": "sort_op",
               "torch.ops.aten.sort.stable": "sort_op"}


def _select_launch(stmt: ast.Assign) -> ast.Assign:
    """`buf = torch.ops.aten.topk.default(x, k, dim, largest, sorted)` (or aten.sort) ->
    `buf = topk_op(x, k, dim, largest, sorted, precision='ieee')`: krefine's selection family
    (tools/kernels/select.py), a (values, indices) tuple as the op returns."""
    return _as_family_call(stmt, _SELECT_OPS[call_name(stmt)], "top-k / sort", [])



LOOKUP_FAMILY = "tools/kernels/lookup.py"
# the fallback ops of nn.EmbeddingBag and torch.cdist -> the family function taking their arguments
_LOOKUP_OPS = {"torch.ops.aten._embedding_bag.default": "embedding_bag_op",
               "torch.ops.aten._cdist_forward.default": "cdist_op"}


def _lookup_launch(stmt: ast.Assign, rest: list[ast.stmt]) -> ast.Assign:
    """`buf = torch.ops.aten._embedding_bag.default(w, idx, offsets, ...)` (or _cdist_forward) ->
    `buf = embedding_bag_op(w, idx, offsets, ..., precision='ieee')`: krefine's lookup family
    (tools/kernels/lookup.py). The family computes only the first of _embedding_bag's four
    outputs (the others are the backward's): a call() reading another (`buf[1]`, or the
    tuple whole) is refused with that reason."""
    if call_name(stmt) == "torch.ops.aten._embedding_bag.default":
        name = ast.unparse(stmt.targets[0])
        firsts = {id(n.value) for r in rest for n in ast.walk(r) if isinstance(n, ast.Subscript)
                  and ast.unparse(n.value) == name and ast.unparse(n.slice) == "0"}
        deleted = {id(t) for r in rest if isinstance(r, ast.Delete) for t in r.targets}
        if any(isinstance(n, ast.Name) and n.id == name and id(n) not in firsts | deleted
               for r in rest for n in ast.walk(r)):
            raise ValueError(f"call(): {name} = aten._embedding_bag(...) is read beyond its output (offset2bag, "
                             "bag_size or max_indices), which krefine's lookup family does not compute")
    return _as_family_call(stmt, _LOOKUP_OPS[call_name(stmt)], "embedding-bag / cdist", [])


SCATTER_FAMILY = "tools/kernels/scatter.py"
SCATTER_REDUCES = ("sum", "mean", "amax", "amin")   # tools/kernels/scatter.py REDUCES
# the in-place scatter Inductor's cpu backend leaves to PyTorch -> the family function, in place too
_SCATTER_OPS = {"aten.scatter_reduce_.two": "scatter_reduce_op_", "torch.ops.aten.scatter_reduce_.two": "scatter_reduce_op_"}


def _scatter_launch(stmt: ast.Expr) -> ast.Expr:
    """`aten.scatter_reduce_.two(buf, dim, index, src, reduce='sum', include_self=True)` ->
    `scatter_reduce_op_(buf, dim, index, src, reduce='sum', include_self=True, precision='ieee')`:
    krefine's scatter family (tools/kernels/scatter.py), updating `buf` in place as the op does.
    A reduction the family has no form for ("prod") is refused here, with that reason, rather
    than when the seed first runs."""
    given = [k.value for k in stmt.value.keywords if k.arg == "reduce"] + stmt.value.args[4:5]
    if given and isinstance(given[0], ast.Constant) and given[0].value not in SCATTER_REDUCES:
        raise ValueError(f"scatter_reduce with reduce={given[0].value!r}: krefine's scatter family has no atomic "
                         f"form for it (it takes {', '.join(SCATTER_REDUCES)})")
    return _as_family_call(stmt, _SCATTER_OPS[call_name(stmt)], "scatter", [])


COUNTER_FAMILY = "tools/kernels/counters.py"
ADD_ONE_OP = "torch.ops.krefine.add_one_.default"   # tools/dialect/counters.py


def _add_one_launch(stmt: ast.Expr) -> ast.Expr:
    """`torch.ops.krefine.add_one_.default([arg2_1, arg8_1])` (the forward's counter increments,
    a BatchNorm's num_batches_tracked) -> `add_one([arg2_1, arg8_1])`: krefine's counter kernel
    (tools/kernels/counters.py), in place, one launch for every 16."""
    call = stmt.value
    if len(call.args) != 1 or call.keywords or not isinstance(call.args[0], ast.List):
        raise ValueError(f"call(): unsupported counter increment: {short_code(stmt)}")
    return ast.Expr(ast.Call(ast.Name("add_one", ast.Load()), [call.args[0]], []))


BATCH_STATS_FAMILY = "tools/kernels/batchnorm.py"
BATCH_STATS_OPS = ("torch.ops.krefine.batch_stats.default", "torch.ops.krefine.batch_stats_.default")


def _batch_stats_launch(stmt: ast.Assign) -> ast.Assign:
    """`buf3 = torch.ops.krefine.batch_stats_.default(buf2, arg4_1, arg5_1, 0.1, 1.02)` (a BatchNorm's
    statistics and running update: tools/dialect/batch_stats.py), or `batch_stats.default(buf2)` ->
    `buf3 = batch_stats(buf2, ...)`: krefine's batch-statistics kernel (tools/kernels/batchnorm.py),
    one launch, (var, mean) as the op returns them."""
    call = stmt.value
    if len(stmt.targets) != 1 or call.keywords or len(call.args) not in (1, 5) \
            or any(isinstance(a, ast.Starred) for a in call.args):
        raise ValueError(f"call(): unsupported batch statistics call: {short_code(stmt)}")
    return ast.Assign(stmt.targets, ast.Call(ast.Name("batch_stats", ast.Load()), call.args, []))


DRAW_FAMILY = "tools/kernels/draws.py"
_SEED_DRAW = re.compile(r"aten\.randint\.low_out\(-9223372036854775808, 9223372036854775807, \[\d+\], out=(\w+)\)")


def kernel_drawn(draws: list, drawing_ops: set, dropout: bool) -> bool:
    """Whether the forward's random draws (call()'s statements that draw) are all the seeds
    Inductor's random kernels key on (`aten.randint.low_out` over the int64 range, which
    `draw_seeds` writes: tools/kernels/draws.py), for kernels that draw (`drawing_ops`, by
    their names) other than a dropout's or an RReLU's (random in training mode: advised)."""
    return bool(draws) and bool(drawing_ops) and not dropout and \
        all(_SEED_DRAW.fullmatch(ast.unparse(s)) for s in draws)


def _seed_draw_launch(stmt: ast.Expr) -> ast.Expr | None:
    """`aten.randint.low_out(-2**63, 2**63 - 1, [n], out=buf0)` -> `draw_seeds(buf0)`; None for
    any other statement."""
    found = _SEED_DRAW.fullmatch(ast.unparse(stmt)) if isinstance(stmt, ast.Expr) else None
    return ast.Expr(ast.Call(ast.Name("draw_seeds", ast.Load()), [ast.Name(found.group(1), ast.Load())], [])) \
        if found else None


# the random op a fused kernel's name says it draws (triton_poi_fused_randn_0, ..._native_dropout_1)
_RANDOM_OP = re.compile(r"_(randn|randint|rand|bernoulli|dropout|normal|uniform|multinomial|randperm|exponential)"
                        r"(?:_|$)")
# a random op Inductor leaves to PyTorch (nn.RReLU's noise in training mode: aten.uniform)
_FALLBACK_DRAW = re.compile(r"\b(?:aten|prims)\.(uniform|normal|bernoulli|exponential|geometric|log_normal|cauchy|"
                            r"multinomial|randperm|rrelu_with_noise)(?:_functional|_)?\b")   # rsample; x.bernoulli_(p)


def draw_fault(call_fn: ast.FunctionDef, kernels, module_mode: str) -> ValueError | None:
    """Why call()'s random draws give no seed, or None: none, or only the seeds of kernels that
    draw (`kernel_drawn`, written as `draw_seeds`). A dropout's or an RReLU's draw, in training
    mode, is advised to judge eval mode; a draw left to PyTorch (`aten.uniform`) has no kernel."""
    draws = [n for n in ast.walk(call_fn) if isinstance(n, ast.stmt) and not hasattr(n, "body")
             and (re.search(r"\b(randint|inductor_seeds|inductor_random)\b", ast.unparse(n)) or
                  _FALLBACK_DRAW.search(ast.unparse(n)))]
    drawing = {m.group(1) for k in kernels for m in [_RANDOM_OP.search(k)] if m}
    dropout = any("dropout" in k or "rrelu" in k for k in kernels)   # by name; a bernoulli alone is the user's
    draw = None if kernel_drawn(draws, drawing, dropout) else next(iter(draws), None)   # else: draw_seeds
    if draw is None:
        return None
    ops = sorted(drawing | {m.group(1) for m in [_FALLBACK_DRAW.search(ast.unparse(draw))] if m})
    feature = re.search(r"\bbernoulli_\.float\b", ast.unparse(draw))   # nn.Dropout2d / 3d's mask, in place
    what = ("a feature or alpha dropout (nn.Dropout2d / Dropout3d / AlphaDropout, F.dropout2d, F.alpha_dropout) or "
            "the forward's own bernoulli_(p)" if feature else "a dropout (an RReLU)")
    return ValueError(f"call(): the forward draws random numbers ({', '.join(ops) or short_code(draw)}): no kernel "
                      "can reproduce torch's generator draw for draw; " + (
                          (f"{what} is random in training mode (--set eval.module_mode=eval judges inference)"
                           if module_mode == "train" else "one the forward asks for in eval mode too (`training=True`)")
                          if dropout or feature or not ops else "the forward's own draw (torch.randn, rand, bernoulli, "
                          "uniform_): a seed needs the values as inputs or buffers" + (
                              "; if it is drawn only in training (under `if self.training:`, as stochastic depth "
                              "or a VAE's sampling), --set eval.module_mode=eval judges inference without it"
                              if module_mode == "train" else " (eval mode keeps it)")))


# every family a seed may carry, in the order the seed's text holds them (the seed cache's
# key hashes these files: tools/dialect/seedcache.py KERNEL_CODE)
FAMILIES = (CONV_FAMILY, GEMM_FAMILY, ATTENTION_FAMILY, RNN_FAMILY, SELECT_FAMILY, LOOKUP_FAMILY, SCATTER_FAMILY,
            COUNTER_FAMILY, BATCH_STATS_FAMILY, DRAW_FAMILY)
