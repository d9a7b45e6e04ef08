"""Judging on a Ray cluster: the driver's side of the long-lived judge actors
(agent/bench/judge_actor.py's JudgeActor, one per GPU) shared by every problem of a bench.

- `JudgeFleet` (driver) gives each problem a home judge (the live one with the fewest
  problems) and sends the problem's candidates there, so its session is built once;
  judges share the suite by problems. When the actor dies under a candidate (kill -9, a
  lost node), Ray restarts it, the candidate goes to another judge and the problem gets
  a new home; a candidate under which judges died twice in a row gets a runtime_error
  verdict instead of a third try.
- `RayJudgePool` is one problem's share of the fleet with tools.judge.JudgePool's
  interface (its `begin` judges whole in one actor call, gone through the graph's compile,
  test and profile nodes as pipeline.Decided), so the loop writes verdicts and traces exactly
  as on one host; the run (agent/loop/run.py) records a judge's death (node "evaluate",
  "judge_died").

Does not join the cluster or decide how many judges there are (agent/bench/ray_bench.py), does
not run on the nodes (agent/bench/judge_actor.py), and does not protect against a judge that
hangs without dying (the Judge's own timeouts do).
"""
from __future__ import annotations

import contextlib
import dataclasses
import itertools
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from agent.bench.judge_actor import JudgeActor, ProblemRef, ray_result
from tools.errors import EvaluatorError
from tools.judge.feedback import feedback_for
from tools.judge.pipeline import Decided
from tools.verdict import Diagnostic, Status, Verdict

DEATHS_IN_A_ROW = 2          # judges a candidate may take down before it is a runtime_error
_RETRY_UNAVAILABLE_S = 1.0   # between pings of an actor Ray reports as restarting
_FLEETS = itertools.count()


@dataclass
class JudgeSlot:
    """The driver's view of one judge actor."""
    index: int
    handle: Any
    state: str = "starting"          # starting | live | restarting | gone
    in_flight: int = 0
    problems: set = field(default_factory=set)   # the problems whose home it is
    pid: int | None = None
    node: str | None = None
    error: str | None = None

    def describe(self) -> str:
        return f"judge {self.index} (pid {self.pid} on {self.node})"


