"""The refinement loop as a langgraph StateGraph: generate → evaluate (fan-out) → decide,
with the constant sweep → evaluate → decide between rounds.

All wiring lives in this file. Nodes are plain functions returning partial state
updates; routers return `Literal[...]` (or the round's `Send`s); the graph is compiled
once per run. Every artifact is written through agent/loop/rundir.py, the run's one truth:
`krefine resume` rebuilds the state of the last decide from it (agent/loop/resume.py) and
starts where that decide routed (`route_start`); each node is idempotent on disk, so
whatever a kill interrupted after that decide is taken up without losing or re-judging
a candidate (langgraph's SQLite checkpoint is only a cache, never read back):

  seed       ([search] seed_kernel = "inductor") reuses candidates/r00-c00.py, or a recorded failure
  generate   reuses the completions of this round's ids already traced (completions/<id>.txt)
  sweep      re-derives the same variants from the same state; reuses their files and events
  evaluate   reuses evals/<id>.json when it exists
  decide     only rewrites best.py / summary.json from state

The sweep ([search] sweep_variants, agent/loop/sweep.py) runs when decide finds the fastest
correct candidate (the seed included) not yet swept: its launch-constant variants become
candidates of the current round (ids after the round's last, origin "sweep"), judged by
the same evaluate node; the model's rounds go on after. With no model (`--model none`)
the run is the seed and its sweeps, and stops with "no_model".

The evaluate node is agent/loop/judging.py's, the run-scoped context (`LoopContext`)
agent/loop/context.py's. Does not choose parents or stop reasons (agent/loop/state.py), load
models or problems (agent/loop/runner.py), or run candidate code (tools/judge/ does).
"""
from __future__ import annotations

import time
from typing import Any, Callable, Literal

from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langgraph.types import Send

from agent.loop.context import GpuPool, LoopContext
from agent.loop.judging import ensure_profiled, evaluate
from agent.loop.progress import counting
from agent.loop.prompting import lineage, search_facts
from agent.loop.resume import state_from_rundir
from agent.loop.rundir import candidate_id, parse_candidate_id
from agent.loop.runstats import judged_counts
from agent.loop.state import (ORIGIN_MODEL, ORIGIN_SEED, ORIGIN_SWEEP, SWEEP_GOES_ON, CandidateRecord, EvalTask,
                         RunState, Spent, assign_slots, best_candidate, bottleneck_label, by_model, choose_parents,
                         new_record, stop_reason, sweep_parent)
from agent.loop.sweep import Variant
from agent.loop.sweep_plan import plan_sweep, prescreened

__all__ = ["GpuPool", "LoopContext", "build_graph", "run_graph", "make_summary"]


# ---------------------------------------------------------------- seed (round 0)

def seed(state: RunState, runtime: Runtime[LoopContext]) -> dict:
    """[search] seed_kernel = "inductor": torch.compile's Triton for the problem, in KernelBook
    format, as round 0: the seed portfolio (tools/dialect/portfolio.py: each Inductor
    configuration and its dots at tf32x3; [search] seed_portfolio = false keeps the first
    alone), r00-c00 being the seed a run always had. Judged like any other and parents
    like any other, but not the model's: never the run's best, never counted in its
    figures. No seed at all is traced (status seed_failed) and round 1 starts."""
    ctx = runtime.context
    rd = ctx.rundir
    if ctx.config.search.seed_kernel != "inductor" or any(r["round"] == 0 for r in state["candidates"].values()):
        return {"pending": []}
    # 1) idempotent: seeds written, or a failure traced, by a killed session are kept
    traced = _seed_events(rd, with_failure=True)
    t0 = time.monotonic()
    error, entries = None, []
    left = [] if traced else [("seed", rd.source(c)) for c in sorted(rd.written()) if c.startswith("r00-")]
    if left:                        # written by a killed session before it traced them: kept
        entries = left
    elif not traced:
        try:
            search = ctx.config.search
            ctx.progress.seeding(candidate_id(0, 0), search.seed_timeout_s)
            make = ctx.make_seed or _inductor_seed(search.seed_timeout_s, search.seed_cache,
                                                   ctx.config.eval.test.module_mode)
            made = make(ctx.problem, ctx.device)
            entries = [("seed", made)] if isinstance(made, str) else made
            entries = entries if search.seed_portfolio else entries[:1]
        except ValueError as e:
            error = f"no Inductor seed: {e}"
    if not traced:
        for i, (label, code) in enumerate(entries):
            cid = candidate_id(0, i)
            rd.write_source(cid, code)
            rd.append_event(iteration=0, candidate=cid, node="generate", status="ok",
                            duration_s=time.monotonic() - t0 if i == 0 else 0.0,
                            metrics={"origin": ORIGIN_SEED, "parent": None, "prompt_tokens": 0,
                                     "completion_tokens": 0, **({"change": f"Inductor {label}"} if label != "seed" else {})},
                            artifacts={"candidate": rd.candidate_src(cid)})
        if not entries:
            rd.append_event(iteration=0, candidate=None, node="generate", status="seed_failed",
                            duration_s=time.monotonic() - t0, error=error,
                            metrics={"origin": ORIGIN_SEED, "parent": None, "prompt_tokens": 0, "completion_tokens": 0})
        traced = _seed_events(rd)
    # 2) the candidates, as their generate events say
    records = {}
    for e in sorted((e for e in traced if e["candidate"] and e["status"] == "ok"), key=lambda e: e["candidate"]):
        cid = e["candidate"]
        records[cid] = new_record(cid, 0, parse_candidate_id(cid)[1], parent=None, origin=ORIGIN_SEED,
                                  change=(e.get("metrics") or {}).get("change"))
        ctx.progress.generated(records[cid])
    return {"candidates": records, "pending": list(records)} if records else {"pending": []}


