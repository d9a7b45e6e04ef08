"""KernelBook's dialect in feedback: the usual causes when such a candidate fails.

`explain(...)` is a pure function from a failed verdict's facts (the candidate source,
its diagnostics, the problem's shapes) to extra diagnostics naming the dialect's usual
faults: an import of a name this torch or Triton lacks (tools/dialect/names.py says
where it came from), `xnumel` hard-coded for other shapes, a failing
`assert_size_stride`, a class named `<Name>New` instead of ModelNew, a
`reinterpret_tensor` view outside its buffer or returned with strides that are not
row-major. `with_causes(...)` places them among the raw diagnostics for the verdict
(tools/judge/record.py): a cause that explains the error goes before it; a hard-coded
size, a guess, after the judge's own first finding.

A size counts as hard-coded only when no product of the problem's sizes makes it: the
dims of its inputs, outputs, parameters and submodule outputs, and its integer
parameters (kernel_size, channels, ...) up to their cubes (a k×k×k window), or the
sizes of a split reduction: r0_numel = ceil(p / k), p a product of one shape's dims
(or such a share again, a second split), with xnumel = k times a size of the problem.

Not covered: making such code run (tools/dialect/portable.py).
"""
from __future__ import annotations

import ast
import math
import re
from collections import Counter
from dataclasses import dataclass

from tools.dialect import names
from tools.dialect.runtime import span
from tools.verdict import Diagnostic, Status

