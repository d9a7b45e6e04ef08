"""Step 1) guard: parse and static checks, before CUDA or any candidate code.

(The guards read dotted paths through torch, triton and numpy, never CUDA: a process
that has imported torch through the modules themselves, any other through the
installation's module table, so `krefine eval` refuses here without importing them:
tools/guards/modules.py, module_table.py.)

A syntax error is a compile error; a static guard's rejecting finding (tools/guards/)
rejects the candidate, and every finding becomes a flag and a diagnostic. A candidate
refused here needs no session at all (`static_verdict`: no fork server, no CUDA), nor
does a file that is not Python defining ModelNew (`file_verdict`).
"""
from __future__ import annotations

import ast

import time

from tools.judge.record import Evaluation, to_verdict
from tools.settings import EvalSettings
from tools.verdict import Status, Verdict


def static_verdict(src: str, candidate_name: str, settings: EvalSettings, device: str,
                   gpu_index: int) -> Verdict | None:
    """The verdict of a candidate the syntax check or a static guard refuses, else None."""
    t0 = time.monotonic()
    evaluation = Evaluation(None, src, device, gpu_index, settings, None)
    status = static_checks(evaluation, candidate_name)
    return None if status is None else to_verdict(evaluation, status, t0)


def file_verdict(src: str, fault: str, candidate_name: str, settings: EvalSettings, device: str,
                 gpu_index: int) -> Verdict:
    """The compile_error verdict of a candidate file that is not Python defining ModelNew
    (`fault`: tools/problem.py's one-line reason), for krefine eval's batches, where each
    file gets a verdict of its own: a syntax error as the judge reports it, with its line;
    any other fault (empty, binary, no ModelNew) as one diagnostic."""
    t0 = time.monotonic()
    evaluation = Evaluation(None, src, device, gpu_index, settings, None)
    evaluation.device_info = {"type": device}
    if not _syntax_error(evaluation, candidate_name):
        evaluation.diag("bad_candidate", fault)
    return to_verdict(evaluation, Status.COMPILE_ERROR, t0)


_TOO_DEEP = "an expression nested too deeply for Python's parser"


def static_checks(evaluation: Evaluation, candidate_name: str) -> Status | None:
    """1) guard: parse and static checks, before CUDA or any candidate code."""
    evaluation.device_info = {"type": evaluation.device}
    if _syntax_error(evaluation, candidate_name):
        return Status.COMPILE_ERROR
    from tools.guards.suite import run_static_guards
    from tools.judge.accuracy import policy_rule
    from tools.precision import dot_precisions
    try:
        findings = run_static_guards(evaluation.src, evaluation.settings.guards)
        dots = dot_precisions(ast.parse(evaluation.src))
    except (RecursionError, MemoryError):   # it parsed (a process whose recursion limit Inductor raised), but
        evaluation.diag("syntax_error", _TOO_DEEP)   # the guards' tree walks cannot follow it
        return Status.COMPILE_ERROR
    if dots:
        evaluation.checks["dot_precision"] = dots   # tl.dot calls by precision (tools/precision.py)
        # what a GPU runs: no precision given is TF32 for fp32 operands (the interpreter is exact)
        on_gpu: dict[str, int] = {}
        for precision, n in dots.items():
            key = "tf32" if precision == "default" else precision
            on_gpu[key] = on_gpu.get(key, 0) + n
        evaluation.checks["dot_precision_on_gpu"] = on_gpu
    for f in findings:
        evaluation.flag(f.flag)
        # what reduced precision must meet is the policy's ([eval] precision), not the guard's
        note = " " + policy_rule(evaluation.settings.test.precision) if f.guard == "reduced_precision" else ""
        evaluation.diag(f"guard:{f.guard}", f.message + note, f.line)
    if any(f.reject for f in findings):
        return Status.REJECTED
    return None


def _syntax_error(evaluation: Evaluation, candidate_name: str) -> bool:
    """Does the source not compile? Then its diagnostic, with the line, is on `evaluation`."""
    try:
        compile(evaluation.src, candidate_name, "exec")
    except SyntaxError as e:
        evaluation.diag("syntax_error", f"SyntaxError: {e.msg}", e.lineno)
        return True
    except (RecursionError, MemoryError):   # CPython's parser gives up on deep nesting
        evaluation.diag("syntax_error", _TOO_DEEP)
        return True
    return False
