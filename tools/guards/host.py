"""The guard on forward work done on the host: `check_host_transfer`.

Rejects, in the forward path (tools/guards/regions.py: every function body but
`__init__`, not @triton.jit bodies, not dead defs), what copies tensor data to the host
where Python or NumPy could compute the answer: `.tolist()`, `.numpy()`, `.item()`,
`.cpu()`, `.untyped_storage()`, `.storage()`, `.__array__()` and the scalar dunders (also
as `torch.Tensor.tolist(x)` or `getattr(x, "tolist")`), `.pin_memory()`, a "cpu" device
handed to `.to()` or to any call's `device=`, `numpy.asarray/array/frombuffer(...)`,
`memoryview`/`bytes`/`bytearray` of anything but a literal, and `float`/`int`/`bool`/
`complex`/`str`/`range`/`math.*`, an `if`/`while`/`assert` test or an f-string of an
expression that is readably a tensor (a parameter used as one, `torch.empty(...)`, an
index or a method result of those). Set-up may build weights with NumPy: `__init__` and
module level are not checked. Shapes, strides, `numel()`, `data_ptr()` and devices stay
allowed, as does any arithmetic on them.

Anywhere in the file (set-up too: a handle made there is read in the forward), rejects
what reaches tensor memory around every Tensor method: the array protocols' names
(`__array_interface__`, `__array_struct__`, `__cuda_array_interface__`, also as string
pieces: NumPy reads the address they give), DLPack (`__dlpack__`, capsules),
serialisation (`__reduce_ex__`, `__reduce__`, `__getstate__`, `_write_file`, pickle,
copyreg, torch.save), mappings and files over memory (mmap, numpy.memmap/fromfile,
torch.from_file/frombuffer, storages' from_file/from_buffer and shared-memory handles),
ctypes and NumPy's ctypeslib, and any string naming a process memory file
(/proc/<pid>/..., /proc/self/..., /dev/mem).

Not covered: conversions the source does not show (a tensor whose origin the guard
cannot read, `x.to(dev)` with `dev` a "cpu" string held in a variable; a name built at
run time other than from dunder pieces); the worker's aten counter still sees the copy
and the compute PyTorch does afterwards, and its audit hook sees memory files opened,
mappings and serialisation (tools/sandbox/detours.py).
"""
from __future__ import annotations

import ast
import re
from typing import Iterator

from tools.guards.names import literal_getattr, resolve, words
from tools.guards.regions import DEAD, FORWARD, Site
from tools.guards.source import Finding, Source, first, fn_name, line_of, path_hits, spell, under
from tools.settings import GuardSettings

# Tensor methods and attributes that hand its data to the host
_HOST_ATTRS = words("tolist numpy item cpu untyped_storage storage _typed_storage __array__ "
                    "__array_interface__ __float__ __int__ __index__ __bool__ __complex__ pin_memory")

_HOST_PATHS = ("numpy.asarray", "numpy.asanyarray", "numpy.array", "numpy.ascontiguousarray",
               "numpy.frombuffer", "numpy.from_dlpack", "numpy.fromiter", "numpy.copy", "array.array")

# builtins that read a tensor's values into Python
_SCALAR_BUILTINS = words("float int bool complex str repr format range")
_BYTES_BUILTINS = words("memoryview bytes bytearray")

# evidence that a parameter is a tensor, and methods whose result is not one
_TENSOR_EVIDENCE = words("contiguous numel data_ptr stride is_contiguous element_size view reshape "
                         "device is_cuda new_empty new_zeros storage_offset clone detach dim size shape "
                         "transpose permute flatten unsqueeze squeeze expand narrow")
_NOT_TENSOR = words("size stride numel nelement dim ndimension data_ptr element_size is_contiguous "
                    "storage_offset get_device is_floating_point is_complex is_cuda dtype device shape "
                    "ndim layout names is_leaf requires_grad nbytes itemsize") | _HOST_ATTRS
_TENSOR_ATTRS = words("T mT H mH real imag data grad")
_TORCH_FACTORIES = words("""empty empty_like empty_strided zeros zeros_like ones ones_like full full_like
 arange tensor as_tensor scalar_tensor rand rand_like randn randn_like randint randint_like randperm
 from_numpy as_strided linspace _empty_strided_cuda _empty_strided_cpu _reinterpret_tensor rand_strided""")

_CPU = re.compile(r"cpu(:\d+)?$")

# names (attributes, defs, keywords, strings) and paths that reach tensor memory around
# every Tensor method, wherever they appear
_MEMORY_NAMES = words("""__array_interface__ __array_struct__ __cuda_array_interface__ __reduce_ex__ __reduce__
 __getstate__ _reduce_ex_internal _write_file _share_fd_cpu_ _share_filename_cpu_ _new_shared _get_shared_fd
 _new_shared_fd_cpu _new_shared_filename_cpu _new_using_fd_cpu _new_using_filename_cpu _new_with_file
 _set_from_file from_file from_buffer __buffer__ __dlpack__ __dlpack_device__ share_memory_ _share_memory_""")
