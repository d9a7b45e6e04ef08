"""The loop's evaluate node: one candidate judged (or its verdict reused), the verdict
written to evals/<id>.json, one trace event per phase the evaluator reached; and the
verdicts the loop makes itself without running anything (no code, cut off).

Also `ensure_profiled`: [eval] profile = "refined" gives a correct candidate its
bottleneck summary only once its feedback is about to be used. Does not choose what to
judge (agent/loop/graph.py routes) nor run candidate code (tools/judge/ does, in its worker).
"""
from __future__ import annotations

import dataclasses
import time
from typing import Any

from langgraph.runtime import Runtime

from agent.loop.context import LoopContext
from agent.loop.rundir import RunDir, parse_candidate_id
from agent.loop.state import CandidateRecord, EvalTask, bottleneck_label, judged_record
from tools.judge.feedback import feedback_for
from tools.verdict import Diagnostic, Status, Verdict


def evaluate(task: EvalTask, runtime: Runtime[LoopContext]) -> dict:
    """Judge one candidate (or reuse its verdict from a killed session) and trace it."""
    ctx = runtime.context
    rd = ctx.rundir
    record = task["candidate"]
    cid = record["id"]
    # 1) idempotent: a verdict on disk is a finished evaluation, never redone
    verdict = rd.verdict(cid)
    if verdict is None:
        verdict = _judge(ctx, record)
        # 2) code cut off at the token limit: the judge saw only a syntax error, the model must hear why
        if record["has_code"] and record.get("finish_reason") == "length" and not verdict.correct:
            verdict = cut_off_verdict(verdict, ctx.config.sampling.max_new_tokens)
        # 3) the verdict first, then the trace events that point at it
        rd.write_verdict(cid, verdict)
    _trace_phases(rd, record, verdict)
    judged = judged_record(record, verdict)
    ctx.progress.evaluated(judged, verdict)
    return {"candidates": {cid: judged}}


def _judge(ctx: LoopContext, record: CandidateRecord) -> Verdict:
    rd, cid = ctx.rundir, record["id"]
    if not record["has_code"]:
        return no_code_verdict(rd.completion(cid).read_text(encoding="utf-8"), record["finish_reason"])
    name = rd.candidate_src(cid).name
    if ctx.evaluate is None:
        ctx.progress.judging(record)
        return ctx.judges.judge(rd.source(cid), candidate_name=name, profile=ctx.profile_policy == "all")
    with ctx.gpus.lease() as gpu:
        ctx.progress.judging(record)
        return ctx.evaluate(ctx.problem, rd.source(cid), device=ctx.device, settings=ctx.config.eval,
                            candidate_name=name, profile=ctx.profile_policy != "none", gpu_index=gpu)


def no_code_verdict(completion: str, finish_reason: str | None) -> Verdict:
    """The verdict of a completion with no code in it, made without running anything."""
    if not completion.strip():
        message = "the completion was empty: no code to compile"
    else:
        message = "no Python code defining ModelNew was found in the completion"
    if finish_reason == "length":
        message += " (it was cut off at the token limit)"
    verdict = Verdict(status=Status.COMPILE_ERROR, diagnostics=(Diagnostic(kind="no_code", message=message),),
                      checks={"phase_s": {}})
    return dataclasses.replace(verdict, feedback=feedback_for(verdict))


def cut_off_verdict(verdict: Verdict, max_new_tokens: int) -> Verdict:
    """`verdict` of code whose completion hit max_new_tokens, with that said first."""
    message = (f"the completion was cut off at the token limit ({max_new_tokens} new tokens): "
               "the code may be incomplete; write a shorter answer")
    verdict = dataclasses.replace(verdict, diagnostics=(Diagnostic(kind="cut_off", message=message), *verdict.diagnostics))
    return dataclasses.replace(verdict, feedback=feedback_for(verdict))


# evaluator phases (verdict.checks["phase_s"]) in the order they run, and their trace node
_PHASE_NODE = {"setup": "compile", "compile": "compile", "test": "test", "gpu_compile": "compile",
               "time": "profile", "profile": "profile"}


def _trace_phases(rd: RunDir, record: CandidateRecord, verdict: Verdict) -> None:
    """One compile / test / profile event per node the evaluator reached, timed by its phase_s.

    The node of the last phase reached carries the verdict's status (where it failed,
    or "correct"); earlier nodes are "ok".
    """
    cid = record["id"]
    if any(e["node"] in ("compile", "test", "profile") for e in rd.events_of(cid)):
        return  # traced before a kill; the verdict was reused
    phase_s = (verdict.checks or {}).get("phase_s") or {}
    reached = [k for k in _PHASE_NODE if k in phase_s] or ["compile"]
    last_node = _PHASE_NODE[reached[-1]]
    error = verdict.diagnostics[0].message if verdict.diagnostics and not verdict.correct else None
    for node in ("compile", "test", "profile"):
        keys = [k for k in reached if _PHASE_NODE[k] == node]
        if not keys:
            continue
        metrics: dict[str, Any] = {f"{k}_s": phase_s[k] for k in keys if k in phase_s}
        if node == "profile":
            metrics.update(speedup={"eager": verdict.speedup_eager, "compile": verdict.speedup_compile},
                           bottleneck=bottleneck_label(verdict.bottleneck))
        last = node == last_node
        rd.append_event(iteration=record["round"], candidate=cid, node=node,
                        status=verdict.status.value if last else "ok",
                        duration_s=sum(phase_s.get(k, 0.0) for k in keys), metrics=metrics,
                        error=error if last else None, artifacts={"eval": rd.eval(cid)})


def ensure_profiled(ctx: LoopContext, cid: str) -> Verdict | None:
    """[eval] profile = "refined": give a correct candidate its bottleneck summary once
    its feedback is about to be used (a parent, the final best), not at evaluation."""
    rd = ctx.rundir
    if ctx.profile_policy != "refined" or not ctx.timed or ctx.judges is None or ctx.evaluate is not None:
        return None
    verdict = rd.verdict(cid)
    if verdict is None or not verdict.correct or verdict.bottleneck is not None \
            or "profile_refined" in verdict.checks.get("phase_s", {}):
        return None
    t0 = time.monotonic()
    profiled = ctx.judges.add_bottleneck(rd.source(cid), verdict, candidate_name=rd.candidate_src(cid).name)
    rd.write_verdict(cid, profiled)
    rd.append_event(iteration=parse_candidate_id(cid)[0], candidate=cid, node="profile",
                    status="refined" if profiled.bottleneck else "refine_failed",
                    duration_s=time.monotonic() - t0,
                    metrics={"bottleneck": bottleneck_label(profiled.bottleneck),
                             "roofline_fraction": (profiled.bottleneck or {}).get("roofline_fraction")},
                    error=None if profiled.bottleneck else profiled.checks.get("profile_error"),
                    artifacts={"eval": rd.eval(cid)})
    return profiled