class JudgeFleet:
    """Every judge actor of the bench, and the candidates waiting for one."""

    def __init__(self, handles: list, *, slots: int, say: Callable[[str], None] = lambda line: None):
        self.judges = [JudgeSlot(i, h) for i, h in enumerate(handles)]
        self.slots = slots           # candidates one judge takes at once (its compile phases overlap)
        self.say = say
        self.judged = 0
        self.deaths = 0
        self.started_s = time.monotonic()
        self._closed = False
        self._homes: dict[str, JudgeSlot] = {}
        self._cond = threading.Condition()
        for j in self.judges:
            self._watch(j)

    @classmethod
    def start(cls, n: int, *, device: str, resource: str, cache: int, slots: int,
              say: Callable[[str], None] = lambda line: None) -> "JudgeFleet":
        import ray
        if resource == "GPU":
            need = {"num_gpus": 1, "num_cpus": 0}
        elif resource == "CPU":
            need = {"num_cpus": 1}
        else:
            need = {"num_cpus": 0, "resources": {resource: 1}}
        options = dict(max_restarts=-1,          # Ray brings a dead judge back (on another node if its own is gone)
                       max_task_retries=0,       # ... but its candidate is re-queued here, so the death is traced
                       max_concurrency=slots + 2, **need)  # + info and forget while every slot judges
        actor = ray.remote(JudgeActor)
        fleet = next(_FLEETS)   # names unique per fleet: a killed fleet's names may not be free yet
        return cls([actor.options(name=f"krefine-judge-{i}-{os.getpid()}-{fleet}", **options).remote(device, cache)
                    for i in range(n)], slots=slots, say=say)

    # --- liveness -------------------------------------------------------------------
    def _watch(self, j: JudgeSlot) -> None:
        """Ping a starting or restarting actor from a thread; it is live once it answers."""
        def ping() -> None:
            import ray
            from ray.exceptions import ActorUnavailableError, RayActorError
            while not self._closed:   # closed: the driver is leaving, and a call now would start Ray anew
                try:
                    info = ray.get(j.handle.info.remote())
                except ActorUnavailableError:
                    time.sleep(_RETRY_UNAVAILABLE_S)
                    continue
                except RayActorError as e:   # it cannot start (or restart) at all
                    if not self._closed:
                        self._mark(j, "gone", error=_first_line(e))
                    return
                except Exception:
                    if self._closed:          # Ray shut down under a ping still waiting
                        return
                    raise
                with self._cond:
                    j.pid, j.node = info["pid"], info["node"]
                self._mark(j, "live")
                return
        threading.Thread(target=ping, name=f"krefine-judge-{j.index}-ping", daemon=True).start()

    def _mark(self, j: JudgeSlot, state: str, error: str | None = None) -> None:
        with self._cond:
            before, j.state = j.state, state
            j.error = error or j.error
            self._cond.notify_all()
        if before == "restarting" and state == "live":
            self.say(f"ray: {j.describe()} is back")
        elif state == "gone":
            self.say(f"ray: judge {j.index} is gone (Ray cannot start it): {error}")

    def wait_ready(self, timeout_s: float) -> None:
        """Until one judge is live; EvaluatorError when none can start in time."""
        with self._cond:
            if not self._cond.wait_for(lambda: self.live or self._all_gone(), timeout=timeout_s):
                raise EvaluatorError(f"no judge actor started within {timeout_s:g} s: does the cluster have "
                                     "the resource the judges ask for? ([bench] judge_resource)")
            if self._all_gone():
                raise EvaluatorError(f"no judge actor could start: {self.judges[0].error}")
            self.started_s = time.monotonic()

    @property
    def live(self) -> int:
        return sum(j.state == "live" for j in self.judges)

    def _all_gone(self) -> bool:
        return all(j.state == "gone" for j in self.judges)

    def elapsed_min(self) -> float:
        """Since the first judge was ready."""
        return (time.monotonic() - self.started_s) / 60

    def per_minute(self) -> float:
        """Candidates judged per minute since the first judge was ready."""
        return self.judged / max(1e-9, self.elapsed_min())

    # --- dispatch ---------------------------------------------------------------------
    def _acquire(self, problem_key: str, avoid: set[int]) -> JudgeSlot:
        """A slot on the problem's home judge; for a candidate whose judge died under it
        (`avoid`), on any other live judge, the least busy."""
        with self._cond:
            while True:
                if self._all_gone():
                    raise EvaluatorError(f"every judge actor is gone: {self.judges[0].error}")
                j = self._requeued(avoid) if avoid else self._home(problem_key)
                if j is not None and j.in_flight < self.slots:
                    j.in_flight += 1
                    return j
                self._cond.wait(timeout=1.0)

    def _home(self, problem_key: str) -> JudgeSlot | None:
        """The problem's judge: kept while it lives (its session is there); a new one, the
        live judge with the fewest problems, when it has none or its judge is down."""
        home = self._homes.get(problem_key)
        if home is not None and home.state == "live":
            return home
        live = [j for j in self.judges if j.state == "live"]
        if not live:
            return None
        if home is not None:
            home.problems.discard(problem_key)
        home = min(live, key=lambda j: (len(j.problems), j.in_flight, j.index))
        home.problems.add(problem_key)
        self._homes[problem_key] = home
        return home

    def _requeued(self, avoid: set[int]) -> JudgeSlot | None:
        """Not a judge that died under this candidate while another may yet take it."""
        others = [j for j in self.judges if j.index not in avoid and j.state != "gone"]
        free = [j for j in (others or self.judges) if j.state == "live" and j.in_flight < self.slots]
        return min(free, key=lambda j: (j.in_flight, j.index)) if free else None

    def run(self, problem_key: str, method: str, args: tuple, *, deaths_before: int,
            on_death: Callable[[JudgeSlot, int, str], None]) -> tuple[Any, list[str]]:
        """(the actor method's result, or None after DEATHS_IN_A_ROW deaths; the judges
        that died under it). `deaths_before`: deaths a killed earlier driver recorded."""
        from ray.exceptions import RayActorError
        deaths, avoid, lost = deaths_before, set(), []
        while deaths < DEATHS_IN_A_ROW:
            j = self._acquire(problem_key, avoid)
            try:
                result = ray_result(getattr(j.handle, method).remote(*args))
            except RayActorError as e:
                deaths += 1
                lost.append(j.describe())
                avoid.add(j.index)
                self._died(j)
                on_death(j, deaths, _first_line(e))
                continue
            finally:
                with self._cond:
                    j.in_flight -= 1
                    self._cond.notify_all()
            with self._cond:
                self.judged += method == "judge"
            return result, lost
        return None, lost

    def _died(self, j: JudgeSlot) -> None:
        with self._cond:
            self.deaths += 1
            first = j.state == "live"   # its other candidates fail too; one restart watch will do
            if first:
                j.state = "restarting"
        if first:
            self._watch(j)

    def forget(self, problem_key: str) -> None:
        """The problem is finished: its home no longer counts it, every judge drops its session."""
        with self._cond:
            home = self._homes.pop(problem_key, None)
            if home is not None:
                home.problems.discard(problem_key)
            live = [j for j in self.judges if j.state == "live"]
        for j in live:
            j.handle.forget.remote(problem_key)   # fire and forget: one without the session has nothing to do

    def close(self) -> None:
        import ray
        self._closed = True
        for j in self.judges:
            with contextlib.suppress(Exception):
                ray.kill(j.handle, no_restart=True)


