"""The judge subgraph: one candidate's compile → test → profile, each a langgraph node.

agent/loop/graph.py sends every candidate of a round here (`Send("judge", ...)`); this
subgraph runs its steps one after the other, each a call into the same judgement of the
run's judge (tools/judge/pipeline.py Judgement: the candidate's worker lives from compile
to its last step; its code never runs in this process). Routes on outcomes: a compile
error ends at compile, an incorrect candidate at test; a correct one goes on to profile
(timing and the profile, on a GPU; untimed on cpu, it ends at test). Each node traces
its step; the verdict is written (Run.judged) before the step event that points at it.

A candidate judged before (a resumed run) is not judged again: its verdict on disk goes
through the same nodes (`Recorded`). Also here: the verdicts the loop makes itself
without running anything (no code, cut off) and `ensure_profiled` ([eval] profile =
"refined": the bottleneck summary once a candidate's feedback is about to be used).
"""
from __future__ import annotations

import dataclasses
import time
from typing import Literal, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime

from agent.loop.context import LoopContext
from agent.loop.state import bottleneck_label
from tools.judge.feedback import feedback_for
from tools.judge.pipeline import STEPS, Decided, ended_at
from tools.verdict import Diagnostic, Status, Verdict


class JudgeTask(TypedDict, total=False):
    """What one `Send` to the judge subgraph carries, and what its nodes pass on."""
    candidate: str
    ended: bool                      # the judgement has its verdict
    step: str                        # the step just run


def compile_step(task: JudgeTask, runtime: Runtime[LoopContext]) -> dict:
    """Static checks, the reference, the candidate's worker: its module imported, ModelNew
    built, its kernels compiled."""
    ctx = runtime.context
    ctx.judgements[task["candidate"]] = _begin(ctx, task["candidate"])
    return _step(ctx, task["candidate"], "compile")


def test_step(task: JudgeTask, runtime: Runtime[LoopContext]) -> dict:
    """The trials: fresh secret inputs against the reference, and the runtime guards."""
    return _step(runtime.context, task["candidate"], "test")


def profile_step(task: JudgeTask, runtime: Runtime[LoopContext]) -> dict:
    """Timing against eager and torch.compile, and the profile ([eval] profile)."""
    return _step(runtime.context, task["candidate"], "profile")


def route_step(task: JudgeTask) -> Literal["test", "profile", "__end__"]:
    """compile → test → profile, ending where the verdict came (then decide refines or stops)."""
    if task["ended"]:
        return END
    return "test" if task.get("step") == "compile" else "profile"


def build_judge_graph():
    builder = StateGraph(JudgeTask, context_schema=LoopContext)
    builder.add_node("compile", compile_step)
    builder.add_node("test", test_step)
    builder.add_node("profile", profile_step)
    builder.add_edge(START, "compile")
    builder.add_conditional_edges("compile", route_step, ["test", END])
    builder.add_conditional_edges("test", route_step, ["profile", END])
    builder.add_edge("profile", END)
    return builder.compile(name="judge")


def _begin(ctx: LoopContext, cid: str):
    run = ctx.run
    record = run.record(cid)
    verdict = run.verdict(cid)
    if verdict is not None:      # judged before a kill: recorded, never redone
        return Decided(lambda: verdict)
    if not record["has_code"]:
        made = no_code_verdict(run.rd.completion(cid).read_text(encoding="utf-8"), record["finish_reason"])
        return Decided(lambda: made)
    ctx.progress.judging(record)
    return ctx.judges.begin(run.source(cid), candidate_name=run.rd.candidate_src(cid).name,
                            profile=ctx.profile_policy == "all")


def _step(ctx: LoopContext, cid: str, node: str) -> dict:
    run, judgement = ctx.run, ctx.judgements[cid]
    ctx.progress.stepping(cid, node)
    t0 = time.monotonic()
    try:
        verdict = judgement.advance()
    except BaseException:
        ctx.judgements.pop(cid, None)
        judgement.close()
        raise
    if verdict is not None:
        ctx.judgements.pop(cid, None)
        record = run.record(cid)
        if record["has_code"] and record.get("finish_reason") == "length" and not verdict.correct \
                and run.verdict(cid) is None:
            # code cut off at the token limit: the judge saw only a syntax error, the model must hear why
            verdict = cut_off_verdict(verdict, ctx.config.sampling.max_new_tokens)
        if run.verdict(cid) is None:
            run.judged(cid, verdict)
    _trace(ctx, cid, node, verdict, judgement.phase_s, time.monotonic() - t0)
    if verdict is not None:
        ctx.progress.evaluated(run.record(cid), verdict)
    return {"ended": verdict is not None, "step": node}


# the judge's phases (verdict.checks["phase_s"]) each step runs
_PHASES = {"compile": ("setup", "compile"), "test": ("test", "gpu_compile"), "profile": ("time", "profile")}


def _trace(ctx: LoopContext, cid: str, node: str, verdict: Verdict | None, phase_s: dict, wall_s: float) -> None:
    """The step's event: "ok" when the judgement goes on, else the verdict's status (and
    its first diagnostic where it failed); timed by the judge's phases of this step."""
    run = ctx.run
    metrics = {f"{k}_s": phase_s[k] for k in _PHASES[node] if k in phase_s}
    seconds = sum(metrics.values()) if metrics else wall_s
    if node == "profile" and verdict is not None:
        metrics.update(speedup={"eager": verdict.speedup_eager, "compile": verdict.speedup_compile},
                       bottleneck=bottleneck_label(verdict.bottleneck))
    error = verdict.diagnostics[0].message if verdict is not None and verdict.diagnostics and not verdict.correct else None
    run.stepped(cid, node, verdict.status.value if verdict is not None else "ok",
                duration_s=seconds, metrics=metrics, error=error)


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


def ensure_profiled(ctx: LoopContext, cid: str) -> Verdict | None:
    """[eval] profile = "refined": give a correct candidate its bottleneck summary once
    its feedback is about to be used (a parent, the final best), not at evaluation."""
    run = ctx.run
    if ctx.profile_policy != "refined" or not ctx.timed or ctx.judges is None:
        return None
    verdict = run.verdict(cid)
    if verdict is None or not verdict.correct or verdict.bottleneck is not None \
            or "profile_refined" in verdict.checks.get("phase_s", {}):
        return None
    t0 = time.monotonic()
    profiled = ctx.judges.add_bottleneck(run.source(cid), verdict, candidate_name=run.rd.candidate_src(cid).name)
    run.profiled(cid, profiled, time.monotonic() - t0)
    return profiled


__all__ = ["STEPS", "ended_at", "build_judge_graph", "ensure_profiled", "no_code_verdict", "cut_off_verdict"]
