"""The refinement loop as a langgraph StateGraph, as docs/DESIGN.md draws it:

  seed → judge → decide → generate → judge → decide → ... (and sweep → judge → decide)
  judge = compile → test → profile, per candidate (agent/loop/judging.py's subgraph)

All wiring lives here. Nodes are plain functions returning partial state updates; the
state (agent/loop/state.py RunState) is ids and routing only; what happened goes to the
run (agent/loop/run.py `Run`, the run directory's one reader and writer), which the
nodes read back. A fresh run and a resumed one start alike: from `Run.state()`, the
state of the run's last decide (nothing, for a fresh run), where that decide routed
(`route_start`); a node that runs again after a kill reuses what the run recorded (a
seed, a completion, a sweep's variants, a verdict) and the Run writes nothing twice.

  seed       ([search] seed_kernel = "inductor") the Inductor seed portfolio, as round 0
  generate   one round of the model's candidates (completions of this round recorded
             before a kill are reused, not sampled again)
  sweep      launch-constant variants of decide's `sweep_next` (agent/search/sweep.py)
  judge      each candidate's compile → test → profile (agent/loop/judging.py)
  decide     best so far, budget, stop or loop; the summary when the run stops

With no model (`--model none`) the run is the seed and its sweeps, and stops with
"no_model". Does not choose parents or stop reasons (agent/loop/state.py), load models
or problems (agent/loop/runner.py), or run candidate code (tools/judge/ does).
"""
from __future__ import annotations

import time
from typing import Any, Callable, Literal

from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langgraph.types import Send

from agent.loop.context import LoopContext
from agent.loop.judging import build_judge_graph, ensure_profiled
from agent.loop.progress import counting
from agent.loop.prompting import lineage, render_initial, render_refine, search_facts
from agent.loop.extract import extract_candidate
from agent.loop.rundir import candidate_id
from agent.loop.runstats import judged_counts
from agent.loop.state import (ORIGIN_MODEL, ORIGIN_SEED, ORIGIN_SWEEP, SWEEP_GOES_ON, RunState, Spent,
                              assign_slots, best_candidate, by_model, choose_parents, stop_reason, sweep_parent)
from agent.loop.sweep_plan import plan_sweep, prescreened
from agent.models.llm import ReplayExhausted

__all__ = ["LoopContext", "build_graph", "run_graph", "make_summary", "finish"]


# ---------------------------------------------------------------- seed (round 0)

def seed(state: RunState, runtime: Runtime[LoopContext]) -> dict:
    """[search] seed_kernel = "inductor": torch.compile's Triton for the problem, in KernelBook
    format, as round 0: the seed portfolio (tools/dialect/portfolio.py: each Inductor
    configuration and its dots at tf32x3, on cuda its convolutions at TF32 too, an entry
    left out under [eval] precision "strict"; [search] seed_portfolio = false keeps the first
    alone), r00-c00 being the seed a run always had. Judged like any other and parents
    like any other, but not the model's: never the run's best, never counted in its
    figures. No seed at all is traced (status seed_failed) and round 1 starts."""
    ctx = runtime.context
    run, search = ctx.run, ctx.config.search
    if search.seed_kernel != "inductor":
        return {"pending": []}
    seeds = [c for c, r in run.candidates().items() if r["origin"] == ORIGIN_SEED]
    if not seeds and run.seed_failure() is None:   # else: made by a session before a kill
        t0 = time.monotonic()
        try:
            from tools.dialect.seedcache import in_cache
            command = "portfolio" if search.seed_portfolio else "seed"   # the seed alone: no other compile
            ctx.progress.seeding(candidate_id(0, 0), search.seed_timeout_s, cached=ctx.make_seed is None and in_cache(
                command, ctx.problem.path, ctx.device, search.seed_timeout_s, search.seed_cache,
                ctx.config.eval.test.module_mode,
                {"templates_s": search.templates_timeout_s} if search.seed_portfolio else None))
            make = ctx.make_seed or _inductor_seed(search.seed_timeout_s, search.seed_cache,
                                                   ctx.config.eval.test.module_mode, search.seed_portfolio,
                                                   search.templates_timeout_s)
            made = make(ctx.problem, ctx.device)
            entries = ([("seed", made)] if isinstance(made, str) else made)[:None if search.seed_portfolio else 1]
            if ctx.config.eval.test.precision == "strict":   # TF32 convolutions cannot pass exact fp32
                from tools.dialect.portfolio import CONV_TF32
                entries = [e for e in entries if not e[0].endswith(f"+{CONV_TF32}")]
            if not entries:
                raise ValueError("no Inductor configuration gave a kernel")
        except ValueError as e:
            run.seed_failed(f"no Inductor seed: {e}", time.monotonic() - t0)
            entries = []
        waited = time.monotonic() - t0
        compiled = None
        if entries and ctx.make_seed is None:   # a portfolio made before (krefine bench): its compile time
            from tools.dialect.seedcache import compile_seconds
            compiled = compile_seconds(ctx.problem.path, ctx.device, search.seed_cache,
                                       ctx.config.eval.test.module_mode, command)
        for i, (label, code) in enumerate(entries):
            run.generated(candidate_id(0, i), parent=None, origin=ORIGIN_SEED, code=code,
                          duration_s=waited if i == 0 else 0.0,
                          change=f"Inductor {label}" if label != "seed" else None,
                          seed_s=max(waited, compiled or 0.0) if i == 0 else None)
        seeds = [candidate_id(0, i) for i in range(len(entries))]
    for cid in seeds:
        ctx.progress.generated(run.record(cid))
    return {"pending": seeds}


