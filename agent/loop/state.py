"""The refinement loop's state and the pure rules over it: ranking, parents, stopping.

Covers what flows between the loop's nodes (`RunState`: ids and routing), a candidate's
record (`CandidateRecord`, as agent/loop/run.py's Run makes it from its generate event
and its verdict), the budget spent, and the decisions that read only records: which
candidate is best, which ones the next round refines (greedy or beam, repair of failed
ones), which one the constant sweep re-launches next, and why the loop stops. Does no
I/O and calls no model or judge: the nodes in agent/loop/graph.py do, then hand plain
values to these functions.
"""
from __future__ import annotations

import math
from typing import Literal, TypedDict


# stop reasons recorded in summary.json
StopReason = Literal["target_reached", "roofline", "replay_exhausted", "max_rounds",
                     "token_budget", "time_budget", "no_model", "reference_not_reproducible"]
# a verdict flag saying the problem's reference cannot be matched by any candidate
# (Dropout in training mode: tools/judge/reference.py), so no round can do better
UNMATCHABLE_FLAGS = ("stochastic_reference", "unreproducible_reference")
# stop reasons about the model's side of the run: the sweep, which needs no model, may still go on
SWEEP_GOES_ON = ("replay_exhausted", "max_rounds", "token_budget", "no_model")

# a failed parent worth repairing first: the closer to correct, the better
_REPAIR_ORDER = ("incorrect", "runtime_error", "timeout", "compile_error", "rejected")


class CandidateRecord(TypedDict):
    id: str                          # r<round>-c<index> (agent/loop/rundir.py)
    round: int
    index: int
    parent: str | None               # the candidate whose feedback the prompt carried
    has_code: bool                   # False: no code could be extracted from the completion
    finish_reason: str | None        # the backend's, e.g. "length" for a cut completion
    status: str                      # "pending" until judged, then a verdict status
    correct: bool
    speedup: dict[str, float | None]  # {"eager": x, "compile": y}; null on cpu
    speedup_low: dict[str, float | None]  # low ends of those speedups' intervals (tools/perf/speedup.py); null: untimed or untrusted
    flags: list[str]
    bottleneck: str | None           # one short label from the verdict's profile, if any
    roofline_fraction: float | None
    tokens: dict[str, int]           # {"prompt": n, "completion": n}
    origin: str                      # "model", "inductor_seed" (round 0's torch.compile seed) or "sweep"
    change: str | None               # sweep only: the launch constants it changed from its parent


ORIGIN_MODEL = "model"
ORIGIN_SEED = "inductor_seed"
ORIGIN_SWEEP = "sweep"


def by_model(record: CandidateRecord) -> bool:
    """Written by the model: what the run's figures (candidates judged, pass@k) count."""
    return record["origin"] == ORIGIN_MODEL


def may_be_best(record: CandidateRecord) -> bool:
    """The model's, or a sweep variant (of the model's or of the seed): what the run's best
    and its target count. The seed itself never is."""
    return record["origin"] in (ORIGIN_MODEL, ORIGIN_SWEEP)


def bottleneck_label(bottleneck: dict | None) -> str | None:
    """The profiler's class for the progress table (e.g. "memory-bound"), if it has one."""
    label = (bottleneck or {}).get("class")
    return label if isinstance(label, str) else None


class Spent(TypedDict):
    rounds: int                      # rounds that produced at least one model candidate
    candidates: int                  # model candidates judged (neither an Inductor seed nor a sweep variant is one)
    sweep: int                       # sweep variants judged ([search] sweep_budget caps those written)
    prescreen: int                   # sweep variants pre-screened ([search] prescreen_budget caps them)
    tokens: int                      # prompt + completion tokens over all candidates
    wall_s: float                    # wall-clock seconds, summed over resumed sessions


class RunState(TypedDict):
    """The graph's state: ids and routing only (the candidates are the run's: agent/loop/run.py)."""
    problem_path: str
    round: int                       # the last round generated (0 before the first)
    pending: list[str]               # ids generated this round, judged before decide
    best: str | None                 # best correct candidate so far
    spent: Spent
    stop_reason: str | None          # set by decide when the loop ends
    sweep_next: str | None           # set by decide: the candidate the sweep node re-launches next
    decided: bool                    # a decide has run: the next round is the model's


def initial_state(problem_path: str) -> RunState:
    return RunState(problem_path=problem_path, round=0, pending=[], best=None,
                    spent=Spent(rounds=0, candidates=0, sweep=0, prescreen=0, tokens=0, wall_s=0.0),
                    stop_reason=None, sweep_next=None, decided=False)


# ---------------------------------------------------------------- ranking

