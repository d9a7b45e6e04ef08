"""The refinement loop's state and the pure rules over it: ranking, parents, stopping.

Covers what langgraph checkpoints between nodes (`RunState`, one `CandidateRecord` per
candidate, the budget spent) and the decisions that read only that state: which
candidate is best, which ones the next round refines (greedy or beam, repair of failed
ones), and why the loop stops. Does no I/O and calls no model or evaluator: the nodes
in agent/graph.py do, then hand plain values to these functions.

Everything here is plain JSON-able data (dicts, lists, str, numbers), so the SQLite
checkpointer can save it and `krefine resume` can read it back in a later process.
"""
from __future__ import annotations

import math
from typing import Annotated, Literal, TypedDict

# stop reasons recorded in summary.json
StopReason = Literal["target_reached", "roofline", "replay_exhausted", "max_rounds",
                     "token_budget", "time_budget"]

# a failed parent worth repairing first: the closer to correct, the better
_REPAIR_ORDER = ("incorrect", "runtime_error", "timeout", "compile_error", "rejected")


class CandidateRecord(TypedDict):
    id: str                          # r<round>-c<index> (agent/rundir.py)
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
    origin: str                      # "model", or "inductor_seed" for round 0's torch.compile seed


ORIGIN_MODEL = "model"
ORIGIN_SEED = "inductor_seed"


def by_model(record: CandidateRecord) -> bool:
    """Written by the model: what the run's best, its target and its figures count.
    Records from before the field existed were all the model's."""
    return record.get("origin", ORIGIN_MODEL) == ORIGIN_MODEL


class Spent(TypedDict):
    rounds: int                      # rounds that produced at least one model candidate
    candidates: int                  # model candidates judged (an Inductor seed is not one)
    tokens: int                      # prompt + completion tokens over all candidates
    wall_s: float                    # wall-clock seconds, summed over resumed sessions


def merge_candidates(old: dict[str, CandidateRecord], new: dict[str, CandidateRecord]) -> dict[str, CandidateRecord]:
    """Reducer: evaluate tasks of one round each return their own record."""
    merged = dict(old or {})
    merged.update(new or {})
    return dict(sorted(merged.items()))


class RunState(TypedDict):
    problem_path: str
    round: int                       # the last round generated (0 before the first)
    candidates: Annotated[dict[str, CandidateRecord], merge_candidates]
    pending: list[str]               # ids generated this round, judged before decide
    best: str | None                 # best correct candidate so far
    spent: Spent
    replay_exhausted: bool           # the backend had no more completions to hand out
    stop_reason: str | None          # set by decide when the loop ends


class EvalTask(TypedDict):
    """What one `Send` to the evaluate node carries."""
    candidate: CandidateRecord


def initial_state(problem_path: str) -> RunState:
    return RunState(problem_path=problem_path, round=0, candidates={}, pending=[], best=None,
                    spent=Spent(rounds=0, candidates=0, tokens=0, wall_s=0.0),
                    replay_exhausted=False, stop_reason=None)


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
    """The run's best: a correct candidate the model wrote (a seed is only a parent)."""
    ranked = rank_correct([r for r in records if by_model(r)], baseline)
    return ranked[0]["id"] if ranked else None


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
    merely the ratio of medians. Untimed (cpu): correct is enough. Records written
    before intervals existed carry only the point speedup, which then decides."""
    if not record["correct"]:
        return False
    if not timed:
        return True
    if "speedup_low" not in record:
        value = record["speedup"].get(baseline)
        return value is not None and value >= target_speedup
    low = record["speedup_low"].get(baseline)
    return low is not None and low > target_speedup


def stop_reason(state: RunState, *, best: CandidateRecord | None, baseline: str,
                target_speedup: float, timed: bool, max_rounds: int, token_budget: int | None,
                time_budget_s: float | None, roofline_stop_fraction: float | None) -> StopReason | None:
    """Why the loop stops after this round, or None to go on. First match wins."""
    spent = state["spent"]
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
    return None
