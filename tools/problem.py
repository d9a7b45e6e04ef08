"""Loading problems (KernelBench format) and candidate files, with one-line errors.

A problem file defines `class Model(nn.Module)`, `get_inputs()` and
`get_init_inputs()` (a flat list, or KernelBook's `[args, kwargs]`). It is the user's
own trusted code and runs in the judge. A candidate file must define `ModelNew`; here
it is only read and parsed, never executed (that happens in tools/sandbox/worker.py).
Loading validates on the meta device, so a problem with 8 GiB inputs loads in
milliseconds. Does not generate real inputs: see `make_inputs`.
"""
from __future__ import annotations

import ast
import contextlib
import errno
import hashlib
import inspect
import io
import os
import random
import stat
import sys
import threading
import tokenize
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import NoReturn

from tools.deadline import Deadline, Overdue
from tools.errors import BadInput
from tools.problem_inputs import build_model, make_inputs, seeded, set_seed, split_init  # noqa: F401
from tools.precision_flags import as_the_user_has_it, fp32_precisions, precision_flags, strict_fp32  # noqa: F401

MAX_SOURCE_BYTES = 64 << 20   # a problem or candidate file larger than this is not read
LOAD_TIMEOUT_S = 300.0        # loading a problem: the file's code runs on the meta device, or the cpu when cheap


@dataclass(frozen=True)
class Problem:
    path: Path
    name: str
    source: str
    module: types.ModuleType = field(repr=False, compare=False)
    n_inputs: int = 0
    init_form: str = "flat"              # "flat" or "args_kwargs" (KernelBook)
    input_bytes: int = 0                 # one call's tensor inputs, from the meta-device pass


def read_python(path: str | Path, what: str) -> tuple[Path, str, ast.Module]:
    """Read and parse a Python file, or raise BadInput naming it and the fault."""
    p, raw = _read_file(path, what)
    src, tree, fault = _parse(p, raw, what)
    if fault is not None:
        raise BadInput(p, fault)
    return p, src, tree


def _read_file(path: str | Path, what: str) -> tuple[Path, bytes]:
    """The bytes of an existing, readable file, or BadInput: the path itself is wrong."""
    p = Path(path)
    try:
        st = p.stat()
    except OSError as e:   # missing, a link loop, a name too long: what the system says
        raise BadInput(p, f"{what} file does not exist" if e.errno == errno.ENOENT else
                       f"{what} path cannot be read: {e.strerror}") from None
    if not stat.S_ISREG(st.st_mode):
        raise BadInput(p, f"{what} path is not a file")
    if st.st_size > MAX_SOURCE_BYTES:
        raise BadInput(p, f"{what} file is {st.st_size / (1 << 20):.0f} MiB; Python source of at most "
                          f"{MAX_SOURCE_BYTES >> 20} MiB is read")
    try:
        return p, p.read_bytes()
    except OSError as e:
        raise BadInput(p, f"cannot read {what} file: {e.strerror}") from None


def _parse(p: Path, raw: bytes, what: str) -> tuple[str, ast.Module | None, str | None]:
    """(source text, its syntax tree, None), or what there is and why it is not Python
    (the source is "" when the bytes are not text)."""
    if b"\x00" in raw:
        return "", None, f"{what} file is binary, not Python source"
    try:   # as Python reads a source file: UTF-8, a byte-order mark, or a coding declaration (PEP 263)
        encoding = tokenize.detect_encoding(io.BytesIO(raw).readline)[0]
        src = raw.decode(encoding)
    except (SyntaxError, LookupError, UnicodeDecodeError):
        return "", None, f"{what} file is not UTF-8 text (nor text in the encoding it declares)"
    if not src.strip():
        return src, None, f"{what} file is empty"
    try:
        return src, ast.parse(src, filename=str(p)), None
    except SyntaxError as e:
        return src, None, f"{what} file is not valid Python: {e.msg} (line {e.lineno})"
    except (RecursionError, MemoryError):
        return src, None, f"{what} file is not valid Python: an expression nested too deeply for Python's parser"


