"""The session cache: Judges built once per (problem, settings, device, GPU) and shared.

A Judge (session.py) costs a reference, two baselines and a fork server to build, so
every host keeps its Judges here: the loop's process (`JudgePool`, below), the
judge service (service.py) and the Ray judge actor (agent/bench/judge_actor.py). Those are
transports that turn requests into `acquire` and `release`; this module alone decides
when a Judge is built, shared, kept and closed:

- one Judge per `SessionKey`, built by the first thread that asks while the others wait
  for it; a build that fails is not kept, and every thread waiting for it hears why;
- a count of users: a session in use is never closed. `drop` (its judge failed) forgets
  it at once, so the next request builds a fresh one, and closes it when its last user
  lets go, never under a candidate another request is judging;
- at most `keep` sessions (idle ones closed least recently used first; `keep=0`: closed
  as soon as nobody uses them);
- fork servers: each Judge's own, or with `forkservers` one set for every session (dead
  ones replaced, closed with the cache); with `spares`, each new Judge's fork server was
  started while the last was judged (tools/sandbox/isolation.py spare_forkservers);
- GPU memory: before a new session, idle ones on its GPU are closed while less is free
  than its trial needs; a Judge short of memory closes the idle ones on its GPU.

`JudgePool` is the in-process host: one problem's Judges for a run, one per GPU, each
a session of `local_sessions()`. Does not judge (session.py, pipeline.py) or speak a
protocol (service.py).
"""
from __future__ import annotations

import contextlib
import hashlib
import os
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Callable, Hashable

from tools.judge.pipeline import finish
from tools.judge.session import Judge

ROOM_FACTOR = 3   # a new session wants this many times its inputs free (make_room)


@dataclass(frozen=True)
class SessionKey:
    """What a Judge judges with; equal keys share one Judge."""
    problem: str          # the problem's identity (problem_id, or the host's own such name)
    settings: Hashable    # tools.settings.EvalSettings
    device: str           # "cuda" | "cpu"
    gpu_index: int = 0


def problem_id(path, source: str | bytes) -> str:
    """A problem's identity: its resolved file and a hash of its text, so an edited file
    is a new problem and never meets the reference of the old one."""
    data = source.encode() if isinstance(source, str) else source
    return f"{os.path.realpath(path)}#{hashlib.sha256(data).hexdigest()}"


class Session:
    """One Judge and its users (the fields are the cache's, under its lock)."""

    def __init__(self, key: SessionKey, label: str):
        self.key, self.label = key, label
        self.judge = None
        self.users = 0
        self.dropped = False
        self.error: BaseException | None = None
        self.ready = threading.Event()


