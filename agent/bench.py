"""`krefine bench SUITE_DIR [options]`: the loop over every problem of a suite.

  -h, --help          the flags below
  --filter REGEX      only problems whose name matches (repeatable: any of them)
  --out DIR           results directory (default runs/bench-<suite>); resumable
  --config FILE       agent.toml to start from; --set TABLE.KEY=VALUE overrides it
  --model SPEC        as `krefine run --model`; "{problem}" in it becomes each problem's
                      name, e.g. replay:replays/{problem}.jsonl
  --device cuda|cpu   --gpus N: use only the first N GPUs
  --ray [ADDRESS]     judge on a Ray cluster: auto (default: the running one), local,
                      HOST:PORT or ray://HOST:PORT; [bench] ray_address, and the rest of
                      [bench], in agent.toml (agent/ray_bench.py)
  --sweep TABLE.KEY=V1,V2,...   one suite pass per value (repeatable: every combination)
  --list              print the problems that would run, and stop

A problem is any .py file under SUITE_DIR that defines `class Model` (a KernelBench
checkout's KernelBench/level1 works as it is). Each (setting, problem) gets its run
directory OUT/<setting>/<problem>; one that has summary.json is skipped, one that was
interrupted (kill -9, SIGTERM from `timeout` or a cut-off device call, Ctrl-C) is
resumed from its checkpoint, no finished candidate judged again; one whose summary says
the evaluator failed (stop_reason evaluator_error: a kill can take the judge down
first) is resumed too. SIGTERM is handled as Ctrl-C: the problem in progress unwinds
(its judges closed), the bench exits 130, and the same command goes on from there. With several GPUs, one worker process per GPU takes problems
from a queue (CUDA_VISIBLE_DEVICES names its GPU); on cpu there is one, in-process. With
--ray, judge actors on the cluster's GPUs serve problem loops that run in this process.

Writes OUT/results.csv, OUT/results.json, OUT/results.md and OUT/bench.html (budget
curves of every setting overlaid) and prints one line per problem, then the results
table, fast_p, pass@k and the budget curve. Every file is written whole or not at all
(a kill while writing leaves the previous one), and all are rewritten from the run
dirs on each bench, so a rerun after any kill reports the whole suite.

The results table puts the seed (round 0's torch.compile seed alone: no sweep, no
model) beside the run's best (sweep variants and model candidates, which may descend
from the seed): with `--model none`, best over seed is what the sweep added to
torch.compile's code. results.md is that table in Markdown, ready for BENCHMARKS.md,
with the suite figures (runstats.suite_figures): correct %, fast_1 and fast_1.5
against eager and torch.compile, geometric means, the best's gain over the seed, the
judge's wall per candidate, GPU time and seed coverage. Exit status (exit_status): 0 when at least one problem ran; 2 or 3 when none could. The figures come
from agent/runstats.py; the loop itself is agent/runner.py's run_problem/resume_run.
"""
from __future__ import annotations

import argparse
import contextlib
import csv
import dataclasses
import io
import itertools
import os
import queue
import re
import signal
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console
from rich.table import Table

from agent.config import RAY_ADDRESS
from agent.runstats import (BASELINES, FAST_P_THRESHOLDS, PASS_K, SUITE_FAST, ProblemResult, budget_curve,
                            fast_p, fmt_speedup, load_run, mean_pass_at_k, problem_result, suite_figures)
from tools.errors import EXIT_BAD_INPUT, EXIT_EVALUATOR, EXIT_OK, BadInput, EvaluatorError
from tools.jsonio import read_json, write_json, write_text_atomic


@dataclass(frozen=True)
class Setting:
    label: str                      # directory name and legend, e.g. "budget.max_rounds=2"
    overrides: dict                 # load_config's dotted overrides
    origins: dict = field(default_factory=dict, compare=False)   # override -> the flag that set it, for errors