def _same_default_device(p: Path) -> None:
    """BadInput when importing the problem moved torch's default device (set_default_device):
    every tensor krefine makes would land there, and candidates would be blamed for it."""
    import torch
    device = torch.get_default_device()
    if device.type != "cpu":
        torch.set_default_device(None)
        raise BadInput(p, f"the problem file sets torch's default device to {device} at import "
                          "(torch.set_default_device); krefine places inputs and models itself: remove it")


def _defines(tree: ast.Module, name: str) -> bool:
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef)) and node.name == name:
            return True
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            return True
        if isinstance(node, (ast.Import, ast.ImportFrom)) and any((a.asname or a.name) == name for a in node.names):
            return True
    return False


def load_candidate(path: str | Path) -> str:
    """Return a candidate's source after static checks (readable, Python, defines ModelNew)."""
    src, fault = read_candidate(path)
    if fault is not None:
        raise BadInput(path, fault)
    return src


def read_candidate(path: str | Path) -> tuple[str, str | None]:
    """A candidate file's source and, when it is not Python defining ModelNew, the
    one-line reason (the source is "" when the file is not text). A path that names no
    readable file raises BadInput: that is the command line's fault, not the candidate's."""
    p, raw = _read_file(path, "candidate")
    src, tree, fault = _parse(p, raw, "candidate")
    if fault is None and not _defines(tree, "ModelNew"):
        fault = "candidate defines no ModelNew class"
    return src, fault


def exec_module(path: Path, src: str) -> types.ModuleType:
    """Execute problem source as a fresh module, as an import would: compiled with none of
    this file's __future__ flags (its annotations stay what the problem wrote), and in
    sys.modules under its own name only while it runs (a @dataclass looks its module up
    there), not after (candidates do not find the reference through it)."""
    digest = hashlib.sha1(str(path).encode()).hexdigest()[:8]
    name = f"krefine_problem_{digest}"
    mod = types.ModuleType(name)
    mod.__file__ = str(path)
    code = compile(src, str(path), "exec", dont_inherit=True)
    sys.modules[name] = mod     # the name is this path's own: nothing else is displaced
    argv, sys.argv = sys.argv, [str(path)]   # as `python FILE` has it: an argparse at import reads no krefine flag
    real_exit, pid = os._exit, os.getpid()

    def refused(status=0):   # os._exit at import would end krefine itself, with the file's status (0: "passed")
        if os.getpid() != pid:   # a child the file forked exits as it asks
            real_exit(status)
        raise SystemExit(status)
    os._exit = refused
    try:
        exec(code, mod.__dict__)
    finally:
        os._exit = real_exit
        sys.modules.pop(name, None)
        sys.argv = argv
    return mod


@contextlib.contextmanager
def importable(mod: types.ModuleType):
    """The problem's module in sys.modules for the block, under its own name, and only it
    taken out after (mock.patch.dict would drop every module imported meanwhile): Dynamo
    imports the module a decorated forward's globals name (`@torch.no_grad()`)."""
    sys.modules[mod.__name__] = mod
    try:
        yield mod
    finally:
        sys.modules.pop(mod.__name__, None)


def read_problem(path: str | Path) -> tuple[Path, str]:
    """The checks of a problem file that need no torch: readable Python that defines
    Model, get_inputs and get_init_inputs (load_problem does the rest)."""
    p, src, tree = read_python(path, "problem")
    for name in ("Model", "get_inputs", "get_init_inputs"):
        if not _defines(tree, name):
            raise BadInput(p, f"problem defines no {name}")
    return p, src


def load_problem(path: str | Path) -> Problem:
    """Load and validate a problem file; every fault is a BadInput naming the file, and
    so is code of the file's that runs past LOAD_TIMEOUT_S (tools/deadline.py)."""
    import torch  # noqa: F401 - imported before the clock starts

    # 1) read and parse
    p, src = read_problem(path)
    with Deadline(LOAD_TIMEOUT_S, p, "loading the problem (its import, get_init_inputs, get_inputs, a first forward)"):
        return _load(p, src)