# a piece of one of those dunder names, as a string ("__array_" + "interface__")
_DUNDER_PIECES = frozenset(name[i:j] for name in _MEMORY_NAMES if name.startswith("__")
                           for i in range(len(name)) for j in range(i + 5, len(name) + 1)
                           if name[i:j].startswith("__") or name[i:j].endswith("__"))
_MEMORY_PATHS = ("pickle", "_pickle", "cPickle", "copyreg", "copy_reg", "shelve", "dill", "cloudpickle", "mmap",
                 "ctypes", "_ctypes", "cffi", "numpy.ctypeslib", "numpy.memmap", "numpy.fromfile",
                 "numpy.lib.format", "numpy.lib.stride_tricks", "numpy.frombuffer", "numpy.from_dlpack",
                 "torch.save", "torch.load", "torch.serialization", "torch.from_file", "torch.frombuffer",
                 "torch.storage", "torch.*Storage", "torch._utils._rebuild*", "torch.utils.dlpack",
                 "torch.to_dlpack", "torch._C._to_dlpack*", "torch.multiprocessing.reductions",
                 "os.pread", "os.preadv", "os.readv", "os.sendfile", "os.memfd_create")
# a process's memory as files: /proc/<pid>/..., /proc/self/... (mem, maps, map_files), /dev/mem
_MEMORY_FILE = re.compile(r"^/*proc(/|$)|^/+dev/+(k?mem|port)\b")


def check_host_transfer(source: Source, settings: GuardSettings) -> Finding | None:
    """Tensor data copied to the host in the forward path (.tolist(), .item(), .cpu(),
    numpy.asarray, float(t), ...): the work must stay on the device."""
    def bad(node, site):
        return Finding("host_transfer", f"`{spell(source, node)}` in `{fn_name(site)}` copies tensor data to "
                       "the host; the work must stay on the device, in Triton kernels.", line_of(node), True,
                       "host_compute")

    by_func: dict[int, list[Site]] = {}
    for s in source.sites:
        if s.region == FORWARD and s.func is not None:
            by_func.setdefault(id(s.func), []).append(s)
    out = [bad(node, site) for sites in by_func.values() for node, site in _transfers(source, sites)]
    for r in source.refs:
        if r.site.region == FORWARD and any(under(p, _HOST_PATHS) or (p.startswith("torch.") and
                                                                     p.split(".")[-1] in _HOST_ATTRS)
                                            for p in r.paths):
            out.append(bad(r.site.parent if r.called else r.node, r.site))
    for node, what in _memory_reach(source):
        out.append(Finding("host_transfer", f"`{what}` reaches tensor memory on the host (an address handed to "
                           "NumPy, a serialised tensor or storage, a mapping or a process memory file); "
                           "the work must stay on the device, in Triton kernels.", line_of(node), True,
                           "host_compute"))
    return first(out)


def _memory_reach(source: Source) -> Iterator[tuple[ast.AST, str]]:
    """Anywhere but dead code: the names, paths and memory-file strings above."""
    for path, node in path_hits(source, _MEMORY_PATHS, skip_dead=True):
        yield node, (f"import {path}" if isinstance(node, (ast.Import, ast.ImportFrom)) else spell(source, node))
    for s in source.sites:
        n = s.node
        if s.region == DEAD:
            continue
        if isinstance(n, ast.Attribute) and n.attr in _MEMORY_NAMES:
            yield n, spell(source, n)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name in _MEMORY_NAMES:
            yield n, f"def {n.name}"
        elif isinstance(n, ast.keyword) and n.arg in _MEMORY_NAMES:
            yield n, f"{n.arg}="
        elif isinstance(n, ast.Constant) and isinstance(n.value, str) and not isinstance(s.parent, ast.Expr) \
                and (n.value in _MEMORY_NAMES or n.value in _DUNDER_PIECES or _MEMORY_FILE.match(n.value)):
            yield n, repr(n.value)[:60]   # a docstring (a bare string statement) runs nothing