@dataclass(frozen=True)
class Shapes:
    """The problem's tensors as the candidate sees them (from a meta-device run)."""
    inputs: tuple[tuple[tuple[int, ...], tuple[int, ...]], ...]   # (size, stride) of each tensor input
    outputs: tuple[tuple[int, ...], ...]
    params: tuple[int, ...] = ()                # integers among the init inputs and inputs
    inner: tuple[tuple[int, ...], ...] = ()     # sizes of parameters, buffers, submodule outputs

    def makes(self, value: int) -> bool:
        """Whether `value` is a product of the problem's sizes: dims of its tensors, each
        as often as it occurs in one shape (112*512*512 of (112, 64, 512, 512)), times
        integer parameters, each up to its cube (121 = 11*11, a pooling window), or such a
        product divided by one of them (Mamba2's 2 chunks = a sequence of 128 / blocks of 64)."""
        if value < 1:
            return False
        factors = Counter()
        for shape in [s for s, _ in self.inputs] + list(self.outputs) + list(self.inner):
            for dim, n in Counter(d for d in shape if d > 1).items():
                factors[dim] = max(factors[dim], n)
        for p in self.params:
            if p > 1:
                factors[p] += 3

        def product(v):
            reachable = {1}   # only divisors of v: a few thousand at most, however many dims
            for dim, n in factors.items():
                reachable = {r * dim ** k for r in reachable for k in range(n + 1) if v % (r * dim ** k) == 0}
            return v in reachable
        return product(value) or any(product(value * q) for q in factors)

    def splits(self, value: int, times: int, bounds=()) -> bool:
        """Whether a reduction kernel's r0_numel `value` and xnumel `times` are a split
        reduction's (Inductor's batch norm over N*H*W in k shares): value = ceil(p / k)
        and times = k * a size `makes`, p a product of the dims of one shape, or one of
        `bounds` (the kernel's literals) that is itself such a share (a second split)."""
        if value < 1 or times < 1:
            return False
        products = {math.prod(d for i, d in enumerate(dims) if mask >> i & 1)
                    for dims in ([d for d in shape if d > 1] for shape in
                                 [s for s, _ in self.inputs] + list(self.outputs) + list(self.inner))
                    for mask in range(1, 1 << len(dims))}
        products |= {b for b in bounds if any(_shares(p, b) for p in products)}
        return any(low <= k <= high and self.makes(times // k)
                   for p in products if (span := _shares(p, value)) for low, high in [span] for k in _divisors(times))

    def describe(self) -> str:
        parts = [f"input {i} has size {_tup(s)}: {math.prod(s)} elements" for i, (s, _) in enumerate(self.inputs)]
        parts += [f"the output has size {_tup(s)}" if len(self.outputs) == 1 else f"output {i} has size {_tup(s)}"
                  for i, s in enumerate(self.outputs)]
        if self.params:
            parts.append(f"its integer parameters are {', '.join(map(str, self.params))}")
        return "; ".join(parts)


def _shares(p: int, value: int) -> tuple[int, int] | None:
    """The k in which ceil(p / k) == value, as (low, high), for 1 < value < p; else None."""
    if not 1 < value < p:
        return None
    low, high = -(-p // value), (p - 1) // (value - 1)
    return (low, high) if low <= high else None


def _divisors(n: int) -> list[int]:
    small = [k for k in range(1, math.isqrt(n) + 1) if n % k == 0]
    return small + [n // k for k in small]


def problem_shapes(module) -> Shapes:
    """Input sizes and strides, output sizes, integer parameters and the sizes of the
    model's own tensors of a problem module, computed on the meta device (no memory, no
    compute, no random numbers drawn)."""
    import torch
    from tools.problem import split_init
    inputs, outputs, params, inner = (), (), (), []
    try:
        with torch.device("meta"):
            values = list(module.get_inputs())
            inputs = tuple((tuple(v.shape), tuple(v.stride())) for v in values if isinstance(v, torch.Tensor))
            args, kwargs = split_init(module.get_init_inputs())
            params = tuple(_integers([*args, *kwargs.values(), *values]))
            model = module.Model(*args, **kwargs)
            inner += [tuple(t.shape) for t in [*model.parameters(), *model.buffers()]]
            for sub in model.modules():   # a fused kernel's loop may span an intermediate (a conv's output)
                if sub is not model:
                    sub.register_forward_hook(lambda _m, _i, out: inner.extend(_tensor_shapes(out, torch)))
            with torch.no_grad():
                out = model(*values)
        outputs = tuple(_tensor_shapes(out, torch))
    except Exception:   # an op without a meta kernel: explain from what is known
        pass
    return Shapes(inputs, outputs, params, tuple(dict.fromkeys(inner)))


def _integers(values):
    for v in values:
        if isinstance(v, (list, tuple)):
            yield from _integers(v)
        elif isinstance(v, int) and not isinstance(v, bool):
            yield v


def _tensor_shapes(out, torch):
    outs = out if isinstance(out, (tuple, list)) else [out]
    return [tuple(o.shape) for o in outs if isinstance(o, torch.Tensor)]


def explain(src: str, status: Status, diagnostics, problem=None) -> tuple[Diagnostic, ...]:
    """Diagnostics naming the KernelBook-dialect cause of a failed verdict; () when none
    applies. `problem` (a tools.problem.Problem) gives the shapes the size checks compare
    with."""
    return tuple(d for _, d in _found(src, status, tuple(diagnostics), problem))


def with_causes(src: str, status: Status, diagnostics, problem=None) -> tuple[Diagnostic, ...]:
    """A verdict's diagnostics with explain()'s among them: a cause that explains the
    error (a removed import, a failing assert_size_stride, a view outside its buffer)
    first; a hard-coded size after the judge's own first finding (wrong values, a crash,
    out of memory): it is a guess, the constant may be meant for a shape the problem
    makes that the judge cannot see, and the finding is what happened."""
    raw = tuple(diagnostics)
    found = _found(src, status, raw, problem)
    first = tuple(d for check, d in found if check not in _AFTER_THE_ERROR)
    after = tuple(d for check, d in found if check in _AFTER_THE_ERROR)
    return first + raw[:1] + after + raw[1:]


def _found(src: str, status: Status, diagnostics: tuple, problem) -> list:
    """(check, diagnostic) of the first two checks that apply."""
    if status in (Status.CORRECT, Status.REJECTED) or not diagnostics:
        return []
    try:
        tree = ast.parse(src)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    facts = _Facts(src, tree, problem, diagnostics, status)
    found = []
    for check in _CHECKS:
        try:
            d = check(facts)
        except Exception:   # a hint must never turn a verdict into an evaluator failure
            continue
        if d is not None:
            found.append((check, d))
    return found[:2]


class _Facts:
    def __init__(self, src, tree, problem, diagnostics, status):
        self.src, self.tree, self.problem, self.diagnostics, self.status = src, tree, problem, diagnostics, status
        self._shapes = None

    @property
    def shapes(self) -> Shapes | None:
        if self._shapes is None and self.problem is not None:
            self._shapes = problem_shapes(self.problem.module)
        return self._shapes

    def calls(self, name: str):
        """Calls of a plain name (`assert_size_stride(...)`) in document order."""
        return sorted((n for n in ast.walk(self.tree) if isinstance(n, ast.Call)
                       and isinstance(n.func, ast.Name) and n.func.id == name), key=lambda n: n.lineno)

    def jit_functions(self):
        for n in self.tree.body:
            if isinstance(n, ast.FunctionDef) and any(
                    "jit" in ast.unparse(d) or "autotune" in ast.unparse(d) for d in n.decorator_list):
                yield n


def _tup(values) -> str:
    values = tuple(values)
    return f"({values[0]},)" if len(values) == 1 else str(values)


def _literal(node):
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None


def _diag(f: _Facts, kind: str, message: str, line: int | None) -> Diagnostic:
    lines = f.src.splitlines()
    text = lines[line - 1].strip() if line and 0 < line <= len(lines) else None
    return Diagnostic(f"dialect:{kind}", message, line, text)


def _missing_model_new(f: _Facts) -> Diagnostic | None:
    if not any("MissingModelNew" in d.message or "defines no ModelNew" in d.message for d in f.diagnostics):
        return None
    classes = [n for n in f.tree.body if isinstance(n, ast.ClassDef)]
    named = [c for c in classes if c.name.endswith("New")] or \
        [c for c in classes if any(isinstance(b, ast.FunctionDef) and b.name == "forward" for b in c.body)]
    if named:
        c = named[0]
        return _diag(f, "missing_model_new", f"the file defines class {c.name}, but the evaluator loads ModelNew: "
                     f"rename class {c.name} to ModelNew (keep its __init__ arguments and forward)", c.lineno)
    return _diag(f, "missing_model_new", "the file defines no ModelNew class: add class ModelNew(nn.Module) with "
                 "the reference Model's __init__ arguments, whose forward takes the inputs and launches the kernels",
                 None)


_IMPORT_FAULTS = (
    (re.compile(r"cannot import name '(\w+)' from '([\w.]+)'"), lambda m: (m.group(2), m.group(1))),
    (re.compile(r"No module named '([\w.]+)'"), lambda m: (m.group(1), None)),
    (re.compile(r"module '([\w.]+)' has no attribute '(\w+)'"), lambda m: (m.group(1), m.group(2))),
)


def _missing_name(f: _Facts) -> Diagnostic | None:
    """A torch or Triton name the candidate used that is not there: gone since the
    torch (or Triton) KernelBook's code was written for, or never part of Triton."""
    for d in f.diagnostics:
        for pattern, parts in _IMPORT_FAULTS:
            m = pattern.search(d.message)
            said = names.describe(*parts(m)) if m is not None else None
            if said is not None:
                return _diag(f, said[0], said[1], d.line)
    return None


_ASSERT_DIM = re.compile(r"expected size (\d+)==(\d+), stride (-?\d+)==(-?\d+) at dim=(\d+)")


_ASSERT_NDIM = re.compile(r"wrong number of dimensions\s*(\d+)")


def _failed_size_assert(f: _Facts) -> Diagnostic | None:
    for d in f.diagnostics:
        dims, ndim = _ASSERT_DIM.findall(d.message), _ASSERT_NDIM.search(d.message)
        call = next((c for c in f.calls("assert_size_stride") if c.lineno == d.line), None)
        if not (dims or ndim) or call is None or len(call.args) < 3:
            continue
        name = arg = ast.unparse(call.args[0])
        want = f"size {_tup(_literal(call.args[1]) or ())}, stride {_tup(_literal(call.args[2]) or ())}"
        shapes = f.shapes.describe() if f.shapes else "see get_inputs()"
        if dims:
            dims = sorted(dims, key=lambda g: int(g[4]))
            size = tuple(int(g[0]) for g in dims)
            got = f"size {_tup(size)}, stride {_tup(int(g[2]) for g in dims)}"
            which = [i for i, (s, _) in enumerate(f.shapes.inputs) if s == size] if f.shapes else []
            if len(which) == 1:
                arg = f"{arg} (input {which[0]})"
        else:
            got = f"{ndim.group(1)} dimensions"
        return _diag(f, "assert_size_stride",
                     f"assert_size_stride({name}, ...) fails: {arg} has {got} here, but the code was written for "
                     f"{want}. Write call() and its kernels for this problem's shapes ({shapes}): the asserted "
                     "sizes, the empty_strided_cuda sizes, xnumel/rnumel, grid(...) and the numel arguments", d.line)
    return None


_NUMEL = re.compile(r"^[xyzr]\d*_?numel$")


def _hardcoded_size(f: _Facts) -> Diagnostic | None:
    if f.status not in (Status.INCORRECT, Status.RUNTIME_ERROR) or _failed_size_assert(f) is not None:
        return None   # that message already says to rewrite the sizes
    fixed = []   # (value, line, what it is): `xnumel = 4257` in a kernel, `grid(4257)` in call()
    shares = set()   # a split reduction's sizes (Inductor's batch norm over N*H*W in k shares)
    for fn in f.jit_functions():
        numels = {}
        for stmt in fn.body[:8]:
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name) \
                    and _NUMEL.match(stmt.targets[0].id) and isinstance(_literal(stmt.value), int):
                name = stmt.targets[0].id
                numels[name] = _literal(stmt.value)
                fixed.append((_literal(stmt.value), stmt.lineno, f"{name} = {_literal(stmt.value)} is hard-coded in "
                              f"{fn.name}", f"set {name}, the grid(...) size and the numel arguments in call()"))
        r, x = numels.get("r0_numel", numels.get("rnumel")), numels.get("xnumel")
        if r and x and f.shapes is not None and not (f.shapes.makes(r) and f.shapes.makes(x)):
            bounds = {n.value for n in ast.walk(fn) if isinstance(n, ast.Constant) and type(n.value) is int}
            if f.shapes.splits(r, x, bounds):
                shares |= {r, x}
    for call in f.calls("grid"):
        for value in (_literal(a) for a in call.args):
            if isinstance(value, int):
                fixed.append((value, call.lineno, f"{ast.unparse(call)} launches for {value} elements",
                              "size the grid, xnumel and the numel arguments"))
    shapes = f.shapes if fixed else None
    if shapes is None or not shapes.inputs:
        return None
    for value, line, what, fix in fixed:
        if not shapes.makes(value) and value not in shares:
            return _diag(f, "hardcoded_size", f"{what}, but no product of this problem's sizes or parameters "
                         f"is {value} ({shapes.describe()}): it was written for other shapes; {fix} from this "
                         "problem's sizes", line)
    return None


_ALLOCATORS = ("empty_strided_cuda", "empty_strided_cpu", "empty_strided")


def _view_out_of_bounds(f: _Facts) -> Diagnostic | None:
    """A reinterpret_tensor whose literal size and strides reach past the buffer it
    views, the buffer's extent known from its allocation or assert_size_stride."""
    if f.status not in (Status.INCORRECT, Status.RUNTIME_ERROR) or \
            any("view is out of bounds" in d.message for d in f.diagnostics):
        return None   # the worker's own check said it already
    bound = {id(n.value): n.targets[0].id for n in ast.walk(f.tree) if isinstance(n, ast.Assign)
             and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name)}
    storage: dict[str, tuple[int, int, int]] = {}   # name -> (extent, offset, line it was made)
    calls = [c for name in (*_ALLOCATORS, "assert_size_stride", "reinterpret_tensor") for c in f.calls(name)]
    for call in sorted(calls, key=lambda c: (c.lineno, c.col_offset)):
        kind, args = call.func.id, [_literal(a) for a in call.args]
        target = bound.get(id(call))
        if kind in _ALLOCATORS and len(args) >= 2 and target and isinstance(args[0], tuple):
            storage[target] = (span(args[0], args[1]), 0, call.lineno)
        elif kind == "assert_size_stride" and len(args) >= 3 and isinstance(call.args[0], ast.Name):
            storage.setdefault(call.args[0].id, (span(args[1], args[2]), 0, call.lineno))
        elif kind == "reinterpret_tensor" and len(args) >= 4 and isinstance(call.args[0], ast.Name) \
                and call.args[0].id in storage and isinstance(args[1], tuple) and isinstance(args[3], int):
            base = call.args[0].id
            extent, offset, made = storage[base]
            need = offset + args[3] + span(args[1], args[2])
            if need > extent:
                return _diag(f, "view_out_of_bounds", f"{ast.unparse(call)} reaches element {need - 1} of {base}'s "
                             f"buffer, which holds {extent} elements (line {made}): the view is out of bounds; "
                             "make its size, strides and offset fit the buffer", call.lineno)
            if target:
                storage[target] = (extent, offset + args[3], made)
    return None


def _strided_output_view(f: _Facts) -> Diagnostic | None:
    """Wrong values, and call() returns a reinterpret_tensor whose strides are not the
    row-major strides of its size: its elements are read in an order the kernel may not
    have written them in."""
    if f.status is not Status.INCORRECT or not any(d.kind == "mismatch" for d in f.diagnostics):
        return None
    # the outputs that are wrong, where the verdict names them (several outputs): a strided view
    # returned at another place is not the cause (kthvalue's values beside its wrong indices)
    wrong = {int(m) for d in f.diagnostics if d.kind == "mismatch" for m in re.findall(r"output (\d+)", d.message)}
    calls = [n for fn in f.tree.body if isinstance(fn, ast.FunctionDef) and fn.name == "call"
             for ret in ast.walk(fn) if isinstance(ret, ast.Return) and ret.value is not None
             for i, e in enumerate(ret.value.elts if isinstance(ret.value, ast.Tuple) else [ret.value])
             if not wrong or i in wrong
             for n in ast.walk(e) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
             and n.func.id == "reinterpret_tensor" and len(n.args) >= 3]
    for call in calls:
        size, stride = _literal(call.args[1]), _literal(call.args[2])
        if not (isinstance(size, tuple) and isinstance(stride, tuple)) or len(size) != len(stride):
            continue
        row_major = tuple(math.prod(size[i + 1:]) for i in range(len(size)))
        if any(n > 1 and s != r for n, s, r in zip(size, stride, row_major)):
            return _diag(f, "strided_view", f"call() returns {ast.unparse(call)}: strides {_tup(stride)}, not "
                         f"the row-major {_tup(row_major)} of size {_tup(size)}, so the output's elements are read "
                         "in another order than a row-major kernel writes them; give the view the strides the "
                         "kernel stored the buffer with", call.lineno)
    return None


_CHECKS = (_missing_model_new, _missing_name, _failed_size_assert, _hardcoded_size, _view_out_of_bounds,
           _strided_output_view)
_AFTER_THE_ERROR = (_hardcoded_size,)