class RayJudgePool:
    """One problem's judges, as tools.judge.JudgePool offers them to agent/loop/graph.py."""

    def __init__(self, fleet: JudgeFleet, problem, settings, run):
        self.fleet, self.settings, self.run = fleet, settings, run   # run: agent/loop/run.py, the run dir's writer
        self.ref = ProblemRef.of(problem)

    @property
    def concurrency(self) -> int:
        return len(self.fleet.judges) * self.fleet.slots

    def judge(self, candidate_src: str, *, candidate_name: str = "candidate.py", profile: bool = True) -> Verdict:
        verdict, lost = self._run("judge", (candidate_src, candidate_name, profile), candidate_name)
        if verdict is not None:
            return verdict
        message = (f"judging this candidate took down its judge {len(lost)} times in a row "
                   f"({'; '.join(lost) or 'in an earlier session'}); it is not tried again")
        verdict = Verdict(status=Status.RUNTIME_ERROR, diagnostics=(Diagnostic(kind="judge_died", message=message),),
                          checks={"phase_s": {}, "judge_deaths": lost})
        return dataclasses.replace(verdict, feedback=feedback_for(verdict))

    def begin(self, candidate_src: str, *, candidate_name: str = "candidate.py", profile: bool = True) -> Decided:
        """The judgement, whole in one actor call, gone through the loop's steps (pipeline.Decided)."""
        return Decided(lambda: self.judge(candidate_src, candidate_name=candidate_name, profile=profile))

    def add_bottleneck(self, candidate_src: str, verdict: Verdict, *, candidate_name: str = "candidate.py") -> Verdict:
        profiled, lost = self._run("add_bottleneck", (candidate_src, verdict, candidate_name), candidate_name)
        if profiled is not None:
            return profiled
        # marked as refined, so the next round does not send it to a third judge
        checks = {**verdict.checks, "profile_error": f"the profile step took down {len(lost)} judges in a row",
                  "phase_s": {**verdict.checks.get("phase_s", {}), "profile_refined": 0.0}}
        return dataclasses.replace(verdict, checks=checks)

    def prescreen(self, sources: list[str], *, reps: int = 30) -> list:
        """tools/judge/prescreen.py on a judge's GPU; a judge lost on the way fails every variant."""
        screens, lost = self._run("prescreen", (sources, reps), "prescreen")
        if screens is not None:
            return screens
        from tools.judge.prescreen import FAILED, Screen
        return [Screen(i, FAILED, error=f"the pre-screen took down its judge ({'; '.join(lost)})")
                for i in range(len(sources))]

    def close(self) -> None:
        self.fleet.forget(self.ref.key)

    def _run(self, method: str, args: tuple, candidate_name: str) -> tuple[Any, list[str]]:
        cid = candidate_name.removesuffix(".py")
        started = time.monotonic()

        def on_death(j: JudgeSlot, deaths: int, error: str) -> None:
            again = deaths < DEATHS_IN_A_ROW
            self.run.judge_died(cid, time.monotonic() - started, error,
                                {"step": method, "judge": j.index, "pid": j.pid, "host": j.node,
                                 "deaths_in_a_row": deaths, "requeued": again})
            self.fleet.say(f"ray: {j.describe()} died judging {self.ref.name} {cid}: "
                           + ("re-queued on another judge" if again else f"{deaths} deaths in a row, not tried again"))
        # deaths a killed earlier driver recorded count too: a restart is no third chance
        before = sum(1 for e in self.run.events(cid) if e.get("node") == "evaluate"
                     and e.get("status") == "judge_died" and (e.get("metrics") or {}).get("step") == method)
        return self.fleet.run(self.ref.key, method, (self.ref, self.settings, *args),
                              deaths_before=before, on_death=on_death)


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return (text[0] if text else type(e).__name__)[:300]
