"""The Inductor seed made once: seeds, and the captures they come from, kept on disk.

A seed is torch.compile of the problem (tens of seconds on cuda; minutes where Inductor
autotunes GEMM and convolution templates) and then the converter (tools/dialect/
kernelbook.py, milliseconds). `SeedCache` keeps both results under `[search] seed_cache`:

  DIR/<problem>-<key>.py | .err                 the seed, or the reason there is none
  DIR/<problem>-<key>.<attempt>.capture | .err  each compile attempt's capture, or why it failed
  DIR/<problem>-<key>.portfolio.json | .err     the seed portfolio (portfolio.py), or a timeout
  DIR/<problem>-<key>.portfolio.partial         one cut short by its budget, with that budget

A seed's key holds the problem's source, the device, the module mode it was compiled in
(`[eval] module_mode`: a seed of the eval-mode forward is never one of the training-mode
forward), torch's version and the digest of the converter (every file of tools/dialect/
but this one and portfolio.py: a fix to the conversion makes new seeds, a fix to this
plumbing does not). A capture's key holds the same but only the capture's own code
(CAPTURE_CODE), so a converter change re-converts the kept captures without compiling
again; a portfolio's, the seed's and the portfolio's own code (PORTFOLIO_CODE). A failure that
another try may not repeat (out of memory, a CUDA error, a crash) is not kept; a timeout
is kept with its limit and tried again only under a longer one.

`seed_in_subprocess` is how the agent gets a seed: from the cache in its own process when
it is there, else from a `python -m tools.dialect seed` process (torch.compile and a CUDA
context never in the agent's process), which fills the cache (`cached_seed`).
"""
from __future__ import annotations

import functools
import hashlib
import json
import math
import os
import re
import sys
import time
from pathlib import Path
from types import SimpleNamespace

from tools.dialect.families import FAMILIES
from tools.dialect.inductor_capture import Capture, capture, capture_text, read_capture
from tools.dialect.kernelbook import seed_candidate

_HERE = Path(__file__).parent
# a failure that another try may not repeat is never cached
_TRANSIENT = ("out of memory", "CUDA error", "exit status")
# the capture's own code: what it compiles and how (conv_rewrite: the template compile's rewrites;
# fallback_rewrite: every compile's)
CAPTURE_CODE = ("inductor_capture.py", "capture_context.py", "module_state.py", "blocks.py", "conv_rewrite.py",
                "fallback_rewrite.py", "rnn_op.py", "recurrence.py", "conv_epilogue.py",
                "recurrence_cells.py", "gemm_epilogue.py", "counters.py", "batch_stats.py", "cat_chain.py")
# what makes a portfolio of the seed's captures (tools/precision.py: its tf32x3 variants)
PORTFOLIO_CODE = ("portfolio.py", "../precision.py")
# the cache's plumbing: no part of what a seed is
_PLUMBING = ("seedcache.py", "portfolio.py")
# kernel families a seed copies its text from (tools/dialect/kernelbook.py)
KERNEL_CODE = tuple("../" + f.removeprefix("tools/") for f in FAMILIES)


def seed_cache_key(problem_source: str, device: str, torch_version: str, module_mode: str = "train") -> str:
    """What a seed depends on: the problem's source, the device, the module mode
    (`[eval] module_mode`), torch (Inductor writes the kernels) and the converter
    (tools/dialect/ but this file and portfolio.py, and the kernel families it copies)."""
    return _key(problem_source, device, torch_version, _digest(tuple(sorted(
        f.name for f in _HERE.glob("*.py") if f.name not in _PLUMBING)) + KERNEL_CODE), module_mode)


def capture_cache_key(problem_source: str, device: str, torch_version: str, module_mode: str = "train") -> str:
    """What a capture depends on: the same, with only the capture's own code."""
    return _key(problem_source, device, torch_version, _digest(CAPTURE_CODE), module_mode)


def portfolio_cache_key(problem_source: str, device: str, torch_version: str, module_mode: str = "train") -> str:
    """What a seed portfolio depends on: what its seeds do, and the portfolio's own code."""
    return _key(seed_cache_key(problem_source, device, torch_version, module_mode), _digest(PORTFOLIO_CODE))


def _key(*parts: str) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode("utf-8") + b"\0")
    return h.hexdigest()[:20]