def _transfers(source: Source, sites: list[Site]) -> Iterator[tuple[ast.AST, Site]]:
    """What one function's body copies to the host."""
    is_tensor = _tensor_reader(source, sites)
    for s in sites:
        n = s.node
        if isinstance(n, ast.Attribute) and n.attr in _HOST_ATTRS and isinstance(n.ctx, ast.Load):
            if _foreign_base(source, n.value):
                yield n, s
        elif literal_getattr(n) and n.args[1].value in _HOST_ATTRS and _foreign_base(source, n.args[0]):
            yield n, s
        elif isinstance(n, ast.Call):
            f = n.func
            device_args = [k.value for k in n.keywords if k.arg == "device"]
            if isinstance(f, ast.Attribute) and f.attr in ("to", "copy_", "new_empty", "new_zeros"):
                device_args += n.args
            if any(_cpu(source, a) for a in device_args) or \
                    any(k.arg == "pin_memory" and not (isinstance(k.value, ast.Constant) and not k.value.value)
                        for k in n.keywords):
                yield n, s
            elif isinstance(f, ast.Name) and f.id not in source.module_names and (
                    (f.id in _BYTES_BUILTINS and any(not isinstance(a, ast.Constant) for a in n.args)) or
                    (f.id in _SCALAR_BUILTINS and any(is_tensor(a) for a in n.args))):
                yield n, s
            elif any(p.startswith("math.") for p in resolve(f, source.aliases, source.self_attrs, frozenset())) \
                    and any(is_tensor(a) for a in n.args):
                yield n, s
        elif isinstance(n, (ast.If, ast.While, ast.Assert, ast.IfExp)) and is_tensor(n.test):
            yield n.test, s
        elif (isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.Not) and is_tensor(n.operand)) or \
                (isinstance(n, ast.BoolOp) and any(is_tensor(v) for v in n.values)) or \
                (isinstance(n, ast.FormattedValue) and is_tensor(n.value)):
            yield n, s


def _foreign_base(source: Source, base: ast.AST) -> bool:
    """Is `base.tolist` & co. a tensor's (or unknown) method? Not the module's own
    (`self.cpu`), nor an imported name's (`torch.cpu`), nor a NumPy or math result's."""
    if isinstance(base, ast.Name) and base.id in ("self", "cls"):
        return False
    if resolve(base, source.aliases, source.self_attrs, frozenset()):
        return False
    if isinstance(base, ast.Call):
        paths = resolve(base.func, source.aliases, source.self_attrs, frozenset())
        return not paths or any(p.startswith("torch.") for p in paths)
    return True


def _cpu(source: Source, arg: ast.AST) -> bool:
    """"cpu", "cpu:0" or torch.device("cpu")."""
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return bool(_CPU.match(arg.value))
    if isinstance(arg, ast.Call) and arg.args and \
            "torch.device" in resolve(arg.func, source.aliases, source.self_attrs, frozenset()):
        return _cpu(source, arg.args[0])
    return False


def _tensor_reader(source: Source, sites: list[Site]):
    """is_tensor(expr) for one function: is `expr` readably a tensor?"""
    fn = sites[0].func
    params = {a.arg for a in (*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs)} - {"self", "cls"}
    names = {s.node.value.id for s in sites if isinstance(s.node, ast.Attribute) and isinstance(s.node.value, ast.Name)
             and s.node.value.id in params and s.node.attr in _TENSOR_EVIDENCE}

    def is_tensor(e: ast.AST) -> bool:
        if isinstance(e, ast.Name):
            return e.id in names
        if isinstance(e, ast.Subscript):
            return is_tensor(e.value)
        if isinstance(e, ast.Attribute):
            return e.attr in _TENSOR_ATTRS and is_tensor(e.value)
        if isinstance(e, ast.Call):
            if isinstance(e.func, ast.Attribute) and is_tensor(e.func.value):
                return e.func.attr not in _NOT_TENSOR
            paths = resolve(e.func, source.aliases, source.self_attrs, frozenset())
            return any(p.startswith("torch.") and p.split(".")[-1] in _TORCH_FACTORIES for p in paths)
        if isinstance(e, ast.BinOp):
            return is_tensor(e.left) or is_tensor(e.right)
        if isinstance(e, ast.UnaryOp):
            return not isinstance(e.op, ast.Not) and is_tensor(e.operand)
        if isinstance(e, ast.Compare):
            return not any(isinstance(op, (ast.Is, ast.IsNot, ast.In, ast.NotIn)) for op in e.ops) and \
                any(is_tensor(x) for x in (e.left, *e.comparators))
        return False

    for _ in range(3):   # locals bound to tensors, and loop variables over them
        for s in sites:
            n = s.node
            if isinstance(n, (ast.Assign, ast.AnnAssign, ast.AugAssign)) and n.value is not None and is_tensor(n.value):
                for t in (n.targets if isinstance(n, ast.Assign) else [n.target]):
                    names.update(x.id for x in ast.walk(t) if isinstance(x, ast.Name))
            elif isinstance(n, (ast.For, ast.comprehension)) and is_tensor(n.iter):
                names.update(x.id for x in ast.walk(n.target) if isinstance(x, ast.Name))
    return is_tensor