class SessionCache:
    """See the module docstring. Thread-safe; close() ends every session it keeps."""

    def __init__(self, *, keep: int | None = None, forkservers: dict | None = None,
                 spares: bool = False):
        self.keep = keep
        self.forkservers = forkservers    # shared by every session, or None: each Judge its own
        self._sessions: OrderedDict[SessionKey, Session] = OrderedDict()
        self._lock = threading.Lock()
        self._spares = contextlib.ExitStack()
        if spares:
            from tools.sandbox.isolation import spare_forkservers
            self._spares.enter_context(spare_forkservers())

    def __enter__(self) -> "SessionCache":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # --- users ------------------------------------------------------------------------
    def acquire(self, key: SessionKey, load: Callable[[], object], label: str = "") -> tuple[Session, bool]:
        """The session for `key`, its Judge built from `load()` (the Problem) on first
        use; (it, whether it existed). The caller uses `session.judge`, then release()."""
        self._revive_forkservers()
        with self._lock:
            s = self._sessions.get(key)
            made = s is None
            if made:   # others asking for it meanwhile wait for this thread to build it
                s = self._sessions[key] = Session(key, label or key.problem)
            self._sessions.move_to_end(key)   # most recently used last
            s.users += 1
        if not made:
            s.ready.wait()
            if s.error is not None:
                self.release(s)
                raise s.error
            return s, True
        try:
            s.judge = self._build(key, load)
        except BaseException as e:
            s.error = e
            self._forget(s)
            self.release(s)
            raise
        finally:
            s.ready.set()
        self._trim()
        return s, False

    @contextlib.contextmanager
    def use(self, key: SessionKey, load: Callable[[], object], label: str = ""):
        """acquire() and release() around a block; yields the Judge."""
        s, _ = self.acquire(key, load, label)
        try:
            yield s.judge
        finally:
            self.release(s)

    def release(self, s: Session) -> None:
        """One user fewer; a dropped session goes with its last user."""
        with self._lock:
            s.users -= 1
            closing = s.users == 0 and s.dropped
        if closing:
            _close(s)
        self._trim()

    def drop(self, s: Session) -> None:
        """Forget a session whose judge failed: the next request builds a fresh one; this
        one is closed once nobody uses it."""
        self._forget(s)
        with self._lock:
            s.dropped = True
            closing = s.users == 0
        if closing:
            _close(s)

    # --- what is kept -----------------------------------------------------------------
    def sessions(self) -> list[Session]:
        """The sessions kept, least recently used first."""
        with self._lock:
            return list(self._sessions.values())

    def evict(self, wanted: Callable[[SessionKey], bool] = lambda key: True, keep=None) -> int:
        """Close the idle sessions whose key is `wanted` (never `keep`'s, a Judge), least
        recently used first; how many were closed."""
        with self._lock:
            gone = [k for k, s in self._sessions.items()
                    if s.users == 0 and s.judge is not None and s.judge is not keep and wanted(k)]
            closing = [self._sessions.pop(k) for k in gone]
        for s in closing:
            _close(s)
        return len(closing)

    def evict_idle(self, keep=None) -> int:
        """A Judge's memory_pressure: close the idle sessions on its GPU but its own
        (their GPU memory goes back to the driver: Judge.close)."""
        if keep is None:
            return self.evict()
        return self.evict(lambda k: (k.device, k.gpu_index) == (keep.device, keep.gpu_index), keep=keep)

    def make_room(self, key: SessionKey, input_bytes: int) -> None:
        """Before a new session on a GPU: close idle ones there, least recently used
        first, while less is free than its trial needs (ROOM_FACTOR times its inputs)."""
        if key.device != "cuda" or not input_bytes:
            return
        import torch
        if not torch.cuda.is_available():
            return   # the Judge's device check says so, as the evaluator's fault (exit 3)
        here = (key.device, key.gpu_index)
        while torch.cuda.mem_get_info(key.gpu_index)[0] < ROOM_FACTOR * input_bytes:
            with self._lock:
                idle = next((k for k, s in self._sessions.items()
                             if (k.device, k.gpu_index) == here and s.users == 0 and s.judge is not None), None)
                s = self._sessions.pop(idle) if idle is not None else None
            if s is None:
                return   # nothing left to close; the session's own retries say the rest
            _close(s)

    def close(self) -> None:
        """Every session (in use or not: the host is leaving), the shared fork servers, the spares."""
        with self._lock:
            closing = list(self._sessions.values())
            self._sessions.clear()
            servers = list((self.forkservers or {}).values())
            if self.forkservers is not None:
                self.forkservers.clear()
        for s in closing:
            _close(s)
        for fs in servers:
            if fs is not None:
                fs.close()
        self._spares.close()

    # --- inside -----------------------------------------------------------------------
    def _build(self, key: SessionKey, load: Callable[[], object]):
        problem = load()
        self.make_room(key, getattr(problem, "input_bytes", 0))
        judge = Judge(problem, device=key.device, gpu_index=key.gpu_index, settings=key.settings,
                      forkservers=self.forkservers)
        judge.memory_pressure = self.evict_idle   # its own shortage: close the idle sessions
        return judge

    def _revive_forkservers(self) -> None:
        """Forget shared fork servers that died (the next fork starts a new one, shared again)."""
        with self._lock:
            for kind, fs in list((self.forkservers or {}).items()):
                if fs is None or not fs.alive():
                    del self.forkservers[kind]
                    if fs is not None:
                        fs.close()

    def _forget(self, s: Session) -> None:
        with self._lock:
            if self._sessions.get(s.key) is s:
                del self._sessions[s.key]

    def _trim(self) -> None:
        """Close idle sessions beyond `keep` (least recently used first)."""
        with self._lock:
            idle = [k for k, s in self._sessions.items() if s.users == 0 and s.judge is not None]
            over = max(0, len(self._sessions) - self.keep) if self.keep is not None else 0
            closing = [self._sessions.pop(k) for k in idle[:over]]
        for s in closing:
            _close(s)


