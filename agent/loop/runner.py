"""`run_problem()` and `resume_run()`: one run set up and driven (agent/cli/runcmd.py, bench).

Sets a run up and hands it to the graph (agent/loop/graph.py): load the problem, resolve
the device, claim the run directory, load the model backend, create the run (agent/loop/run.py
`Run.create`: run.json), then run the loop from `Run.state()`. `resume` rebuilds the same
pieces from run.json and goes on the same way from what the run directory holds; the
replay backend is moved past the completions the run already consumed. A caller that
shares an evaluator
or a model between runs (krefine bench --ray) passes them in as `Services`.

Exit status (docs/DESIGN.md): 0 solved, 1 budget spent without a solution, 2 bad input
(BadInput, incl. a backend that cannot load), 3 evaluator failure (EvaluatorError).
Does not decide anything about the loop itself.
"""
from __future__ import annotations

import dataclasses
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from agent.config import AgentConfig
from agent.loop.context import LoopContext
from agent.loop.graph import build_graph, finish, make_summary, run_graph
from agent.models.base import BackendUnavailable
from agent.models.llm import NO_MODEL, ReplayBackend, check_spec, make_backend
from agent.loop.progress import Progress, make_progress
from agent.loop.run import Run
from agent.loop.rundir import RunDir
from agent.loop.state import RunState
from tools.errors import BadInput, EvaluatorError, check_writable
from tools.judge import JudgePool
from tools.judge.warm import warm_imports
from tools.problem import load_problem
from tools.settings import SettingsError, build

@dataclass(frozen=True)
class Services:
    """What a run borrows instead of making its own (krefine bench --ray)."""
    judges: Callable[..., Any]       # (problem, device, EvalSettings, Run) -> a pool with JudgePool's interface
    backend: Any = None              # a loaded backend shared by every run; None: load the run's model spec


def run_problem(problem_path: str | Path, config: AgentConfig, out_dir: str | Path | None, *,
                progress: bool = True, services: Services | None = None, model_fallback: bool = False) -> dict:
    """Run the loop on one problem, with the model config.model.id names; returns summary.json's contents.
    `model_fallback`: the model is the default one, nobody named it; when it cannot load, say
    so in one line and run as --model none --seed-kernel inductor (a named model is exit 2)."""
    # 1) the model spec, the problem and the device: bad input fails before anything is written
    check_spec(config.model.id)   # as given: "replay:" with no file names none, not the working directory
    spec = _absolute_spec(config.model.id)
    if spec == NO_MODEL and config.search.seed_kernel != "inductor":
        raise BadInput("--model none", 'a run without a model is the Inductor seed and its constant sweep: it needs '
                                       '[search] seed_kernel = "inductor" (krefine run --seed-kernel inductor; '
                                       'krefine bench --set search.seed_kernel=inductor)')
    if out_dir:   # a path that cannot be a run directory says so before the problem's import
        check_writable(out_dir, "run directory", directory=True)
    if config.search.seed_kernel == "inductor" and config.search.seed_cache:   # else "no Inductor seed", exit 1
        _seed_cache_dir(config.search.seed_cache)
    problem = load_problem(problem_path)
    device = resolve_device(config.run.device)
    if device == "cuda":   # a GPU this machine lacks: krefine eval's one line, exit 2, nothing written
        from tools.sandbox.isolation import device_fault
        if (fault := device_fault(device, 0)) is not None:
            raise BadInput("", fault)
    # 2) the run directory: --out must be new or empty
    rd = RunDir(Path(out_dir) if out_dir else default_run_dir(config.run.out_root, problem.name))
    if not out_dir:   # the default one under [run] out_root: its --out was checked above
        check_writable(rd.root, "run directory", directory=True)
    if rd.root.is_dir() and any(rd.root.iterdir()):
        raise BadInput(rd.root, "run directory exists and is not empty (use `krefine resume` or another --out)")
    # 3) the model: one line and exit 2 when it cannot load, or one line and no model
    shown = make_progress(progress)
    shown.started(problem.name, device, str(rd.root))   # the first line: the device, before a slow load
    try:
        spec, config, backend, fallback = _model_or_none(spec, config, services, model_fallback)
    except BaseException:
        shown.close()
        raise
    run = Run.create(rd, {**({"model_fallback": fallback} if fallback else {}),
                          "problem": {"path": str(Path(problem.path).resolve()), "name": problem.name,
                                      "source": problem.source},
                          "config": dataclasses.asdict(config), "model": spec, "device": device,
                          "created": time.strftime("%Y-%m-%dT%H:%M:%S%z")})
    # 4) the loop
    return _drive(run, problem, config, backend, device, shown, services)