@dataclass(frozen=True)
class Job:
    setting: Setting
    problem: Path
    name: str
    run_dir: Path


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
    for s in settings:
        _load_config(opts.config, s.overrides, s.origins)
    if opts.model:
        from agent.llm import check_spec
        check_spec(opts.model)
    out = Path(opts.out or Path("runs") / f"bench-{suite.resolve().name}")
    jobs = [Job(s, path, name, out / s.label / name) for s in settings for name, path in problems]
    # 2) run what is not finished yet, one worker per GPU
    todo = [j for j in jobs if not finished(j.run_dir)]
    address = ray_address(opts, settings[0])
    console = Console()
    console.print(f"bench: {len(problems)} problems x {len(settings)} setting(s); "
                  f"{len(jobs) - len(todo)} already done, {len(todo)} to run; results in {out}")
    with terminated_as_interrupt():
        try:
            if address and todo:
                from agent import ray_bench
                errors = ray_bench.run_jobs(todo, address, opts.config, opts.model, console)
            else:
                gpus = visible_gpus(_device(opts, settings[0]), opts.gpus)
                errors = run_jobs(todo, gpus, opts.config, opts.model, console)
        except KeyboardInterrupt:
            print(f"krefine bench: interrupted; the same command resumes it (results in {out})", file=sys.stderr)
            raise
    # 3) read every run dir back and report
    per_setting = [(s, [collect(j, errors.get(j.run_dir)) for j in jobs if j.setting == s]) for s in settings]
    write_results(out, suite, per_setting)
    print_results(console, per_setting)
    console.print(f"wrote {out / 'results.csv'}, {out / 'results.json'}, {out / 'results.md'}, {out / 'bench.html'}")
    return exit_status([r for _, results in per_setting for r in results])


def finished(run_dir: Path) -> bool:
    """A run the bench need not touch again: it has summary.json, and the summary does
    not say the evaluator failed (that is retried: a kill can reach the judge first)."""
    path = run_dir / "summary.json"
    if not path.exists():
        return False
    try:
        return read_json(path).get("stop_reason") != "evaluator_error"
    except (OSError, ValueError):
        return False


@contextlib.contextmanager
def terminated_as_interrupt():
    """SIGTERM (timeout, a device call cut off) raises KeyboardInterrupt for the block, as
    Ctrl-C does, so the problem in progress unwinds and closes its judges; the handler
    before it is put back after. Only in the main thread (signal handlers live there)."""
    import threading
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    def interrupt(signum, frame):
        raise KeyboardInterrupt
    before = signal.signal(signal.SIGTERM, interrupt)
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
    return EXIT_BAD_INPUT if all(e.startswith(f"{_BAD_INPUT}: ") for e in failed) else EXIT_EVALUATOR


# ---------------------------------------------------------------- options and discovery

def option_parser():
    """krefine bench's flags (also what `krefine bench --help` prints)."""
    from agent.cli import UsageParser  # usage errors are BadInput: one line, exit 2
    p = UsageParser(prog="krefine bench", usage="krefine bench SUITE_DIR [options]",
                    description="Run the loop over every problem (a .py defining class Model) under SUITE_DIR. "
                                "Rerunning the same command resumes: finished problems are skipped, "
                                "interrupted ones resumed.")
    p.add_argument("--filter", action="append", default=[], metavar="REGEX",
                   help="only problems whose name matches (repeatable: any of them)")
    p.add_argument("--out", default=None, metavar="DIR", help="results directory (default runs/bench-<suite>)")
    p.add_argument("--config", default=None, metavar="FILE", help="agent.toml to start from")
    p.add_argument("--model", default=None, metavar="SPEC",
                   help='as krefine run --model; "{problem}" becomes each problem\'s name, '
                        'e.g. replay:replays/{problem}.jsonl')
    p.add_argument("--device", choices=("cuda", "cpu"), default=None)
    p.add_argument("--gpus", type=int, default=None, metavar="N", help="use only the first N GPUs")
    p.add_argument("--sweep", action="append", default=[], metavar="TABLE.KEY=V1,V2,...",
                   help="one suite pass per value (repeatable: every combination)")
    p.add_argument("--set", action="append", default=[], metavar="TABLE.KEY=VALUE", dest="overrides",
                   help="override one agent.toml value (repeatable)")
    p.add_argument("--list", action="store_true", help="print the problems that would run, and stop")
    p.add_argument("--ray", nargs="?", const="auto", default=None, metavar="ADDRESS",
                   help="judge on a Ray cluster: auto (default), local, HOST:PORT or ray://HOST:PORT")
    return p