def _load(p: Path, src: str) -> Problem:
    import torch
    from torch import nn

    # 2) execute (the user's own module)
    try:
        mod = exec_module(p, src)
    except SystemExit:
        raise BadInput(p, "problem file called exit() or os._exit() at import") from None
    except BaseException as e:
        if isinstance(e, (KeyboardInterrupt, Overdue)):
            raise
        _fault(p, e, "importing the problem file", "import")
    _same_default_device(p)
    model_cls = getattr(mod, "Model", None)
    if not (isinstance(model_cls, type) and issubclass(model_cls, nn.Module)):
        raise BadInput(p, "Model is not a torch.nn.Module subclass")
    if model_cls.forward is nn.Module.forward:
        raise BadInput(p, "Model defines no forward()")
    for fname in ("get_inputs", "get_init_inputs"):
        fn = getattr(mod, fname)
        if not callable(fn):
            raise BadInput(p, f"{fname} is not a function")
        try:
            inspect.signature(fn).bind()
        except TypeError:
            raise BadInput(p, f"{fname}() must take no arguments") from None
        except ValueError:
            pass

    # 3) validate shapes and arity on the meta device: no memory, no time
    state = _rng_state()
    try:
        init = _meta_call(p, mod.get_init_inputs, "get_init_inputs", "meta_init")
        inputs = _meta_call(p, mod.get_inputs, "get_inputs", "meta_inputs")
    finally:
        _restore_rng(state)
    if not isinstance(init, (list, tuple)):
        raise BadInput(p, f"get_init_inputs() returned {type(init).__name__}, expected a list")
    if not isinstance(inputs, (list, tuple)):
        raise BadInput(p, f"get_inputs() returned {type(inputs).__name__}, expected a list")
    args, kwargs = split_init(init)
    _check_arity(p, model_cls.__init__, args, kwargs, "Model(*get_init_inputs())")
    _check_arity(p, model_cls.forward, list(inputs), {}, "Model.forward(*get_inputs())")
    form = "args_kwargs" if kwargs or (len(init) == 2 and isinstance(init[1], dict)) else "flat"
    nbytes = sum(x.numel() * x.element_size() for x in inputs if isinstance(x, torch.Tensor))
    # 4) the reference forward once, before a run directory or a candidate exists
    _check_forward(p, mod, model_cls, args, kwargs, list(inputs))
    # 5) the module everything else uses, fresh: the checks above built Model on the meta device,
    #    which a set-up cache (an lru_cache'd rotary table) or a global counter (layer ids) kept
    try:
        mod = exec_module(p, src)
    except BaseException as e:
        if isinstance(e, (KeyboardInterrupt, Overdue)):
            raise
        _fault(p, e, "importing the problem file", "import")
    return Problem(path=p.resolve(), name=p.stem, source=src, module=mod,
                   n_inputs=len(inputs), init_form=form, input_bytes=nbytes)


def output_fault(out) -> str | None:
    """Why `out`, what Model.forward returned, is no output a kernel can be judged on (a
    tensor, or a tuple or list of tensors), or None."""
    import torch
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    if outs and all(isinstance(o, torch.Tensor) for o in outs):
        return None
    got = type(out).__name__ if not isinstance(out, (tuple, list)) else \
        f"{type(out).__name__} of {', '.join(dict.fromkeys(type(o).__name__ for o in outs)) or 'nothing'}"
    return f"Model.forward returned {got}; expected a tensor or a tuple of tensors"


# a forward that fails on the meta device is run for real on the CPU when this little is at
# stake (inputs and parameters); a bigger one is judged by the meta error alone
REAL_CHECK_BYTES = 64 << 20