def _model_or_none(spec: str, config: AgentConfig, services: Services | None, model_fallback: bool):
    """(spec, config, backend, fallback): the model loaded, or, when the default model
    cannot load (`model_fallback`), no model, said in one line; fallback {model, why}."""
    try:
        return spec, config, _load_backend(spec, config, skip=0, shared=services.backend if services else None), None
    except BackendUnavailable as e:
        if not model_fallback:
            raise
        print(f"krefine: {spec} cannot be loaded here ({e.why}); going on without a model: the Inductor seed "
              "and its constant sweep, as --model none --seed-kernel inductor (name a model with --model to "
              "make this an error)", file=sys.stderr, flush=True)
        fallback = {"model": spec, "why": e.why}
        config = dataclasses.replace(config, model=dataclasses.replace(config.model, id=NO_MODEL),
                                     search=dataclasses.replace(config.search, seed_kernel="inductor"))
        return NO_MODEL, config, _load_backend(NO_MODEL, config, skip=0), fallback


def resume_run(run_dir: str | Path, *, progress: bool = True, services: Services | None = None,
               budget: dict | None = None) -> dict:
    """Continue an interrupted run from its run directory; a finished one just re-reports,
    unless `budget` ({"budget.max_rounds": 6, ...}) raises the budget that stopped it:
    then it goes on under the new budget, which run.json keeps."""
    rd = RunDir(Path(run_dir))
    if not rd.meta.exists():
        raise BadInput(rd.root, "not a run directory (no run.json)")
    from agent.loop.runstats import load_run
    load_run(rd.root)   # a damaged file is one line naming it, before anything is written
    run = Run(rd)
    meta = run.meta()
    try:
        recorded = (str(meta["problem"]["path"]), meta["problem"]["source"], dict(meta["config"]), meta["model"],
                    meta["device"])
    except (KeyError, TypeError, ValueError):
        raise BadInput(rd.meta, "not a run.json krefine wrote (its problem, config, model or device is missing)") \
            from None
    # 1) the same problem, config, model and device as the interrupted session
    problem = load_problem(recorded[0])
    if problem.source != recorded[1]:
        raise BadInput(problem.path, "problem file changed since the run started; its original "
                                     f"source is in {rd.meta}")
    # the model spec run.json names (absolute, or "none" after a fallback) is the id
    doc = {**recorded[2], "model": {**(recorded[2].get("model") or {}), "id": meta["model"]}}
    try:
        config = build(AgentConfig, doc, f"{rd.meta} config")
    except SettingsError as e:
        raise BadInput(rd.meta, str(e)) from None
    # as run.json is written back (a raised budget): its model spec the id that config names,
    # so the next resume reads the same model
    meta = {**meta, "model": config.model.id, "config": dataclasses.asdict(config)}
    if budget:
        check_writable(rd.root, "krefine resume", directory=True)   # run.json is written back
        config = _raised(run, meta, budget)
    # 2) the replay backend resumes after every completion already recorded
    consumed = len(rd.completion_ids())
    shown = make_progress(progress)
    shown.started(problem.name, meta["device"], str(rd.root))
    try:
        backend = _load_backend(config.model.id, config, skip=consumed, shared=services.backend if services else None)
    except BaseException:
        shown.close()
        raise
    return _drive(run, problem, config, backend, meta["device"], shown, services, reopen=bool(budget))


# what a raised budget can undo (agent/loop/state.py stop_reason), and the key that raises it
_BUDGET_STOPS = ("max_rounds", "token_budget", "time_budget")
_BUDGET_KEYS = {"max_rounds": "max_rounds", "token_budget": "token_budget", "time_budget": "time_budget_s"}


def more_budget_hint(run_dir: str | Path, stop_reason: str | None) -> str | None:
    """For a run its budget stopped, the resume command that gives it more (twice the
    budget it had; one more round at least)."""
    key = _BUDGET_KEYS.get(stop_reason or "")
    if key is None:
        return None
    had = Run(RunDir(Path(run_dir))).meta()["config"]["budget"][key]
    more = max(int(had) + 1, 2 * int(had)) if key != "time_budget_s" else 2 * float(had)
    return (f"the run stopped at its budget ({stop_reason}); to go on: krefine resume {run_dir} "
            f"--set budget.{key}={more:g}")