def parse_options(argv: list[str]) -> argparse.Namespace:
    opts = option_parser().parse_args(argv)
    if opts.ray is not None and not RAY_ADDRESS.match(opts.ray):
        raise BadInput("", f"krefine bench: --ray {opts.ray!r}: expected auto, local, HOST:PORT or ray://HOST:PORT")
    if opts.gpus is not None and opts.gpus < 1:
        raise BadInput("", f"krefine bench: --gpus must be at least 1, got {opts.gpus}")
    if opts.ray is not None and opts.gpus is not None:
        raise BadInput("", "krefine bench: --gpus counts this host's GPUs; on a Ray cluster set --set bench.judges=N")
    return opts


def find_problems(suite: Path, filters: list[str]) -> list[tuple[str, Path]]:
    """(name, path) of every problem file under `suite`, in natural order (2_ before 10_).

    The name is the path below the suite without .py, "/" turned into "__", so two
    levels' same-named files get different run dirs.
    """
    if not suite.is_dir():
        raise BadInput(suite, "no such suite directory")
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
    """The fixed overrides (--set, --device) times every combination of the --sweep values."""
    fixed = dict(_assignment(a, "--set") for a in opts.overrides)
    origins = {key: f"--set {key}" for key in fixed}
    if opts.device:
        fixed["run.device"] = opts.device
        origins["run.device"] = "--device"
    axes = []
    for a in opts.sweep:
        key, raw = _split(a, "--sweep")
        axes.append([(key, _toml_value(v)) for v in raw.split(",") if v.strip()])
        origins[key] = f"--sweep {key}"
    if not axes:
        return [Setting("default", fixed, origins)]
    return [Setting(",".join(f"{k}={_label(v)}" for k, v in combo), {**fixed, **dict(combo)}, origins)
            for combo in itertools.product(*axes)]


def ray_address(opts: argparse.Namespace, setting: Setting) -> str:
    """The Ray cluster to judge on ("" = this host): --ray, else [bench] ray_address.
    Without Ray installed, asking for one is one line and exit 2."""
    if opts.ray is not None:
        address, where = opts.ray, "--ray"
    else:
        address, where = _load_config(opts.config, setting.overrides).bench.ray_address, "[bench] ray_address"
    if address:
        from agent.ray_bench import require_ray
        require_ray(where)
    return address


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
        import torch
        ids = [str(i) for i in range(torch.cuda.device_count())]
    if limit is not None and limit > len(ids):
        raise BadInput("", f"krefine bench: --gpus {limit}: only {len(ids)} GPU{'s' if len(ids) != 1 else ''} visible")
    if limit is not None and limit < len(ids):
        return ids[:limit]
    return ids if len(ids) > 1 else [None]


# ---------------------------------------------------------------- running