@functools.cache
def _digest(names: tuple[str, ...]) -> str:
    """The hash of these files of tools/dialect/, read once per process."""
    h = hashlib.sha256()
    for name in names:
        h.update(name.encode() + b"\0" + (_HERE / name).read_bytes())
    return h.hexdigest()


def torch_version() -> str:
    """torch.__version__ (what the keys hold), without importing torch when this process
    has not: the package metadata may leave out the build's local part ("2.11.0" for
    "2.11.0+cu130"), so torch/version.py is read instead."""
    if "torch" in sys.modules:
        return sys.modules["torch"].__version__
    import importlib.util
    spec = importlib.util.find_spec("torch")
    for root in (spec.submodule_search_locations or []) if spec is not None else []:
        f = Path(root) / "version.py"
        m = f.exists() and re.search(r"^__version__\s*=\s*['\"]([^'\"]+)['\"]", f.read_text(encoding="utf-8"), re.M)
        if m:
            return m.group(1)
    import torch
    return torch.__version__


def problem_file(path: str | Path) -> SimpleNamespace:
    """What the cache keys a problem file by (its path and source, read as load_problem
    reads it: bytes decoded, newlines kept), without loading it."""
    path = Path(path)
    return SimpleNamespace(path=str(path), source=path.read_bytes().decode("utf-8"))