def _limit(name: str, value) -> float:
    """A [budget] limit as a number to compare (token_budget 0: none); anything else as
    no limit, for build() to refuse by name."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return math.inf
    return math.inf if name == "token_budget" and value == 0 else float(value)


def _raised(run: Run, meta: dict, budget: dict) -> AgentConfig:
    """The run's config with `budget`'s [budget] values, written back to run.json."""
    doc = {**meta["config"], "budget": dict(meta["config"]["budget"])}
    for key, value in budget.items():
        table, _, name = key.partition(".")
        if table != "budget" or not name:
            raise BadInput(f"--set {key}", "only [budget] values (budget.KEY=VALUE) can change when a run resumes")
        had = doc["budget"].get(name)
        if name in _BUDGET_KEYS.values() and _limit(name, value) < _limit(name, had):
            raise BadInput(f"--set {key}", f"a resumed run's budget can only be raised: it was {had:g}, "
                                           f"--set asks {value:g}")
        doc["budget"][name] = value
    try:
        config = build(AgentConfig, doc, "--set")
    except SettingsError as e:
        raise BadInput("--set", str(e).removeprefix("--set.")) from None
    run.write_meta({**meta, "config": dataclasses.asdict(config)})
    return config


def _drive(run: Run, problem, config: AgentConfig, backend, device: str, progress: Progress,
           services: Services | None, reopen: bool = False) -> dict:
    """Run the graph from the run's state (the initial one, or where a resumed run's last
    decide left it) to its end. `reopen`: a raised budget reopens a run that budget stopped."""
    rd = run.rd
    state = run.state(str(problem.path))
    resumed = run.events() != []
    if reopen and state["stop_reason"] in _BUDGET_STOPS:
        state = RunState(state, stop_reason=None)
    latest = {"state": state}   # after the last step: a failed run's summary is made from it
    if not state["stop_reason"]:
        check_writable(rd.root, "the run directory", directory=True)   # a read-only one: one line, exit 2
        run.write_summary(None)   # a failed session's; the run goes on
    if services is None:   # judged here, from the loop's threads: torch's lazy modules first
        warm_imports(device)
    judges = services.judges(problem, device, config.eval, run) if services else \
        JudgePool(problem, device=device, gpu_count=gpu_count(device), settings=config.eval)
    ctx = LoopContext(run=run, problem=problem, config=config, backend=backend, device=device,
                      progress=progress, judges=judges, wall_offset_s=state["spent"]["wall_s"])
    if resumed:
        progress.resumed(run.view(state), judged=rd.judged(), written=rd.written())
    try:
        state = run_graph(build_graph(), ctx, state, on_step=lambda s: latest.update(state=s))
        if state["stop_reason"] and not rd.summary.exists():   # stopped, but cut off before its summary
            finish(ctx, state)
    except EvaluatorError:
        progress.close()
        run.write_summary(make_summary(run, dict(latest["state"], stop_reason="evaluator_error"), device == "cuda"))
        raise
    except KeyboardInterrupt:
        progress.close()
        print(f"krefine: run interrupted; continue it with: krefine resume {rd.root}", file=sys.stderr)
        raise
    except BackendUnavailable as e:   # the model went away mid-run (a server that died): one line, kept
        progress.close()
        e.args = (f"{e.path}: {e.why}; what was done is kept: when the model is back, krefine resume {rd.root}",)
        raise
    except BaseException:
        progress.close()
        raise
    finally:
        judges.close()
    summary = {"schema": 1, **make_summary(run, state, device == "cuda")}   # as decide wrote it
    progress.finished(summary, str(rd.root))
    return summary


def _load_backend(spec: str, config: AgentConfig, *, skip: int, shared: Any = None) -> Any:
    """The model backend; BackendUnavailable (a BadInput: one line, exit 2) when it cannot serve.
    A `shared` backend (model actors serving every run of a bench) is used as it is."""
    if shared is not None:
        return shared
    backend = make_backend(spec, config)
    load = getattr(backend, "load", None)
    if load is not None:
        load()  # weights or server now, so a backend that cannot serve fails before the run starts
    if skip and isinstance(backend, ReplayBackend):
        backend.seek(skip)  # the completions already recorded are not handed out again
    return backend


def _seed_cache_dir(path: str) -> None:
    """Make [search] seed_cache (a directory of seeds) now, or BadInput naming the setting."""
    cache = Path(path).expanduser()
    try:
        cache.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise BadInput(cache, f"[search] seed_cache cannot be made: {e.strerror or e}") from None
    check_writable(cache, "[search] seed_cache", directory=True)


def _absolute_spec(spec: str) -> str:
    """replay:FILE with FILE made absolute, so `resume` works from any directory."""
    if spec.startswith("replay:"):
        return "replay:" + str(Path(spec[len("replay:"):]).resolve())
    return spec


def resolve_device(wanted: str | None) -> str:
    """The device a run judges on: `wanted`, else cuda when one is visible."""
    if wanted:
        return wanted
    import torch
    return "cuda" if torch.cuda.is_available() else "cpu"


def gpu_count(device: str) -> int:
    """The GPUs a run's judges spread over: every visible one (runs of one process share
    them through tools/judge/gpulock.py, per device), one on cpu."""
    if device != "cuda":
        return 1
    import torch
    return max(1, torch.cuda.device_count())


def default_run_dir(out_root: str, problem_name: str) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    path = Path(out_root) / f"{stamp}-{problem_name}"
    n = 1
    while path.exists():  # two runs started in the same second
        n += 1
        path = Path(out_root) / f"{stamp}-{problem_name}-{n}"
    return path