def run_jobs(jobs: list[Job], gpus: list[str | None], config_path: str | None, model: str | None,
             console: Console) -> dict[Path, str]:
    """Run every job; returns run_dir -> one-line error for those that could not run."""
    errors: dict[Path, str] = {}
    def done(i: int, job: Job, error: str | None) -> None:
        if error:
            errors[job.run_dir] = error
        say_done(console, i, len(jobs), job, error)
    if gpus == [None]:
        dead: dict[str, str] = {}
        for i, job in enumerate(jobs, 1):
            done(i, job, run_job(job, config_path, model, progress=True, dead=dead))
        return errors
    import multiprocessing as mp
    ctx = mp.get_context("spawn")   # no forked copies of threads, sqlite handles, CUDA state
    todo, results = ctx.Queue(), ctx.Queue()
    for job in jobs:
        todo.put(job)
    workers = []
    for gpu in gpus[: len(jobs)]:
        todo.put(None)
        with _visible(gpu):         # a spawned child takes os.environ as it is at start()
            w = ctx.Process(target=_worker, args=(todo, results, config_path, model), daemon=True)
            w.start()
        workers.append(w)
    ended = 0
    try:
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


def _worker(todo, results, config_path: str | None, model: str | None) -> None:
    """One GPU's worker: problems from `todo` until None. SIGTERM (from the bench, or from
    the kernel when the bench itself dies, even by kill -9) unwinds the problem in
    progress as Ctrl-C would, so no orphan goes on judging into a run dir that the
    next bench resumes."""
    _die_with_parent()
    signal.signal(signal.SIGTERM, lambda signum, frame: _interrupt())
    dead: dict[str, str] = {}   # this process's: at most one refused connection per server and GPU
    try:
        while (job := todo.get()) is not None:
            results.put((job, run_job(job, config_path, model, progress=False, dead=dead)))
    except KeyboardInterrupt:
        return


def _interrupt():
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


def say_done(console: Console, i: int, total: int, job: Job, error: str | None) -> None:
    """One line per finished problem, however long its reason (the terminal wraps it)."""
    console.print(f"[{i}/{total}] {job.setting.label} {job.name}: {error or _outcome(job.run_dir)}",
                  highlight=False, markup=False, soft_wrap=True)


def run_job(job: Job, config_path: str | None, model: str | None, *, progress: bool,
            services=None, dead: dict[str, str] | None = None) -> str | None:
    """Run (or resume) one problem; None when it ran, else a one-line reason. `services`
    (agent.runner.Services) are the shared judges and model of a bench on Ray. `dead`
    (server URL -> the problem where it refused the connection) spares the rest of the
    bench asking a model server that is down again: once per server, not per problem."""
    from agent.llm import ServerUnreachable, server_url
    from agent.runner import resume_run, run_problem
    shared = {"services": services} if services is not None else {}
    try:
        config = _load_config(config_path, job.setting.overrides)
        spec = model.replace("{problem}", job.name) if model else config.model.id
        server = server_url(spec, config.model)
        if dead is not None and server in dead:
            return f"{_BAD_INPUT}: the model server {server} refused the connection ({dead[server]}); not asked again"
        if (job.run_dir / "run.json").exists():
            resume_run(job.run_dir, progress=progress, **shared)
        else:
            _clear_skeleton(job.run_dir)
            run_problem(job.problem, config, job.run_dir, model_spec=spec if model else None, progress=progress,
                        **shared)
        return None
    except (BadInput, EvaluatorError) as e:
        if isinstance(e, ServerUnreachable) and dead is not None:
            dead.setdefault(e.server, f"for {job.name}")
        return f"{_BAD_INPUT if isinstance(e, BadInput) else 'evaluator failed'}: {' '.join(str(e).split())}"
    except Exception as e:  # a bug in the loop must not stop the other problems; it is reported
        return f"internal error: {type(e).__name__}: {' '.join(str(e).split())}"


_BAD_INPUT = "bad input"   # how run_job's reasons start when the fault is the input's (exit_status)


def _outcome(run_dir: Path) -> str:
    r = problem_result(load_run(run_dir))
    if not r.solved:
        return f"not solved ({r.stop_reason}, {r.candidates} candidates)"
    timed = r.speedup_eager is not None or r.speedup_compile is not None
    return (f"solved by {r.best} after {r.solved_at} candidates, " +
            (f"{fmt_speedup(r.speedup_eager)} eager / {fmt_speedup(r.speedup_compile)} compile" if timed else "not timed (cpu)"))


