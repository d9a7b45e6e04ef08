"""One problem of a bench: its setting and run directory (`Setting`, `Job`), running or
resuming it (`run_job`: the reason it could not run, or None), its line when done
(`say_done`) and its result read back (`collect`). Shared by the bench's GPU workers
(agent/bench/workers.py) and its Ray driver (agent/bench/ray_bench.py), which import this and not each
other.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console

from agent.bench.stats import ProblemResult, problem_result
from agent.config import load_config
from agent.loop.rundir import RunDir
from agent.loop.runstats import fmt_speedup, load_run
from tools.errors import BadInput, EvaluatorError


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


def say_done(console: Console, i: int, total: int, job: Job, error: str | None) -> None:
    """One line per finished problem, however long its reason (the terminal wraps it)."""
    console.print(f"[{i}/{total}] {job.setting.label} {job.name}: {error or outcome(job.run_dir)}",
                  highlight=False, markup=False, soft_wrap=True)


def run_job(job: Job, config_path: str | None, model: str | None, *, progress: bool,
            services=None, dead: dict[str, str] | None = None) -> str | None:
    """Run (or resume) one problem; None when it ran, else a one-line reason. `services`
    (agent.loop.runner.Services) are the shared judges and model of a bench on Ray. `dead`
    (server URL -> the problem where it refused the connection) spares the rest of the
    bench asking a model server that is down again: once per server, not per problem."""
    from agent.models.llm import ServerUnreachable, server_url
    from agent.loop.runner import resume_run, run_problem
    shared = {"services": services} if services is not None else {}
    try:
        # --model is [model] id, "{problem}" filled in per problem
        config = load_config(config_path, {**job.setting.overrides,
                                           **({"model.id": model.replace("{problem}", job.name)} if model else {})})
        server = server_url(config.model.id)
        if dead is not None and server in dead:
            return f"{BAD_INPUT}: the model server {server} refused the connection ({dead[server]}); not asked again"
        if RunDir(job.run_dir).meta.exists():
            resume_run(job.run_dir, progress=progress, **shared)
        else:
            clear_skeleton(job.run_dir)
            run_problem(job.problem, config, job.run_dir, progress=progress, **shared)
        return None
    except (BadInput, EvaluatorError) as e:
        if isinstance(e, ServerUnreachable) and dead is not None:
            dead.setdefault(e.server, f"for {job.name}")
        return f"{BAD_INPUT if isinstance(e, BadInput) else 'evaluator failed'}: {' '.join(str(e).split())}"
    except Exception as e:  # a bug in the loop must not stop the other problems; it is reported
        return f"internal error: {type(e).__name__}: {' '.join(str(e).split())}"


BAD_INPUT = "bad input"   # how run_job's reasons start when the fault is the input's (exit_status)


def outcome(run_dir: Path) -> str:
    run = load_run(run_dir)
    r = problem_result(run)
    if not r.solved:
        return f"not solved ({r.stop_reason}, {r.candidates} candidates)" + (f": {r.why}" if r.why else short_of_target(run))
    timed = r.speedup_eager is not None or r.speedup_compile is not None
    return (f"solved by {r.best} after {r.candidates} candidates, " +
            (f"{fmt_speedup(r.speedup_eager)} eager / {fmt_speedup(r.speedup_compile)} compile" if timed else "not timed (cpu)"))


def short_of_target(run) -> str:
    """Why a correct kernel faster than eager is still 'not solved': the loop's target (budget.target_speedup
    against budget.target_baseline, cleared by the low end of the speedup's interval: agent/loop/state.py's
    target_met). "" when nothing is known to say."""
    budget = (run.meta.get("config") or {}).get("budget") or {}
    target, base = budget.get("target_speedup"), budget.get("target_baseline", "eager")
    best = run.candidates.get(run.best_id) if run.best_id else None
    x = best.speedup.get(base) if best is not None and best.correct else None
    if target is None or x is None:
        return ""
    low = (best.interval.get(base) or {}).get("low")
    return (f": {x:.2f}x {base}, short of the {target:g}x target" +
            (f" (the low end of its interval, {low:.2f}x, must clear it)" if low is not None else ""))


def clear_skeleton(run_dir: Path) -> None:
    """Remove a run dir that a kill left before run.json: only empty folders, nothing lost."""
    if run_dir.is_dir() and not any(p.is_file() for p in run_dir.rglob("*")):
        for sub in sorted(run_dir.rglob("*"), reverse=True):
            sub.rmdir()
        run_dir.rmdir()


def collect(job: Job, error: str | None) -> ProblemResult:
    rd = RunDir(job.run_dir)
    if rd.summary.exists() or rd.meta.exists():
        r = problem_result(load_run(job.run_dir), job.name)
        return dataclasses.replace(r, error=error) if error else r
    return ProblemResult.failed(job.name, str(job.run_dir), error or "not run")