class SeedCache:
    """Seeds and captures on disk (see the module docstring), of the forward in one
    module mode (`[eval] module_mode`). `problem` is anything with `.path` and `.source`
    (a tools.problem.Problem)."""

    def __init__(self, root: str | Path, module_mode: str = "train"):
        self.root = Path(root).expanduser()
        self.module_mode = module_mode

    def path(self, problem, device: str, torch_version: str, suffix: str) -> Path:
        key = seed_cache_key(problem.source, device, torch_version, self.module_mode)
        return self.root / f"{Path(problem.path).stem}-{key}{suffix}"

    def get(self, problem, device: str, torch_version: str, timeout_s: float | None = None) -> str:
        """The cached seed; ValueError with the cached reason; KeyError when not cached,
        or when the cached reason is a timeout shorter than `timeout_s` (worth a new try)."""
        return self._read(self.path(problem, device, torch_version, ".py"), ".err", problem, timeout_s)

    def put(self, problem, device: str, torch_version: str, code: str | None, reason: str = "",
            seconds: float | None = None) -> None:
        """`seconds`: how long compiling it took, kept beside it (`seed_seconds`)."""
        self._write(self.path(problem, device, torch_version, ".py"), ".err", code, reason)
        if seconds is not None and code is not None:
            self._write(self.path(problem, device, torch_version, ".seconds"), "", f"{seconds:.3f}\n", "")

    def seed_seconds(self, problem, device: str, torch_version: str) -> float | None:
        """How long the kept seed (compiled alone, not as a portfolio's first entry) took."""
        try:
            return float(self.path(problem, device, torch_version, ".seconds").read_text())
        except (OSError, ValueError):
            return None

    def portfolio_path(self, problem, device: str, torch_version: str) -> Path:
        key = portfolio_cache_key(problem.source, device, torch_version, self.module_mode)
        return self.root / f"{Path(problem.path).stem}-{key}.portfolio.json"

    def get_portfolio(self, problem, device: str, torch_version: str, timeout_s: float | None = None,
                      templates_s: float = 0.0) -> str:
        """The cached seed portfolio's JSON (tools/dialect/portfolio.py); ValueError and
        KeyError as `get`. Where only a portfolio cut short by its budget is kept
        (`put_partial_portfolio`), that one, for a `timeout_s` no longer than its budget and,
        where the templates budget cut it, a `templates_s` ([search] templates_timeout_s,
        0: none) no longer than that one."""
        path = self.portfolio_path(problem, device, torch_version)
        try:
            return self._read(path, ".err", problem, timeout_s)
        except KeyError:
            partial = self._partial(path)
            if partial is None or timeout_s is None or timeout_s > partial["limit_s"] or \
                    (partial["templates_s"] and not 0 < templates_s <= partial["templates_s"]):
                raise
            return partial["entries"]

    def put_partial_portfolio(self, problem, device: str, torch_version: str, text: str, limit_s: float,
                              templates_s: float = 0.0, seconds: float | None = None) -> None:
        """A portfolio whose compile ran past `limit_s` ([search] seed_timeout_s), or whose
        templates compile ran past `templates_s` ([search] templates_timeout_s; 0: not that),
        its first configurations kept (portfolio.py's `partial_portfolio`): asked again under
        the same budgets it is this one, not a second compile cut short alike; under a longer
        one it is compiled again. Its compile seconds are `seconds`, how long it ran until
        the cut (None: the whole budget, `limit_s`, ran out)."""
        path = self.portfolio_path(problem, device, torch_version)
        self._write(path.with_suffix(".partial"), "", json.dumps({"limit_s": limit_s, "templates_s": templates_s,
                                                                  "entries": text}), "")
        took = limit_s if seconds is None else seconds
        self._write(path.with_suffix(".seconds"), "", f"{took:.3f}\n", "")

    @staticmethod
    def _partial(path: Path) -> dict | None:
        try:
            kept = json.loads(path.with_suffix(".partial").read_text(encoding="utf-8"))
            return {"limit_s": float(kept["limit_s"]), "templates_s": float(kept.get("templates_s") or 0.0),
                    "entries": str(kept["entries"])}
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def put_portfolio(self, problem, device: str, torch_version: str, text: str | None, reason: str = "",
                      seconds: float | None = None) -> None:
        """`seconds`: how long compiling it took, kept beside it (`portfolio_seconds`)."""
        path = self.portfolio_path(problem, device, torch_version)
        self._write(path, ".err", text, reason)
        if seconds is not None and text is not None:
            self._write(path.with_suffix(".seconds"), "", f"{seconds:.3f}\n", "")

    def portfolio_seconds(self, problem, device: str, torch_version: str) -> float | None:
        """How long the kept portfolio took to compile; None when not recorded."""
        try:
            return float(self.portfolio_path(problem, device, torch_version).with_suffix(".seconds").read_text())
        except (OSError, ValueError):
            return None

    def capture(self, problem, device: str, torch_version: str, templates: bool) -> Capture:
        """tools.dialect.inductor_capture.capture through the cache: a kept capture is
        read back; a new one (or its lasting failure) is kept."""
        key = capture_cache_key(problem.source, device, torch_version, self.module_mode)
        ok = self.root / f"{Path(problem.path).stem}-{key}.{'templates' if templates else 'default'}.capture"
        try:
            return read_capture(self._read(ok, ".capture-err", problem, None))
        except KeyError:
            pass
        try:
            cap = capture(problem, device, templates=templates, module_mode=self.module_mode)
        except ValueError as e:
            self._write(ok, ".capture-err", None, str(e))
            raise
        self._write(ok, ".capture-err", capture_text(cap), "")
        return cap

    def _read(self, ok: Path, err_suffix: str, problem, timeout_s: float | None) -> str:
        err = ok.with_suffix(err_suffix)
        if ok.exists():
            return ok.read_text(encoding="utf-8")
        if err.exists():
            reason = err.read_text(encoding="utf-8").strip()
            if (limit := timed_out_after(reason)) is not None and timeout_s is not None and timeout_s > limit:
                raise KeyError(problem.path)
            raise ValueError(reason)
        raise KeyError(problem.path)

    def _write(self, ok: Path, err_suffix: str, text: str | None, reason: str) -> None:
        if text is None and not lasting(reason):
            return
        target = ok if text is not None else ok.with_suffix(err_suffix)
        self.root.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")   # concurrent seeders: rename is atomic
        tmp.write_text(text if text is not None else reason + "\n", encoding="utf-8")
        tmp.replace(target)


def timed_out_after(reason: str) -> float | None:
    """The budget (s) a failure `reason` says a compile ran past ("took longer than 240 s"), else None."""
    return float(m.group(1)) if (m := re.search(r"took longer than (\d+(?:\.\d+)?) s", reason or "")) else None


def lasting(reason: str) -> bool:
    """Whether another try would fail the same way (what the cache may keep)."""
    return not any(t in reason for t in _TRANSIENT)