def speed(record: CandidateRecord, baseline: str) -> float:
    """The speedup a candidate is ranked by; unknown (cpu, untimed) ranks lowest."""
    value = record["speedup"].get(baseline)
    return -math.inf if value is None else float(value)


def rank_correct(records: list[CandidateRecord], baseline: str) -> list[CandidateRecord]:
    """Correct candidates, fastest first; ties keep generation order (first wins)."""
    ordered = sorted((r for r in records if r["correct"]), key=lambda r: r["id"])
    return sorted(ordered, key=lambda r: speed(r, baseline), reverse=True)


def best_candidate(records: list[CandidateRecord], baseline: str) -> str | None:
    """The run's best: a correct candidate the model wrote or the sweep made (a seed is
    only a parent)."""
    ranked = rank_correct([r for r in records if may_be_best(r)], baseline)
    return ranked[0]["id"] if ranked else None


def sweep_parent(records: list[CandidateRecord], swept: list[str], baseline: str) -> str | None:
    """The candidate to sweep next: the fastest correct one, the seed included, unless it
    was swept already (hill-climbing: a variant that becomes the fastest is next)."""
    ranked = rank_correct(records, baseline)
    return ranked[0]["id"] if ranked and ranked[0]["id"] not in swept else None


def rank_failed(records: list[CandidateRecord]) -> list[CandidateRecord]:
    """Judged, failed candidates, most repairable first: closest status, then newest."""
    failed = [r for r in records if not r["correct"] and r["status"] in _REPAIR_ORDER]
    failed.sort(key=lambda r: r["id"], reverse=True)
    return sorted(failed, key=lambda r: _REPAIR_ORDER.index(r["status"]))


# ---------------------------------------------------------------- parents of the next round

def choose_parents(records: list[CandidateRecord], *, strategy: str, beam_width: int,
                   repair_failed: bool, baseline: str) -> list[str | None]:
    """The candidates the next round refines; [None] means a fresh first-turn prompt.

    greedy refines the best so far; beam the top `beam_width` by (correct, speedup).
    An Inductor seed (round 0) is a candidate like the others here. Before any
    candidate is correct, failed ones are repaired from their own feedback
    when `repair_failed`, otherwise the round starts again from the original module.
    """
    width = 1 if strategy == "greedy" else max(1, beam_width)
    correct = rank_correct(records, baseline)
    if correct:
        return [r["id"] for r in correct[:width]]
    if repair_failed:
        failed = rank_failed(records)
        if failed:
            return [r["id"] for r in failed[:width]]
    return [None]


def assign_slots(parents: list[str | None], n: int) -> list[tuple[str | None, int]]:
    """Spread n candidates over the parents round-robin: [(parent, count), ...] in order."""
    counts = [0] * len(parents)
    for i in range(n):
        counts[i % len(parents)] += 1
    return [(p, c) for p, c in zip(parents, counts) if c]


# ---------------------------------------------------------------- stopping

def target_met(record: CandidateRecord, *, baseline: str, target_speedup: float, timed: bool) -> bool:
    """Correct and faster than `target_speedup` by the spread-aware rule: the low end of
    the speedup's interval over interleaved rounds lies above it (tools/perf/speedup.py), not
    merely the ratio of medians. Untimed (cpu): correct is enough."""
    if not record["correct"]:
        return False
    if not timed:
        return True
    low = record["speedup_low"].get(baseline)
    return low is not None and low > target_speedup


def stop_reason(state: RunState, *, best: CandidateRecord | None, baseline: str,
                target_speedup: float, timed: bool, max_rounds: int, token_budget: int | None,
                time_budget_s: float | None, roofline_stop_fraction: float | None,
                has_model: bool = True) -> StopReason | None:
    """Why the loop stops after this round, or None to go on. First match wins; with no
    model there is nothing to go on to ("no_model")."""
    spent = state["spent"]
    if any(f in UNMATCHABLE_FLAGS for r in state["candidates"].values() for f in r.get("flags") or ()):
        return "reference_not_reproducible"
    if best is not None and target_met(best, baseline=baseline, target_speedup=target_speedup, timed=timed):
        return "target_reached"
    if (best is not None and roofline_stop_fraction and best["roofline_fraction"] is not None
            and best["roofline_fraction"] >= roofline_stop_fraction):
        return "roofline"
    if state["replay_exhausted"]:
        return "replay_exhausted"
    if state["round"] >= max_rounds:
        return "max_rounds"
    if token_budget and spent["tokens"] >= token_budget:
        return "token_budget"
    if time_budget_s and spent["wall_s"] >= time_budget_s:
        return "time_budget"
    if not has_model:
        return "no_model"
    return None