def _inductor_seed(timeout_s: float, cache_dir: str = "", module_mode: str = "train",
                   portfolio: bool = True, templates_s: float = 0.0) -> Callable[[Any, str], list]:
    """The seed portfolio's entries, or (`portfolio` False: [search] seed_portfolio) the
    seed alone, `seed_candidate`'s, whose compile makes no other configuration."""
    def make(problem, device: str) -> list[tuple[str, str]]:   # the forward the judge runs: [eval] module_mode
        from tools.dialect import portfolio_in_subprocess, seed_in_subprocess
        if not portfolio:
            return [("seed", seed_in_subprocess(problem.path, device, timeout_s, cache_dir or None,
                                                module_mode=module_mode))]
        entries = portfolio_in_subprocess(problem.path, device, timeout_s, cache_dir or None, module_mode=module_mode,
                                          templates_s=templates_s)
        return [(e.label, e.code) for e in entries if e.code is not None]
    return make


# ---------------------------------------------------------------- generate

def generate(state: RunState, runtime: Runtime[LoopContext]) -> dict:
    """Prompt the model for one round of candidates and record them."""
    ctx = runtime.context
    cfg, run = ctx.config, ctx.run
    round_ = state["round"] + 1
    # as of the last decide: what a killed session recorded of this round is taken up below
    records = {c: r for c, r in run.candidates().items() if r["round"] < round_}
    # 1) parents: the original module in round 1, then per the search strategy
    parents = choose_parents(list(records.values()), strategy=cfg.search.strategy,
                             beam_width=cfg.search.beam_width, repair_failed=cfg.search.repair_failed,
                             baseline=cfg.budget.target_baseline)
    new: list[str] = []
    exhausted = run.replay_exhausted()
    index = 0
    for parent, count in assign_slots(parents, cfg.budget.candidates_per_round):
        ids = [candidate_id(round_, index + i) for i in range(count)]
        index += count
        if parent is not None:
            ensure_profiled(ctx, parent)   # its feedback is about to be used
        prompt = _prompt(ctx, parent, records)
        # 2) completions of this round recorded before a kill (a prefix of it) are not sampled again
        recorded = 0
        while recorded < count and run.completion(ids[recorded]) is not None:
            recorded += 1
        fresh, call_s = [], 0.0
        if recorded < count and not exhausted:
            t0 = time.monotonic()
            try:
                fresh = ctx.backend.generate(prompt, count - recorded, cfg.sampling, **counting(
                    ctx.backend, ctx.progress, round_, count - recorded, cfg.sampling.max_new_tokens, ctx.device))
            except ReplayExhausted:
                exhausted = True
                run.note_replay_exhausted(round_)
            call_s = (time.monotonic() - t0) / max(1, len(fresh))
        # 3) every completion becomes a candidate, code or not: no code is feedback too
        for cid, c in zip(ids[recorded:], fresh):
            run.generated(cid, parent=parent, origin=ORIGIN_MODEL, code=extract_candidate(c.text), duration_s=call_s,
                          prompt=prompt, completion=c.text, tokens=(int(c.prompt_tokens or 0), int(c.completion_tokens or 0)),
                          model=c.model, finish_reason=c.finish_reason)
        for cid in ids[:recorded + len(fresh)]:
            ctx.progress.generated(run.record(cid))
            new.append(cid)
    tokens = sum(r["tokens"]["prompt"] + r["tokens"]["completion"] for r in map(run.record, new))
    spent = dict(state["spent"], tokens=state["spent"]["tokens"] + tokens,
                 rounds=state["spent"]["rounds"] + (1 if new else 0))
    return {"round": round_ if new else state["round"], "pending": new, "spent": spent}


