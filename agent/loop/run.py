"""`Run`: the one reader of a run directory, and its one writer while its loop runs.

Every file of the run directory (agent/loop/rundir.py has the layout) is written here and
nowhere else in the loop: the graph's nodes hand what happened to a Run (a candidate
written, a step of its judgement, a verdict, a decision) and the Run writes it and keeps
it. The graph's state (agent/loop/state.py RunState) carries ids and routing only; a
candidate's record (`record`) is made from its generate event and its verdict whenever
asked, never copied into the state.

A fresh run and a resumed one are one code path: `Run(rd)` folds whatever the directory
holds (nothing, for a fresh run) and `state()` is the state of its last decide. Each
writer is idempotent, so a node that runs again after a kill writes nothing twice: a
candidate's generate event once, a verdict once, each step's event once, each decide
once. One process writes a run at a time. What is drawn from a run for inspect, report,
export and bench (agent/loop/runstats.py `load_run`) is read through a Run too, as is the
run.json the runner resumes from.
"""
from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any

from agent.loop.rundir import NODES, TRACE_SCHEMA, RunDir, candidate_id
from agent.loop.state import (ORIGIN_MODEL, ORIGIN_SWEEP, CandidateRecord, RunState, Spent, bottleneck_label,
                              initial_state)
from tools.jsonio import append_jsonl, read_json_object, read_jsonl, write_json, write_text_atomic
from tools.verdict import Verdict

# decide's statuses that are not stop reasons (agent/loop/graph.py decide)
GOES_ON = ("continue", "sweep")