def _clear_skeleton(run_dir: Path) -> None:
    """Remove a run dir that a kill left before run.json: only empty folders, nothing lost."""
    if run_dir.is_dir() and not any(p.is_file() for p in run_dir.rglob("*")):
        for sub in sorted(run_dir.rglob("*"), reverse=True):
            sub.rmdir()
        run_dir.rmdir()


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


# ---------------------------------------------------------------- results

def collect(job: Job, error: str | None) -> ProblemResult:
    if (job.run_dir / "summary.json").exists() or (job.run_dir / "run.json").exists():
        r = problem_result(load_run(job.run_dir), job.name)
        return dataclasses.replace(r, error=error) if error else r
    return ProblemResult.failed(job.name, str(job.run_dir), error or "not run")


def scores(results: list[ProblemResult]) -> dict:
    """fast_p per baseline, pass@k over round-1 samples and over all candidates, and the
    budget curve, keyed as results.json writes them."""
    def pass_at(pairs: list[tuple[int, int]]) -> dict:
        return {str(k): dict(zip(("mean", "problems"), mean_pass_at_k(pairs, k))) for k in PASS_K}
    return {
        "problems": len(results), "solved": sum(r.solved for r in results),
        "fast_p": {b: {f"{p:g}": fast_p(results, p, b) for p in FAST_P_THRESHOLDS} for b in BASELINES},
        "pass_at_k": {"round1": pass_at([(r.n_round1, r.c_round1) for r in results]),
                      "all": pass_at([(r.n_all, r.c_all) for r in results])},
        "budget_curve": budget_curve(results),
    }


def write_results(out: Path, suite: Path, per_setting: list[tuple[Setting, list[ProblemResult]]]) -> None:
    from agent.report import Series, SERIES_COLORS, line_chart, render
    # judge_s (one wall per candidate) is in results.json only; the CSV has one value per cell
    fields = [f.name for f in dataclasses.fields(ProblemResult) if f.name != "judge_s"]
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=["setting", *fields], lineterminator="\n", extrasaction="ignore")
    w.writeheader()
    for s, results in per_setting:
        for r in results:
            w.writerow({"setting": s.label, **dataclasses.asdict(r)})
    write_text_atomic(out / "results.csv", buf.getvalue())
    scored = [(s, results, scores(results)) for s, results in per_setting]
    write_json(out / "results.json", {
        "schema": 1, "suite": str(suite),
        "settings": [{"label": s.label, "overrides": s.overrides, "scores": sc, "figures": suite_figures(results),
                      "results": [dataclasses.asdict(r) for r in results]} for s, results, sc in scored]})
    write_text_atomic(out / "results.md", results_markdown(suite, per_setting))
    curves = [Series(s.label, budget_curve(results), SERIES_COLORS[i % len(SERIES_COLORS)], step=True)
              for i, (s, results) in enumerate(per_setting)]
    top = max([b for c in curves for b, _ in c.points] + [1])
    chart = line_chart(curves, x_label="candidates spent", y_label="problems solved",
                       x_range=(1, top), y_range=(0.0, 1.0), y_percent=True)
    write_text_atomic(out / "bench.html", render(
        "bench", title=f"krefine bench: {suite.name}", suite=str(suite), suite_name=suite.name, out_dir=str(out),
        problems=len(per_setting[0][1]), budget_chart=chart, baselines=BASELINES, ks=PASS_K,
        thresholds=[f"{p:g}" for p in FAST_P_THRESHOLDS], fmt=fmt_speedup, colors={},
        settings=[{"label": s.label, "results": results, "scores": sc} for s, results, sc in scored]))


