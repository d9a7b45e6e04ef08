"""`krefine bench SUITE_DIR [options]`: the loop over every problem of a suite.

  -h, --help          the flags below
  --filter REGEX      only problems whose name matches (repeatable: any of them)
  --out DIR           results directory (default runs/bench-<suite>); resumable
  --config FILE       agent.toml to start from; --set TABLE.KEY=VALUE overrides it
  --model SPEC        as `krefine run --model`; "{problem}" in it becomes each problem's
                      name, e.g. replay:replays/{problem}.jsonl
  --device cuda|cpu   --gpus N: use only the first N GPUs
  --precision as-run|strict   [eval] precision, as `krefine run --precision`
  --ray [ADDRESS]     judge on a Ray cluster: auto (default: the running one), local,
                      HOST:PORT or ray://HOST:PORT; the flag sets [bench] ray_address (the
                      rest of [bench] is in agent.toml; agent/bench/ray_bench.py)
  --sweep TABLE.KEY=V1,V2,...   one suite pass per value (repeatable: every combination)
  --list              print the problems that would run, and stop
  --report-only       run nothing: read OUT's run dirs back and write the results (a
                      bench copied back from a run cut off on another machine; the problems
                      with no run dir are listed as "not run")

A problem is any .py file under SUITE_DIR that defines `class Model` (a KernelBench
checkout's KernelBench/level1 works as it is). Each (setting, problem) gets its run
directory OUT/<setting>/<problem>; one that has summary.json is skipped, one that was
interrupted (kill -9, SIGTERM from `timeout` or a job scheduler, Ctrl-C) is
resumed from its run directory, no finished candidate judged again; one whose summary says
the evaluator failed (stop_reason evaluator_error: a kill can take the judge down
first) is resumed too; one that judged nothing because its seed ran past a shorter
[search] seed_timeout_s than the setting's now runs afresh, the earlier run moved to
OUT/.retried/<setting>/<problem>.seed-<N>s. SIGTERM is handled as Ctrl-C: the problem in
progress unwinds (its judges closed), the bench exits 130, and the same command goes on from there. With several GPUs, one worker process per GPU takes problems
from a queue (CUDA_VISIBLE_DEVICES names its GPU); on cpu there is one, in-process. With
--ray, judge actors on the cluster's GPUs serve problem loops that run in this process.

Writes OUT/results.csv, OUT/results.json, OUT/results.md and OUT/bench.html (budget
curves of every setting overlaid; agent/bench/results.py) and prints one line per problem,
then the results table, fast_p, pass@k and the budget curve. Every file is written whole or not at all
(a kill while writing leaves the previous one), and all are rewritten from the run
dirs on each bench, so a rerun after any kill reports the whole suite.

The results table puts the seed (round 0's torch.compile seed alone: no sweep, no
model) beside the run's best (sweep variants and model candidates, which may descend
from the seed): with `--model none`, best over seed is what the sweep added to
torch.compile's code. results.md is that table in Markdown, ready for BENCHMARKS.md,
with the suite figures (benchstats.suite_figures): correct %, fast_1 and fast_1.5
against eager and torch.compile, geometric means, the best's gain over the seed, the
judge's wall per candidate, GPU time and seed coverage. Exit status (exit_status): 0 when at least one problem ran; 2 or 3 when none could. The figures come
from agent/bench/stats.py; the loop itself is agent/loop/runner.py's run_problem/resume_run.
"""
from __future__ import annotations

import argparse
import contextlib
import itertools
import re
import signal
import sys
from pathlib import Path

from rich.console import Console

from agent.config import load_config, parse_assignment, split_assignment, toml_value
from agent.bench.results import print_results, write_results
from agent.bench.job import BAD_INPUT, Job, Setting, collect
from agent.bench.stats import ProblemResult
from tools.errors import EXIT_BAD_INPUT, EXIT_EVALUATOR, EXIT_OK, BadInput, check_writable
from agent.loop.rundir import RunDir
from tools.dialect.seedcache import timed_out_after
from tools.settings import PRECISION_POLICIES
from agent.bench.workers import interrupt, run_jobs, visible_gpus


