"""The loop's state rebuilt from a run directory: what `krefine resume` continues from.

The run directory is the run's one truth (docs/DESIGN.md "Run directory"). Every
candidate has a generate event (parent, origin, tokens, what a sweep changed), its
verdict in evals/, and each round ends with a decide event (round, best, budget spent,
stop reason, the candidate to sweep next). `state_from_rundir` reads these back as the
state the last decide returned; the graph takes up where that decide routed
(agent/loop/graph.py `route_start`), and each node reuses what a killed session wrote after
it (a traced completion, a written variant, a verdict on disk), so nothing finished is
redone and the loop goes on as if it had not stopped.

langgraph's checkpoint.sqlite is never read here: it is a cache of one session's
steps, and a run resumes the same without it or with a stale one. Writes nothing.
"""
from __future__ import annotations

from agent.loop.rundir import RunDir, parse_candidate_id
from agent.loop.state import (ORIGIN_MODEL, ORIGIN_SWEEP, CandidateRecord, RunState, Spent, initial_state, judged_record,
                         new_record)

# decide's statuses that are not stop reasons (agent/loop/graph.py decide)
_GOES_ON = ("continue", "sweep")


def state_from_rundir(rd: RunDir, problem_path: str) -> RunState:
    """The state as of the run's last decide event; the initial state before any."""
    events = list(rd.events())
    last = max((i for i, e in enumerate(events) if e["node"] == "decide"), default=None)
    if last is None:   # no round closed: from the start, where seed and generate reuse what is on disk
        return initial_state(problem_path)
    decide = events[last]
    # 1) the candidates generated before it, each with its verdict (all judged by then)
    candidates: dict[str, CandidateRecord] = {}
    swept: list[str] = []
    exhausted = False
    for e in events[:last]:
        if e["node"] != "generate":
            continue
        cid = e["candidate"]
        if cid is None:
            exhausted = exhausted or e["status"] == "replay_exhausted"
            continue
        if cid in candidates:
            continue
        record = _generated_record(e)
        verdict = rd.verdict(cid)
        candidates[cid] = judged_record(record, verdict) if verdict is not None else record
        if record["origin"] == ORIGIN_SWEEP and record["parent"] not in swept:
            swept.append(record["parent"])
    # 2) what decide concluded
    metrics = decide.get("metrics") or {}
    spent = metrics.get("spent") or {}
    status = decide["status"]
    return RunState(problem_path=problem_path, round=decide["iteration"], candidates=candidates, pending=[],
                    best=decide["candidate"],
                    spent=Spent(rounds=int(spent.get("rounds", 0)), candidates=int(spent.get("candidates", 0)),
                                sweep=int(spent.get("sweep", 0)),
                                prescreen=int(spent.get("prescreen", 0)), tokens=int(spent.get("tokens", 0)),
                                wall_s=float(spent.get("wall_s", 0.0))),
                    replay_exhausted=exhausted, stop_reason=None if status in _GOES_ON else status,
                    swept=swept, sweep_next=metrics.get("sweep") if status == "sweep" else None)


def _generated_record(event: dict) -> CandidateRecord:
    """A candidate as its generate event wrote it, before its verdict."""
    m = event.get("metrics") or {}
    round_, index = parse_candidate_id(event["candidate"])
    return new_record(event["candidate"], round_, index, parent=m.get("parent"),
                      origin=m.get("origin", ORIGIN_MODEL), has_code=event["status"] != "no_code",
                      finish_reason=m.get("finish_reason"), change=m.get("change"),
                      tokens=(int(m.get("prompt_tokens") or 0), int(m.get("completion_tokens") or 0)))