def print_results(console: Console, per_setting: list[tuple[Setting, list[ProblemResult]]]) -> None:
    for s, results in per_setting:
        # a problem that could not run shows the kind of fault in "why"; its line above
        # and results.csv say why in full
        t = _table(f"results: {s.label}")
        for col in TABLE_COLUMNS:
            t.add_column(col, no_wrap=col != "why", overflow="fold")
        for r in results:
            t.add_row(*table_row(r, short_error=True))
        console.print(t)
        console.print(figures_text(suite_figures(results)), highlight=False)
    # one column per setting, so a sweep reads across
    scored = [(s, scores(results)) for s, results in per_setting]
    t = _table("scores")
    t.add_column("metric", no_wrap=True)
    for s, _ in scored:
        t.add_column(s.label, justify="right", overflow="fold")
    t.add_row("solved", *(f"{sc['solved']}/{sc['problems']}" for _, sc in scored))
    for b in BASELINES:
        for p in scored[0][1]["fast_p"][b]:
            t.add_row(f"fast_{p} vs {b}", *(f"{sc['fast_p'][b][p]:.2f}" for _, sc in scored))
    for kind, what in (("round1", "round-1 samples"), ("all", "all candidates")):
        for k in PASS_K:
            t.add_row(f"pass@{k} {what}", *(_pass(sc["pass_at_k"][kind][str(k)]) for _, sc in scored))
    console.print(t)
    for s, results in per_setting:
        curve = budget_curve(results)
        marks = sorted({b for b in (1, 2, 4, 8, 16, 32, 64, 128) if b <= len(curve)} | {len(curve)})
        console.print(f"budget curve {s.label} (candidates: share solved): "
                      + "  ".join(f"{b}: {curve[b - 1][1]:.0%}" for b in marks), highlight=False)


TABLE_COLUMNS = ("problem", "seed", "seed ×eager", "seed ×compile", "best", "×eager [interval]",
                 "×compile [interval]", "measure", "rounds", "cands", "wall", "why")


def table_row(r: ProblemResult, short_error: bool = False) -> list[str]:
    """One problem's cells, in TABLE_COLUMNS order (the terminal's and results.md's)."""
    why = r.why
    if r.error:
        why = r.error.partition(":")[0] if short_error else r.error
    return [r.problem, r.seed, fmt_speedup(r.seed_speedup_eager), fmt_speedup(r.seed_speedup_compile),
            r.best_verdict, fmt_interval(r.speedup_eager, r.eager_low, r.eager_high),
            fmt_interval(r.speedup_compile, r.compile_low, r.compile_high), r.measure or "—",
            str(r.rounds), str(r.candidates), "—" if r.wall_s is None else f"{r.wall_s:.0f} s", why or ""]


def fmt_interval(x: float | None, low: float | None, high: float | None) -> str:
    """"1.45× [1.40–1.50]"; the speedup alone when it has no interval, "—" when untimed."""
    if x is None:
        return "—"
    if low is None or high is None:
        return fmt_speedup(x)
    return f"{fmt_speedup(x)} [{low:.2f}–{high:.2f}]"


def results_markdown(suite: Path, per_setting: list[tuple[Setting, list[ProblemResult]]]) -> str:
    """results.md: per setting, the per-problem table and the suite figures, in Markdown."""
    lines = [f"# krefine bench: {suite.name}", "",
             "seed: round 0's torch.compile seed alone (no sweep, no model); best: the run's best "
             "correct candidate beyond it (sweep variants, model candidates). Speedups are "
             "baseline time / kernel time, with their 90% interval; why: why the run did not "
             "deliver a correct kernel faster than eager.", ""]
    for s, results in per_setting:
        lines += [f"## {s.label}", "", "| " + " | ".join(TABLE_COLUMNS) + " |",
                  "|" + "|".join("---" for _ in TABLE_COLUMNS) + "|"]
        lines += ["| " + " | ".join(_md_cell(c) for c in table_row(r)) + " |" for r in results]
        lines += ["", figures_markdown(suite_figures(results)), ""]
    return "\n".join(lines)