def main(args) -> int:
    opts = parse_options(args.rest)
    # 1) the problems and the settings; every bad flag fails before anything runs
    suite = Path(args.suite_dir)
    problems = find_problems(suite, opts.filter)
    if opts.list:
        for name, path in problems:
            print(f"{name}\t{path}")
        return 0
    settings = make_settings(opts)
    configs = [load_config(opts.config, s.overrides, s.origins) for s in settings]
    if opts.model:
        from agent.models.llm import check_spec
        check_spec(opts.model)
    out = Path(opts.out or Path("runs") / f"bench-{suite.resolve().name}")
    check_writable(out, "bench results directory", directory=True)
    jobs = [Job(s, path, name, out / s.label / name) for s in settings for name, path in problems]
    if opts.seeds_only:
        return _seeds_only(jobs, opts, settings[0])
    console = Console()
    if opts.report_only:
        if not out.is_dir():
            raise BadInput(str(out), f"krefine bench --report-only: {out}: no such results directory")
        return _report(out, suite, settings, jobs, {}, console)
    # 2) run what is not finished yet, one worker per GPU; a seed cut short by a shorter budget is tried again
    for s, config in zip(settings, configs):
        limit = config.search.seed_timeout_s
        for j in jobs:
            if j.setting == s and (moved := retire_seed_timeout(j, out, limit)) is not None:
                console.print(f"bench: {j.name}: its seed ran past {moved[0]:g} s; seeded again under "
                              f"{limit:g} s (the earlier run is kept in {moved[1]})",
                              highlight=False, markup=False, soft_wrap=True)
    todo = [j for j in jobs if not finished(j.run_dir)]
    address = ray_address(opts, settings[0])
    console.print(f"bench: {len(problems)} problems x {len(settings)} setting(s); "
                  f"{len(jobs) - len(todo)} already done, {len(todo)} to run; results in {out}")
    with terminated_as_interrupt():
        try:
            if address and todo:
                from agent.bench import ray_bench
                errors = ray_bench.run_jobs(todo, address, opts.config, opts.model, console)
            else:   # the seeds are compiled (or found) while the GPU workers start
                device = _device(opts, settings[0])
                gpus = visible_gpus(device, opts.gpus)
                errors = run_jobs(todo, gpus, opts.config, opts.model, console,
                                  device=device, first=lambda: _seeds_first(todo, opts, device, gpus, console))
        except KeyboardInterrupt:
            print(f"krefine bench: interrupted; the same command resumes it (results in {out})", file=sys.stderr)
            raise
    # 3) read every run dir back and report
    return _report(out, suite, settings, jobs, errors, console)


def _report(out: Path, suite: Path, settings: list[Setting], jobs: list[Job], errors: dict[Path, str],
            console: Console) -> int:
    per_setting = [(s, [collect(j, errors.get(j.run_dir)) for j in jobs if j.setting == s]) for s in settings]
    write_results(out, suite, per_setting)
    print_results(console, per_setting)
    console.print(f"wrote {out / 'results.csv'}, {out / 'results.json'}, {out / 'results.md'}, {out / 'bench.html'}")
    return exit_status([r for _, results in per_setting for r in results])


def finished(run_dir: Path) -> bool:
    """A run the bench need not touch again: it has summary.json, and the summary does
    not say the evaluator failed (that is retried: a kill can reach the judge first)."""
    try:
        summary = RunDir(run_dir).read_summary()
    except (OSError, ValueError):
        return False
    return summary is not None and summary.get("stop_reason") != "evaluator_error"


RETIRED = ".retried"   # OUT/.retried/<setting>/<problem>.seed-<N>s: runs a bench set aside to run again


def retire_seed_timeout(job: Job, out: Path, seed_timeout_s: float) -> tuple[float, Path] | None:
    """A finished run that judged nothing because its seed ran past a budget shorter than
    `seed_timeout_s` ([search] seed_timeout_s now) moves to OUT/.retried/<setting>/
    <problem>.seed-<N>s, out of the bench's and the tables' way, so the problem runs
    afresh under the longer budget (as the seed cache compiles a kept timeout again only
    under a longer one); (the budget it ran past, where it went), else None."""
    try:
        summary = RunDir(job.run_dir).read_summary()
    except (OSError, ValueError):
        return None
    seed = (summary or {}).get("seed") or {}
    limit = timed_out_after(str(seed.get("error") or "")) if seed.get("status") == "seed_failed" else None
    if limit is None or limit >= seed_timeout_s or summary.get("candidates_evaluated"):
        return None
    home = out / RETIRED / job.run_dir.parent.name
    home.mkdir(parents=True, exist_ok=True)
    target = next(p for p in (home / f"{job.name}.seed-{limit:g}s{f'.{i}' if i else ''}" for i in itertools.count())
                  if not p.exists())
    job.run_dir.rename(target)
    return limit, target


@contextlib.contextmanager
def terminated_as_interrupt():
    """SIGTERM (`timeout`, a job scheduler's time limit) raises KeyboardInterrupt for the block, as
    Ctrl-C does, so the problem in progress unwinds and closes its judges; the handler
    before it is put back after. Only in the main thread (signal handlers live there)."""
    import threading
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = signal.signal(signal.SIGTERM, lambda signum, frame: interrupt())
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)


