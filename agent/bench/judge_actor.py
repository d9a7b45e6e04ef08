"""The judge actor: what runs on the nodes of a Ray cluster for `krefine bench --ray`, and
how its results and faults cross back to the driver.

`JudgeActor` is one actor, one per GPU (`ray.remote` is applied by the driver's
JudgeFleet in agent/bench/ray_judges.py, so this module imports without Ray). Its session
cache (tools/judge/pool.py) keeps one tools.judge.Judge per problem it has judged
(at most [bench] judge_cache; the oldest idle one is closed), so a problem's reference,
torch.compile baseline and fork servers are built once per judge, and a new problem's
fork server was started while the last was judged (spare fork servers). Candidates run
in the Judge's sandboxed workers: a candidate's fault is a verdict, never the actor's
death. A problem travels as a `ProblemRef` (its file, and its text for a node without
that file). `ray_result` is ray.get with the
actor's own exceptions raised as themselves in the driver (`crossing` carries a
BadInput, which cannot be pickled as it is).

Does not choose which judge takes a candidate or survive a judge's death
(agent/bench/ray_judges.py), and does not decide verdicts (tools/).
"""
from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tools.errors import BadInput
from tools.verdict import Verdict


@dataclass(frozen=True)
class ProblemRef:
    """A problem as it travels to a judge: the file, and its text for nodes without it."""
    name: str
    path: str
    source: str

    @classmethod
    def of(cls, problem) -> "ProblemRef":
        return cls(problem.name, str(Path(problem.path).resolve()), problem.source)

    @property
    def key(self) -> str:
        return f"{self.name}-{hashlib.sha256(self.source.encode()).hexdigest()[:16]}"



class JudgeActor:
    """One judge actor: the Ray side of a session cache (tools/judge/pool.py) that
    keeps Judges by (problem, settings), reused across candidates."""

    def __init__(self, device: str, cache_size: int):
        from tools.judge.pool import SessionCache
        from tools.sandbox.isolation import prestart_forkservers
        # each new problem's Judge finds its fork server started (and its imports done)
        # while the last was judged; the spare dies with the actor (its socket closes)
        self._cache = SessionCache(keep=cache_size, spares=True)
        if device == "cuda":   # the first problem's too: they import while this actor does
            prestart_forkservers(device)  # (its GPU is 0: Ray sets CUDA_VISIBLE_DEVICES)
        import torch  # noqa: F401  torch and the evaluator now, not under the first candidate
        import tools.judge  # noqa: F401
        from tools.judge.warm import warm_imports
        warm_imports(device)   # before this actor's threads judge (and import) at once
        self.device = device
        self.judged = 0
        self._judging: dict[int, str] = {}
        self._lock = threading.Lock()
        self._files = Path(tempfile.mkdtemp(prefix="krefine-judge-"))

    def info(self) -> dict:
        import ray
        with self._lock:
            judging = sorted(self._judging.values())
        return {"pid": os.getpid(), "node": ray.util.get_node_ip_address(), "gpus": ray.get_gpu_ids(),
                "judging": judging, "judged": self.judged, "problems": self.problems()}

    def problems(self) -> list[str]:
        """The problems whose Judge this actor keeps, least recently used first."""
        return [s.key.problem for s in self._cache.sessions() if s.judge is not None]

    def judge(self, ref: ProblemRef, settings, src: str, candidate_name: str, profile: bool) -> Verdict:
        with crossing(), self._session(ref, settings, candidate_name) as judge:
            verdict = judge.judge(src, candidate_name=candidate_name, profile=profile)
        with self._lock:
            self.judged += 1
        return verdict

    def add_bottleneck(self, ref: ProblemRef, settings, src: str, verdict: Verdict, candidate_name: str) -> Verdict:
        with crossing(), self._session(ref, settings, candidate_name) as judge:
            return judge.add_bottleneck(src, verdict, candidate_name=candidate_name)

    def prescreen(self, ref: ProblemRef, settings, sources: list[str], reps: int) -> list:
        with crossing(), self._session(ref, settings, "prescreen") as judge:
            return judge.prescreen(sources, reps=reps)

    def forget(self, problem_key: str) -> None:
        """A problem is finished: close its idle Judges now rather than when evicted."""
        self._cache.evict(lambda key: key.problem == problem_key)

    @contextlib.contextmanager
    def _session(self, ref: ProblemRef, settings, candidate_name: str):
        from tools.judge.pool import SessionKey
        from tools.problem import load_problem
        # Ray's CUDA_VISIBLE_DEVICES shows this actor its GPU alone: GPU 0
        key = SessionKey(ref.key, settings, self.device, 0)
        with self._lock:
            self._judging[threading.get_ident()] = f"{ref.name}/{candidate_name}"
        try:
            with self._cache.use(key, lambda: load_problem(self._problem_file(ref)), label=ref.name) as judge:
                yield judge
        finally:
            with self._lock:
                self._judging.pop(threading.get_ident(), None)

    def _problem_file(self, ref: ProblemRef) -> Path:
        """The driver's file where this node has it unchanged, else a copy of its text."""
        path = Path(ref.path)
        with contextlib.suppress(OSError):
            if path.read_text(encoding="utf-8") == ref.source:
                return path
        copy = self._files / ref.key / path.name   # the same file name, so the same problem name
        copy.parent.mkdir(parents=True, exist_ok=True)
        copy.write_text(ref.source, encoding="utf-8")
        return copy


# ---------------------------------------------------------------- crossing back to the driver

class CrossingBadInput(Exception):
    """A BadInput on its way back from an actor: BadInput's constructor takes (path,
    fault) while pickling rebuilds an exception from its one message, so it cannot cross
    as itself."""

    def __init__(self, path: str, fault: str):
        super().__init__(path, fault)


@contextlib.contextmanager
def crossing():
    """Around an actor method: a BadInput (a problem's own fault, a model that cannot load)
    leaves as CrossingBadInput, which ray_result turns back."""
    try:
        yield
    except BadInput as e:
        raise CrossingBadInput(e.path, e.fault) from None


def ray_result(ref) -> Any:
    """ray.get, with an exception the actor's own code raised (the evaluator's fault, a
    problem's, a model that cannot load) raised as itself, so the CLI reports it in one
    line as on one host. A dead actor is still RayActorError."""
    import ray
    from ray.exceptions import RayTaskError
    try:
        return ray.get(ref)
    except RayTaskError as e:
        if isinstance(e.cause, CrossingBadInput):
            raise BadInput(*e.cause.args) from None
        raise (e.cause if isinstance(e.cause, BaseException) else e) from None