def _seed_events(rd, with_failure: bool = False) -> list[dict]:
    """Round 0's generate events: each seed written (and a seed failure, if asked)."""
    events = [e for c in sorted(rd.written()) if c.startswith("r00-") for e in rd.events_of(c)]
    events += rd.events_of(None) if with_failure else []
    return [e for e in events if e["node"] == "generate" and e["iteration"] == 0]


def _inductor_seed(timeout_s: float, cache_dir: str = "", module_mode: str = "train") -> Callable[[Any, str], list]:
    def make(problem, device: str) -> list[tuple[str, str]]:   # the forward the judge runs: [eval] module_mode
        from tools.dialect import portfolio_in_subprocess
        entries = portfolio_in_subprocess(problem.path, device, timeout_s, cache_dir or None, module_mode=module_mode)
        return [(e.label, e.code) for e in entries if e.code is not None]
    return make


# ---------------------------------------------------------------- generate

def generate(state: RunState, runtime: Runtime[LoopContext]) -> dict:
    """Prompt the model for one round of candidates and write their artifacts."""
    ctx = runtime.context
    cfg, rd = ctx.config, ctx.rundir
    round_ = state["round"] + 1
    # 1) parents: the original module in round 1, then per the search strategy
    parents = choose_parents(list(state["candidates"].values()), strategy=cfg.search.strategy,
                             beam_width=cfg.search.beam_width, repair_failed=cfg.search.repair_failed,
                             baseline=cfg.budget.target_baseline)
    slots = assign_slots(parents, cfg.budget.candidates_per_round)
    # 2) completions this round already recorded before a kill are reused, not re-sampled
    new: dict[str, CandidateRecord] = {}
    refreshed: dict[str, CandidateRecord] = {}   # parents that got their summary just now
    exhausted = False
    index = 0
    for parent, count in slots:
        ids = [candidate_id(round_, index + i) for i in range(count)]
        index += count
        if parent is not None:
            profiled = ensure_profiled(ctx, parent)   # its feedback is about to be used
            if profiled is not None and parent in state["candidates"]:
                refreshed[parent] = dict(state["candidates"][parent],
                                         bottleneck=bottleneck_label(profiled.bottleneck),
                                         roofline_fraction=(profiled.bottleneck or {}).get("roofline_fraction"))
        prompt = _prompt(ctx, parent, state["candidates"])
        reused = []
        for cid in ids:  # a kill mid-round leaves a prefix of the round recorded
            got = rd.completion_record(cid)
            if got is None:
                break
            reused.append(got)
        fresh: list = []
        call_s = 0.0
        if len(reused) < count and not exhausted:
            t0 = time.monotonic()
            try:
                fresh = ctx.backend.generate(prompt, count - len(reused), cfg.sampling, **counting(
                    ctx.backend, ctx.progress, round_, count - len(reused), cfg.sampling.max_new_tokens, ctx.device))
            except ctx.replay_exhausted_error:
                exhausted = True
            call_s = time.monotonic() - t0
        # 3) every completion becomes a candidate, code or not: no code is feedback too
        for i, (cid, got) in enumerate(zip(ids, reused + [_completion_record(c) for c in fresh])):
            record = _write_candidate(ctx, cid, round_, parent, prompt, got, fresh=i >= len(reused),
                                      call_s=call_s / max(1, len(fresh)))
            new[record["id"]] = record
    # traced even when part of the round was had (a resumed run must know it), once: a
    # session killed after tracing it may have resumed this round already
    if exhausted and not any(e["node"] == "generate" and e["status"] == "replay_exhausted"
                             and e["iteration"] == round_ for e in rd.events_of(None)):
        rd.append_event(iteration=round_, candidate=None, node="generate", status="replay_exhausted",
                        error="the replay file has no more completions")
    tokens = sum(r["tokens"]["prompt"] + r["tokens"]["completion"] for r in new.values())
    spent = dict(state["spent"], tokens=state["spent"]["tokens"] + tokens,
                 rounds=state["spent"]["rounds"] + (1 if new else 0))
    return {"round": round_ if new else state["round"], "candidates": {**refreshed, **new}, "pending": list(new),
            "replay_exhausted": exhausted, "spent": spent}


