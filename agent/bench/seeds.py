"""The Inductor seeds of a bench, made before it judges (`krefine bench`, [bench] seed_jobs).

A seed is torch.compile of the problem in its own process: tens of seconds, minutes where
Inductor autotunes (GEMM and convolution templates), mostly on the CPU (BENCHMARKS.md,
"KernelBench level 1: pure-Triton seeds and the first level-1 bench"). The loop makes a
run's seed when the run starts, so a bench on one GPU would compile one problem at a time
while the GPU waits. `prepare_seeds` makes every problem's seed
portfolio (tools/dialect/portfolio.py: the seed and the other configurations' seeds) the
bench will need first, `seed_jobs` at a time per GPU (each child sees only its GPU), into
the seed cache ([search] seed_cache, tools/dialect/seedcache.py's SeedCache), which then
holds both the portfolio and its first entry as the seed; each run finds them there. With
[search] seed_portfolio = false it compiles the seed alone, as the run would. A
portfolio already cached, or a lasting reason for none, is not made again; a failure is
reported and left for the run, which records it as usual.

Does not judge, and does nothing for settings without `[search] seed_kernel = "inductor"` and a
seed cache, for [bench] seed_jobs = 0, or on a Ray cluster (the actors' hosts may not
share this cache).
"""
from __future__ import annotations

import os
import queue
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from tools.errors import describe_fault, one_line


@dataclass(frozen=True)
class SeedTask:
    problem: Path
    name: str
    cache: str
    timeout_s: float
    module_mode: str = "train"          # [eval] module_mode: the forward the judge runs
    portfolio: bool = True              # [search] seed_portfolio: false compiles the seed alone
    templates_s: float = 0.0            # [search] templates_timeout_s: the templates compile's own budget (0: none)


def seed_tasks(jobs, load_config, device: str) -> tuple[list[SeedTask], int]:
    """The seed portfolios `jobs` need that their caches lack (one per problem, cache and
    module mode), and the compiles per GPU the first such setting allows ([bench] seed_jobs)."""
    from tools.dialect.seedcache import SeedCache, problem_file, torch_version
    version = torch_version()
    tasks: dict[tuple[Path, str, str], SeedTask] = {}
    per_gpu = 0
    configs: dict[str, object] = {}                    # one load per setting (by label), not per job
    for job in jobs:
        cfg = configs.get(job.setting.label) or configs.setdefault(job.setting.label, load_config(job.setting))
        s = cfg.search
        if s.seed_kernel != "inductor" or not s.seed_cache or cfg.bench.seed_jobs < 1:
            continue
        per_gpu = per_gpu or cfg.bench.seed_jobs
        mode = cfg.eval.test.module_mode
        key = (job.problem.resolve(), str(Path(s.seed_cache).expanduser()), mode, s.seed_portfolio,
               s.templates_timeout_s)
        if key in tasks:
            continue
        cache = SeedCache(s.seed_cache, mode)
        try:
            if s.seed_portfolio:
                cache.get_portfolio(problem_file(job.problem), device, version, s.seed_timeout_s,
                                    templates_s=s.templates_timeout_s)
            else:
                cache.get(problem_file(job.problem), device, version, s.seed_timeout_s)
            continue                                   # cached: a portfolio (a seed), or a lasting reason for none
        except KeyError:
            pass
        except ValueError:
            continue
        tasks[key] = SeedTask(job.problem, job.name, s.seed_cache, s.seed_timeout_s, mode, s.seed_portfolio,
                              s.templates_timeout_s)
    return list(tasks.values()), per_gpu


def prepare_seeds(tasks: list[SeedTask], gpus: list[str | None], per_gpu: int, device: str, say) -> dict[str, str]:
    """Make `tasks`' seed portfolios in their caches, `per_gpu` at a time on each of `gpus`
    (CUDA_VISIBLE_DEVICES per child; [None]: what this process sees). Returns problem name
    -> reason for those that gave no seed. `say(line)` reports each one as it ends.
    Interrupted (Ctrl-C, or the bench's SIGTERM as KeyboardInterrupt), it starts no other
    seed and re-raises; a seed whose child ended with the stop is reported stopped, not as
    "no seed" (nothing of it is cached: the next run compiles it)."""
    from tools.dialect.portfolio import PortfolioEntry, portfolio_in_subprocess
    from tools.dialect.seedcache import seed_in_subprocess
    todo: queue.Queue[SeedTask] = queue.Queue()
    for t in tasks:
        todo.put(t)
    failed: dict[str, str] = {}
    done = [0]
    lock = threading.Lock()
    stopping = threading.Event()     # the bench was interrupted: its stop ends the children, not a seed's fault

    threads_each = compile_threads(len(gpus) * max(1, per_gpu))

    def work(gpu: str | None) -> None:
        env = {"CUDA_VISIBLE_DEVICES": gpu} if gpu is not None else {}
        if threads_each is not None:
            env["TORCHINDUCTOR_COMPILE_THREADS"] = str(threads_each)
        while not stopping.is_set():
            try:
                t = todo.get_nowait()
            except queue.Empty:
                return
            t0 = time.monotonic()
            try:
                if t.portfolio:
                    entries = portfolio_in_subprocess(t.problem, device, t.timeout_s, t.cache, env=env,
                                                      module_mode=t.module_mode, templates_s=t.templates_s)
                else:
                    entries = [PortfolioEntry("seed", seed_in_subprocess(t.problem, device, t.timeout_s, t.cache,
                                                                         env=env, module_mode=t.module_mode))]
                more = sum(e.code is not None for e in entries) - 1
                result = f"seed + {more} more" if more else "seed"
            except ValueError as e:
                if stopping.is_set():   # its child ended with the bench: nothing is cached, the next run makes it
                    result = "stopped with the bench (interrupted); the next run compiles it"
                else:
                    result = f"no seed: {one_line(str(e), 300)}"
                    with lock:
                        failed[t.name] = str(e)
            except Exception as e:      # never ends this worker: the queue's other seeds still need it
                result = f"no seed: internal error: {describe_fault(e)}"
                with lock:
                    failed[t.name] = result
            with lock:
                done[0] += 1
                where = f", GPU {gpu}" if gpu is not None else ""
                say(f"seeds: {done[0]}/{len(tasks)} {t.name}: {result} ({time.monotonic() - t0:.0f} s{where})")

    threads = [threading.Thread(target=work, args=(g,), daemon=True) for g in gpus for _ in range(max(1, per_gpu))]
    try:
        for th in threads:
            th.start()
        for th in threads:
            while th.is_alive():
                th.join(0.5)    # a Ctrl-C (or the bench's SIGTERM) reaches the main thread between joins
    except KeyboardInterrupt:
        stopping.set()
        raise
    return failed


def compile_threads(children: int) -> int | None:
    """Inductor's compile workers for each of `children` seed compiles at once: a share of
    this machine's CPUs (each child would otherwise start one worker per CPU, up to 32, and
    a dozen children's workers can exhaust the host's memory), or None where the user's
    TORCHINDUCTOR_COMPILE_THREADS says."""
    if os.environ.get("TORCHINDUCTOR_COMPILE_THREADS"):
        return None
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(32, cpus // max(1, children)))