def exit_status(results: list[ProblemResult]) -> int:
    """0 when at least one problem ran: its scores are the bench's result, solved or not
    (the others are reported, each with its reason). When none could run, 2 if every
    one failed on bad input (an unreachable model server among them, as for
    `krefine run`), else 3."""
    failed = [r.error for r in results if r.error]
    if len(failed) < len(results):
        return EXIT_OK
    return EXIT_BAD_INPUT if all(e.startswith(f"{BAD_INPUT}: ") for e in failed) else EXIT_EVALUATOR


# ---------------------------------------------------------------- options and discovery

def option_parser():
    """krefine bench's flags (also what `krefine bench --help` prints)."""
    from agent.cli import UsageParser  # usage errors are BadInput: one line, exit 2
    p = UsageParser(prog="krefine bench", usage="krefine bench SUITE_DIR [options]",
                    description="Run the loop over every problem (a .py defining class Model) under SUITE_DIR. "
                                "Rerunning the same command resumes: finished problems are skipped, "
                                "interrupted ones resumed.",
                    epilog="Writes OUT/results.csv, results.json, results.md (the per-problem table, the seed "
                           "beside the run's best, and the suite figures, for BENCHMARKS.md) and bench.html.")
    p.add_argument("--filter", action="append", default=[], metavar="REGEX",
                   help="only problems whose name matches (repeatable: any of them)")
    p.add_argument("--out", default=None, metavar="DIR", help="results directory (default runs/bench-<suite>)")
    p.add_argument("--config", default=None, metavar="FILE", help="agent.toml to start from")
    p.add_argument("--model", default=None, metavar="SPEC",
                   help='as krefine run --model; "{problem}" becomes each problem\'s name, '
                        'e.g. replay:replays/{problem}.jsonl')
    p.add_argument("--device", choices=("cuda", "cpu"), default=None)
    p.add_argument("--gpus", type=int, default=None, metavar="N", help="use only the first N GPUs")
    p.add_argument("--precision", choices=PRECISION_POLICIES, default=None,
                   help="[eval] precision: as-run (eager's own error bounds a candidate's) or strict (TF32 off)")
    p.add_argument("--sweep", action="append", default=[], metavar="TABLE.KEY=V1,V2,...",
                   help="one suite pass per value (repeatable: every combination)")
    p.add_argument("--set", action="append", default=[], metavar="TABLE.KEY=VALUE", dest="sets",
                   help="override one agent.toml value (repeatable)")
    p.add_argument("--list", action="store_true", help="print the problems that would run, and stop")
    p.add_argument("--report-only", action="store_true",
                   help="run nothing: read OUT's run dirs back and write the results (unrun problems: \"not run\")")
    p.add_argument("--seeds-only", action="store_true",
                   help="compile the Inductor seeds the suite lacks into [search] seed_cache "
                        "([bench] seed_jobs per GPU), then stop: a later bench judges at once")
    p.add_argument("--ray", nargs="?", const="auto", default=None, metavar="ADDRESS",
                   help="[bench] ray_address: judge on a Ray cluster: auto (default), local, HOST:PORT or "
                        "ray://HOST:PORT")
    return p


def parse_options(argv: list[str]) -> argparse.Namespace:
    opts = option_parser().parse_args(argv)
    if opts.gpus is not None and opts.gpus < 1:
        raise BadInput("", f"krefine bench: --gpus must be at least 1, got {opts.gpus}")
    if opts.report_only and (opts.seeds_only or opts.list):
        raise BadInput("", "krefine bench: --report-only runs nothing; leave out --seeds-only and --list")
    if opts.seeds_only and opts.ray is not None:
        raise BadInput("", "krefine bench: --seeds-only compiles on this host's GPUs; leave out --ray")
    if opts.ray is not None and opts.gpus is not None:
        raise BadInput("", "krefine bench: --gpus counts this host's GPUs; on a Ray cluster set --set bench.judges=N")
    return opts


def find_problems(suite: Path, filters: list[str]) -> list[tuple[str, Path]]:
    """(name, path) of every problem file under `suite`, in natural order (2_ before 10_).

    The name is the path below the suite without .py, "/" turned into "__", so two
    levels' same-named files get different run dirs.
    """
    if not suite.is_dir():
        raise BadInput(suite, "not a directory; a suite is a directory of problem files" if suite.exists()
                       else "no such suite directory")
    try:
        patterns = [re.compile(f) for f in filters]
    except re.error as e:
        raise BadInput("", f"krefine bench: --filter {e.pattern!r}: {e}") from None
    found = []
    for path in suite.rglob("*.py"):
        rel = path.relative_to(suite)
        if any(part.startswith((".", "__")) for part in rel.parts):
            continue
        name = "__".join(rel.with_suffix("").parts)
        if patterns and not any(p.search(name) for p in patterns):
            continue
        if re.search(r"^class Model\b", path.read_text(encoding="utf-8", errors="replace"), re.M):
            found.append((name, path))
    if not found:
        raise BadInput(suite, "no problem files (.py defining class Model)"
                              + (f" match --filter {' '.join(filters)}" if filters else ""))
    return sorted(found, key=lambda np: _natural(np[0]))