def _prompt(ctx: LoopContext, parent: str | None, candidates: dict) -> str:
    if parent is None:
        return ctx.render_initial(ctx.problem.source)
    rd = ctx.rundir
    source, verdict = rd.source(parent) or "", rd.verdict(parent)
    return ctx.render_refine(ctx.problem.source, source, verdict, ctx.config.prompt, ctx.backend.count_tokens,
                             facts=search_facts(source, verdict, lineage(candidates, parent)))


def _generated(rd, cid: str) -> bool:
    """Its generate event is in the trace: the candidate was written whole."""
    return any(e["node"] == "generate" for e in rd.events_of(cid))


def _completion_record(c) -> dict:
    return {"completion": c.text, "prompt_tokens": int(c.prompt_tokens or 0),
            "completion_tokens": int(c.completion_tokens or 0), "model": c.model,
            "finish_reason": c.finish_reason}


def _write_candidate(ctx: LoopContext, cid: str, round_: int, parent: str | None, prompt: str,
                     got: dict, *, fresh: bool, call_s: float) -> CandidateRecord:
    """A fresh completion: write prompt, raw completion and extracted source, then its
    generate event, which holds the rest of the completion's record and makes the
    candidate reusable after a kill. A reused one (`fresh` False) is all on disk."""
    rd = ctx.rundir
    code = ctx.extract_code(got["completion"])
    if fresh:
        rd.write_text(rd.prompt(cid), prompt)
        rd.write_text(rd.completion(cid), got["completion"])
        if code is not None:
            rd.write_source(cid, code)
    record = new_record(cid, round_, parse_candidate_id(cid)[1], parent=parent, origin=ORIGIN_MODEL,
                        has_code=code is not None, finish_reason=got.get("finish_reason"),
                        tokens=(got["prompt_tokens"], got["completion_tokens"]))
    if fresh:
        artifacts = {"prompt": rd.prompt(cid), "completion": rd.completion(cid)}
        if code is not None:
            artifacts["candidate"] = rd.candidate_src(cid)
        rd.append_event(iteration=round_, candidate=cid, node="generate",
                        status="ok" if code is not None else "no_code", duration_s=call_s,
                        metrics={"origin": ORIGIN_MODEL, "parent": parent, "prompt_tokens": got["prompt_tokens"],
                                 "completion_tokens": got["completion_tokens"], "model": got.get("model"),
                                 "finish_reason": got.get("finish_reason")},
                        artifacts=artifacts)
    ctx.progress.generated(record)
    return record


# ---------------------------------------------------------------- sweep

def sweep(state: RunState, runtime: Runtime[LoopContext]) -> dict:
    """Write the launch-constant variants of decide's `sweep_next` as candidates of the
    current round (origin "sweep", parent the swept one) for evaluate to judge. No model
    call: the variants follow from the parent's source and the state alone, so a session
    killed mid-sweep gets the same ids and sources again, and reuses what it wrote."""
    ctx = runtime.context
    rd = ctx.rundir
    parent, round_ = state["sweep_next"], state["round"]
    # 1) ids after the round's last
    first = 1 + max((r["index"] for r in state["candidates"].values() if r["round"] == round_), default=-1)
    # 2) one candidate per variant, traced like a generated one
    new: dict[str, CandidateRecord] = {}
    for i, variant in enumerate(plan_sweep(ctx, state, parent)):
        cid = candidate_id(round_, first + i)
        new[cid] = _write_variant(ctx, cid, round_, parent, variant, traced=_generated(rd, cid))
    return {"candidates": new, "pending": list(new), "swept": [*(state.get("swept") or []), parent],
            "sweep_next": None}