def figures_markdown(fig: dict) -> str:
    """runstats.suite_figures as a Markdown table (seed | best) and a few lines."""
    n = fig["problems"]
    rows = [("correct", lambda side: f"{side['correct']}/{n} ({side['correct_share']:.0%})")]
    for b, name in (("eager", "eager"), ("compile", "torch.compile")):
        for p in SUITE_FAST:
            rows.append((f"fast_{p:g} vs {name}", lambda side, b=b, p=p: f"{side['fast'][b][f'{p:g}']:.2f}"))
    for b, name in (("eager", "eager"), ("compile", "torch.compile")):
        rows.append((f"geometric mean vs {name} (correct, timed)", lambda side, b=b: _geo(side["geomean"][b])))
    out = ["| | seed | best |", "|---|---|---|"]
    out += [f"| {label} | {cell(fig['seed'])} | {cell(fig['best'])} |" for label, cell in rows]
    out += ["", *(f"- {line}" for line in _figure_lines(fig))]
    return "\n".join(out)


def figures_text(fig: dict) -> str:
    """The suite figures for the terminal: one line each."""
    n = fig["problems"]
    parts = []
    for of in ("seed", "best"):
        side = fig[of]
        fast = ", ".join(f"fast_{p} {b} {v:.2f}" for b in BASELINES for p, v in side["fast"][b].items())
        parts.append(f"{of}: correct {side['correct']}/{n}; {fast}; geomean eager {_geo(side['geomean']['eager'])}, "
                     f"compile {_geo(side['geomean']['compile'])}")
    return "\n".join(parts + _figure_lines(fig))


def _figure_lines(fig: dict) -> list[str]:
    judge, cov = fig["judge_s"], fig["seed_coverage"]
    gain = fig["gain_over_seed"]
    return [
        f"best over seed (what the sweep and the model added): {_geo(gain['eager'])} vs eager, "
        f"{_geo(gain['compile'])} vs torch.compile",
        "judge wall per candidate: " + ("—" if judge["mean"] is None else
                                        f"mean {judge['mean']:.2f} s, median {judge['median']:.2f} s "
                                        f"over {judge['candidates']} candidates"),
        f"GPU time (judge walls on cuda): {fig['gpu_s']:.0f} s; runs' wall: {fig['wall_s']:.0f} s",
        f"seed coverage (correct pure-Triton seeds / all): {cov['correct']}/{cov['problems']}",
    ]


def _geo(g: dict) -> str:
    return "—" if g["value"] is None else f"{fmt_speedup(g['value'])} (n={g['over']})"


def _md_cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _table(title: str) -> Table:
    return Table(title=title, box=None, pad_edge=False, header_style="bold underline")


# ---------------------------------------------------------------- small helpers

def _load_config(path: str | None, overrides: dict, origins: dict | None = None):
    from agent.config import load_config
    return load_config(path, overrides, origins)


def _device(opts: argparse.Namespace, setting: Setting) -> str:
    from agent.runner import resolve_device
    return resolve_device(_load_config(opts.config, setting.overrides).run.device)


def _split(text: str, flag: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip() or not value.strip():
        raise BadInput("", f"krefine bench: {flag} {text!r}: expected TABLE.KEY=VALUE")
    return key.strip(), value.strip()


def _assignment(text: str, flag: str) -> tuple[str, object]:
    key, raw = _split(text, flag)
    return key, _toml_value(raw)


def _toml_value(raw: str):
    """A value as TOML reads it (2, 1.5, true, "x"); a bare word stays a string."""
    try:
        return tomllib.loads(f"v = {raw.strip()}")["v"]
    except tomllib.TOMLDecodeError:
        return raw.strip()


def _label(value) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def _pass(v: dict) -> str:
    return "—" if v["mean"] is None else f"{v['mean']:.2f} (n={v['problems']})"


def _natural(name: str) -> list:
    return [int(t) if t.isdigit() else t.lower() for t in re.split(r"(\d+)", name)]