class Run:
    def __init__(self, rd: RunDir):
        self.rd = rd
        self._lock = threading.RLock()
        self._events: list[dict] = list(read_jsonl(rd.trace)) if rd.trace.exists() else []
        self._by_cid: dict[str | None, list[dict]] = {}
        for e in self._events:
            self._by_cid.setdefault(e.get("candidate"), []).append(e)
        self._mended = False
        self._sources: dict[str, str] = {}
        self._verdicts: dict[str, Verdict] = {}
        self._best: str | None = None    # the candidate best.py was written from this session

    @classmethod
    def create(cls, rd: RunDir, meta: dict) -> "Run":
        """A new run: the directory made (refused when not empty) and run.json written."""
        rd.create()
        write_json(rd.meta, {"schema": 1, **meta})
        return cls(rd)

    def write_meta(self, meta: dict) -> None:
        write_json(self.rd.meta, meta)

    def meta(self) -> dict:
        """run.json: the problem, config, model and device ({} before `create` wrote it)."""
        return read_json_object(self.rd.meta) if self.rd.meta.exists() else {}

    def summary(self) -> dict | None:
        """summary.json (None while the run goes on, or when a kill came first)."""
        return read_json_object(self.rd.summary) if self.rd.summary.exists() else None

    # --------------------------------------------------------------- reading
    def events(self, cid: Any = ...) -> list[dict]:
        """Every event in file order; with `cid`, those naming that candidate (None: none)."""
        with self._lock:
            return list(self._events) if cid is ... else list(self._by_cid.get(cid, ()))

    def source(self, cid: str) -> str | None:
        return self._kept(self._sources, cid, self.rd.source)

    def verdict(self, cid: str) -> Verdict | None:
        return self._kept(self._verdicts, cid, self.rd.verdict)

    def _kept(self, store: dict, cid: str, read) -> Any:
        """store[cid], read through RunDir the first time it is there; None while it is not."""
        with self._lock:
            if cid not in store:
                value = read(cid)
                if value is None:
                    return None
                store[cid] = value
            return store[cid]

    def generate_event(self, cid: str) -> dict | None:
        return next((e for e in self.events(cid) if e["node"] == "generate"), None)

    def completion(self, cid: str) -> dict | None:
        """A model candidate's recorded completion (RunDir.completion_record), or None."""
        return self.rd.completion_record(cid, self.generate_event(cid))

    def record(self, cid: str) -> CandidateRecord:
        """The candidate as its generate event wrote it and its verdict judged it."""
        e = self.generate_event(cid)
        m = e.get("metrics") or {}
        verdict = self.verdict(cid)
        record = CandidateRecord(
            id=cid, round=e["iteration"], index=int(cid.split("-c")[1]), parent=m.get("parent"),
            has_code=e["status"] != "no_code", finish_reason=m.get("finish_reason"), status="pending", correct=False,
            speedup={"eager": None, "compile": None}, speedup_low={"eager": None, "compile": None}, flags=[],
            bottleneck=None, roofline_fraction=None, origin=m["origin"], change=m.get("change"),
            tokens={"prompt": int(m.get("prompt_tokens") or 0), "completion": int(m.get("completion_tokens") or 0)})
        if verdict is not None:
            record.update(status=verdict.status.value, correct=verdict.correct,
                          speedup={"eager": verdict.speedup_eager, "compile": verdict.speedup_compile},
                          speedup_low={b: (verdict.speedup_interval.get(b) or {}).get("low")
                                       for b in ("eager", "compile")},
                          flags=list(verdict.flags), bottleneck=bottleneck_label(verdict.bottleneck),
                          roofline_fraction=(verdict.bottleneck or {}).get("roofline_fraction"))
        return record

    def candidate_ids(self, before: int | None = None) -> list[str]:
        """Every candidate written (before event index `before`: a candidate exists once its
        generate event does), in generation order."""
        events = self.events()[:before]
        return sorted({e["candidate"] for e in events if e["node"] == "generate" and e["candidate"]})

    def candidates(self, before: int | None = None) -> dict[str, CandidateRecord]:
        """`candidate_ids`' records, by id."""
        return {cid: self.record(cid) for cid in self.candidate_ids(before)}

    def view(self, state: RunState) -> dict:
        """`state` with the candidates beside it: what the loop's rules and progress read."""
        return dict(state, candidates=self.candidates(), swept=self.swept(), replay_exhausted=self.replay_exhausted())

    def swept(self) -> list[str]:
        """The candidates a sweep has re-launched, in order (each at most once)."""
        parents = [r["parent"] for r in self.candidates().values() if r["origin"] == ORIGIN_SWEEP]
        return list(dict.fromkeys(parents))

    def replay_exhausted(self) -> bool:
        return any(e["node"] == "generate" and e["status"] == "replay_exhausted" for e in self.events(None))

    def state(self, problem_path: str) -> RunState:
        """The loop's state as of the last decide event; the initial state before any."""
        events = self.events()
        last = max((i for i, e in enumerate(events) if e["node"] == "decide"), default=None)
        if last is None:   # no round closed: from the start; seed and generate reuse what is on disk
            return initial_state(problem_path)
        decide = events[last]
        metrics = decide.get("metrics") or {}
        spent = metrics.get("spent") or {}
        return RunState(problem_path=problem_path, round=decide["iteration"], pending=[], best=decide["candidate"],
                        spent=Spent(**{k: type(v)(spent.get(k, v)) for k, v in initial_state("")["spent"].items()}),
                        stop_reason=None if decide["status"] in GOES_ON else decide["status"],
                        sweep_next=metrics.get("sweep") if decide["status"] == "sweep" else None, decided=True)

    # --------------------------------------------------------------- writing
    def _trace(self, *, iteration: int, candidate: str | None, node: str, status: str, duration_s: float = 0.0,
               metrics: dict | None = None, error: str | None = None, artifacts: dict | None = None) -> dict:
        if node not in NODES:
            raise ValueError(f"unknown trace node {node!r}")
        event = {"schema": TRACE_SCHEMA, "run_id": self.rd.run_id, "ts": time.time(), "iteration": iteration,
                 "candidate": candidate, "node": node, "status": status, "duration_s": round(duration_s, 6),
                 "metrics": metrics or {}, "error": error,
                 "artifacts": {k: os.path.relpath(v, self.rd.root) if os.path.isabs(str(v)) else str(v)
                               for k, v in (artifacts or {}).items()}}
        with self._lock:
            if not self._mended:
                _mend_tail(self.rd.trace)
                self._mended = True
            append_jsonl(self.rd.trace, event)
            self._events.append(event)
            self._by_cid.setdefault(candidate, []).append(event)
        return event

    def generated(self, cid: str, *, parent: str | None, origin: str, code: str | None, duration_s: float = 0.0,
                  prompt: str | None = None, completion: str | None = None, change: str | None = None,
                  tokens: tuple[int, int] = (0, 0), model: str | None = None,
                  finish_reason: str | None = None, seed_s: float | None = None) -> CandidateRecord:
        """A candidate written: its files, then its generate event (once: a candidate
        already traced keeps what it has)."""
        with self._lock:
            if self.generate_event(cid) is None:
                rd, round_ = self.rd, _round(cid)
                artifacts = {}
                if prompt is not None:
                    write_text_atomic(rd.prompt(cid), prompt)
                    write_text_atomic(rd.completion(cid), completion or "")
                    artifacts = {"prompt": rd.prompt(cid), "completion": rd.completion(cid)}
                if code is not None:
                    write_text_atomic(rd.candidate_src(cid), code)
                    self._sources[cid] = code
                    artifacts["candidate"] = rd.candidate_src(cid)
                metrics = {"origin": origin, "parent": parent, "prompt_tokens": tokens[0], "completion_tokens": tokens[1]}
                if origin == ORIGIN_MODEL:
                    metrics.update(model=model, finish_reason=finish_reason)
                if change is not None:
                    metrics["change"] = change
                if seed_s is not None:   # what the seed portfolio cost to make (its compile, where cached)
                    metrics["seed_s"] = round(seed_s, 3)
                self._trace(iteration=round_, candidate=cid, node="generate",
                            status="ok" if code is not None else "no_code", duration_s=duration_s,
                            metrics=metrics, artifacts=artifacts)
            return self.record(cid)

    def seed_failed(self, error: str, duration_s: float) -> None:
        if self.seed_failure() is None:
            self._trace(iteration=0, candidate=None, node="generate", status="seed_failed", duration_s=duration_s,
                        error=error, metrics={"origin": "inductor_seed", "parent": None, "prompt_tokens": 0,
                                              "completion_tokens": 0})

    def seed_failure(self) -> str | None:
        """Why round 0 has no seed, as its seed_failed event says; None when it has one or was not asked."""
        failed = [e.get("error") for e in self.events(None) if (e["node"], e["status"]) == ("generate", "seed_failed")]
        return (failed[-1] or "no Inductor seed") if failed else None

    def note_replay_exhausted(self, round_: int) -> None:
        if not self.replay_exhausted():
            self._trace(iteration=round_, candidate=None, node="generate", status="replay_exhausted",
                        error="the replay file has no more completions")

    def stepped(self, cid: str, node: str, status: str, *, duration_s: float, metrics: dict,
                error: str | None = None) -> None:
        """A compile, test or profile step of the candidate's judgement (once per node)."""
        with self._lock:
            if not any(e["node"] == node for e in self.events(cid)):
                self._trace(iteration=_round(cid), candidate=cid, node=node, status=status, duration_s=duration_s,
                            metrics=metrics, error=error, artifacts={"eval": self.rd.eval(cid)})

    def judged(self, cid: str, verdict: Verdict) -> None:
        """evals/<cid>.json: written before the step events that point at it."""
        with self._lock:
            write_json(self.rd.eval(cid), verdict.to_json())
            self._verdicts[cid] = verdict

    def profiled(self, cid: str, verdict: Verdict, duration_s: float) -> None:
        """The bottleneck summary a correct candidate got later ([eval] profile = "refined")."""
        self.judged(cid, verdict)
        self._trace(iteration=_round(cid), candidate=cid, node="profile",
                    status="refined" if verdict.bottleneck else "refine_failed", duration_s=duration_s,
                    metrics={"bottleneck": bottleneck_label(verdict.bottleneck),
                             "roofline_fraction": (verdict.bottleneck or {}).get("roofline_fraction")},
                    error=None if verdict.bottleneck else verdict.checks.get("profile_error"),
                    artifacts={"eval": self.rd.eval(cid)})

    def prescreened(self, parent: str, round_: int, record: dict, seconds: float, metrics: dict) -> None:
        """prescreen/<parent>.json and its event (agent/loop/sweep_plan.py)."""
        path = self.rd.prescreen(parent)
        write_json(path, record)
        self._trace(iteration=round_, candidate=parent, node="sweep", status="prescreen", duration_s=seconds,
                    metrics=metrics, artifacts={"prescreen": path})

    def judge_died(self, cid: str, duration_s: float, error: str, metrics: dict) -> None:
        """What befell the evaluator under a candidate (krefine bench --ray lost a judge)."""
        self._trace(iteration=_round(cid), candidate=cid, node="evaluate", status="judge_died",
                    duration_s=duration_s, error=error, metrics=metrics)

    def decided(self, round_: int, best: str | None, status: str, *, duration_s: float, metrics: dict) -> None:
        """A decide event, once per round and outcome; best.py follows the best."""
        with self._lock:
            if best is not None and self.source(best) is not None and self._best != best:
                write_text_atomic(self.rd.best, self.source(best))
                self._best = best
            last = self._events[-1] if self._events else None
            if last is None or (last.get("node"), last.get("iteration"), last.get("status")) != ("decide", round_, status):
                self._trace(iteration=round_, candidate=best, node="decide", status=status, duration_s=duration_s,
                            metrics=metrics, artifacts={"best": self.rd.best} if best else {})

    def write_summary(self, summary: dict | None) -> None:
        """summary.json; None: removed (a resumed run goes on from a failed session's)."""
        if summary is None:
            self.rd.summary.unlink(missing_ok=True)
        else:
            write_json(self.rd.summary, {"schema": 1, **summary})


def _round(cid: str) -> int:
    """The round of a candidate id (r<round>-c<index>); 0 for what is not one."""
    head = cid.split("-c")[0].lstrip("r")
    return int(head) if head.isdigit() else 0


def _mend_tail(path: Path) -> None:
    """Before a session's first append: a last line without its newline (a kill mid-append)
    is cut, as read_jsonl skips it, or ended when it is a whole record, as read_jsonl keeps
    it; appended after as it is, it would be a broken line mid-file that every read fails on."""
    try:
        f = open(path, "rb+")
    except FileNotFoundError:
        return
    with f:
        size = f.seek(0, os.SEEK_END)
        if size == 0:
            return
        f.seek(size - 1)
        if f.read(1) == b"\n":
            return
        f.seek(0)
        data = f.read()
        start = data.rfind(b"\n") + 1
        try:
            json.loads(data[start:])
        except ValueError:           # torn (JSONDecodeError, or bytes cut mid-character)
            f.truncate(start)
        else:
            f.seek(size)
            f.write(b"\n")
        f.flush()
        os.fsync(f.fileno())


__all__ = ["Run", "GOES_ON", "candidate_id"]