def _prompt(ctx: LoopContext, parent: str | None, records: dict) -> str:
    if parent is None:
        return render_initial(ctx.problem.source)
    run = ctx.run
    source, verdict = run.source(parent) or "", run.verdict(parent)
    return render_refine(ctx.problem.source, source, verdict, ctx.config.prompt, ctx.backend.count_tokens,
                         facts=search_facts(source, verdict, lineage(records, parent)))


# ---------------------------------------------------------------- sweep

def sweep(state: RunState, runtime: Runtime[LoopContext]) -> dict:
    """Record the launch-constant variants of decide's `sweep_next` as candidates of the
    current round (origin "sweep", parent the swept one, ids after the round's last) for
    the judge. No model call: the variants follow from the parent's source and the run
    alone, so a session killed mid-sweep gets the same ids and sources again."""
    ctx = runtime.context
    run = ctx.run
    parent, round_ = state["sweep_next"], state["round"]
    # as of the last decide: variants of `parent` a killed session recorded are made again, alike
    records = {c: r for c, r in run.candidates().items() if not (r["origin"] == ORIGIN_SWEEP and r["parent"] == parent)}
    first = 1 + max((r["index"] for r in records.values() if r["round"] == round_), default=-1)
    new = []
    for i, variant in enumerate(plan_sweep(ctx, dict(state, candidates=records), parent)):
        cid = candidate_id(round_, first + i)
        ctx.progress.generated(run.generated(cid, parent=parent, origin=ORIGIN_SWEEP, code=variant.source,
                                             change=variant.change))
        new.append(cid)
    return {"pending": new, "sweep_next": None}


def next_sweep(ctx: LoopContext, state: RunState, reason: str | None, records: dict) -> str | None:
    """The candidate to sweep before the run goes on or stops, or None.

    Only where the run would go on, or stop for the model's side alone (rounds, tokens,
    replay, no model); never past the target, the roofline or the time budget. Untimed
    (cpu) there is no speed to climb: a run with a model does not sweep, a `--model none`
    run sweeps its first correct candidate once, so its variants are judged for
    correctness in the interpreter.
    """
    if ctx.config.search.sweep_variants == 0 or reason not in (None, *SWEEP_GOES_ON):
        return None
    if not ctx.timed and ctx.has_model:
        return None
    parent = sweep_parent(list(records.values()), ctx.run.swept(), ctx.config.budget.target_baseline)
    return parent if parent is not None and plan_sweep(ctx, dict(state, candidates=records), parent,
                                                       screen=False) else None


# ---------------------------------------------------------------- decide

def decide(state: RunState, runtime: Runtime[LoopContext]) -> dict:
    """Keep the best correct candidate, then stop (and write the summary) or loop."""
    ctx = runtime.context
    cfg, run = ctx.config, ctx.run
    t0 = time.monotonic()
    records = run.candidates()
    baseline = cfg.budget.target_baseline
    # 1) best so far
    best = best_candidate(list(records.values()), baseline)
    # 2) budget spent
    judged = sum(1 for r in records.values() if r["status"] != "pending" and by_model(r))
    swept = sum(1 for r in records.values() if r["status"] != "pending" and r.get("origin") == ORIGIN_SWEEP)
    spent = Spent(rounds=state["spent"]["rounds"], candidates=judged, sweep=swept, prescreen=prescreened(run),
                  tokens=state["spent"]["tokens"], wall_s=round(ctx.wall_s(), 3))
    # 3) stop or loop
    b = cfg.budget
    view = dict(state, spent=spent, candidates=records, replay_exhausted=run.replay_exhausted())
    reason = stop_reason(view, best=records.get(best) if best else None,
                         baseline=baseline, target_speedup=b.target_speedup, timed=ctx.timed,
                         max_rounds=b.max_rounds, token_budget=b.token_budget,
                         time_budget_s=b.time_budget_s, roofline_stop_fraction=b.roofline_stop_fraction,
                         has_model=ctx.has_model)
    # 4) ... but first the sweep, where it may go on
    sweep_next = next_sweep(ctx, dict(state, spent=spent), reason, records)
    if sweep_next is not None:
        reason = None
    update = {"best": best, "spent": spent, "pending": [], "stop_reason": reason, "sweep_next": sweep_next,
              "decided": True}
    run.decided(state["round"], best, reason or ("sweep" if sweep_next else "continue"),
                duration_s=time.monotonic() - t0,
                metrics={"best_speedup": records[best]["speedup"] if best else None,
                         "spent": dict(spent), **({"sweep": sweep_next} if sweep_next else {})})
    if reason is not None:
        finish(ctx, dict(state, **update))
    ctx.progress.decided(run.view(dict(state, **update)))
    return update


