"""What one evaluation has found so far, and the Verdict it ends as.

Covers `Evaluation` (diagnostics, flags, checks, timing, speedups, kernels, bottleneck: mutable
while the steps judge, frozen at the end by `to_verdict`, which places the KernelBook
dialect's causes among the diagnostics and adds the feedback text), and how the steps
turn a worker's fault into diagnostics: `error_diag` (an error reply), `died` (the worker exited) and
`health` (after a crash or hang: is the GPU still usable?). Decides no status itself.
"""
from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field

from tools.dialect.portable import portable
from tools.errors import JudgeShutDown
from tools.problem import Problem
from tools.settings import EvalSettings
from tools.verdict import Diagnostic, Status, Verdict


@dataclass
class Evaluation:
    """What one evaluation has found so far (mutable while judging, frozen at the end)."""
    problem: Problem
    src: str
    device: str
    gpu_index: int
    settings: EvalSettings
    judge: object = None            # service.Judge: what this candidate shares with others
    diagnostics: list[Diagnostic] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)
    checks: dict = field(default_factory=dict)
    timing: dict = field(default_factory=dict)
    kernels: list = field(default_factory=list)
    phase_s: dict = field(default_factory=dict)
    device_info: dict = field(default_factory=dict)
    speedup_eager: float | None = None
    speedup_compile: float | None = None
    speedup_interval: dict = field(default_factory=dict)   # baseline -> speedup.SpeedupEstimate JSON + "faster"
    bottleneck: dict | None = None
    staging: object = None          # tools.sandbox.cudaipc.Staging while a worker may map it
    staged: object = None           # its bytes (a uint8 tensor) once the probe proved IPC works
    progress: object = None         # callable(str) told when each phase starts, or None
    memory_peaks: dict = field(default_factory=dict)   # phase -> GPU memory peaks (memory.note_peaks)
    graph_probe: dict | None = None  # the candidate's CUDA-graph capture reply, judged after a timing batch

    def __post_init__(self):
        # what is judged is the text a user takes away: KernelBook's torch-2.5 runtime
        # replaced by definitions in the file (tools/dialect/portable.py; the loop stores
        # candidates already converted, so there this changes nothing)
        converted = portable(self.src)
        if converted != self.src:
            self.src = converted
            self.checks["portable_form"] = "KernelBook's private torch runtime replaced by definitions in the file"

    def say(self, what: str) -> None:
        if self.progress is not None:
            self.progress(what)

    def diag(self, kind: str, message: str, line: int | None = None, source_line: str | None = None):
        if line and not source_line:
            lines = self.src.splitlines()
            source_line = lines[line - 1].strip() if 0 < line <= len(lines) else None
        self.diagnostics.append(Diagnostic(kind, message, line, source_line))

    def flag(self, name: str) -> None:
        if name not in self.flags:
            self.flags.append(name)


def to_verdict(evaluation: "Evaluation", status: Status, t0: float) -> Verdict:
    evaluation.checks["phase_s"] = {k: round(v, 4) for k, v in evaluation.phase_s.items()}
    from tools.dialect.causes import with_causes   # KernelBook-dialect causes, for the model
    verdict = Verdict(
        status=status, diagnostics=with_causes(evaluation.src, status, evaluation.diagnostics, evaluation.problem),
        flags=tuple(evaluation.flags),
        checks=evaluation.checks, timing=evaluation.timing, speedup_eager=evaluation.speedup_eager,
        speedup_compile=evaluation.speedup_compile, speedup_interval=evaluation.speedup_interval, device=evaluation.device_info,
        kernels=tuple(evaluation.kernels), bottleneck=evaluation.bottleneck,
        duration_s=round(time.monotonic() - t0, 3))
    from tools.judge.feedback import feedback_for
    return dataclasses.replace(verdict, feedback=feedback_for(verdict))


def error_diag(evaluation: Evaluation, reply: dict) -> None:
    """A worker's error reply as a diagnostic. A GPU allocation failure within what the
    candidate may use raises memory.JudgeOutOfMemory instead: the judge's shortage."""
    if evaluation.device == "cuda":
        from tools.judge import memory
        if memory.reply_is_oom(reply):
            memory.attribute_candidate_oom(evaluation, reply)
    kind = {"triton_compile": "triton_compile", "syntax": "syntax_error"}.get(reply.get("kind"), None)
    phase = reply.get("phase", "?")
    if kind is None:
        kind = {"import": "import_error", "construct": "construct_error"}.get(phase, "runtime_error")
    msg = f"{reply.get('error_type', 'Error')}: {reply.get('message', '')}".strip()
    evaluation.diag(kind, f"during {phase}: {msg[:1500]}", reply.get("line"), reply.get("source_line"))
    if reply.get("traceback"):
        evaluation.checks["traceback"] = reply["traceback"]


def died(evaluation: Evaluation, worker, during: str) -> Status:
    """The candidate's process exited without answering: RUNTIME_ERROR with how it died;
    raises JudgeShutDown instead when the judge was shutting down (no verdict then)."""
    if getattr(worker, "shut_down", False) or (evaluation.judge is not None and getattr(evaluation.judge, "closed", False)):
        raise JudgeShutDown(f"the judge shut down during {during}: the candidate's process was killed with it, "
                            "no verdict")
    code = worker.returncode
    how = f"signal {-code}" if code is not None and code < 0 else f"status {code}"
    tail = worker.output().get("stderr", "").strip().splitlines()[-3:]
    evaluation.diag("worker_died", f"the candidate's process exited ({how}) during {during} without "
             f"reporting results" + (f"; stderr: {' | '.join(tail)[:500]}" if tail else ""))
    health(evaluation, worker)
    return Status.RUNTIME_ERROR


def health(evaluation: Evaluation, worker) -> None:
    """After a crash or hang: is the GPU still usable for the next candidate?"""
    if evaluation.device != "cuda":
        return
    from tools.judge.device_check import check_gpu
    evaluation.checks["gpu_healthy_after_failure"] = False
    check_gpu(evaluation.gpu_index, " after the candidate failed")   # raises where the GPU is not
    evaluation.checks["gpu_healthy_after_failure"] = True