def cached_seed(problem, device: str, cache_dir: str | Path | None, module_mode: str = "train",
                block_ops: int | None = None) -> str:
    """seed_candidate of the `module_mode` forward through the seed cache at `cache_dir`
    (None or "": no cache): a kept seed, else one converted from kept captures, else
    compiled (and kept). `block_ops` (no cache only): the capture's (None: its default)."""
    if not cache_dir:
        return seed_candidate(problem, device, capture_fn=lambda p, d, templates: capture(
            p, d, templates=templates, module_mode=module_mode, block_ops=block_ops))
    if block_ops is not None:
        raise ValueError("a seed cache keeps seeds of the default block_ops only")
    import torch
    cache, version = SeedCache(cache_dir, module_mode), torch.__version__
    try:    # a kept timeout is tried again: the caller that set the limit came here
        return cache.get(problem, device, version, math.inf)
    except KeyError:
        pass
    t0 = time.monotonic()
    try:
        code = seed_candidate(problem, device, capture_fn=lambda p, d, templates: cache.capture(p, d, version, templates))
    except ValueError as e:
        cache.put(problem, device, version, None, str(e))
        raise
    cache.put(problem, device, version, code, seconds=time.monotonic() - t0)
    return code


def seed_in_subprocess(problem_path: str | Path, device: str, timeout_s: float,
                       cache_dir: str | Path | None = None, env: dict[str, str] | None = None,
                       module_mode: str = "train") -> str:
    """The seed of the problem at `problem_path` (its forward in `module_mode`, as the
    judge runs it: `[eval] module_mode`): from the seed cache at `cache_dir` in this
    process when it is there (no torch import), else from a fresh `python -m tools.dialect
    seed` process (`run_dialect`), with `env` added to the agent's environment.
    ValueError with the child's one-line reason when it fails; a timeout is cached too,
    and compiled again only under a longer `timeout_s`."""
    return cached_or_child("seed", problem_path, device, timeout_s, cache_dir, env, module_mode)


def in_cache(command: str, problem_path: str | Path, device: str, timeout_s: float,
             cache_dir: str | Path | None, module_mode: str = "train", cached: dict | None = None) -> bool:
    """Whether `cached_or_child` would answer from the cache (a kept result or a kept
    reason) without starting a child (`cached`: its keywords for the cache's get)."""
    if not cache_dir:
        return False
    get = "get" if command == "seed" else f"get_{command}"
    try:
        getattr(SeedCache(cache_dir, module_mode), get)(problem_file(problem_path), device, torch_version(), timeout_s,
                                                        **(cached or {}))
    except KeyError:
        return False
    except ValueError:
        pass
    return True


def compile_seconds(problem_path: str | Path, device: str, cache_dir: str | Path | None,
                    module_mode: str = "train", command: str = "portfolio") -> float | None:
    """How long the seed cache's portfolio (`command` "portfolio") or lone seed ("seed") of
    the problem took to compile, where recorded."""
    if not cache_dir:
        return None
    cache = SeedCache(cache_dir, module_mode)
    read = cache.portfolio_seconds if command == "portfolio" else cache.seed_seconds
    return read(problem_file(problem_path), device, torch_version())


def cached_or_child(command: str, problem_path: str | Path, device: str, timeout_s: float,
                    cache_dir: str | Path | None, env: dict[str, str] | None, module_mode: str,
                    result: str = "", on_timeout=None, deadline=None, cached: dict | None = None) -> str:
    """What `python -m tools.dialect COMMAND` ("seed" | "portfolio") writes for the problem:
    the seed cache's copy when it has one (read in this process, no torch import; `cached`:
    more keywords for the cache's get), else a child's, read from `result` under its --out
    ("" = --out itself). A timeout is cached (SeedCache keeps it with its limit) and raised
    as ValueError, unless `on_timeout(out)` makes something of what the child left under
    --out: that is returned, not cached. `deadline(out)`, polled while the child runs, may
    end it sooner (a monotonic time, or None), as a timeout."""
    import subprocess
    import tempfile
    get, put = ("get", "put") if command == "seed" else (f"get_{command}", f"put_{command}")
    cache, version, problem = None, None, None
    if cache_dir:
        problem = problem_file(problem_path)
        cache, version = SeedCache(cache_dir, module_mode), torch_version()
        try:
            return getattr(cache, get)(problem, device, version, timeout_s, **(cached or {}))
        except KeyError:
            pass
    # ignore_cleanup_errors: a compile worker the child left can still be writing its Triton cache here
    with tempfile.TemporaryDirectory(prefix=f"krefine-{command}-", ignore_cleanup_errors=True) as tmp:
        out = Path(tmp) / "out"
        # the child's temp files (torch.compile leaves empty tmpXXXXXXXX dirs) go with this
        # dir; Inductor's cache stays where it was, in the system temp dir
        (Path(tmp) / "tmp").mkdir()
        env = {"TORCHINDUCTOR_CACHE_DIR": os.environ.get("TORCHINDUCTOR_CACHE_DIR") or str(
            Path(tempfile.gettempdir()) / f"torchinductor_{_user()}"), **(env or {}), "TMPDIR": str(Path(tmp) / "tmp")}
        try:
            run_dialect(command, problem_path, device, module_mode, cache_dir, out, timeout_s, env, deadline)
        except subprocess.TimeoutExpired:
            left = on_timeout(out) if on_timeout is not None and out.is_dir() else None
            if left is not None:
                return left
            reason = f"{command}: torch.compile took longer than {timeout_s:.0f} s"
            if cache is not None:
                getattr(cache, put)(problem, device, version, None, reason)
            raise ValueError(reason) from None
        return (out / result if result else out).read_text(encoding="utf-8")