def _write_variant(ctx: LoopContext, cid: str, round_: int, parent: str, variant: Variant, *,
                   traced: bool) -> CandidateRecord:
    """Write a sweep variant's source, then (once) its generate event with what changed."""
    rd = ctx.rundir
    rd.write_source(cid, variant.source)
    record = new_record(cid, round_, parse_candidate_id(cid)[1], parent=parent, origin=ORIGIN_SWEEP,
                        change=variant.change)
    if not traced:
        rd.append_event(iteration=round_, candidate=cid, node="generate", status="ok",
                        metrics={"origin": ORIGIN_SWEEP, "parent": parent, "change": variant.change,
                                 "prompt_tokens": 0, "completion_tokens": 0},
                        artifacts={"candidate": rd.candidate_src(cid)})
    ctx.progress.generated(record)
    return record


def next_sweep(ctx: LoopContext, state: RunState, reason: str | None) -> str | None:
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
    parent = sweep_parent(list(state["candidates"].values()), state.get("swept") or [],
                          ctx.config.budget.target_baseline)
    return parent if parent is not None and plan_sweep(ctx, state, parent, screen=False) else None


# ---------------------------------------------------------------- decide

def decide(state: RunState, runtime: Runtime[LoopContext]) -> dict:
    """Keep the best correct candidate, then stop (and write the summary) or loop."""
    ctx = runtime.context
    cfg, rd = ctx.config, ctx.rundir
    t0 = time.monotonic()
    records = list(state["candidates"].values())
    baseline = cfg.budget.target_baseline
    # 1) best so far: best.py always mirrors it
    best = best_candidate(records, baseline)
    if best is not None and best != state["best"]:
        rd.write_text(rd.best, rd.source(best))
    # 2) budget spent
    judged = sum(1 for r in records if r["status"] != "pending" and by_model(r))
    swept = sum(1 for r in records if r["status"] != "pending" and r.get("origin") == ORIGIN_SWEEP)
    spent = Spent(rounds=state["spent"]["rounds"], candidates=judged, sweep=swept, prescreen=prescreened(rd),
                  tokens=state["spent"]["tokens"], wall_s=round(ctx.wall_s(), 3))
    # 3) stop or loop
    b = cfg.budget
    reason = stop_reason(dict(state, spent=spent), best=state["candidates"].get(best) if best else None,
                         baseline=baseline, target_speedup=b.target_speedup, timed=ctx.timed,
                         max_rounds=b.max_rounds, token_budget=b.token_budget,
                         time_budget_s=b.time_budget_s, roofline_stop_fraction=b.roofline_stop_fraction,
                         has_model=ctx.has_model)
    # 4) ... but first the sweep, where it may go on
    sweep_next = next_sweep(ctx, dict(state, spent=spent), reason)
    if sweep_next is not None:
        reason = None
    update = {"best": best, "spent": spent, "pending": [], "stop_reason": reason, "sweep_next": sweep_next}
    best_record = state["candidates"].get(best) if best else None
    last = rd.last_event()
    status = reason or ("sweep" if sweep_next else "continue")
    if last is None or (last["node"], last["iteration"], last["status"]) != ("decide", state["round"], status):
        rd.append_event(iteration=state["round"], candidate=best, node="decide", status=status,
                        duration_s=time.monotonic() - t0,
                        metrics={"best_speedup": best_record["speedup"] if best_record else None,
                                 "spent": dict(spent), **({"sweep": sweep_next} if sweep_next else {})},
                        artifacts={"best": rd.best} if best else {})  # not again when re-run after a kill
    if reason is not None:
        if best is not None:
            ensure_profiled(ctx, best)   # the final best gets its summary whatever the policy
        rd.write_summary(make_summary(dict(state, **update), ctx.timed, rd))
    ctx.progress.decided(dict(state, **update))
    return update


