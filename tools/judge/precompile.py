"""The pre-screen's compile pass: its variants' Triton kernels compiled in parallel processes
before the one worker that checks and times them (tools/judge/prescreen.py) starts.

A pre-screened variant costs its Triton compile more than anything else (a GEMM template
~1-2 s, an elementwise kernel ~0.3 s); in the one screening worker they compile one after
another. Here `jobs` child processes (`python -m tools.judge.precompile SPEC INDEXES`) each
take a share of the variants and run each one's forward with every tensor on the `meta`
device (no memory, no values) while Triton's launch is replaced by its own warm-up
(`JITFunction.run(..., warmup=True)`): the kernel is specialised and compiled exactly as
the launch would have it (dtypes, 16-byte alignment, integer specialisations, constexprs,
num_warps / num_stages) and written to the Triton cache directory the screening worker
then reads, without running. The kernels a meta forward never reaches (a data-dependent
branch, `.item()`, a failure) are compiled by the worker as before: this pass only saves
time, it decides nothing, and what it cannot do costs nothing but its own wall.

Each child prints one JSON line per variant: {"index", "launches", "compiled", "error"}.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from tools.perf.gpuinfo import gpu_count

ROOT = Path(__file__).resolve().parents[2]
MAX_JOBS = 8


def compile_jobs(n_variants: int) -> int:
    """Processes for `n_variants`: the machine's cores shared by its GPUs (each GPU's judge
    may pre-screen at once), at most MAX_JOBS, at most one per variant."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(n_variants, MAX_JOBS, cores // max(1, gpu_count())))


class CompilePass:
    """The children compiling `files` (variant paths) into `env`'s TRITON_CACHE_DIR, the
    cache the screening worker reads; `spec` names the problem ("problem", "init_seed",
    "module_mode"). `marker` is written when every child has ended, or `timeout_s` after
    the start, when the children still running are killed (what they compiled stays
    cached): the worker, started meanwhile, waits for it before its first variant, so its
    own start (imports, inputs, the reference) overlaps the pass."""

    def __init__(self, spec: dict, files: list[str], env: dict, jobs: int, timeout_s: float):
        work = Path(env["TRITON_CACHE_DIR"]).parent
        self.marker = work / "precompiled"
        spec_file = work / "precompile.json"
        spec_file.write_text(json.dumps({**spec, "sources": files}), encoding="utf-8")
        shares = [list(range(i, len(files), jobs)) for i in range(jobs)]
        self.t0, self.seconds, self._rows = time.monotonic(), None, []
        self._procs = [subprocess.Popen([sys.executable, "-m", "tools.judge.precompile", str(spec_file),
                                         ",".join(map(str, share))], cwd=ROOT, env=env, stdin=subprocess.DEVNULL,
                                        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
                       for share in shares if share]
        self._thread = threading.Thread(target=self._collect, args=(self.t0 + timeout_s,), daemon=True)
        self._thread.start()

    def _collect(self, deadline: float) -> None:
        try:
            for p in self._procs:
                try:
                    out, _ = p.communicate(timeout=max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    p.kill()
                    out, _ = p.communicate()
                self._rows += [row for row in map(_row, out.decode("utf-8", "replace").splitlines()) if row]
        finally:                                # whatever happened here, the worker waits no longer
            self.seconds = time.monotonic() - self.t0
            self._done()

    def _done(self) -> None:
        self.marker.write_text(f"{self.seconds:.3f}\n", encoding="utf-8")

    def wait(self) -> list[dict]:
        """The children's rows, by variant index, once every child has ended."""
        self._thread.join()
        return sorted(self._rows, key=lambda r: r["index"])

    def close(self) -> None:
        for p in self._procs:
            if p.poll() is None:
                p.kill()
        self._thread.join()


def _row(line: str) -> dict | None:
    try:
        row = json.loads(line)
    except ValueError:
        return None
    return row if isinstance(row, dict) and isinstance(row.get("index"), int) else None


def precompile(spec: dict, files: list[str], env: dict, jobs: int, timeout_s: float) -> list[dict]:
    """CompilePass(...) waited for: its rows."""
    return CompilePass(spec, files, env, jobs, timeout_s).wait()


def wait_for(marker: str | None, timeout_s: float) -> None:
    """In the screening worker: until the pass's marker exists (at most `timeout_s`)."""
    deadline = time.monotonic() + timeout_s
    while marker and not os.path.exists(marker) and time.monotonic() < deadline:
        time.sleep(0.05)


# ---------------------------------------------------------------- the child

def _child(spec: dict, indexes: list[int]) -> None:
    import torch
    from triton.runtime.jit import JITFunction

    from tools.problem import build_model, exec_module, load_problem, make_inputs
    out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)                               # the variants' prints are not the protocol
    counts: dict = {}
    launch = JITFunction.run

    def warm_up(self, *args, grid, warmup, **kwargs):
        counts["launches"] += 1
        try:
            kernel = launch(self, *args, grid=grid, warmup=True, **kwargs)    # compile, never run
        except Exception as e:                  # noqa: BLE001 - this kernel is the worker's; go on to the next
            counts["error"] = counts["error"] or _line(e)
            return None
        counts["compiled"] += 1
        return kernel
    JITFunction.run = warm_up
    problem = load_problem(spec["problem"])
    inputs = make_inputs(problem.module, 0, "meta")
    for index in indexes:
        counts.update(launches=0, compiled=0, error="")
        try:
            path = Path(spec["sources"][index])
            mod = exec_module(path, path.read_text(encoding="utf-8"))
            with torch.device("meta"):
                model = build_model(mod.ModelNew, problem.module, spec["init_seed"], "meta", spec["module_mode"])
            with torch.no_grad():
                model(*inputs)
        except Exception as e:                  # noqa: BLE001 - the worker compiles what was not reached
            counts["error"] = counts["error"] or _line(e)
        out.write(json.dumps({"index": index, **counts}) + "\n")


def _line(e: BaseException) -> str:
    return f"{type(e).__name__}: {' '.join(str(e).split())[:200]}"


if __name__ == "__main__":
    _child(json.loads(Path(sys.argv[1]).read_text(encoding="utf-8")), [int(i) for i in sys.argv[2].split(",")])
