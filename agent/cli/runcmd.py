"""`krefine run PROBLEM` and `krefine resume RUN_DIR`: the flags made into a config, then
agent/loop/runner.py's `run_problem` / `resume_run`; exit 0 solved, 1 not."""
from __future__ import annotations

from agent.cli import RUN_FLAGS, flag_overrides
from agent.config import DEFAULT_MODEL_ID, load_config, parse_assignment
from tools.errors import EXIT_FAIL, EXIT_OK
from tools.problem import read_problem


def main(args) -> int:
    if args.command == "run":   # a file that is not Python says so before torch is imported (seconds)
        read_problem(args.problem)
    if args.command == "resume":
        budget = dict(parse_assignment(a, "--set") for a in args.sets)
        summary = resume_run(args.run_dir, budget=budget)
        if not budget and (hint := more_budget_hint(args.run_dir, summary["stop_reason"])):
            print(hint, flush=True)
    else:
        overrides, origins = flag_overrides(args, RUN_FLAGS)
        if overrides.get("model.id") == "none" and overrides.get("search.seed_kernel") is None:
            # a run without a model has one thing to do: the Inductor seed and its sweep
            overrides["search.seed_kernel"], origins["search.seed_kernel"] = "inductor", "--model none"
        config = load_config(args.config, overrides, origins)   # --model is [model] id
        # the default model, named by nobody: when it cannot load, the run goes on without one
        named = overrides.get("model.id") is not None or config.model.id != DEFAULT_MODEL_ID
        summary = run_problem(args.problem, config, args.out, model_fallback=not named)
    return EXIT_OK if summary["solved"] else EXIT_FAIL


# agent/loop/runner.py imports torch: imported only once the problem file has parsed
def run_problem(*args, **kwargs) -> dict:
    from agent.loop import runner
    return runner.run_problem(*args, **kwargs)


def resume_run(*args, **kwargs) -> dict:
    from agent.loop import runner
    return runner.resume_run(*args, **kwargs)


def more_budget_hint(*args) -> str | None:
    from agent.loop import runner
    return runner.more_budget_hint(*args)
