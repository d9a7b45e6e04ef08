"""What the loop's nodes share for one run but the state must not hold (`LoopContext`,
langgraph's runtime context): the run (agent/loop/run.py, the run directory's one
reader and writer), the problem, the config, the model, the judges and the judgements
in progress.

Holds no node and no rule of the loop (agent/loop/graph.py wires the nodes, agent/loop/state.py
holds the rules).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

from agent.loop.run import Run
from agent.models.llm import NO_MODEL


@dataclass
class LoopContext:
    """Run-scoped things the nodes use. `judges` is the run's judge pool
    (tools.judge.JudgePool, or any host with its interface: `begin`, `add_bottleneck`,
    `prescreen`, `concurrency`); `backend` the model. Those two are where a test stands
    in; `make_seed` (problem, device) -> [(label, source)] stands in for the Inductor seed."""
    run: Run
    problem: Any                     # tools.problem.Problem
    config: Any                      # agent.config.AgentConfig
    backend: Any                     # agent.models.llm.Backend
    device: str                      # "cuda" | "cpu"
    progress: Any                    # agent.loop.progress.Progress
    judges: Any
    wall_offset_s: float = 0.0       # wall time spent by earlier sessions of this run
    started_s: float = field(default_factory=time.monotonic)
    make_seed: Callable[[Any, str], list] | None = None
    judgements: dict = field(default_factory=dict)   # candidate id -> its judgement, from compile to its end

    def wall_s(self) -> float:
        return self.wall_offset_s + (time.monotonic() - self.started_s)

    @property
    def profile_policy(self) -> str:
        return self.config.eval.test.profile

    @property
    def concurrency(self) -> int:
        """Candidates of a round judged at once: compile phases overlap in a judge."""
        return self.judges.concurrency

    @property
    def timed(self) -> bool:
        return self.device == "cuda"

    @property
    def has_model(self) -> bool:
        """False for `--model none`: no generate rounds, the seed and the sweep only."""
        return getattr(self.backend, "name", None) != NO_MODEL