def make_summary(state: RunState, timed: bool, rd=None) -> dict:
    """summary.json's body (RunDir.write_summary adds the schema); `rd`: why no seed, if so."""
    best = state["candidates"].get(state["best"]) if state["best"] else None
    seeded = state["candidates"].get(candidate_id(0, 0))   # round 0: the Inductor seed, if any
    failed = None if seeded or rd is None else seed_failure(rd)
    return {"stop_reason": state["stop_reason"], "solved": state["stop_reason"] == "target_reached",
            "best": {"candidate": best["id"], "speedup": dict(best["speedup"])} if best else None,
            "candidates_evaluated": state["spent"]["candidates"], "rounds": state["spent"]["rounds"],
            "judged": judged_counts((c.get("origin"), c["status"]) for c in state["candidates"].values()),
            "budget_spent": dict(state["spent"]), "timed": timed,
            "seed": {"candidate": seeded["id"], "status": seeded["status"], "speedup": dict(seeded["speedup"])}
            if seeded else ({"candidate": None, "status": "seed_failed", "error": failed} if failed else None)}


def seed_failure(rd) -> str | None:
    """Why round 0 has no seed, as its seed_failed event says; None when it has one or was not asked."""
    failed = [e.get("error") for e in rd.events_of(None) if (e["node"], e["status"]) == ("generate", "seed_failed")]
    return (failed[-1] or "no Inductor seed") if failed else None


# ---------------------------------------------------------------- routers and wiring

def route_start(state: RunState) -> Literal["seed", "generate", "sweep"]:
    """A new run starts at the seed; a resumed one (agent/loop/resume.py: the state of its last
    decide) where that decide routed. Before any decide, the seed: it and generate reuse
    what a killed session wrote."""
    if state.get("sweep_next"):
        return "sweep"
    return "generate" if state["candidates"] or state["round"] else "seed"


def route_seeded(state: RunState, runtime: Runtime[LoopContext]) -> list[Send] | Literal["generate", "decide"]:
    """The seed to evaluate (then decide), or straight on to round 1 without one (to
    decide, which stops the run, where there is no model)."""
    if not state["pending"]:
        return "generate" if runtime.context.has_model else "decide"
    return [Send("evaluate", EvalTask(candidate=state["candidates"][cid])) for cid in state["pending"]]


def route_generated(state: RunState) -> list[Send] | Literal["decide"]:
    """Fan the round's (or the sweep's) candidates out to evaluate; straight to decide
    when there are none."""
    if not state["pending"]:
        return "decide"
    return [Send("evaluate", EvalTask(candidate=state["candidates"][cid])) for cid in state["pending"]]


def route_decided(state: RunState) -> Literal["generate", "sweep", "__end__"]:
    if state.get("sweep_next"):
        return "sweep"
    return END if state["stop_reason"] else "generate"


def build_graph(checkpointer=None) -> Any:
    """The loop, compiled once. `checkpointer` (the run directory's checkpoint.sqlite) is
    a cache of the session's steps: nothing reads it back (agent/loop/resume.py)."""
    builder = StateGraph(RunState, context_schema=LoopContext)
    builder.add_node("seed", seed)
    builder.add_node("generate", generate)
    builder.add_node("sweep", sweep)
    builder.add_node("evaluate", evaluate, input_schema=EvalTask)
    builder.add_node("decide", decide)
    builder.add_conditional_edges(START, route_start, ["seed", "generate", "sweep"])
    builder.add_conditional_edges("seed", route_seeded, ["evaluate", "generate", "decide"])
    builder.add_conditional_edges("generate", route_generated, ["evaluate", "decide"])
    builder.add_conditional_edges("sweep", route_generated, ["evaluate", "decide"])
    builder.add_edge("evaluate", "decide")
    builder.add_conditional_edges("decide", route_decided, ["generate", "sweep", END])
    return builder.compile(checkpointer=checkpointer, name="krefine")


def run_graph(graph, ctx: LoopContext, thread_id: str, start: RunState | None,
              on_step: Callable[[RunState], None] | None = None) -> RunState:
    """Run from `start` to the end; None: resume from the state rebuilt from the run
    directory. A stopped run's state comes back as it is. `on_step` sees the state after
    every step (what a failed run's summary is written from)."""
    state = start if start is not None else state_from_rundir(ctx.rundir, str(ctx.problem.path))
    if state["stop_reason"]:
        return state
    config = {"configurable": {"thread_id": thread_id}, "max_concurrency": ctx.concurrency,
              "recursion_limit": 10_000}
    if graph.checkpointer:   # the cache starts afresh: this session runs from `state`, not from it
        graph.checkpointer.delete_thread(thread_id)
    for state in graph.stream(state, config, context=ctx, stream_mode="values", durability="exit"):
        if on_step is not None:
            on_step(state)
    return state