def make_settings(opts: argparse.Namespace) -> list[Setting]:
    """The fixed overrides (--set, and the flags that set a key: --device, --ray,
    --precision) times every combination of the --sweep values."""
    fixed = dict(parse_assignment(a, "--set") for a in opts.sets)
    origins = {key: f"--set {key}" for key in fixed}
    for flag, key, value in (("--device", "run.device", opts.device), ("--ray", "bench.ray_address", opts.ray),
                             ("--precision", "eval.precision", opts.precision)):
        if value is not None:
            fixed[key], origins[key] = value, flag
    if getattr(opts, "model", None) == "none" and "search.seed_kernel" not in fixed:
        # a bench without a model has one thing to do: each problem's Inductor seed and its sweep
        fixed["search.seed_kernel"], origins["search.seed_kernel"] = "inductor", "--model none"
    axes = []
    for a in opts.sweep:
        key, raw = split_assignment(a, "--sweep")
        axes.append([(key, toml_value(v)) for v in raw.split(",") if v.strip()])
        origins[key] = f"--sweep {key}"
    if not axes:
        return [Setting("default", fixed, origins)]
    return [Setting(",".join(f"{k}={_label(v)}" for k, v in combo), {**fixed, **dict(combo)}, origins)
            for combo in itertools.product(*axes)]


def ray_address(opts: argparse.Namespace, setting: Setting) -> str:
    """The Ray cluster to judge on ("" = this host): [bench] ray_address, which --ray sets.
    Without Ray installed, asking for one is one line and exit 2."""
    address = load_config(opts.config, setting.overrides).bench.ray_address
    where = setting.origins.get("bench.ray_address", "[bench] ray_address")
    if address:
        from agent.bench.ray_bench import require_ray
        require_ray(where)
    return address


# ---------------------------------------------------------------- running

def _seeds_first(todo: list[Job], opts, device: str, gpus: list[str | None],
                 console: Console) -> tuple[int, dict[str, str]]:
    """The Inductor seeds the runs will need, compiled in parallel into the seed cache
    on `gpus` (visible_gpus) before any run starts (agent/bench/seeds.py); (how many were
    compiled, problem -> reason for those that gave no seed)."""
    from agent.bench.seeds import prepare_seeds, seed_tasks
    tasks, per_gpu = seed_tasks(todo, lambda s: load_config(opts.config, s.overrides), device)
    if not tasks:
        return 0, {}
    console.print(f"seeds: {len(tasks)} to compile, {per_gpu} at a time per GPU ({len(gpus)} GPU(s)) "
                  "before judging; the rest are cached")
    return len(tasks), prepare_seeds(tasks, gpus, per_gpu, device, console.print)


def _seeds_only(jobs: list[Job], opts, setting: Setting) -> int:
    """--seeds-only: the suite's seeds into the seed cache, nothing judged."""
    config = load_config(opts.config, setting.overrides)
    if config.search.seed_kernel != "inductor" or not config.search.seed_cache or config.bench.seed_jobs < 1:
        raise BadInput("", 'krefine bench --seeds-only: needs [search] seed_kernel = "inductor", a [search] seed_cache '
                           "and [bench] seed_jobs of at least 1 (e.g. --set search.seed_kernel=inductor)")
    console = Console()
    with terminated_as_interrupt():
        device = _device(opts, setting)
        compiled, failed = _seeds_first(jobs, opts, device, visible_gpus(device, opts.gpus), console)
    problems = len({j.problem for j in jobs})
    console.print(f"seeds: {problems} problems, {problems - compiled} already cached, {compiled} compiled now "
                  f"({len(failed)} without a seed, reasons above); cache {config.search.seed_cache}", highlight=False)
    return EXIT_OK


# ---------------------------------------------------------------- small helpers

def _device(opts: argparse.Namespace, setting: Setting) -> str:
    from agent.loop.runner import resolve_device
    return resolve_device(load_config(opts.config, setting.overrides).run.device)


def _label(value) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def _natural(name: str) -> list:
    return [int(t) if t.isdigit() else t.lower() for t in re.split(r"(\d+)", name)]
