"""Which variants a sweep sends to the judge: `plan_sweep`, with the pre-screen.

Without a pre-screen ([search] prescreen_variants = 0, or judges that have none) a sweep
writes the first [search] sweep_variants variants agent/search/sweep.py makes. With one,
the sweep makes up to prescreen_variants variants (`wide`: pairs of constants too, and
the precision of exact dots), has the judge check and time all of them in one worker
(tools/judge/prescreen.py: one input, CUDA-graph timing), and writes only the fastest
`sweep_variants` of those right on that input, each a candidate judged in full like any
other. The pre-screen's results are kept in prescreen/<parent>.json (every variant's
change, status and time, and the sources of the chosen ones): a resumed run reads them
back, never screens the same parent twice, and counts what was screened against
[search] prescreen_budget apart from what was judged (sweep_budget).
"""
from __future__ import annotations

import time
from pathlib import Path

from agent.loop.state import ORIGIN_SWEEP
from agent.search.sweep import Variant, sweep_variants
from tools.jsonio import read_json


def plan_sweep(ctx, state, parent: str, *, screen: bool = True) -> list[Variant]:
    """The variants a sweep of `parent` writes: at most [search] sweep_variants, within what
    is left of sweep_budget, none whose source the run already holds (a variant of a
    variant may undo its change). screen=False: only whether there would be any (decide
    asks before routing to the sweep; the pre-screen itself runs in the sweep node)."""
    cfg, run = ctx.config.search, ctx.run
    records = state["candidates"].values()
    left = cfg.sweep_budget - sum(1 for r in records if r.get("origin") == ORIGIN_SWEEP)
    limit = min(cfg.sweep_variants, left)
    if ctx.device == "cpu":    # untimed: nothing ranks variants, so one shows the path (each costs minutes)
        limit = min(limit, 1)
    if limit <= 0 or run.source(parent) is None:
        return []
    held = {run.source(r["id"]) for r in records if r["has_code"]} - {None}
    kept = _screened(run.rd, parent)
    if kept is not None:                                   # screened before (this session or a killed one)
        return [Variant(v["source"], v["change"]) for v in kept["chosen"] if v["source"] not in held][:limit]
    width = min(cfg.prescreen_variants, cfg.prescreen_budget - prescreened(run)) if uses_prescreen(ctx) else 0
    if ctx.device == "cpu":      # untimed: screen no more than go on
        width = min(width, limit)
    if width <= 0:
        variants = sweep_variants(run.source(parent), limit + len(held))
        return [v for v in variants if v.source not in held][:limit]
    if not screen:                                         # whether there is any: no need to make them all
        width = limit
    variants = [v for v in sweep_variants(run.source(parent), width + len(held), wide=True)
                if v.source not in held][:width]
    if not screen or not variants:
        return variants[:limit]
    return _prescreen(ctx, state, parent, variants, limit)


def uses_prescreen(ctx) -> bool:
    """It is on, and the judges pre-screen (tools/judge's do; so does a Ray judge actor)."""
    return ctx.config.search.prescreen_variants > 0 and hasattr(ctx.judges, "prescreen")


def prescreened(run) -> int:
    """Variants pre-screened in this run so far (every prescreen/*.json)."""
    return sum(len(read_json(f)["variants"]) for f in sorted(_dir(run.rd).glob("*.json")))


def _prescreen(ctx, state, parent: str, variants: list[Variant], limit: int) -> list[Variant]:
    run = ctx.run
    ctx.progress.note(f"pre-screening {len(variants)} variant{'s' * (len(variants) != 1)} of {parent} on one input")
    t0 = time.monotonic()
    screens = ctx.judges.prescreen([run.source(parent), *(v.source for v in variants)],
                                   reps=ctx.config.search.prescreen_reps)
    seconds = time.monotonic() - t0
    own, rest = screens[0], screens[1:]
    right = sorted((s for s in rest if s.status == "correct"),
                   key=lambda s: (s.ms if s.ms is not None else float("inf"), s.index))
    timing = {s.index - 1: s for s in rest}
    chosen = [_noted(variants[s.index - 1], s, own) for s in right[:limit]]
    record = {"parent": parent, "parent_ms": own.ms, "parent_status": own.status, "seconds": round(seconds, 3),
              "variants": [{"change": v.change, "status": timing[i].status, "ms": timing[i].ms,
                            "how": timing[i].how, "error": timing[i].error} for i, v in enumerate(variants)],
              "chosen": [{"change": v.change, "source": v.source} for v in chosen]}
    best = right[0].ms if right else None
    run.prescreened(parent, state["round"], record, seconds,
                    {"variants": len(variants), "correct": len(right), "chosen": len(chosen),
                     "parent_ms": own.ms, "best_ms": best})
    ctx.progress.note(f"pre-screen of {parent}: {len(right)}/{len(variants)} right on one input"
                      + (f", fastest {best:.4g} ms vs the parent's {own.ms:.4g} ms" if best and own.ms else "")
                      + f" ({seconds:.1f} s); {len(chosen)} go{'es' * (len(chosen) == 1)} to the judge")
    return chosen


def _noted(variant: Variant, screen, own) -> Variant:
    """The variant, its change saying what the pre-screen timed (parent beside it)."""
    if screen.ms is None:
        return variant
    vs = f" vs {own.ms:.4g}" if own.ms is not None else ""
    return Variant(variant.source, f"{variant.change} (pre-screen {screen.ms:.4g}{vs} ms)")


def _screened(rd, parent: str) -> dict | None:
    f = rd.prescreen(parent)
    return read_json(f) if f.exists() else None


def _dir(rd) -> Path:
    return Path(rd.root) / "prescreen"
