"""A bench's problems on this host's GPUs (`run_jobs`): one worker process per GPU
(CUDA_VISIBLE_DEVICES names its GPU) taking problems from a queue, or, on cpu or the only
GPU there is, one loop in this process (`visible_gpus` says which).

A worker pays its start once: its imports, torch's lazy modules and the first judge's
fork servers. With few problems a GPU that start is what keeps two GPUs from judging
twice as fast (BENCHMARKS.md, "Two GPUs of one host: `--gpus 1`, `--gpus 2` and `--ray
local` in one run"), so it overlaps what it can: the workers start first, each starting
its fork servers (they import in their own processes) while it imports, and `first` (the
bench compiling or finding its seeds) runs in this process before any problem is handed
out.
"""
from __future__ import annotations

import contextlib
import os
import queue
import signal
from pathlib import Path
from typing import Callable

from rich.console import Console

from agent.bench.job import Job, run_job, say_done
from tools.errors import BadInput
from tools.perf.gpuinfo import gpu_count
from tools.sandbox.isolation import prestart_forkservers, spare_forkservers


def visible_gpus(device: str, limit: int | None) -> list[str | None]:
    """One CUDA_VISIBLE_DEVICES value per worker process, or [None]: one worker, in this
    process, seeing what this process sees (cpu, or the only GPU there is). --gpus
    (`limit`) beyond the GPUs there are, or on cpu, is bad input."""
    if device != "cuda":
        if limit is not None:
            raise BadInput("", f"krefine bench: --gpus {limit}: judging on {device} uses no GPU (leave --gpus out)")
        return [None]
    listed = os.environ.get("CUDA_VISIBLE_DEVICES")
    if listed is not None:
        ids = [x.strip() for x in listed.split(",") if x.strip()]
    else:
        ids = [str(i) for i in range(gpu_count())]
    if limit is not None and limit > len(ids):
        raise BadInput("", f"krefine bench: --gpus {limit}: only {len(ids)} GPU{'s' if len(ids) != 1 else ''} visible")
    if not ids:   # krefine eval's and run's line for the same fault
        raise BadInput("", "--device cuda but no CUDA device is visible (use --device cpu)")
    if limit is not None and limit < len(ids):
        return ids[:limit]
    return ids if len(ids) > 1 else [None]


def run_jobs(jobs: list[Job], gpus: list[str | None], config_path: str | None, model: str | None,
             console: Console, *, device: str | None = None, first: Callable[[], object] | None = None
             ) -> dict[Path, str]:
    """Run every job; returns run_dir -> one-line error for those that could not run.
    `device` (the runs' "cuda" or "cpu"): the judges' fork servers are started before
    `first()`, which runs here before any job starts (None: neither)."""
    errors: dict[Path, str] = {}
    def done(i: int, job: Job, error: str | None) -> None:
        if error:
            errors[job.run_dir] = error
        say_done(console, i, len(jobs), job, error)
    if gpus == [None]:
        dead: dict[str, str] = {}
        with spare_forkservers():   # each problem's judge finds its fork server started
            if device == "cuda" and jobs:   # (on cpu a judge's server starts quickly: not worth a spare)
                prestart_forkservers(device)
            if first is not None:
                first()
            for i, job in enumerate(jobs, 1):
                done(i, job, run_job(job, config_path, model, progress=True, dead=dead))
        return errors
    import multiprocessing as mp
    ctx = mp.get_context("spawn")   # no forked copies of threads, sqlite handles, CUDA state
    todo, results = ctx.Queue(), ctx.Queue()
    workers = []
    ended = 0
    try:
        for gpu in gpus[: len(jobs)]:
            with _visible(gpu):         # a spawned child takes os.environ as it is at start()
                w = ctx.Process(target=_worker, args=(todo, results, config_path, model, device), daemon=True)
                w.start()
            workers.append(w)
        if first is not None:
            first()                 # while the workers start
        for job in jobs:
            todo.put(job)
        for _ in workers:
            todo.put(None)
        while ended < len(jobs):
            try:
                job, error = results.get(timeout=5)
            except queue.Empty:
                if not any(w.is_alive() for w in workers):
                    break           # a worker died hard; what is left is reported as not run
                continue
            ended += 1
            done(ended, job, error)
    finally:
        # interrupted (Ctrl-C, SIGTERM): each worker unwinds its problem the same way
        for w in workers:
            if w.is_alive() and ended < len(jobs):
                w.terminate()
        for w in workers:
            w.join(timeout=30)
    return errors


def _worker(todo, results, config_path: str | None, model: str | None, device: str | None = None) -> None:
    """One GPU's worker: problems from `todo` until None. SIGTERM (from the bench, or from
    the kernel when the bench itself dies, even by kill -9) unwinds the problem in
    progress as Ctrl-C would, so no orphan goes on judging into a run dir that the
    next bench resumes. Before its first problem it starts its judges' fork servers and
    imports what they use (`device`: the runs' device; None: not)."""
    _die_with_parent()
    signal.signal(signal.SIGTERM, lambda signum, frame: interrupt())
    dead: dict[str, str] = {}   # this process's: at most one refused connection per server and GPU
    try:
        with spare_forkservers():   # each problem's judge finds its fork server started
            if device:
                prestart_forkservers(device)
                from tools.judge.warm import warm_imports
                warm_imports(device)
                import agent.loop.runner  # noqa: F401 - the loop's own imports, before the first problem
            while (job := todo.get()) is not None:
                results.put((job, run_job(job, config_path, model, progress=False, dead=dead)))
    except KeyboardInterrupt:
        return


def interrupt():
    """SIGTERM's handler here and in the bench: unwind as Ctrl-C would."""
    raise KeyboardInterrupt


def _die_with_parent() -> None:
    """Linux: SIGTERM this process when its parent dies (prctl PR_SET_PDEATHSIG); a no-op elsewhere."""
    import ctypes
    import ctypes.util
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGTERM)   # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


@contextlib.contextmanager
def _visible(gpu: str):
    before = os.environ.get("CUDA_VISIBLE_DEVICES")
    os.environ["CUDA_VISIBLE_DEVICES"] = gpu
    try:
        yield
    finally:
        if before is None:
            del os.environ["CUDA_VISIBLE_DEVICES"]
        else:
            os.environ["CUDA_VISIBLE_DEVICES"] = before
