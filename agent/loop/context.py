"""What the loop's nodes share for one run but the state must not hold: the run
directory, the problem, the config, the model, the evaluator, the GPUs (`LoopContext`,
langgraph's runtime context), and the pool that hands GPUs out one evaluation at a time.

Holds no node and no rule of the loop (agent/loop/graph.py wires the nodes, agent/loop/state.py
holds the rules).
"""
from __future__ import annotations

import contextlib
import queue
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from agent.loop.extract import extract_candidate
from agent.models.llm import NO_MODEL, ReplayExhausted
from agent.loop.prompting import render_initial, render_refine
from agent.loop.rundir import RunDir
from tools.verdict import Verdict


class GpuPool:
    """GPU indices handed out one evaluation at a time, for a stand-in `evaluate` (tests):
    the real judges hold their GPU with tools/judge/gpulock.py, and the runner uses this
    only to count GPUs."""

    def __init__(self, n: int):
        self.size = max(1, n)
        self._free: queue.Queue[int] = queue.Queue()
        for i in range(self.size):
            self._free.put(i)

    @contextlib.contextmanager
    def lease(self) -> Iterator[int]:
        gpu = self._free.get()
        try:
            yield gpu
        finally:
            self._free.put(gpu)


@dataclass
class LoopContext:
    """Run-scoped things the nodes use but the state must not hold.

    The model, the evaluator and the prompt functions are fields so tests can stand
    in for them; the defaults are the real ones. `judges` (tools.judge.JudgePool) is the
    real evaluator: one persistent judge per GPU for this run's problem. A stand-in
    `evaluate` callable, when given, is used instead, one evaluation per GPU at a time.
    """
    rundir: RunDir
    problem: Any                     # tools.problem.Problem
    config: Any                      # agent.config.AgentConfig
    backend: Any                     # agent.models.llm.Backend
    device: str                      # "cuda" | "cpu"
    progress: Any                    # agent.loop.progress.Progress
    gpus: GpuPool = field(default_factory=lambda: GpuPool(1))
    wall_offset_s: float = 0.0       # wall time spent by earlier sessions of this run
    started_s: float = field(default_factory=time.monotonic)
    judges: Any = None               # tools.judge.JudgePool (the runner makes and closes it)
    evaluate: Callable[..., Verdict] | None = None
    make_seed: Callable[[Any, str], str] | None = None   # (problem, device) -> seed source; None: the real one
    render_initial: Callable[[str], str] = render_initial
    render_refine: Callable[..., str] = render_refine
    extract_code: Callable[[str], str | None] = extract_candidate
    replay_exhausted_error: type[BaseException] = ReplayExhausted

    def wall_s(self) -> float:
        return self.wall_offset_s + (time.monotonic() - self.started_s)

    @property
    def profile_policy(self) -> str:
        return self.config.eval.test.profile

    @property
    def concurrency(self) -> int:
        """Candidates of a round judged at once: compile phases overlap in a judge."""
        return self.judges.concurrency if self.evaluate is None and self.judges is not None else self.gpus.size

    @property
    def timed(self) -> bool:
        return self.device == "cuda"

    @property
    def has_model(self) -> bool:
        """False for `--model none`: no generate rounds, the seed and the sweep only."""
        return getattr(self.backend, "name", None) != NO_MODEL