def run_dialect(command: str, problem_path: str | Path, device: str, module_mode: str,
                cache_dir: str | Path | None, out: Path, timeout_s: float, env: dict[str, str] | None,
                deadline=None) -> None:
    """`python -m tools.dialect COMMAND PROBLEM ... --out OUT` in a fresh process
    (compiling the problem loads torch.compile and, on cuda, a CUDA context: not in the
    agent's own process). ValueError with the child's one-line reason when it fails or
    writes no OUT; subprocess.TimeoutExpired past `timeout_s`, or past the time
    `deadline(out)` gives while the child runs (polled twice a second)."""
    returncode, stderr = run_child(
        [sys.executable, "-m", "tools.dialect", command, str(problem_path), "--device", device,
         "--module-mode", module_mode, "--out", str(out), *(["--cache", str(cache_dir)] if cache_dir else [])],
        {**os.environ, **(env or {})}, timeout_s, None if deadline is None else (lambda: deadline(out)))
    if returncode != 0 or not out.exists():
        raise ValueError(child_reason(returncode, stderr))


def run_child(argv: list[str], env: dict[str, str], timeout_s: float, deadline=None) -> tuple[int, str]:
    """`argv` run from the repo root (tools/ importable), no stdin (never waits on input),
    its output captured (stderr's last line is the reason): (returncode, stderr). Killed
    and subprocess.TimeoutExpired past `timeout_s` (torch.compile of a hung problem), or
    past the monotonic time `deadline()` returns while it runs (None: no sooner end)."""
    import subprocess
    end = time.monotonic() + timeout_s
    proc = subprocess.Popen(argv, cwd=Path(__file__).resolve().parents[2], env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    while True:
        if deadline is not None:
            end = min(end, deadline() or end)
        left = end - time.monotonic()
        try:
            _, stderr = proc.communicate(timeout=max(0.0, min(left, 0.5) if deadline is not None else left))
            return proc.returncode, stderr
        except subprocess.TimeoutExpired:
            if time.monotonic() >= end:
                proc.kill()
                proc.communicate()
                raise subprocess.TimeoutExpired(argv, timeout_s) from None


def child_reason(returncode: int, stderr: str) -> str:
    """The one-line reason a `python -m tools.dialect` child gave no result: its own
    `kernelbook:` line, else its last line, with the signal that ended it, if one did
    (a process the kernel killed for memory prints nothing of its own)."""
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    own = [ln for ln in lines if ln.startswith("kernelbook: ")]
    if own:
        return own[-1].removeprefix("kernelbook: ")
    if returncode < 0:
        import signal
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        why = " (the kernel's out-of-memory killer sends it)" if name == "SIGKILL" else ""
        return f"the compile process was killed by {name}{why}" + (f"; its last line: {lines[-1]}" if lines else "")
    return lines[-1] if lines else f"exit status {returncode}"


def _user() -> str:
    """The user name in Inductor's cache dir, as torch names it
    (torch/_inductor/runtime/cache_dir_utils.py default_cache_dir)."""
    import getpass
    try:
        name = getpass.getuser()
    except (KeyError, ModuleNotFoundError, OSError):
        name = f"uid_{os.getuid()}" if hasattr(os, "getuid") else "unknown_user"
    return re.sub(r'[\\/:*?"<>|]', "_", name)