def finish(ctx: LoopContext, state: RunState) -> None:
    """A stopped run's last step, after its decide event: the final best's bottleneck summary
    (whatever the profile policy), then summary.json. `krefine resume` repeats it for a run
    cut off between the two (Ctrl-C or a bench's time limit during that last profile)."""
    if state["best"] is not None:
        ensure_profiled(ctx, state["best"])
    ctx.run.write_summary(make_summary(ctx.run, state, ctx.timed))


def make_summary(run, state: RunState, timed: bool) -> dict:
    """summary.json's body (Run.write_summary adds the schema)."""
    records = run.candidates()
    best = records.get(state["best"]) if state["best"] else None
    seeded = records.get(candidate_id(0, 0))   # round 0: the Inductor seed, if any
    failed = None if seeded else run.seed_failure()
    return {"stop_reason": state["stop_reason"], "solved": state["stop_reason"] == "target_reached",
            "best": {"candidate": best["id"], "speedup": dict(best["speedup"])} if best else None,
            "candidates_evaluated": state["spent"]["candidates"], "rounds": state["spent"]["rounds"],
            "judged": judged_counts((c.get("origin"), c["status"]) for c in records.values()),
            "budget_spent": dict(state["spent"]), "timed": timed,
            "seed": {"candidate": seeded["id"], "status": seeded["status"], "speedup": dict(seeded["speedup"]),
                     "seconds": seed_seconds(run)}
            if seeded else ({"candidate": None, "status": "seed_failed", "error": failed, "seconds": seed_seconds(run)}
                            if failed else None)}


def seed_seconds(run) -> float | None:
    """What round 0's seed cost: its portfolio's compile (where the seed cache recorded it)
    or the run's wait for it; for no seed, the time until that was known."""
    made = run.generate_event(candidate_id(0, 0))
    if made is not None:
        return (made.get("metrics") or {}).get("seed_s", made.get("duration_s"))
    failed = [e for e in run.events(None) if (e["node"], e["status"]) == ("generate", "seed_failed")]
    return failed[-1].get("duration_s") if failed else None


# ---------------------------------------------------------------- routers and wiring

def route_start(state: RunState) -> Literal["seed", "generate", "sweep"]:
    """A new run starts at the seed; a resumed one (Run.state: the state of its last
    decide) where that decide routed. Before any decide, the seed: it and generate reuse
    what a killed session recorded."""
    if state.get("sweep_next"):
        return "sweep"
    return "generate" if state["decided"] else "seed"


def route_seeded(state: RunState, runtime: Runtime[LoopContext]) -> list[Send] | Literal["generate", "decide"]:
    """The seeds to judge (then decide), or straight on to round 1 without one (to
    decide, which stops the run, where there is no model)."""
    if not state["pending"]:
        return "generate" if runtime.context.has_model else "decide"
    return route_generated(state)


def route_generated(state: RunState) -> list[Send] | Literal["decide"]:
    """Fan the round's (or the sweep's) candidates out to the judge; straight to decide
    when there are none."""
    if not state["pending"]:
        return "decide"
    return [Send("judge", {"candidate": cid}) for cid in state["pending"]]


def route_decided(state: RunState) -> Literal["generate", "sweep", "__end__"]:
    if state.get("sweep_next"):
        return "sweep"
    return END if state["stop_reason"] else "generate"


def build_graph() -> Any:
    """The loop, compiled once per run."""
    builder = StateGraph(RunState, context_schema=LoopContext)
    builder.add_node("seed", seed)
    builder.add_node("generate", generate)
    builder.add_node("sweep", sweep)
    builder.add_node("judge", build_judge_graph())
    builder.add_node("decide", decide)
    builder.add_conditional_edges(START, route_start, ["seed", "generate", "sweep"])
    builder.add_conditional_edges("seed", route_seeded, ["judge", "generate", "decide"])
    builder.add_conditional_edges("generate", route_generated, ["judge", "decide"])
    builder.add_conditional_edges("sweep", route_generated, ["judge", "decide"])
    builder.add_edge("judge", "decide")
    builder.add_conditional_edges("decide", route_decided, ["generate", "sweep", END])
    return builder.compile(name="krefine")


def run_graph(graph, ctx: LoopContext, state: RunState,
              on_step: Callable[[RunState], None] | None = None) -> RunState:
    """Run from `state` (Run.state()) to the end. A stopped run's state comes back as it
    is. `on_step` sees the state after every step (what a failed run's summary is written from)."""
    if state["stop_reason"]:
        return state
    config = {"max_concurrency": ctx.concurrency, "recursion_limit": 10_000}
    try:
        for state in graph.stream(state, config, context=ctx, stream_mode="values"):
            if on_step is not None:
                on_step(state)
    finally:
        for judgement in list(ctx.judgements.values()):   # a failed step's, or one a Ctrl-C left
            judgement.close()
        ctx.judgements.clear()
    return state