def _close(s: Session) -> None:
    if s.judge is not None:
        s.judge.close()


class JudgePool:
    """One problem's Judges for a run: one per GPU (one on cpu), each a session of the
    process's cache (pool.py), taken on first use and given back at close(); a
    candidate goes to the judge with the fewest candidates in flight."""

    def __init__(self, problem, *, device: str, gpu_count: int, settings,
                 cache: SessionCache | None = None):
        self.problem, self.device, self.settings = problem, device, settings
        self.size = max(1, gpu_count) if device == "cuda" else 1
        self.cache = cache if cache is not None else local_sessions()
        self._id = problem_id(problem.path, problem.source)
        self._sessions: list = []
        self._lock = threading.Lock()

    def _pick(self) -> Judge:
        with self._lock:
            judges = [s.judge for s in self._sessions]
            if len(judges) < self.size and all(j.in_flight for j in judges):
                key = SessionKey(self._id, self.settings, self.device, len(judges))
                session, _ = self.cache.acquire(key, lambda: self.problem, label=str(self.problem.path))
                self._sessions.append(session)
                judges.append(session.judge)
            judge = min(judges, key=lambda j: j.in_flight)
            with judge._lock:
                judge.in_flight += 1   # claimed now, so the next pick sees it busy
            return judge

    def judge(self, candidate_src: str, *, candidate_name: str = "candidate.py", profile: bool = True):
        return finish(self.begin(candidate_src, candidate_name=candidate_name, profile=profile))

    def begin(self, candidate_src: str, *, candidate_name: str = "candidate.py", profile: bool = True):
        """A step-by-step judgement (tools/judge/pipeline.py Judgement) on the least busy judge."""
        judge = self._pick()

        def ended():
            with judge._lock:
                judge.in_flight -= 1
        try:
            return judge.begin(candidate_src, candidate_name=candidate_name, profile=profile, on_end=ended)
        except BaseException:
            ended()
            raise

    def add_bottleneck(self, candidate_src: str, verdict, *, candidate_name: str = "candidate.py"):
        judge = self._pick()
        try:
            return judge.add_bottleneck(candidate_src, verdict, candidate_name=candidate_name)
        finally:
            with judge._lock:
                judge.in_flight -= 1

    def prescreen(self, sources: list[str], *, reps: int = 30) -> list:
        judge = self._pick()
        try:
            return judge.prescreen(sources, reps=reps)
        finally:
            with judge._lock:
                judge.in_flight -= 1

    @property
    def concurrency(self) -> int:
        """How many candidates the loop should hand over at once."""
        return self.size * (self.settings.test.parallel_compile + 1)

    def close(self) -> None:
        with self._lock:
            sessions, self._sessions = self._sessions, []
        for s in sessions:
            self.cache.release(s)


_LOCAL: SessionCache | None = None
_LOCAL_LOCK = threading.Lock()


def local_sessions() -> SessionCache:
    """The cache of Judges used in this process (krefine run, a bench's GPU worker):
    a session lives while a run uses it (keep=0), shared by runs judging alike."""
    global _LOCAL
    with _LOCAL_LOCK:
        if _LOCAL is None:
            _LOCAL = SessionCache(keep=0)
        return _LOCAL