def _check_forward(p: Path, mod: types.ModuleType, model_cls, args: list, kwargs: dict, inputs: list) -> None:
    """Model(*init).forward(*inputs) on the meta device (no memory, no time): a forward that
    cannot run (`x @ x` on a 3x4 input) is the file's fault, exit 2. A meta failure is
    confirmed by a real CPU call when that is cheap; an expensive problem whose forward the
    meta device cannot follow (data-dependent: `.item()`, `nonzero`; an op with no meta
    kernel) is left to the judge, which runs it on the device."""
    import torch
    state = _rng_state()
    try:
        with torch.device("meta"), torch.no_grad():
            try:
                model = model_cls(*args, **kwargs)
            except Exception as e:   # a constructor the meta device cannot follow: the judge builds it for real,
                if not _meta_limit(e):   # unless it fails for another reason (the file's own `n must be a multiple
                    with torch.device("cpu"):   # of 3`, a ModuleDict key torch refuses) and does on the cpu too
                        try:
                            build_model(model_cls, mod, 0, "cpu")
                        except Exception as real:   # noqa: BLE001 - the file's own fault, named
                            _fault(p, real, "Model(*get_init_inputs())", "model")
                return
            try:
                out = model(*inputs)
            except Exception as e:
                meta_error = e
            else:
                if (fault := output_fault(out)) is not None:
                    raise BadInput(p, fault)
                return
    finally:
        _restore_rng(state)
    params = model.parameters() if isinstance(model, torch.nn.Module) else ()
    at_stake = sum(t.numel() * t.element_size() for t in (*params, *inputs) if isinstance(t, torch.Tensor))
    limit = _meta_limit(meta_error)
    # with a GPU the judge runs the forward there: a CPU failure after a meta limit may be the CPU's
    if at_stake <= REAL_CHECK_BYTES and not (limit and torch.cuda.is_available()):
        try:
            with torch.no_grad():
                real = build_model(model_cls, mod, 0, "cpu")
                real(*make_inputs(mod, 0, "cpu"))
            return
        except Exception as e:
            _fault(p, e, "the reference Model.forward(*get_inputs())", "forward")
    if not limit:
        _fault(p, meta_error, "the reference Model.forward(*get_inputs()) on the meta device", "forward")


def _raised_by(e: BaseException, p: Path) -> bool:
    """Whether the innermost frame of `e`'s traceback is the problem file's own code."""
    tb = e.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return tb is not None and tb.tb_frame.f_code.co_filename == str(p)


def _meta_limit(e: Exception) -> bool:
    """Whether `e` is the meta device's own limit rather than the forward's fault."""
    return isinstance(e, NotImplementedError) or "meta" in str(e).lower() or "data-dependent" in str(e).lower()


def _meta_call(p: Path, fn, name: str, step: str):
    """fn() on the meta device; on the cpu where it copies or reads data a meta tensor does
    not hold (`torch.randn(4, 16).to(device)`: "Cannot copy out of meta tensor")."""
    import torch
    try:
        with torch.device("meta"):
            return fn()
    except SystemExit:
        raise BadInput(p, f"{name}() called exit()") from None
    except Exception as e:   # noqa: BLE001 - a fault of the file's own is named below, as it was
        if not _meta_limit(e):   # ("aten::_to_sparse ... with Meta tensors": the meta device's, run on the cpu)
            with torch.device("meta"):
                return _call(p, fn, name, step)
    return _call(p, fn, name, step)


def _call(p: Path, fn, name: str, step: str):
    try:
        return fn()
    except SystemExit:
        raise BadInput(p, f"{name}() called exit()") from None
    except Exception as e:
        _fault(p, e, f"{name}()", step)


def _fault(p: Path, e: BaseException, what: str, step: str) -> NoReturn:
    """The problem's own code raised while loading; tools/blame.py says whose fault.
    With no other thread in this process nothing can have disturbed torch meanwhile (a
    lazy import half done by another thread: tools/judge/warm.py), so the fault is the
    file's as it stands: the CLI loads its problem before any thread starts, and a bad
    problem stays a quick exit 2. With other threads (the judge service's requests, a Ray
    judge's candidates, bench's problems) a fresh process must fail the same way first."""
    from tools.blame import Step, blame
    if threading.active_count() == 1:
        blame(p, e, what, Step(step), confirm=False)
    import torch   # the meta steps replay where this process runs, CUDA visible or not
    blame(p, e, what, Step(step, "cuda:0" if torch.cuda.is_available() else "cpu"))


def _check_arity(p: Path, fn, args: list, kwargs: dict, what: str) -> None:
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return
    try:
        sig.bind(None, *args, **kwargs)
    except TypeError as e:
        raise BadInput(p, f"{what} does not fit the signature: {e} ({len(args)} values given)") from None


def _rng_state():
    import torch
    return torch.random.get_rng_state(), random.getstate()


def _restore_rng(state) -> None:
    import torch
    torch.random.set_rng_state(state[0])
    random.setstate(state[1])


# --- real inputs, the way KernelBench makes them -------------------------------------

if __name__ == "__main__":  # quick manual check: python -m tools.problem FILE...
    for a in sys.argv[1:]:
        print(load_problem(a))
